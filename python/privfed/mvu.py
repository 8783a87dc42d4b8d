"""The MVU designer of paper 004 (§3.4): optimal unbiased mechanisms on a b-bit grid.

``design(input_bits, output_bits, epsilon)`` solves the LP/QP alternation and returns a
validated :class:`MvuDesign`; ``privfed.MVU(epsilon, design=d, lo=..., hi=...)`` privatizes with it.
"""

from . import _privfed as _native

MvuDesign = _native.MvuDesign
design = _native.design

# The native functions carry their public names; this module is where users find them.
for _f in (design,):
    _f.__module__ = __name__
del _f

__all__ = ["MvuDesign", "design"]
