"""Central DP on Flower: clipping (fixed or adaptive), Gaussian noise, per-round accounting.

Server: :class:`CentralDpStrategy` wraps any Flower strategy. Client (``clipping="client"``):
:func:`central_dp_mod` clips the update on the device; the server still projects every update
onto the clipping ball before summing (a client cannot raise the sensitivity) and adds the noise.

The formulas (docs/ALGORITHMS.md §5.5 is their one home in prose):

* **Release.** Round r samples a cohort S of k clients uniformly without replacement from n.
  Client i's update is ``Δ_i = returned_i − global`` over the selected arrays
  (:mod:`privfed.flwr.selection`); the server releases
  ``mean = (Σ_{i∈S} Π_C(Δ_i)) / k + N(0, (z_Δ·C/k)² I)``, ``Π_C(v) = v·min(1, C/‖v‖₂)``
  (:class:`privfed.CentralGaussian`, privfed's generator). A sampled client that fails or is
  refused counts as ``Π_C(Δ_i) = 0``. Dividing by the public k is post-processing of the noisy
  sum ``Σ Π_C(Δ_i) + N(0, (z_Δ·C)² I)``.
* **Sensitivity (replace-one).** Replacing one client's data by another's changes one term of
  the sum: by at most ``2C`` in ℓ2. The noise ``z_Δ·C`` on the sum is therefore a Gaussian
  mechanism of noise multiplier ``z_Δ/2`` over the replace-one sensitivity.
* **Adaptive clipping** (Andrew, Thakkar, McMahan, Ramaswamy, *Differentially Private Learning
  with Adaptive Clipping*, NeurIPS 2021, Alg. 1 and Thm. 1): each client's bit
  ``b_i = [‖Δ_i‖₂ ≤ C]``; the server releases ``b̄ = (Σ b_i + N(0, σ_b²)) / k`` and sets
  ``C ← C·exp(−η_C·(b̄ − γ))`` for the next round (γ the target quantile: the fraction of
  updates meant to be unclipped). The bit sum has replace-one sensitivity 1, so the pair (noisy
  sum, noisy count) is one Gaussian mechanism whose replace-one noise multiplier is
  ``(4/z_Δ² + 1/σ_b²)^{−1/2}``; with ``z_Δ = (z^{−2} − (2σ_b)^{−2})^{−1/2}`` this is exactly
  ``z/2``: the round costs what fixed clipping at noise multiplier z costs (the paper's
  Theorem 1, stated there under add/remove-one with centred bits; both sensitivities double
  under replace-one, so the same z_Δ holds). Needs ``σ_b > z/2``.
* **Accounting.** One event per aggregated round:
  ``SampledWithoutReplacementDpEvent(n, k, GaussianDpEvent(z/2))``, composed by
  ``RdpAccountant(neighboring_relation="replace_one")`` (docs/ALGORITHMS.md §5.1, WBK19).
  ε(δ) bounds what the released models (and the released clipping norms) reveal about one
  client's data replaced by another's, for a client that is in the population every round.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from .. import accounting, errors
from .._privfed import CentralGaussian
from .ledger import PrivacyLedger, uncalled_mod_error, warn
from .records import check_same_layout, keep_dtypes, single_array_record
from .selection import (
    ArraySelection,
    Patterns,
    check_records,
    flatten_selected,
    log_skipped,
    replace_selected,
    train_selected,
)
from .strategy_base import WrappedStrategy

#: The ConfigRecord of client-side clipping: server -> client ``{"clip"}``; client -> server
#: ``{"clip", "unclipped", "arrays"}``.
CENTRAL_RECORD = "privfed-central"
_TO_CLIENT_KEYS = ("clip",)
_FROM_CLIENT_KEYS = ("clip", "unclipped", "arrays")


def adjusted_noise_multiplier(noise_multiplier: float, count_stddev: float) -> float:
    """``z_Δ = (z^{−2} − (2σ_b)^{−2})^{−1/2}``: the update's noise multiplier that makes a round
    of adaptive clipping (noisy sum at z_Δ, noisy unclipped count at σ_b) cost exactly what
    noise multiplier ``z`` costs (Andrew et al. 2021, Thm. 1; see the module docs). Raises
    ValueError unless ``σ_b > z/2``."""
    z, sb = float(noise_multiplier), float(count_stddev)
    if not (z > 0 and math.isfinite(z)):
        raise ValueError(f"noise_multiplier must be positive and finite, got {z}")
    if not sb > z / 2:
        raise ValueError(
            f"adaptive clipping needs clipped_count_stddev σ_b > z/2 = {z / 2:g} (got {sb:g}): "
            "the noisy count alone would cost more than the whole round's noise multiplier z")
    return float((z ** -2 - (2 * sb) ** -2) ** -0.5)


def central_round_event(population: int, cohort: int, noise_multiplier: float) -> Any:
    """``SampledWithoutReplacementDpEvent(n, k, GaussianDpEvent(z/2))``: a round of
    :class:`CentralDpStrategy` (fixed or adaptive clipping at noise multiplier z) over a cohort
    of k of n clients, under replace-one neighbours (sensitivity 2C of the clipped sum)."""
    return accounting.SampledWithoutReplacementDpEvent(
        int(population), int(cohort), accounting.GaussianDpEvent(float(noise_multiplier) / 2))


def _derived_seed(seed: Any, *parts: Any) -> Optional[bytes]:
    """A 256-bit seed for one draw from an experiment's seed (None: the OS)."""
    if seed is None:
        return None
    h = hashlib.sha256(repr((seed,) + parts).encode())
    return h.digest()


# ================================================================================ client side
class CentralDpMod:
    """ClientApp mod of :class:`CentralDpStrategy` with ``clipping="client"``.

    On a TRAIN message carrying the server's ConfigRecord ``"privfed-central"`` (``clip`` = C),
    the mod lets the ClientApp train, computes ``Δ = returned − received`` over the selected
    arrays (float arrays matching ``privfed-include`` and not ``privfed-exclude``, read from
    ``Context.run_config`` on every call, falling back to ``include``/``exclude``), and replies
    with ``received + Π_C(Δ)`` on them (other arrays as trained; an INFO line names them). The
    reply's ``"privfed-central"`` record carries ``clip``, ``unclipped`` (1 if ``‖Δ‖₂ ≤ C``: the
    bit of adaptive clipping) and ``arrays`` (the names clipped, which the server checks).

    A TRAIN message without the record, with unknown keys in it, or with another ``privfed…``
    record is refused (an error reply): the mod never sends an unclipped update by guessing.
    Non-TRAIN messages pass through. No noise is added here: the server adds it.
    """

    def __init__(self, *args: Any, include: Patterns = None, exclude: Patterns = None,
                 arrays_key: Optional[str] = None) -> None:
        if args:
            raise uncalled_mod_error("CentralDpMod", "CentralDpMod()", args)
        self.selection = ArraySelection.of(include, exclude)  # validates the patterns now
        self.include, self.exclude = include, exclude
        self.arrays_key = arrays_key
        self._logged: set = set()

    def __call__(self, msg: Message, ctxt: Context, call_next: Callable) -> Message:
        if msg.metadata.message_type != MessageType.TRAIN:
            return call_next(msg, ctxt)
        who = "central_dp_mod"
        check_records(msg.content, {CENTRAL_RECORD: _TO_CLIENT_KEYS}, who)
        rec = msg.content.config_records.get(CENTRAL_RECORD)
        if rec is None:
            raise errors.ProtocolError(
                f"{who}: a TRAIN message without the server's clipping norm (record "
                f"{CENTRAL_RECORD!r}); is the server a CentralDpStrategy(clipping='client')?")
        clip = float(rec["clip"])
        if not (math.isfinite(clip) and clip > 0):
            raise errors.ProtocolError(f"{who}: the server's clipping norm {clip} is not positive")
        out, u = train_selected(self, msg, ctxt, call_next, who,
                                "sent as trained (the server aggregates them without noise)")
        if u is None:
            return out
        delta = u.update
        if not np.all(np.isfinite(delta)):
            raise ValueError(f"{who}: the update has non-finite entries")
        unclipped = bool(np.linalg.norm(delta) <= clip)
        clipped = CentralGaussian(clip, 1.0).project(delta)  # privfed's projection (no noise)
        out.content.array_records[u.key] = replace_selected(u.returned, u.names, u.start + clipped)
        out.content[CENTRAL_RECORD] = ConfigRecord(
            {"clip": clip, "unclipped": int(unclipped), "arrays": u.names})
        return out


def central_dp_mod(*args: Any, **kw: Any) -> CentralDpMod:
    """A :class:`CentralDpMod` (``ClientApp(mods=[central_dp_mod()])``).

    Passing the factory itself (``mods=[central_dp_mod]``) makes Flower call it with a message:
    that is refused with a TypeError that names the fix."""
    if args:
        raise uncalled_mod_error("central_dp_mod", "central_dp_mod()", args)
    return CentralDpMod(**kw)


# ================================================================================ server side
@dataclass
class CentralRound:
    """What one round of :class:`CentralDpStrategy` did (``strategy.rounds``)."""

    server_round: int
    population: int  # n: the clients the cohort was drawn from (as accounted)
    sampled: int  # k: the cohort (the divisor of the mean and the event's sample size)
    clipping_norm: float  # C this round
    noise_multiplier: float  # z_Δ: the update's (z with fixed clipping)
    noise_stddev: float  # z_Δ·C/k: the noise on the mean
    contributors: int = 0
    refused: int = 0
    failed: int = 0
    unclipped: Optional[int] = None  # Σ b_i before noise (kept on the server, never released)
    unclipped_fraction: Optional[float] = None  # b̄, noisy (released; adaptive only)
    next_clipping_norm: Optional[float] = None
    epsilon: float = 0.0
    mean: Optional[np.ndarray] = None  # the released noisy mean update (selected arrays)
    names: List[str] = field(default_factory=list)


class CentralDpStrategy(WrappedStrategy):
    """Central DP around a Flower strategy: per-client clipping (fixed or adaptive), Gaussian
    noise on the mean, one privfed accounting event per round and a budget stop.

    ``CentralDpStrategy(FedAvg(...), noise_multiplier=z, clipping_norm=C, population=n,
    delta=δ)``. Each round (module docs for the formulas and the sensitivity):

    1. The inner strategy samples its cohort (``configure_train``); k = the distinct nodes it
       addresses, n = ``min(population, nodes connected now)`` (fewer connected nodes than
       ``population`` means a higher sampling rate; it is the one accounted). The round's event
       ``SampledWithoutReplacementDpEvent(n, k, GaussianDpEvent(z/2))`` is checked against
       ``budget``: a round that would take ε(δ) past it sends nothing and raises
       :class:`privfed.errors.PrivacyBudgetExceeded` (``on_budget="stop"``: a WARNING and no
       more rounds).
    2. Replies: ``Δ_i`` over the selected arrays (``include``/``exclude`` patterns; float arrays
       only — integer arrays such as ``num_batches_tracked`` are skipped and named in an INFO
       line). With ``clipping="client"`` the clients run :func:`central_dp_mod`, each reply must
       carry its ``"privfed-central"`` record for this round's C and the same arrays. Error
       replies, replies from nodes outside the cohort, with another layout, non-finite or
       without a valid record are left out (counted as zero updates; WARNING;
       ``privfed-refused`` / ``privfed-failed``).
    3. The server computes ``(Σ Π_C(Δ_i))/k + N(0, (z_Δ·C/k)²)`` with
       :class:`privfed.CentralGaussian` (privfed's generator; OS-seeded unless ``seed=``, for
       experiments only) and hands the inner strategy the accepted replies with the selected
       arrays replaced by ``global + mean`` (all equal, so FedAvg's weighted average returns
       them up to rounding; FedAdam & co. take the mean as their pseudo-gradient). Skipped
       arrays and the clients' metrics are aggregated by the inner strategy as sent: **they
       are not protected by the noise** (the INFO line says which arrays).
    4. Adaptive clipping (``adaptive=True``; Andrew et al. 2021): ``clipping_norm`` is the
       initial C; the noisy unclipped fraction ``b̄`` (noise ``clipped_count_stddev`` σ_b,
       default k/20 as in the paper) moves C toward the ``target_clipped_quantile`` γ with
       ``clip_norm_lr`` η_C (Flower's argument names). z_Δ as in
       :func:`adjusted_noise_multiplier`. The next C is sent to the clients in client mode.
       A client left out counts as a zero update and a 0 bit; b̄ divides by the cohort k
       (public), not by the replies received (which depend on the clients).
    5. The event is composed into the ledger (``RdpAccountant(neighboring_relation=
       "replace_one")`` by default) and ε(δ) logged; the metrics gain ``privfed-epsilon``,
       ``privfed-clipping-norm``, ``privfed-contributors``, ``privfed-refused``,
       ``privfed-failed`` (and ``privfed-unclipped-fraction``). ``strategy.rounds`` keeps a
       :class:`CentralRound` per round.

    ``population`` is required: the accounting's amplification by sampling depends on it, and
    no default can be safe. There is no ``num_sampled_clients`` (Flower's wrappers take one to
    size the noise in advance): k is the cohort the inner strategy actually addressed, public
    and known before any reply, so the noise and the event always match the round. The inner
    strategy must sample its cohort uniformly without replacement (Flower's built-in strategies
    do, with Python's ``random``) and must not see anything else of the replies than what
    this wrapper hands it. Its aggregate is returned in the model's dtypes
    (:func:`privfed.flwr.records.keep_dtypes`: FedAvg would turn an int64 counter into float64,
    which the next round would take for a parameter).
    """

    def __init__(
        self,
        inner: Strategy,
        noise_multiplier: float,
        clipping_norm: float,
        *,
        population: int,
        delta: float,
        clipping: str = "server",
        adaptive: bool = False,
        target_clipped_quantile: float = 0.5,
        clip_norm_lr: float = 0.2,
        clipped_count_stddev: Optional[float] = None,
        budget: Optional[float] = None,
        on_budget: str = "raise",
        accountant: Optional[Any] = None,
        include: Patterns = None,
        exclude: Patterns = None,
        arrays_key: Optional[str] = None,
        seed: Any = None,
    ) -> None:
        super().__init__(inner)
        z, c = float(noise_multiplier), float(clipping_norm)
        if not (math.isfinite(z) and z > 0):
            raise ValueError(
                f"noise_multiplier must be positive and finite, got {noise_multiplier}")
        if not (math.isfinite(c) and c > 0):
            raise ValueError(f"clipping_norm must be positive and finite, got {clipping_norm}")
        if clipping not in ("server", "client"):
            raise ValueError(f"clipping must be 'server' or 'client', got {clipping!r}")
        if on_budget not in ("raise", "stop"):
            raise ValueError(f"on_budget must be 'raise' or 'stop', got {on_budget!r}")
        if isinstance(population, bool) or not isinstance(population, (int, np.integer)) \
                or population < 1:
            raise ValueError(
                f"population must be the number of clients cohorts are drawn from (an int ≥ 1), "
                f"got {population!r}")
        if not 0.0 <= target_clipped_quantile <= 1.0:
            raise ValueError(
                f"target_clipped_quantile must be in [0, 1], got {target_clipped_quantile}")
        if not (math.isfinite(clip_norm_lr) and clip_norm_lr > 0):
            raise ValueError(f"clip_norm_lr must be positive, got {clip_norm_lr}")
        if clipped_count_stddev is not None:
            adjusted_noise_multiplier(z, clipped_count_stddev)  # σ_b > z/2, or ValueError now
        self.noise_multiplier = z
        self.clipping_norm = c
        self.population = int(population)
        self.clipping = clipping
        self.adaptive = bool(adaptive)
        self.target_clipped_quantile = float(target_clipped_quantile)
        self.clip_norm_lr = float(clip_norm_lr)
        self.clipped_count_stddev = clipped_count_stddev
        self.on_budget = on_budget
        self.selection = ArraySelection.of(include, exclude)
        self.arrays_key = arrays_key
        self.seed = seed
        if accountant is None:
            accountant = accounting.RdpAccountant(neighboring_relation="replace_one")
        probe = central_round_event(self.population, 1, z)
        if not accountant.supports(probe):
            raise ValueError(
                f"the accountant {type(accountant).__name__} cannot compose sampling without "
                "replacement (replace-one neighbours); use "
                "privfed.accounting.RdpAccountant(neighboring_relation='replace_one')")
        self.ledger = PrivacyLedger(delta, accountant, budget)
        self.rounds: List[CentralRound] = []
        self.stopped = False
        self._pending: Optional[Dict[str, Any]] = None
        self._logged: set = set()

    @property
    def history(self):
        return self.ledger.history

    # ------------------------------------------------------------------ per-round parameters
    def count_stddev(self, cohort: int) -> float:
        """σ_b for a cohort of k: ``clipped_count_stddev``, or k/20 (Andrew et al.'s default)."""
        if self.clipped_count_stddev is not None:
            return float(self.clipped_count_stddev)
        return cohort / 20.0

    def update_noise_multiplier(self, cohort: int) -> float:
        """z_Δ for a cohort of k: z (fixed clipping), or :func:`adjusted_noise_multiplier`."""
        if not self.adaptive:
            return self.noise_multiplier
        return adjusted_noise_multiplier(self.noise_multiplier, self.count_stddev(cohort))

    # ------------------------------------------------------------------ the round
    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        self._pending = None
        if self.stopped:
            return []
        names, skipped = self.selection.split(arrays)
        log_skipped("CentralDpStrategy", skipped,
                    "aggregated by the inner strategy as the clients sent them, without noise",
                    self._logged)
        msgs = list(self.inner.configure_train(server_round, arrays, config, grid))
        if not msgs:
            return []
        nodes = {m.metadata.dst_node_id for m in msgs}
        k = len(nodes)
        connected = len(list(grid.get_node_ids()))
        n = min(self.population, connected) if connected > 0 else self.population
        if k > n:
            raise ValueError(
                f"round {server_round}: the inner strategy sampled {k} clients, more than the "
                f"population {self.population} ({connected} connected): give population= the "
                "number of clients cohorts are drawn from")
        if n < self.population:
            warn("privfed: round %d: %d clients connected, fewer than population=%d: the "
                 "round is accounted as a sample of %d of %d", server_round, connected,
                 self.population, k, n)
        z_delta = self.update_noise_multiplier(k)  # adaptive: refuses σ_b ≤ z/2 before sending
        event = central_round_event(n, k, self.noise_multiplier)
        if self.ledger.would_exceed(event):
            what = f"a round of {k} of {n} clients at noise multiplier {self.noise_multiplier:g}"
            if self.on_budget == "raise":
                self.ledger.check(server_round, event, what)
            self.stopped = True
            warn("privfed: round %d and later not started: %s would exceed the budget %g",
                 server_round, what, self.ledger.budget)
            self.ledger.record(server_round, None, 0, "budget reached: round not started")
            return []
        if self.clipping == "client":
            for m in msgs:
                m.content[CENTRAL_RECORD] = ConfigRecord({"clip": self.clipping_norm})
        rnd = CentralRound(server_round, n, k, self.clipping_norm, z_delta,
                           z_delta * self.clipping_norm / k, names=list(names))
        self._pending = {"round": rnd, "event": event, "nodes": nodes, "arrays": arrays,
                         "global": flatten_selected(arrays, names)}
        return msgs

    def add_canary_updates(self, updates: List[np.ndarray]) -> None:
        """Adds audit canaries' updates (over this round's selected arrays) to the round
        between ``configure_train`` and ``aggregate_train`` (:class:`privfed.flwr.AuditStrategy`
        does): each is projected onto the clipping ball and summed with the clients' before the
        noise, as a client's update is, but canaries are not contributors, do not change the
        divisor k and are not accounted (they are extra clients, not sampled ones)."""
        if self._pending is None:
            raise ValueError("add_canary_updates: no round is open (call it after "
                             "configure_train and before aggregate_train)")
        dim = self._pending["global"].size
        for u in updates:
            if np.shape(u) != (dim,) or not np.all(np.isfinite(u)):
                raise ValueError(f"add_canary_updates: a canary update is not {dim} finite numbers")
        self._pending["canaries"] = [np.asarray(u, dtype=np.float64) for u in updates]

    def _accept(self, server_round: int, m: Message, p: Dict[str, Any], seen: set):
        """(Δ, bit) of an acceptable reply, or the reason it is refused."""
        nid = m.metadata.src_node_id
        if nid not in p["nodes"]:
            return f"node {nid} was not sampled this round"
        if nid in seen:
            return f"node {nid} replied twice"
        try:
            _, returned = single_array_record(m.content, self.arrays_key)
            check_same_layout(p["arrays"], returned)
        except ValueError as exc:
            return f"node {nid}: {exc}"
        rnd: CentralRound = p["round"]
        delta = flatten_selected(returned, rnd.names) - p["global"]
        if not np.all(np.isfinite(delta)):
            return f"node {nid}: non-finite update"
        if self.clipping == "server":
            return delta, int(np.linalg.norm(delta) <= rnd.clipping_norm)
        rec = m.content.config_records.get(CENTRAL_RECORD)
        if rec is None:
            return (f"node {nid}: no {CENTRAL_RECORD!r} record (is its ClientApp's mod "
                    "central_dp_mod()?)")
        extra = sorted(k for k in rec.keys() if k not in _FROM_CLIENT_KEYS)
        if extra or any(k not in rec for k in _FROM_CLIENT_KEYS):
            return f"node {nid}: record {CENTRAL_RECORD!r} has keys {sorted(rec.keys())}"
        if float(rec["clip"]) != rnd.clipping_norm:
            return f"node {nid}: clipped at {rec['clip']}, not this round's {rnd.clipping_norm}"
        if list(rec["arrays"]) != rnd.names:
            return (f"node {nid}: clipped the arrays {list(rec['arrays'])}, the server selects "
                    f"{rnd.names} (same privfed-include/-exclude on both sides?)")
        bit = rec["unclipped"]
        if isinstance(bit, bool) or bit not in (0, 1):
            return f"node {nid}: unclipped bit {bit!r} is not 0 or 1"
        return delta, int(bit)

    def aggregate_train(self, server_round: int, replies: Iterable[Message]):
        p, self._pending = self._pending, None
        if p is None:
            return None, None
        rnd: CentralRound = p["round"]
        ok: List[Message] = []
        deltas: List[np.ndarray] = []
        bits: List[int] = []
        seen: set = set()
        for m in replies:
            if m.has_error():
                rnd.failed += 1
                warn("privfed: round %d: node %s failed: %s", server_round,
                     m.metadata.src_node_id, m.error.reason)
                continue
            got = self._accept(server_round, m, p, seen)
            if isinstance(got, str):
                rnd.refused += 1
                warn("privfed: round %d: reply left out: %s", server_round, got)
                continue
            seen.add(m.metadata.src_node_id)
            ok.append(m)
            deltas.append(got[0])
            bits.append(got[1])
        rnd.contributors = len(ok)
        if not ok:
            rec = self.ledger.record(server_round, None, 0,
                                     "no acceptable reply: nothing released")
            rnd.epsilon = rec.epsilon
            self.rounds.append(rnd)
            return None, None
        k, c = rnd.sampled, rnd.clipping_norm
        # the noisy mean: privfed's projection onto the C-ball, sum / k, N(0, (z_Δ·C/k)²)
        mech = CentralGaussian(c, rnd.noise_multiplier,
                               seed=_derived_seed(self.seed, server_round, "update"))
        canaries = p.get("canaries", [])  # audit canaries: clipped and summed, not accounted
        mean = np.asarray(mech.aggregate(np.stack(deltas + canaries), float(k)),
                          dtype=np.float64)
        rnd.mean = mean
        if self.adaptive:
            # noisy count of unclipped updates: Σ b_i + N(0, σ_b²) (a 1-D sum at "clip" 1,
            # batch 1, noise multiplier σ_b), then C ← C·exp(−η_C(b̄ − γ))
            sb = self.count_stddev(k)
            counter = CentralGaussian(1.0, sb,
                                      seed=_derived_seed(self.seed, server_round, "count"))
            noisy = float(counter.aggregate(np.asarray(bits, dtype=np.float64)[:, None], 1.0)[0])
            rnd.unclipped = int(sum(bits))
            rnd.unclipped_fraction = noisy / k
            self.clipping_norm = c * math.exp(
                -self.clip_norm_lr * (rnd.unclipped_fraction - self.target_clipped_quantile))
            rnd.next_clipping_norm = self.clipping_norm
        rec = self.ledger.record(server_round, p["event"], len(ok))
        rnd.epsilon = rec.epsilon
        self.rounds.append(rnd)
        new_vals = p["global"] + mean
        for m in ok:
            # in place, as Flower's own DP wrappers do: the selected arrays become global +
            # mean, everything else stays as the client sent it
            key, returned = single_array_record(m.content, self.arrays_key)
            m.content[key] = replace_selected(returned, rnd.names, new_vals)
            if CENTRAL_RECORD in m.content.config_records:
                del m.content[CENTRAL_RECORD]
        handed = ok
        arrays, metrics = self.inner.aggregate_train(server_round, handed)
        if arrays is not None:
            arrays = keep_dtypes(arrays, p["arrays"])
        metrics = MetricRecord() if metrics is None else metrics
        metrics["privfed-epsilon"] = rec.epsilon
        metrics["privfed-clipping-norm"] = c
        metrics["privfed-contributors"] = len(ok)
        metrics["privfed-refused"] = rnd.refused
        metrics["privfed-failed"] = rnd.failed
        if self.adaptive:
            metrics["privfed-unclipped-fraction"] = float(rnd.unclipped_fraction)
        return arrays, metrics


