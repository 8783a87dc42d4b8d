"""Privacy accounting with the names dp_accounting and Opacus users know.

Events describe what was released; accountants compose them and answer ε for δ and δ for ε::

    from privfed.accounting import GaussianDpEvent, PoissonSampledDpEvent, \\
        SelfComposedDpEvent, RdpAccountant
    event = SelfComposedDpEvent(PoissonSampledDpEvent(0.01, GaussianDpEvent(1.1)), 1000)
    RdpAccountant().compose(event).get_epsilon(1e-5)

Every event round-trips through ``to_dict()`` / :func:`event_from_dict` (the serde form of the
Rust ``privfed_accounting::DpEvent``, as in ``privfed account`` files). Sensitivities are 1 unless
the event says otherwise, under add/remove-one neighbours (replace-one for
:class:`SampledWithoutReplacementDpEvent`). Formulas: docs/ALGORITHMS.md §5.

dp_accounting's own event objects are accepted wherever an event is (converted by their class
names, so dp_accounting is never imported for it), and ``event.to_dp_event()`` builds one when
dp_accounting is installed; it is not a dependency of privfed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING, Any, Callable, Dict, List, NamedTuple, Sequence, Tuple, Type, TypeVar
)

from . import _privfed as _native

PrivacyAccountant = _native.PrivacyAccountant
get_noise_multiplier = _native.get_noise_multiplier
get_laplace_scale = _native.get_laplace_scale
get_skellam_variance = _native.get_skellam_variance
account = _native.account
calibrate = _native.calibrate
# The reports of `privfed analyze ... --json`.
draw_and_discard_analysis = _native.draw_and_discard_analysis
reconstruction_analysis = _native.reconstruction_analysis
analytic_gaussian_analysis = _native.analytic_gaussian_analysis
epsilon_vs_noise = _native.epsilon_vs_noise

# The native functions carry their public names; this module is where users find them.
for _f in (get_noise_multiplier, get_laplace_scale, get_skellam_variance, account, calibrate,
           draw_and_discard_analysis, reconstruction_analysis, analytic_gaussian_analysis,
           epsilon_vs_noise):
    _f.__module__ = __name__
del _f

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
    "SampledWithoutReplacementDpEvent",
    "RdpCurveDpEvent",
    "NoOpDpEvent",
    "event_from_dict",
    "PrivacyAccountant",
    "RdpAccountant",
    "PldAccountant",
    "PLDAccountant",
    "PureCappedRdpAccountant",
    "get_noise_multiplier",
    "get_laplace_scale",
    "get_skellam_variance",
    "account",
    "calibrate",
    "draw_and_discard_analysis",
    "reconstruction_analysis",
    "analytic_gaussian_analysis",
    "epsilon_vs_noise",
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

    def to_dp_event(self) -> Any:
        """The same event as a dp_accounting ``DpEvent`` (needs ``pip install dp-accounting``).
        Raises :class:`~privfed.errors.UnsupportedEvent` for privfed's own events that
        dp_accounting has no class for (pure DP, Skellam, local sampling, RDP curves, ...)."""
        return _to_dp_event(self.to_dict())


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
class SampledWithoutReplacementDpEvent(DpEvent):
    """``event`` run on ``sample_size`` records drawn uniformly without replacement from
    ``source_dataset_size`` (e.g. a fixed-size cohort of clients; dp_accounting's name and field
    order). Stated under **replace-one** neighbours: ``event``'s sensitivities are replace-one
    sensitivities (a sum of updates clipped to C has sensitivity 2C, so noise of standard deviation
    z·C is ``GaussianDpEvent(z / 2)`` here). Composed by ``RdpAccountant(neighboring_relation=
    "replace_one")`` for Gaussian events, as dp_accounting 0.6.0."""

    source_dataset_size: int
    sample_size: int
    event: DpEvent

    def __post_init__(self) -> None:
        self._validate()

    def to_dict(self) -> Dict[str, Any]:
        return {
            "type": "sampled_without_replacement",
            "source_dataset_size": int(self.source_dataset_size),
            "sample_size": int(self.sample_size),
            "event": _as_dict(self.event),
        }


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
    if _is_dp_accounting_event(event):
        return _from_dp_accounting(event)
    raise TypeError(
        "expected a privfed.accounting event, its dict or a dp_accounting event, got "
        f"{type(event).__name__}"
    )


def _is_dp_accounting_event(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "dp_accounting"


def _from_dp_accounting(e: Any) -> Dict[str, Any]:
    """The serde dict of a dp_accounting event, by class name (dp_accounting is not imported):
    Gaussian, Laplace, PoissonSampled, SampledWithoutReplacement, SelfComposed, Composed, NoOp.
    Anything else raises :class:`~privfed.errors.UnsupportedEvent` naming the class."""
    name = type(e).__name__
    if name == "GaussianDpEvent":
        return {"type": "gaussian", "noise_multiplier": float(e.noise_multiplier)}
    if name == "LaplaceDpEvent":
        # dp_accounting's Laplace `noise_multiplier` is the scale over the ℓ1 sensitivity.
        return {"type": "laplace", "scale": float(e.noise_multiplier)}
    if name == "PoissonSampledDpEvent":
        return {
            "type": "poisson_sampled",
            "rate": float(e.sampling_probability),
            "event": _from_dp_accounting(e.event),
        }
    if name == "SampledWithoutReplacementDpEvent":
        return {
            "type": "sampled_without_replacement",
            "source_dataset_size": int(e.source_dataset_size),
            "sample_size": int(e.sample_size),
            "event": _from_dp_accounting(e.event),
        }
    if name == "SelfComposedDpEvent":
        return {"type": "self_composed", "event": _from_dp_accounting(e.event), "count": int(e.count)}
    if name == "ComposedDpEvent":
        return {"type": "composed", "events": [_from_dp_accounting(x) for x in e.events]}
    if name == "NoOpDpEvent":
        return {"type": "composed", "events": []}
    from .errors import UnsupportedEvent

    raise UnsupportedEvent(
        f"dp_accounting's {name} has no privfed counterpart (privfed takes GaussianDpEvent, "
        "LaplaceDpEvent, PoissonSampledDpEvent, SampledWithoutReplacementDpEvent, "
        "SelfComposedDpEvent, ComposedDpEvent and NoOpDpEvent)"
    )


def _to_dp_event(d: Dict[str, Any]) -> Any:
    try:
        import dp_accounting as dpa
    except ImportError as err:
        raise ImportError(
            "to_dp_event() needs dp_accounting: pip install dp-accounting"
        ) from err
    t = d.get("type")
    if t == "gaussian":
        return dpa.GaussianDpEvent(d["noise_multiplier"])
    if t == "laplace":
        return dpa.LaplaceDpEvent(d["scale"])
    if t == "poisson_sampled":
        return dpa.PoissonSampledDpEvent(d["rate"], _to_dp_event(d["event"]))
    if t == "sampled_without_replacement":
        return dpa.SampledWithoutReplacementDpEvent(
            d["source_dataset_size"], d["sample_size"], _to_dp_event(d["event"])
        )
    if t == "self_composed":
        return dpa.SelfComposedDpEvent(_to_dp_event(d["event"]), d["count"])
    if t == "composed":
        if not d["events"]:
            return dpa.NoOpDpEvent()
        return dpa.ComposedDpEvent([_to_dp_event(e) for e in d["events"]])
    from .errors import UnsupportedEvent

    raise UnsupportedEvent(f"privfed's {t!r} event has no dp_accounting counterpart")


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
    if t == "sampled_without_replacement":
        return SampledWithoutReplacementDpEvent(
            d["source_dataset_size"], d["sample_size"], event_from_dict(d["event"])
        )
    if t == "composed":
        return ComposedDpEvent([event_from_dict(e) for e in d["events"]])
    if t == "self_composed":
        return SelfComposedDpEvent(event_from_dict(d["event"]), d["count"])
    if t == "rdp_curve":
        return RdpCurveDpEvent(d["orders"], d["epsilons"])
    from .errors import InvalidParameter

    raise InvalidParameter(f"unknown privacy event type {t!r}")


# ------------------------------------------------------------------ the accountants
# The accountants are the native classes (every formula in Rust), subclassed here for one thing:
# a run of identical bare `step()` calls is counted in Python and handed to Rust as one
# `step(..., steps=count)` (which composes a run in O(1)) before anything else reads or changes
# the accountant. A step with a new event goes to Rust at once as `steps=0` (validated and
# checked against the accountant, nothing composed), so a bad argument raises at that call with
# the native message; the same event again is known to be valid. What is deferred is only the
# composition itself: a numerical failure of a valid event's RDP curve surfaces at the next
# method call (and at every one after it, as the count is kept until it composes).

_ONE = 1  # `steps is _ONE`: only a plain int 1 takes the counting path
_A = TypeVar("_A", bound="_StepRuns")


def _after_flush(f: Callable[..., Any]) -> Callable[..., Any]:
    """``f`` (a native method) with the pending steps composed first."""

    @functools.wraps(f)
    def method(self: "_StepRuns", *args: Any, **kwargs: Any) -> Any:
        self._flush()
        return f(self, *args, **kwargs)

    return method


def _flushed_property(native: Any) -> property:
    """A native getter (``ledger``, ``orders``, ...) with the pending steps composed first."""

    def get(self: "_StepRuns") -> Any:
        self._flush()
        return native.__get__(self, type(self))

    return property(get, doc=native.__doc__)


# The native accountants' methods and getters, each of which composes the pending steps before
# it runs (`step` itself does with a new event; pickling, copying and `==` go through
# `state_dict`). A test checks that these cover every attribute of the native classes.
_FLUSHING_METHODS = ("compose", "get_epsilon", "get_delta", "would_exceed", "as_event",
                    "state_dict", "load_state_dict", "supports", "__len__", "__repr__",
                    "get_epsilon_and_optimal_order", "get_privacy_spent")
_FLUSHING_PROPERTIES = ("ledger", "ledger_runs", "name", "neighbouring_relation", "orders")


if TYPE_CHECKING:  # the accountants' methods, for the type checker; a mixin at run time
    _Accountant = _native.PrivacyAccountant
else:
    _Accountant = object


class _StepRuns(_Accountant):
    """The counting ``step`` and the flush, shared by the accountants below (placed before the
    native class in their bases). ``_z``, ``_q``: the last event stepped (validated in Rust);
    ``_n``: how many of its steps are counted and not yet composed."""

    _z: Any = None
    _q: Any = None
    _n: int = 0

    def step(self, *, noise_multiplier: float, sample_rate: float, steps: int = 1) -> None:
        """Opacus-style: ``steps`` steps of DP-SGD / DP-FedAvg — the Gaussian mechanism with
        ``noise_multiplier`` on a Poisson sample at ``sample_rate`` (the Gaussian alone at
        rate 1). A bare step is counted: a new event is checked in Rust at once (a bad argument
        raises here, with the native message) and starts a new count, the same event again
        only adds one; the count is composed in Rust as one run (O(1); the RDP curve of the
        event is computed then) before any other method runs. ``steps=`` composes at once."""
        try:
            if noise_multiplier == self._z and sample_rate == self._q and steps is _ONE:
                self._n += 1
                return None
        except Exception:  # a comparison that cannot be made: Rust says what is wrong
            pass
        self._flush()
        if steps is _ONE:
            # count 0: the event is validated and checked against this accountant, not composed
            super().step(noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=0)
            self._z, self._q = float(noise_multiplier), float(sample_rate)
            self._n = 1
            return None
        super().step(noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=steps)
        if type(steps) is int:
            self._z, self._q = float(noise_multiplier), float(sample_rate)
        return None

    def _flush(self) -> None:
        n = self._n
        if n:
            super().step(noise_multiplier=self._z, sample_rate=self._q, steps=n)
            self._n = 0

    @classmethod
    def _from_state(cls: Type[_A], state: Dict[str, Any]) -> _A:
        """A fresh accountant with the settings of ``state`` (a ``state_dict()``)."""
        return cls()

    def __reduce__(self) -> Tuple[Any, ...]:
        return (_restore, (type(self), self.state_dict()))

    def __eq__(self, other: object) -> bool:
        """The same settings and the same ledger (runs of the same events and counts)."""
        if not isinstance(other, _native.PrivacyAccountant):
            return NotImplemented
        return bool(self.state_dict() == other.state_dict())

    __hash__ = None  # type: ignore[assignment]


def _restore(cls: Type[_A], state: Dict[str, Any]) -> _A:
    a = cls._from_state(state)
    a.load_state_dict(state)
    return a


_BASE = _native.PrivacyAccountant.__dict__
for _name in _FLUSHING_METHODS:
    if _name in _BASE:  # the others belong to one accountant: in its class below
        setattr(_StepRuns, _name, _after_flush(_BASE[_name]))
for _name in _FLUSHING_PROPERTIES:
    if _name in _BASE:
        setattr(_StepRuns, _name, _flushed_property(_BASE[_name]))
del _name


class RdpAccountant(_StepRuns, _native.RdpAccountant):
    """The Rényi-DP accountant on an order grid (default: privfed's grid, fractional and
    integer orders up to 10^4); supports every event. ``step()`` as Opacus's
    (``get_privacy_spent(delta=)``, ``get_epsilon(delta=)``), ``get_epsilon(target_delta)`` as
    dp_accounting's."""

    get_epsilon_and_optimal_order = _after_flush(
        _native.RdpAccountant.get_epsilon_and_optimal_order)
    get_privacy_spent = _after_flush(_native.RdpAccountant.get_privacy_spent)
    orders = _flushed_property(_native.RdpAccountant.__dict__["orders"])

    @classmethod
    def _from_state(cls, state: Dict[str, Any]) -> "RdpAccountant":
        return cls(orders=state["orders"], neighboring_relation=state["neighbouring_relation"])


class PldAccountant(_StepRuns, _native.PldAccountant):
    """The privacy-loss-distribution accountant (discretization
    ``value_discretization_interval``, default privfed's); composes by FFT. Rejects Poisson
    sampling of anything but the Gaussian and Laplace, and user RDP curves."""

    @classmethod
    def _from_state(cls, state: Dict[str, Any]) -> "PldAccountant":
        return cls(value_discretization_interval=state["discretization"])


class PureCappedRdpAccountant(_StepRuns, _native.PureCappedRdpAccountant):
    """RDP capped by pure composition: when every composed event is pure ε-DP the answer is
    the smaller of RDP's and ``Σ ε_t`` (local randomizers run many times)."""


class PLDAccountant(PldAccountant):
    """dp_accounting's name and argument order for :class:`PldAccountant`:
    ``PLDAccountant(neighboring_relation=None, value_discretization_interval=None)`` (the relation
    must be add/remove-one, by name or as dp_accounting's ``NeighboringRelation``)."""

    def __new__(
        cls, neighboring_relation: Any = None, value_discretization_interval: Any = None
    ) -> "PLDAccountant":
        return super().__new__(
            cls, value_discretization_interval, neighboring_relation=neighboring_relation
        )
