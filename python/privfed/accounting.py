"""Privacy accounting with the names dp_accounting and Opacus users know.

Events describe what was released; accountants compose them and answer ε for δ and δ for ε::

    from privfed.accounting import GaussianDpEvent, PoissonSampledDpEvent, \\
        SelfComposedDpEvent, RdpAccountant
    event = SelfComposedDpEvent(PoissonSampledDpEvent(0.01, GaussianDpEvent(1.1)), 1000)
    RdpAccountant().compose(event).get_epsilon(1e-5)

Every event round-trips through ``to_dict()`` / :func:`event_from_dict` (the serde form of the
Rust ``privfed_accounting::DpEvent``, as in ``privfed account`` files). Sensitivities are 1 unless
the event says otherwise, under add/remove-one neighbours. Formulas: docs/ALGORITHMS.md §5.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, NamedTuple, Sequence

from . import _privfed as _native

PrivacyAccountant = _native.PrivacyAccountant
RdpAccountant = _native.RdpAccountant
PldAccountant = _native.PldAccountant
PureCappedRdpAccountant = _native.PureCappedRdpAccountant
get_noise_multiplier = _native.get_noise_multiplier
get_laplace_scale = _native.get_laplace_scale
get_skellam_variance = _native.get_skellam_variance

__all__ = [
    "Budget",
    "DpEvent",
    "GaussianDpEvent",
    "LaplaceDpEvent",
    "PureDpEvent",
    "SkellamDpEvent",
    "DistributedDiscreteGaussianDpEvent",
    "PoissonSampledDpEvent",
    "LocalSampledDpEvent",
    "ComposedDpEvent",
    "SelfComposedDpEvent",
    "RdpCurveDpEvent",
    "NoOpDpEvent",
    "event_from_dict",
    "PrivacyAccountant",
    "RdpAccountant",
    "PldAccountant",
    "PureCappedRdpAccountant",
    "get_noise_multiplier",
    "get_laplace_scale",
    "get_skellam_variance",
]


class Budget(NamedTuple):
    """A privacy budget (ε, δ), as ``would_exceed`` takes it."""

    epsilon: float
    delta: float


class DpEvent:
    """Base class of privacy events. Subclasses are frozen dataclasses validated on creation."""

    def to_dict(self) -> Dict[str, Any]:
        raise NotImplementedError

    def _validate(self) -> None:
        _native.validate_event(self.to_dict())


@dataclass(frozen=True)
class GaussianDpEvent(DpEvent):
    """The Gaussian mechanism with sensitivity 1 and standard deviation ``noise_multiplier``."""

    noise_multiplier: float

    def __post_init__(self) -> None:
        self._validate()

    def to_dict(self) -> Dict[str, Any]:
        return {"type": "gaussian", "noise_multiplier": float(self.noise_multiplier)}


@dataclass(frozen=True)
class LaplaceDpEvent(DpEvent):
    """The Laplace mechanism with ℓ1 sensitivity 1 and ``scale`` (density ∝ e^{−|x|/scale})."""

    scale: float

    def __post_init__(self) -> None:
        self._validate()

    def to_dict(self) -> Dict[str, Any]:
        return {"type": "laplace", "scale": float(self.scale)}


@dataclass(frozen=True)
class PureDpEvent(DpEvent):
    """Any pure ε-DP randomizer (e.g. one of privfed's local randomizers: ``m.epsilon``)."""

    epsilon: float

    def __post_init__(self) -> None:
        self._validate()

    def to_dict(self) -> Dict[str, Any]:
        return {"type": "pure_dp", "epsilon": float(self.epsilon)}


@dataclass(frozen=True)
class SkellamDpEvent(DpEvent):
    """Skellam noise Sk(mu) on each coordinate of an integer query with the given ℓ1/ℓ2
    sensitivities (paper 001 §3, Thm. 3.5)."""

    mu: float
    l1_sensitivity: float
    l2_sensitivity: float

    def __post_init__(self) -> None:
        self._validate()

    def to_dict(self) -> Dict[str, Any]:
        return {
            "type": "skellam",
            "mu": float(self.mu),
            "l1_sensitivity": float(self.l1_sensitivity),
            "l2_sensitivity": float(self.l2_sensitivity),
        }


@dataclass(frozen=True)
class DistributedDiscreteGaussianDpEvent(DpEvent):
    """The distributed discrete Gaussian of Kairouz, Liu and Steinke 2021 (paper 001's DDG
    baseline): central standard deviation ``sigma`` over ``dim`` coordinates, correction ``tau``."""

    sigma: float
    l1_sensitivity: float
    l2_sensitivity: float
    tau: float
    dim: int

    def __post_init__(self) -> None:
        self._validate()

    def to_dict(self) -> Dict[str, Any]:
        return {
            "type": "distributed_discrete_gaussian",
            "sigma": float(self.sigma),
            "l1_sensitivity": float(self.l1_sensitivity),
            "l2_sensitivity": float(self.l2_sensitivity),
            "tau": float(self.tau),
            "dim": int(self.dim),
        }


@dataclass(frozen=True)
class PoissonSampledDpEvent(DpEvent):
    """``event`` run on a Poisson sample of the data with ``sampling_probability``."""

    sampling_probability: float
    event: DpEvent

    def __post_init__(self) -> None:
        self._validate()

    def to_dict(self) -> Dict[str, Any]:
        return {
            "type": "poisson_sampled",
            "rate": float(self.sampling_probability),
            "event": _as_dict(self.event),
        }


@dataclass(frozen=True)
class LocalSampledDpEvent(DpEvent):
    """Local sampling: each person takes part with ``sampling_probability`` and runs ``event``;
    taking part is visible, so a pure ε is not amplified (only RDP and δ(ε) shrink)."""

    sampling_probability: float
    event: DpEvent

    def __post_init__(self) -> None:
        self._validate()

    def to_dict(self) -> Dict[str, Any]:
        return {
            "type": "local_sampled",
            "rate": float(self.sampling_probability),
            "event": _as_dict(self.event),
        }


@dataclass(frozen=True)
class ComposedDpEvent(DpEvent):
    """Sequential composition of ``events``."""

    events: List[DpEvent] = field(default_factory=list)

    def __post_init__(self) -> None:
        object.__setattr__(self, "events", list(self.events))
        self._validate()

    def to_dict(self) -> Dict[str, Any]:
        return {"type": "composed", "events": [_as_dict(e) for e in self.events]}


@dataclass(frozen=True)
class SelfComposedDpEvent(DpEvent):
    """``count`` sequential repetitions of ``event``."""

    event: DpEvent
    count: int

    def __post_init__(self) -> None:
        self._validate()

    def to_dict(self) -> Dict[str, Any]:
        return {"type": "self_composed", "event": _as_dict(self.event), "count": int(self.count)}


@dataclass(frozen=True)
class RdpCurveDpEvent(DpEvent):
    """A mechanism given by its RDP curve: ``(orders[i], epsilons[i])``-RDP for each i."""

    orders: Sequence[float]
    epsilons: Sequence[float]

    def __post_init__(self) -> None:
        object.__setattr__(self, "orders", [float(o) for o in self.orders])
        object.__setattr__(self, "epsilons", [float(e) for e in self.epsilons])
        self._validate()

    def to_dict(self) -> Dict[str, Any]:
        return {"type": "rdp_curve", "orders": list(self.orders), "epsilons": list(self.epsilons)}


def NoOpDpEvent() -> ComposedDpEvent:  # noqa: N802 (dp_accounting's name)
    """An event that releases nothing (the empty composition)."""
    return ComposedDpEvent([])


def _as_dict(event: Any) -> Dict[str, Any]:
    if isinstance(event, DpEvent):
        return event.to_dict()
    if isinstance(event, dict):
        return event
    raise TypeError(f"expected a privfed.accounting event or its dict, got {type(event).__name__}")


def event_from_dict(d: Dict[str, Any]) -> DpEvent:
    """The event object of a serde dict (as ``to_dict()`` writes and the ledger holds)."""
    t = d.get("type")
    if t == "gaussian":
        return GaussianDpEvent(d["noise_multiplier"])
    if t == "laplace":
        return LaplaceDpEvent(d["scale"])
    if t == "pure_dp":
        return PureDpEvent(d["epsilon"])
    if t == "skellam":
        return SkellamDpEvent(d["mu"], d["l1_sensitivity"], d["l2_sensitivity"])
    if t == "distributed_discrete_gaussian":
        return DistributedDiscreteGaussianDpEvent(
            d["sigma"], d["l1_sensitivity"], d["l2_sensitivity"], d["tau"], d["dim"]
        )
    if t == "poisson_sampled":
        return PoissonSampledDpEvent(d["rate"], event_from_dict(d["event"]))
    if t == "local_sampled":
        return LocalSampledDpEvent(d["rate"], event_from_dict(d["event"]))
    if t == "composed":
        return ComposedDpEvent([event_from_dict(e) for e in d["events"]])
    if t == "self_composed":
        return SelfComposedDpEvent(event_from_dict(d["event"]), d["count"])
    if t == "rdp_curve":
        return RdpCurveDpEvent(d["orders"], d["epsilons"])
    from .errors import InvalidParameter

    raise InvalidParameter(f"unknown privacy event type {t!r}")
