"""Flower integration: privfed's privacy on Flower's Message API (flwr >= 1.41).

Client side (ClientApp mods, ``mod(msg, context, call_next)``):

* :func:`privatize_mod` — local DP: the fit reply's update (the returned model minus the
  received one) is clipped and replaced by a privfed local randomizer's report.

Server side (strategy wrappers around any ``flwr.serverapp.strategy.Strategy``):

* :class:`LocalDpStrategy` — checks that every reply was privatized at the declared ε, composes
  one event per round into a privfed accountant and reports ε(δ) after every round.

Central DP (the server sees every update, the released model is protected):

* :class:`CentralDpStrategy` (server) — clips each client's update to C (fixed, or adaptive
  after Andrew et al. 2021), adds Gaussian noise to the mean, accounts each round as a sample
  without replacement under replace-one neighbours and stops before the budget is exceeded;
  ``clipping="client"`` with :func:`central_dp_mod` (client) clips on the device.

Every mod, and the strategies that see the arrays (central, distributed), privatizes the
floating-point arrays selected by ``include`` / ``exclude`` patterns (mods: also
``privfed-include`` / ``privfed-exclude`` in the run config, read on every call); integer arrays
(e.g. ``num_batches_tracked``) are skipped and named in the log (:mod:`privfed.flwr.selection`),
and every strategy returns the model in its own dtypes.

Distributed DP with secure aggregation (over :mod:`privfed.distributed` and :mod:`privfed.secagg`):

* :func:`distributed_dp_mod` (client) and :class:`DistributedDpStrategy` (server): paper 001's
  Skellam encoding summed by privfed's SecAgg/SecAgg+ over Flower messages; the server decodes
  the mean and accounts each round with the clients actually in the sum.

Canary audits (the empirical ε of a run; :mod:`privfed.flwr.audit`):

* :func:`canary_mod` (client) and :class:`AuditStrategy` (server): canary clients added to each
  round's cohort, the one-run lower bound and the one-shot estimate logged each round beside
  the accounted ε.

See docs/FLOWER.md. Needs Flower: ``pip install "privfed[flwr]"``.
"""

from __future__ import annotations

try:
    import flwr as _flwr  # noqa: F401  (the top-level Flower package, not this one)
    from flwr.app import Message as _Message  # noqa: F401  (Message API: flwr >= 1.13)
    from flwr.serverapp.strategy import Strategy as _Strategy  # noqa: F401  (flwr >= 1.21)
except ImportError as exc:  # pragma: no cover - exercised by test_flwr's subprocess check
    raise ImportError(
        "privfed.flwr needs Flower (flwr >= 1.41 with its Message API): "
        'pip install "privfed[flwr]"'
    ) from exc

from .audit import AuditStrategy, CanaryMod, canary_mod
from .central import (
    CentralDpMod,
    CentralDpStrategy,
    CentralRound,
    adjusted_noise_multiplier,
    central_dp_mod,
    central_round_event,
)
from .distributed import (
    DistributedDpMod,
    DistributedDpStrategy,
    RoundOutcome,
    SecAggRoundAborted,
    distributed_dp_mod,
    dropouts_covered,
    plan_for_dropouts,
)
from .ledger import PrivacyLedger, RoundRecord
from .local import LocalDpStrategy, PrivatizeMod, clip_and_privatize, local_round_event, privatize_mod
from .records import flatten_arrays, unflatten_like
from .selection import ArraySelection

__all__ = [
    "AuditStrategy",
    "CanaryMod",
    "canary_mod",
    "PrivatizeMod",
    "privatize_mod",
    "LocalDpStrategy",
    "clip_and_privatize",
    "local_round_event",
    "CentralDpStrategy",
    "CentralDpMod",
    "central_dp_mod",
    "CentralRound",
    "adjusted_noise_multiplier",
    "central_round_event",
    "ArraySelection",
    "DistributedDpMod",
    "distributed_dp_mod",
    "DistributedDpStrategy",
    "RoundOutcome",
    "SecAggRoundAborted",
    "plan_for_dropouts",
    "dropouts_covered",
    "PrivacyLedger",
    "RoundRecord",
    "flatten_arrays",
    "unflatten_like",
]
