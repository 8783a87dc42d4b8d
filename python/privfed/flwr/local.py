"""Local DP on Flower: a client mod that privatizes the update, a strategy that accounts it."""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, Iterable, Optional, Tuple, Union

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from .. import accounting
from .ledger import PrivacyLedger, uncalled_mod_error, warn
from .records import CANARY_KEYS, CANARY_RECORD, keep_dtypes
from .selection import (
    ArraySelection,
    Patterns,
    check_records,
    replace_selected,
    train_selected,
)
from .strategy_base import WrappedStrategy

#: The ConfigRecord a privatized reply carries (mechanism name and its ε, δ).
PRIVFED_RECORD = "privfed"

RandomizerOrFactory = Union[Any, Callable[[int], Any]]


def _domain(randomizer: Any) -> Tuple[str, float]:
    """(kind, radius) of a randomizer's input domain: kind in sphere, l2, l1, linf."""
    d = randomizer.domain
    if callable(d):
        d = d()
    # serde form of privfed_mechanisms::Domain, e.g. {"L2Ball": {"dim": 5, "radius": 1.0}}
    if isinstance(d, dict) and len(d) == 1 and isinstance(next(iter(d.values())), dict):
        name, fields = next(iter(d.items()))
    elif isinstance(d, dict):
        name, fields = str(d.get("kind", d.get("type", ""))), d
    else:
        name, fields = str(d), {}
    key = name.replace("_", "").lower()
    kinds = {"unitsphere": "sphere", "l2ball": "l2", "l1ball": "l1", "linfball": "linf"}
    if key not in kinds:
        raise ValueError(
            f"{randomizer.name} takes {d}: privatize_mod needs a vector randomizer whose "
            "domain is the unit sphere or an l2/l1/linf ball"
        )
    return kinds[key], float(fields.get("radius", 1.0))


def clip_and_privatize(randomizer: Any, update: np.ndarray, clip: float) -> np.ndarray:
    """The report of ``update`` (float64): clipped to norm ``clip``, scaled onto the
    randomizer's domain, privatized and scaled back (docs/FLOWER.md, "Clipping").

    * unit sphere (PrivUnit2, PrivUnitG): the direction ``u/‖u‖₂`` is privatized and the report
      scaled by ``clip`` (a zero update sends the report of ``e₁``);
    * ℓ2 / ℓ1 ball of radius r (Gaussian, Laplace, Separated, ...): ``u`` is scaled down to
      norm ``clip`` if longer, then by ``r/clip``; the report is scaled by ``clip/r``;
    * ℓ∞ ball of radius r: each coordinate clamped to ``[-clip, clip]``, then as above.
    """
    if not math.isfinite(clip) or clip <= 0:
        raise ValueError(f"clip must be positive and finite, got {clip}")
    u = np.asarray(update, dtype=np.float64)
    if not np.all(np.isfinite(u)):
        raise ValueError("the update has non-finite entries")
    kind, radius = _domain(randomizer)
    if kind == "sphere":
        n = float(np.linalg.norm(u))
        if n > 0:
            x = u / n
        else:
            x = np.zeros_like(u)
            x[0] = 1.0
        return np.asarray(randomizer.privatize(x), dtype=np.float64) * clip
    if kind == "l2":
        n = float(np.linalg.norm(u))
        # slightly inside the ball, against rounding at the boundary
        x = u * (min(1.0, clip / n) * (1.0 - 1e-12) if n > 0 else 1.0)
    elif kind == "l1":
        n = float(np.abs(u).sum())
        x = u * (min(1.0, clip / n) * (1.0 - 1e-12) if n > 0 else 1.0)
    else:
        x = np.clip(u, -clip, clip)
    report = randomizer.privatize(x * (radius / clip))
    return np.asarray(report, dtype=np.float64) * (clip / radius)


class PrivatizeMod:
    """ClientApp mod: the TRAIN reply's update is replaced by a local randomizer's report.

    The mod reads the model the server sent (the message's ArrayRecord), lets the ClientApp
    train (``call_next``), and computes the update ``u = returned − received`` over the
    selected arrays (in the record's key order): floating-point arrays whose names match
    ``include`` and not ``exclude`` (fnmatch patterns; ``privfed-include`` /
    ``privfed-exclude`` in ``Context.run_config``, read on every call, replace them). It then
    clips ``u`` (:func:`clip_and_privatize`), privatizes it and replies with
    ``received + report`` on the selected arrays, so a FedAvg-style strategy averages
    ``global + report``. **Every other array is sent back as received** (integer arrays such as
    ``num_batches_tracked``, excluded ones; an INFO line names them): nothing leaves the device
    unprivatized, whoever sets the run config. The reply also carries a ConfigRecord
    ``"privfed"`` with the mechanism's name, ε and δ, which :class:`LocalDpStrategy` checks.
    A TRAIN message carrying a ``privfed…`` record (another privfed strategy's) is refused,
    except the canary record of :class:`~privfed.flwr.AuditStrategy`: on a canary node
    (``mods=[privatize_mod(...), canary_mod()]``) the canary update :func:`canary_mod` answers
    with is clipped and privatized here like a client's update.

    ``randomizer`` is a privfed :class:`~privfed.LocalRandomizer` of the model's dimension, or a
    callable ``dim -> randomizer`` (built once per dimension and process, e.g.
    ``lambda d: privfed.PrivUnitG(epsilon=8.0, dim=d)``; the Ray simulation then builds it in
    each worker). Non-TRAIN messages pass through untouched.
    """

    def __init__(
        self,
        randomizer: RandomizerOrFactory,
        clip: float,
        *,
        arrays_key: Optional[str] = None,
        include: Patterns = None,
        exclude: Patterns = None,
    ) -> None:
        if not math.isfinite(clip) or clip <= 0:
            raise ValueError(f"clip must be positive and finite, got {clip}")
        self.clip = float(clip)
        self.arrays_key = arrays_key
        ArraySelection.of(include, exclude)  # refuse malformed patterns now
        self.include, self.exclude = include, exclude
        self._logged: set = set()
        self._factory: Optional[Callable[[int], Any]] = None
        self._by_dim: Dict[int, Any] = {}
        if callable(randomizer) and not hasattr(randomizer, "privatize"):
            self._factory = randomizer
        else:
            _domain(randomizer)  # refuse an unusable randomizer now, not at the first round
            self._by_dim[int(randomizer.dim)] = randomizer

    def randomizer(self, dim: int) -> Any:
        """The randomizer for updates of length ``dim``."""
        r = self._by_dim.get(dim)
        if r is None:
            if self._factory is None:
                have = next(iter(self._by_dim))
                raise ValueError(f"the randomizer is for dimension {have}, the update has {dim}")
            r = self._factory(dim)
            if int(r.dim) != dim:
                raise ValueError(f"the factory built a randomizer of dimension {r.dim}, not {dim}")
            _domain(r)
            self._by_dim[dim] = r
        return r

    def __call__(self, msg: Message, ctxt: Context, call_next: Callable) -> Message:
        if msg.metadata.message_type != MessageType.TRAIN:
            return call_next(msg, ctxt)
        who = "privatize_mod"
        check_records(msg.content, {CANARY_RECORD: CANARY_KEYS}, who)
        out, u = train_selected(self, msg, ctxt, call_next, who,
                                "sent back as received (nothing of them leaves the device)")
        if u is None:
            return out
        update = u.update
        r = self.randomizer(update.size)
        report = clip_and_privatize(r, update, self.clip)
        out.content.array_records[u.key] = replace_selected(u.received, u.names, u.start + report)
        out.content[PRIVFED_RECORD] = ConfigRecord(
            {"mechanism": str(r.name), "epsilon": float(r.epsilon), "delta": float(r.delta),
             "clip": self.clip}
        )
        return out


def privatize_mod(randomizer: RandomizerOrFactory, clip: Any = None, *extra: Any,
                  arrays_key: Optional[str] = None, include: Patterns = None,
                  exclude: Patterns = None) -> PrivatizeMod:
    """A :class:`PrivatizeMod` (``ClientApp(mods=[privatize_mod(...)])``).

    Passing the factory itself (``mods=[privatize_mod]``) makes Flower call it with a message:
    that is refused with a TypeError that names the fix."""
    if extra or isinstance(randomizer, Message):
        raise uncalled_mod_error("privatize_mod", "privatize_mod(randomizer, clip)",
                                 (randomizer, clip, *extra))
    if clip is None:
        raise TypeError("privatize_mod needs clip= (the l2 norm each update is clipped to)")
    return PrivatizeMod(randomizer, clip, arrays_key=arrays_key, include=include,
                        exclude=exclude)


def local_round_event(epsilon: float, sample_rate: Optional[float] = None) -> Any:
    """The event of one round of ε-LDP reports: ``PureDpEvent(ε)``, or
    ``LocalSampledDpEvent(q, PureDpEvent(ε))`` when clients take part with probability ``q``
    independently of each other (Poisson sampling; Flower's fixed-size sampling is not)."""
    pure = accounting.PureDpEvent(float(epsilon))
    if sample_rate is None or sample_rate >= 1.0:
        return pure
    return accounting.LocalSampledDpEvent(float(sample_rate), pure)


class LocalDpStrategy(WrappedStrategy):
    """Wraps a strategy whose clients run :func:`privatize_mod`; accounts and reports ε.

    Every round with at least one privatized reply composes :func:`local_round_event` of
    ``epsilon`` into the accountant and logs ε(δ); the aggregated MetricRecord gains
    ``privfed-epsilon``. Replies without the ``"privfed"`` record, or privatized at a larger ε
    (or δ) than declared, are left out of the aggregate (counted in ``privfed-refused``).
    ``sample_rate`` amplifies only if the cohort really is Poisson-sampled; Flower's strategies
    sample a fixed-size cohort, accounted here without amplification (the default).
    ``budget`` (ε at ``delta``): a round whose event would take ε(δ) past it is not started
    and :class:`privfed.errors.PrivacyBudgetExceeded` is raised (``on_budget="stop"``: a
    WARNING and no more rounds). Error replies are logged as WARNINGs with the client's text
    and counted in ``privfed-failed``. The default accountant is
    :class:`privfed.accounting.PureCappedRdpAccountant` (RDP, never above the pure
    composition Σε). The aggregate keeps the model's dtypes (an int64 counter FedAvg averaged
    to float64 is rounded back, so the clients skip it again next round).
    """

    def __init__(
        self,
        inner: Strategy,
        *,
        epsilon: float,
        delta: float,
        local_delta: float = 0.0,
        accountant: Optional[Any] = None,
        sample_rate: Optional[float] = None,
        budget: Optional[float] = None,
        on_budget: str = "raise",
    ) -> None:
        super().__init__(inner)
        if on_budget not in ("raise", "stop"):
            raise ValueError(f"on_budget must be 'raise' or 'stop', got {on_budget!r}")
        self.on_budget = on_budget
        if not epsilon > 0:
            raise ValueError(f"epsilon must be positive, got {epsilon}")
        if local_delta != 0.0:
            raise ValueError("only pure ε-LDP reports are accounted (local_delta = 0)")
        self.epsilon_per_report = float(epsilon)
        self.sample_rate = sample_rate
        if accountant is None:
            accountant = accounting.PureCappedRdpAccountant()
        self.ledger = PrivacyLedger(delta, accountant, budget)
        self.event = local_round_event(epsilon, sample_rate)
        self.stopped = False
        self._model: Optional[ArrayRecord] = None  # the round's global model

    @property
    def history(self):
        return self.ledger.history

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        if self.stopped:
            return []
        if self.ledger.would_exceed(self.event):
            what = f"a round of ε₀ = {self.epsilon_per_report:g} reports"
            if self.on_budget == "raise":
                self.ledger.check(server_round, self.event, what)
            self.stopped = True
            warn("privfed: round %d and later not started: %s would exceed the budget %g",
                 server_round, what, self.ledger.budget)
            self.ledger.record(server_round, None, 0, "budget reached: round not started")
            return []
        self._model = arrays  # its dtypes are kept through the inner aggregation
        return self.inner.configure_train(server_round, arrays, config, grid)

    def aggregate_train(self, server_round: int, replies: Iterable[Message], *,
                        canaries: Iterable[Message] = ()):
        """Aggregates the privatized replies. ``canaries`` (from
        :class:`~privfed.flwr.AuditStrategy`) are checked and aggregated like any reply but are
        not contributors: the round's ``contributors`` and the accounting count the real
        clients only (``privfed-canaries`` in the metrics counts the canaries aggregated)."""
        ok, refused, failed = [], 0, 0
        canary_ids = set()
        canaries = list(canaries)
        for m in canaries:
            canary_ids.add(id(m))
        for m in list(replies) + canaries:
            if m.has_error():
                failed += 1
                warn("privfed: round %d: node %s failed: %s", server_round,
                     m.metadata.src_node_id, m.error.reason)
                continue
            rec = m.content.config_records.get(PRIVFED_RECORD)
            if (rec is None or float(rec["epsilon"]) > self.epsilon_per_report * (1 + 1e-9)
                    or float(rec["delta"]) > 0.0):
                refused += 1
                continue
            ok.append(m)
        if refused:
            warn("privfed: round %d: %d repl(ies) left out: not privatized, or at more than "
                 "ε₀ = %g", server_round, refused, self.epsilon_per_report)
        real = sum(1 for m in ok if id(m) not in canary_ids)
        if not real:
            # canaries alone release nothing about a client: no round
            self.ledger.record(server_round, None, 0, "no privatized reply")
            return None, None
        arrays, metrics = self.inner.aggregate_train(server_round, ok)
        if arrays is not None and self._model is not None:
            arrays = keep_dtypes(arrays, self._model)
        rec = self.ledger.record(server_round, self.event, real)
        metrics = MetricRecord() if metrics is None else metrics
        if canary_ids:
            metrics["privfed-canaries"] = len(ok) - real
        metrics["privfed-epsilon"] = rec.epsilon
        metrics["privfed-refused"] = refused
        metrics["privfed-failed"] = failed
        return arrays, metrics
