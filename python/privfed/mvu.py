"""The MVU designer of paper 004 (§3.4): optimal unbiased mechanisms on a b-bit grid.

``design(input_bits, output_bits, epsilon)`` solves the LP/QP alternation and returns a
validated :class:`MvuDesign` (its ``report`` is the dict ``privfed mvu design --json`` prints);
``privfed.MVU(epsilon, design=d, lo=..., hi=...)`` privatizes with it. ``rdp_report(d)`` is the
Rényi DP report of ``privfed mvu rdp --json`` (paper 004 §4.3).
"""

from . import _privfed as _native

MvuDesign = _native.MvuDesign
design = _native.design
rdp_report = _native.rdp_report

# The native functions carry their public names; this module is where users find them.
for _f in (design, rdp_report):
    _f.__module__ = __name__
del _f

__all__ = ["MvuDesign", "design", "rdp_report"]
