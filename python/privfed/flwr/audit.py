"""Canary audits of a Flower run: :class:`AuditStrategy` (server) and :func:`canary_mod`
(client). docs/FLOWER.md, "Auditing a Flower run".

The audit is the one ``privfed fl train`` runs with ``[audit] canaries = K``
(``crates/privfed-fl/src/audit.rs``; docs/AUDIT.md), computed by the same Rust code through
:class:`privfed.audit.CanarySet`:

* **Canaries.** K seeded unit directions ``c_i`` in the selected parameters' ``d`` dimensions,
  canary i included with probability ½ (``S_i``), both from a seed the server keeps secret.
  An included canary is sent in **every** round (Andrew et al. 2024), as the update
  ``norm·c_i``; an excluded one is never sent.
* **Where canaries come from.** Canaries are *extra* clients: each round the wrapper adds one
  TRAIN message per included canary to the cohort the inner strategy sampled, addressed to a
  node that runs :func:`canary_mod` (``canary_nodes``, round-robin; nodes listed there are
  hidden from the inner strategy's sampling, so a canary never takes a real client's place).
  The canary message carries the ConfigRecord ``"privfed-canary"`` (``index``, ``arrays``,
  ``update``); the mod answers it with ``received + update`` on those arrays **without
  training**. Canaries are not counted as contributors and not accounted: the accounted ε is
  the real clients'.
* **The privacy path.** Under :class:`~privfed.flwr.CentralDpStrategy` (fixed clipping) the
  canary updates are projected onto the clipping ball and added to the clipped sum before the
  noise, exactly as a client's; the canary norm defaults to the clipping norm C (the largest
  contribution a client can make). Under local DP (:class:`~privfed.flwr.LocalDpStrategy`) the
  canary node runs ``mods=[privatize_mod(randomizer, clip), canary_mod()]``: the canary update
  ``canary_mod`` answers with is clipped and privatized by the node's
  :func:`~privfed.flwr.privatize_mod` (the run's randomizer, in Rust) exactly as a client's
  update, and its reply — ``received + report`` with the ``"privfed"`` record — is checked and
  averaged by the local strategy like a real one (a canary reply without that record, e.g.
  from ``canary_mod`` placed first, is left out with a WARNING); ``norm=`` is required (the
  clients' clip: a longer canary is clipped to it). Without privacy (any other Flower strategy)
  the canary replies are handed to the inner strategy with the real ones, weighted like the
  previous round's average real reply; the norm defaults to the previous round's largest real
  update norm (1 in the first round). Under distributed DP
  (:class:`~privfed.flwr.DistributedDpStrategy`) every included canary is a secure-aggregation
  participant of its own canary node (``canary_nodes``: at least one per included canary, each
  running ``mods=[distributed_dp_mod(...), canary_mod()]``;
  :meth:`~privfed.flwr.DistributedDpStrategy.add_canaries`): its update is encoded (clip,
  rotation, rounding, its own Skellam noise share) and masked by the node's
  :func:`~privfed.flwr.distributed_dp_mod` like a client's, and reaches the model only through
  the unmasked sum. Canaries are not noise contributors: the accounting counts the real
  clients' noise alone (the canaries' shares only add noise). The norm defaults to the plan's
  clip. Adaptive clipping is refused.
* **Scores and numbers.** After each round the cosine of every canary direction with the
  cumulative model delta ``Δ = θ_t − θ_0`` (selected arrays); the one-run lower bound
  ``epsilon_lower_bound`` (Steinke, Nasr, Jagielski 2023) at ``confidence``, the one-shot
  estimate ``epsilon_estimate`` (Andrew et al. 2024, μ-GDP reading) and, under central DP,
  ``accounted_canary_epsilon`` (a client at C in every round so far: μ = √T/z). One log line
  per round puts them beside the accounted ε.

The lower bound is a statement about the whole run with respect to one canary: if the released
models are (ε, δ)-DP for every canary, it exceeds ε with probability at most ``1 −
confidence``. Whoever knows the seed, or hosts a canary (the canary nodes see which canaries
they are asked to send), knows inclusion bits: the audit's adversary is one who sees only the
released models.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord
from flwr.app import RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy
from flwr.supercore import log as flwr_log

from .. import errors
from ..audit import CanarySet
from .central import CentralDpStrategy
from .distributed import DistributedDpStrategy
from .ledger import uncalled_mod_error, warn
from .local import PRIVFED_RECORD, LocalDpStrategy
from .records import CANARY_KEYS, CANARY_RECORD, check_same_layout, single_array_record
from .selection import ArraySelection, Patterns, flatten_selected, replace_selected
from .strategy_base import WrappedStrategy

#: What a ``history`` entry adds to the round's ``audit``.
_OWN_KEYS = ("round", "epsilon", "canaries_sent")


# ================================================================================ client side
class CanaryMod:
    """ClientApp mod of :class:`AuditStrategy`: on a TRAIN message carrying the ConfigRecord
    ``"privfed-canary"`` it replies ``received + update`` on the named arrays (other arrays as
    received) with ``num-examples`` = the record's ``weight``, **without calling the ClientApp**
    (a canary does not train). Every other message passes through, so a node may host canaries
    and train as a real client. Put it first in ``mods`` without privacy and under central DP
    (a client-side clipping mod would otherwise see the canary message); under local DP put it
    right **after** :func:`~privfed.flwr.privatize_mod`, which then privatizes the canary update
    like a client's. A malformed canary record is refused (an error reply)."""

    def __init__(self, *args: Any, arrays_key: Optional[str] = None) -> None:
        if args:
            raise uncalled_mod_error("canary_mod", "canary_mod()", args)
        self.arrays_key = arrays_key

    def __call__(self, msg: Message, ctxt: Context, call_next: Callable) -> Message:
        if (msg.metadata.message_type != MessageType.TRAIN
                or CANARY_RECORD not in msg.content.config_records):
            return call_next(msg, ctxt)
        rec = msg.content.config_records[CANARY_RECORD]
        keys = sorted(rec.keys())
        if keys != sorted(CANARY_KEYS):
            raise errors.ProtocolError(f"canary_mod: record {CANARY_RECORD!r} has keys {keys}")
        key, received = single_array_record(msg.content, self.arrays_key)
        names = [str(n) for n in rec["arrays"]]
        missing = [n for n in names if n not in received.keys()]
        if missing:
            raise errors.ProtocolError(f"canary_mod: the model has no arrays {missing}")
        update = np.asarray(rec["update"], dtype=np.float64)
        start = flatten_selected(received, names)
        if update.shape != start.shape or not np.all(np.isfinite(update)):
            raise errors.ProtocolError(
                f"canary_mod: an update of {update.size} numbers for {start.size} parameters")
        out = replace_selected(received, names, start + update)
        content = RecordDict({key: out,
                              "metrics": MetricRecord({"num-examples": float(rec["weight"])}),
                              CANARY_RECORD: ConfigRecord({"index": int(rec["index"])})})
        return Message(content, reply_to=msg)


def canary_mod(*args: Any, **kw: Any) -> CanaryMod:
    """A :class:`CanaryMod` (``ClientApp(mods=[canary_mod(), ...])``, first in the list)."""
    if args:
        raise uncalled_mod_error("canary_mod", "canary_mod()", args)
    return CanaryMod(**kw)


# ================================================================================ server side
class _WithoutNodes:
    """The grid as the inner strategy sees it: the canary nodes hidden from its sampling."""

    def __init__(self, grid: Grid, hidden: Sequence[int]) -> None:
        self._grid = grid
        self._hidden = set(hidden)

    def get_node_ids(self) -> List[int]:
        return [n for n in self._grid.get_node_ids() if n not in self._hidden]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._grid, name)


class AuditStrategy(WrappedStrategy):
    """Canary audit around a strategy: ``AuditStrategy(CentralDpStrategy(FedAvg(...), ...),
    canaries=K, canary_nodes=[...], delta=δ, seed=secret)`` (module docs for what it does).

    * ``canaries``: K (≥ 2, fewer than the selected parameters); ``guesses`` the one-run audit's
      r (even, default ``2·max(1, ⌊K/4⌋)``); ``confidence`` of the lower bound (0.95).
    * ``canary_nodes``: the nodes running :func:`canary_mod` that send the canaries (hidden from
      the inner strategy's sampling); ``None``: every connected node hosts canaries besides its
      own training (each canary is still its own message and its own update).
    * ``norm``: the canary update's ℓ2 norm (default: the clipping norm under central DP; without
      privacy, the previous round's largest real update norm, 1 in the first round; required
      under local DP: the clients' clip).
    * ``delta``: the δ of the numbers (default: the central or local strategy's).
    * ``seed``: the secret seed of the canaries (an int, 64 hex digits or 32 bytes, as
      :class:`privfed.audit.CanarySet`; ``None``: from the OS). The same seed gives the same
      canaries as ``privfed fl train`` with that run seed.

    ``history`` holds one dict per audited round: the round's ``audit`` of ``privfed fl train
    --json`` (``epsilon_lower_bound``, ``epsilon_estimate``, ``accounted_canary_epsilon``,
    ``correct``, ``norm``, …) with ``round`` and the accounted ``epsilon``; ``audit`` is the
    run's summary (the shape of ``privfed fl train --json``'s ``audit``); the metrics gain
    ``privfed-audit-epsilon-lower-bound`` and ``privfed-audit-epsilon-estimate``.
    """

    def __init__(
        self,
        inner: Strategy,
        canaries: int,
        *,
        canary_nodes: Optional[Sequence[int]] = None,
        norm: Optional[float] = None,
        delta: Optional[float] = None,
        confidence: float = 0.95,
        guesses: Optional[int] = None,
        include: Patterns = None,
        exclude: Patterns = None,
        arrays_key: Optional[str] = None,
        seed: Any = None,
    ) -> None:
        super().__init__(inner)
        if isinstance(canaries, bool) or not isinstance(canaries, int) or canaries < 2:
            raise errors.ConfigError(f"AuditStrategy: canaries must be an int ≥ 2, got {canaries!r}")
        self.central = inner if isinstance(inner, CentralDpStrategy) else None
        self.local = inner if isinstance(inner, LocalDpStrategy) else None
        self.distributed = inner if isinstance(inner, DistributedDpStrategy) else None
        if self.distributed is not None:
            if canary_nodes is None:
                raise errors.ConfigError(
                    "AuditStrategy: under DistributedDpStrategy pass canary_nodes= (one node "
                    "per included canary, about canaries/2, each running "
                    "mods=[distributed_dp_mod(...), canary_mod()]: a canary is its own "
                    "secure-aggregation participant)")
            if norm is None:
                norm = float(self.distributed.params["clip"])
        if self.local is not None and norm is None:
            raise errors.ConfigError(
                "AuditStrategy: under LocalDpStrategy pass norm= (the clip of the clients' "
                "privatize_mod: the largest update a client sends; a longer canary is clipped "
                "to it on the canary node)")
        if self.central is not None and self.central.adaptive:
            raise errors.ConfigError(
                "AuditStrategy: CentralDpStrategy with adaptive clipping is not audited (the "
                "canary norm is the clipping norm, which adaptive clipping changes each round)")
        if delta is None:
            ledger = next((x for x in (self.central, self.local, self.distributed)
                           if x is not None), None)
            if ledger is None:
                raise errors.ConfigError(
                    "AuditStrategy: delta= is required without central, local or distributed DP")
            delta = ledger.ledger.delta
        if norm is not None and not (math.isfinite(norm) and norm > 0):
            raise errors.ConfigError(f"AuditStrategy: norm must be finite and > 0, got {norm}")
        self.canaries = canaries
        self.canary_nodes = None if canary_nodes is None else [int(n) for n in canary_nodes]
        if self.canary_nodes is not None and not self.canary_nodes:
            raise errors.ConfigError("AuditStrategy: canary_nodes is empty")
        self.norm = None if norm is None else float(norm)
        self.delta = float(delta)
        self.confidence = float(confidence)
        self.guesses = guesses
        self.selection = (self.central.selection if self.central is not None
                          else self.distributed.selection if self.distributed is not None
                          else ArraySelection.of(include, exclude))
        self.arrays_key = arrays_key
        self.seed = seed
        self.canary_set: Optional[CanarySet] = None
        self.history: List[Dict[str, Any]] = []
        self._names: List[str] = []
        self._theta0: Optional[np.ndarray] = None
        self._pending: Optional[Dict[str, Any]] = None
        self._weight = 1.0
        self._largest: Optional[float] = None
        # Refuse a bad configuration now, not in round 1: a probe at K + 1 dimensions (cheap for
        # K ≤ 1024; larger K and K ≥ dim are checked on the real model in the first round).
        if canaries <= 1024:
            CanarySet(canaries, canaries + 1, seed=0, delta=self.delta, confidence=confidence,
                      guesses=guesses, norm=norm)

    # ------------------------------------------------------------------ the run's summary
    @property
    def audit(self) -> Optional[Dict[str, Any]]:
        """The run's audit after the last round (``privfed fl train --json``'s ``audit``)."""
        if self.canary_set is None:
            return None
        last = self.history[-1] if self.history else None
        if last is not None:  # the round's audit as CanarySet.audit returned it
            last = {k: v for k, v in last.items() if k not in _OWN_KEYS}
        return self.canary_set.summary(last)

    def _canaries_for(self, dim: int) -> CanarySet:
        if self.canary_set is None:
            central = self.central
            self.canary_set = CanarySet(
                self.canaries, dim, seed=self.seed, delta=self.delta, confidence=self.confidence,
                guesses=self.guesses, norm=self.norm,
                clip_norm=None if central is None else central.clipping_norm,
                noise_multiplier=None if central is None else central.noise_multiplier)
        elif self.canary_set.dim != dim:
            raise errors.ConfigError(
                f"AuditStrategy: the model has {dim} selected parameters, the canaries "
                f"{self.canary_set.dim}")
        return self.canary_set

    def _record_key(self) -> str:
        """The model's ArrayRecord key in the messages (the inner Flower strategy's
        ``arrayrecord_key``, through privfed's wrappers; ``"arrays"`` by default)."""
        s: Any = self.inner
        while s is not None:
            key = getattr(s, "arrayrecord_key", None)
            if isinstance(key, str):
                return key
            s = getattr(s, "inner", None)
        return "arrays"

    # ------------------------------------------------------------------ the round
    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        self._pending = None
        names, _ = self.selection.split(arrays)
        theta = flatten_selected(arrays, names)
        if self._theta0 is None:
            self._names, self._theta0 = list(names), theta
        elif list(names) != self._names:
            raise errors.ConfigError("AuditStrategy: the selected arrays changed between rounds")
        cs = self._canaries_for(theta.size)
        view = grid if self.canary_nodes is None else _WithoutNodes(grid, self.canary_nodes)
        if self.distributed is not None:
            return self._configure_distributed(server_round, arrays, config, view, cs, names,
                                               theta)
        msgs = list(self.inner.configure_train(server_round, arrays, config, view))
        if not msgs:
            return msgs
        hosts = self.canary_nodes if self.canary_nodes is not None else list(grid.get_node_ids())
        norm = cs.norm_for_round(self._largest, self.history[-1]["norm"] if self.history else None)
        directions = cs.directions
        sent = {}
        for j, i in enumerate(i for i, s in enumerate(cs.included) if s):
            m = self._canary_message(i, norm * directions[i], names, arrays,
                                     hosts[j % len(hosts)])
            sent[i] = m
            msgs.append(m)
        self._pending = {"norm": norm, "sent": sent, "arrays": arrays, "theta": theta}
        return msgs

    def _canary_message(self, i: int, update: np.ndarray, names: Sequence[str],
                        arrays: ArrayRecord, node: int) -> Message:
        """The TRAIN message of canary ``i`` to ``node``: the model and the canary record."""
        content = RecordDict({
            self._record_key(): arrays,
            CANARY_RECORD: ConfigRecord({
                "index": i, "arrays": list(names), "weight": float(self._weight),
                "update": [float(x) for x in update]}),
        })
        return Message(content, dst_node_id=node, message_type=MessageType.TRAIN)

    def _configure_distributed(self, server_round: int, arrays: ArrayRecord,
                               config: ConfigRecord, view: Any, cs: CanarySet,
                               names: Sequence[str], theta: np.ndarray) -> List[Message]:
        """Distributed DP: every included canary is a secure-aggregation participant of its own
        canary node (:meth:`DistributedDpStrategy.add_canaries`); the round runs inside the
        inner ``configure_train``."""
        assert self.distributed is not None and self.canary_nodes is not None
        included = [i for i, s in enumerate(cs.included) if s]
        if len(self.canary_nodes) < len(included):
            raise errors.ConfigError(
                f"AuditStrategy: {len(included)} canaries are included and there are "
                f"{len(self.canary_nodes)} canary_nodes; under DistributedDpStrategy each "
                "canary needs a node of its own (one secure-aggregation client per node)")
        norm = cs.norm_for_round(None, None)
        directions = cs.directions
        sent = {i: self._canary_message(i, norm * directions[i], names, arrays,
                                        self.canary_nodes[j])
                for j, i in enumerate(included)}
        before = len(self.distributed.rounds)
        self.distributed.add_canaries(list(sent.values()))
        msgs = list(self.inner.configure_train(server_round, arrays, config, view))
        outcome = (self.distributed.rounds[-1] if len(self.distributed.rounds) > before
                   else None)
        if outcome is not None:
            self._pending = {"norm": norm, "sent": sent, "arrays": arrays, "theta": theta,
                             "outcome": outcome}
        return msgs

    def aggregate_train(self, server_round: int, replies: Iterable[Message]):
        p, self._pending = self._pending, None
        replies = list(replies)
        if p is None:
            return self.inner.aggregate_train(server_round, replies)
        if "outcome" in p:  # distributed DP: the canaries in the unmasked sum
            res = p["outcome"]
            inside = set() if res.aborted else set(res.survivor_nodes)
            got = {i for i, m in p["sent"].items() if m.metadata.dst_node_id in inside}
            if len(got) < len(p["sent"]):
                warn("privfed audit: round %d: %d of %d canaries are in the sum", server_round,
                     len(got), len(p["sent"]))
            arrays, metrics = self.inner.aggregate_train(server_round, replies)
            return self._audit_round(server_round, p, arrays, metrics, len(got))
        real: List[Message] = []
        canary: List[Message] = []
        canary_deltas: List[np.ndarray] = []
        got = set()
        for m in replies:
            rec = None if m.has_error() else m.content.config_records.get(CANARY_RECORD)
            if rec is None:
                sent_ids = {s.metadata.message_id for s in p["sent"].values()}
                if m.metadata.reply_to_message_id in sent_ids:
                    warn("privfed audit: round %d: a canary failed or was not answered by "
                         "canary_mod (is canary_mod() first in the canary nodes' mods?): %s",
                         server_round, m.error.reason if m.has_error() else "no canary record")
                    continue
                real.append(m)
                continue
            i = int(rec["index"])
            if i not in p["sent"] or i in got:
                warn("privfed audit: round %d: an unexpected canary reply (index %d) left out",
                     server_round, i)
                continue
            if self.local is not None and PRIVFED_RECORD not in m.content.config_records:
                warn("privfed audit: round %d: canary %d came back unprivatized and is left out "
                     "(under local DP the canary nodes run mods=[privatize_mod(...), "
                     "canary_mod()], canary_mod after privatize_mod)", server_round, i)
                continue
            got.add(i)
            _, returned = single_array_record(m.content, self.arrays_key)
            check_same_layout(p["arrays"], returned)
            canary_deltas.append(flatten_selected(returned, self._names) - p["theta"])
            del m.content[CANARY_RECORD]
            canary.append(m)
        if len(got) < len(p["sent"]):
            warn("privfed audit: round %d: %d of %d canaries reached the server", server_round,
                 len(got), len(p["sent"]))
        # what the next round's canaries are sized and weighted by without privacy
        norms, weights = [], []
        for m in real:
            if m.has_error():
                continue
            try:
                _, returned = single_array_record(m.content, self.arrays_key)
                d = flatten_selected(returned, self._names) - p["theta"]
                norms.append(float(np.linalg.norm(d)))
                wkey = getattr(self.inner, "weighted_by_key", "num-examples")
                for rec in m.content.metric_records.values():
                    if wkey in rec:
                        weights.append(float(rec[wkey]))
            except (ValueError, KeyError):
                continue
        if self.central is not None:
            self.central.add_canary_updates(canary_deltas)
            arrays, metrics = self.inner.aggregate_train(server_round, real)
        elif self.local is not None:
            arrays, metrics = self.local.aggregate_train(server_round, real, canaries=canary)
        else:
            arrays, metrics = self.inner.aggregate_train(server_round, real + canary)
        finite = [n for n in norms if math.isfinite(n) and n > 0]
        self._largest = max(finite) if finite else None
        if weights:
            self._weight = sum(weights) / len(weights)
        return self._audit_round(server_round, p, arrays, metrics, len(got))

    def _audit_round(self, server_round: int, p: Dict[str, Any], arrays: Any, metrics: Any,
                     sent: int):
        """The round's audit of the aggregated model, logged and added to the metrics."""
        if arrays is None:
            return arrays, metrics
        delta = flatten_selected(arrays, self._names) - self._theta0
        if not np.all(np.isfinite(delta)):
            warn("privfed audit: round %d: the model is not finite; not audited", server_round)
            return arrays, metrics
        assert self.canary_set is not None
        rounds = len(self.history) + 1
        a = dict(self.canary_set.audit(delta, p["norm"], rounds))
        epsilon = None
        accounted = next((x for x in (self.central, self.local, self.distributed)
                          if x is not None), None)
        if accounted is not None and accounted.history:
            epsilon = accounted.history[-1].epsilon
        a.update({"round": server_round, "epsilon": epsilon, "canaries_sent": sent})
        self.history.append(a)
        flwr_log(logging.INFO, "privfed audit: round %d: %s", server_round, _line(a, self.confidence))
        metrics = MetricRecord() if metrics is None else metrics
        metrics["privfed-audit-epsilon-lower-bound"] = float(a["epsilon_lower_bound"])
        if a["epsilon_estimate"] is not None:
            metrics["privfed-audit-epsilon-estimate"] = float(a["epsilon_estimate"])
        return arrays, metrics


def _fmt(x: Optional[float]) -> str:
    return "—" if x is None else f"{x:.3f}"


def _line(a: Dict[str, Any], confidence: float) -> str:
    """The per-round log line: ε̂ (one-shot), ε_lb (one-run) and the accounted ε."""
    s = (f"ε̂ {_fmt(a['epsilon_estimate'])} (one-shot), ε_lb {_fmt(a['epsilon_lower_bound'])} "
         f"(one-run, {confidence:.0%}), accounted ε {_fmt(a['epsilon'])}")
    if a.get("accounted_canary_epsilon") is not None:
        s += f" (canaries' own {_fmt(a['accounted_canary_epsilon'])})"
    return s + f", {a['correct']} correct guesses"
