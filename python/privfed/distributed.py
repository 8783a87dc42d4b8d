"""Distributed differential privacy with the Skellam mechanism (paper 001: Agarwal, Kairouz and
Liu 2021, "The Skellam Mechanism for Differentially Private Federated Learning").

Every client adds a share of integer noise to its quantized, rotated vector; secure aggregation
(:mod:`privfed.secagg`) sums the encodings modulo ``2**bits``; the server decodes a private mean
without seeing any client's vector::

    from privfed import distributed as dd
    plan = dd.plan(dim=1000, clip=1.0, bits=16, clients=100, epsilon=1.0, delta=1e-5)
    seed = dd.rotation_seed(session_id, round=0)           # everyone derives the same 32 bytes
    enc = dd.SkellamEncoder(plan.params, seed)              # on each client
    y = enc.encode(x)                                       # numpy uint64, length plan.padded_dim
    total = dd.ModularSum(plan.bits, plan.padded_dim)       # (or a secure-aggregation round)
    total.add(y)
    out = dd.SkellamDecoder(plan, seed).decode(total.value, total.contributions)
    out.mean, out.wrap_suspected
    dd.round_event(plan, total.contributions)               # a privfed.accounting event

``plan`` raises :class:`privfed.errors.InfeasibleParameters` naming the knob to move (``bits``,
``epsilon``, ...) when nothing reaches the target. The encoder's noise comes from an OS-seeded
CSPRNG; ``seed=`` is for experiments only.
"""

from . import _privfed as _native

SkellamPlan = _native.SkellamPlan
SkellamEncoder = _native.SkellamEncoder
SkellamDecoder = _native.SkellamDecoder
ModularSum = _native.ModularSum
Decoded = _native.Decoded
plan = _native.plan
rotation_seed = _native.rotation_seed
round_event = _native.round_event
honest_contributors = _native.honest_contributors
check_plan = _native.check_plan

# The native functions carry their public names; this module is where users find them.
for _f in (plan, rotation_seed, round_event, honest_contributors, check_plan):
    _f.__module__ = __name__
del _f

__all__ = [
    "SkellamPlan",
    "SkellamEncoder",
    "SkellamDecoder",
    "ModularSum",
    "Decoded",
    "plan",
    "rotation_seed",
    "round_event",
    "honest_contributors",
    "check_plan",
]
