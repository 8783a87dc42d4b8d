"""privfed.flwr against a lying server: the SuperLink's operator rewrites, withholds and invents the
secure-aggregation messages that ``DistributedDpStrategy`` sends, and ``distributed_dp_mod``
(the real client mod, its Context and node-local state) answers them through Flower's
serialisation. The attacks are those of ``privfed_secagg::adversary`` (Rust), played on the
Flower path:

* the neighbour-share attack — the target ``u`` is forwarded only ``t`` of the ciphertexts
  addressed to it, so it masks with just those peers ``P_u``; everyone is told that ``u``
  survived, and ``t`` holders of each ``v ∈ P_u`` are told that ``v`` dropped;
* the direct one — ``u`` alone is forwarded only ``t`` ciphertexts, the rest is honest;
* two different survivor sets U3 for two halves of the cohort;
* a refused (or an answered) stage sent again.

An honest-but-curious round answers the neighbour-share attack with everything the attacker
needs: ``t`` shares of ``u``'s self-mask seed, ``t`` shares of the mask key of every ``v ∈ P_u``,
and ``u``'s masked input, with no client aborting. The bindings have no attack code that would
combine them (Shamir, the pairwise-mask PRG): the Rust test
``the_neighbour_share_attack_recovers_an_input_from_an_honest_but_curious_round``
(``crates/privfed-secagg/tests/it/lying_server.rs``) shows that the same client code's answers
to the same requests unmask the target's exact input; this module checks that the Flower path
releases those shares. In the active mode every attack ends with the attacked clients aborting
(typed errors, the ``aborted`` marker in ``ctxt.state``) and no reply carrying a share the attack
needed, or with the server holding no more than a masked aggregate.

Needs Flower (``pip install "privfed[flwr]"``): skipped without it, failed under CI.
"""

from __future__ import annotations

import logging
from typing import Callable, Dict, Optional

import numpy as np
import pytest

from privfed import secagg as sa

pytestmark = [pytest.mark.requires("flwr", install='pip install "privfed[flwr]"'),
              pytest.mark.usefixtures("flower_task_identity")]

NODES = [61, 62, 63, 64, 65, 66]
STATE = "privfed-secagg-state"


def _payload(message: dict):
    """(kind, body) of a decoded message's payload."""
    ((kind, body),) = message["payload"].items()
    return kind, body


def _lying_grid_class():
    from flwr.app import ConfigRecord, Message, MessageType, RecordDict
    from flwr_harness import InProcessGrid

    from privfed.flwr.distributed import SECAGG_RECORD

    class LyingGrid(InProcessGrid):
        """The SuperLink as the attacker: ``lies[stage](client_id, message)`` rewrites the
        decoded server message the strategy sends a node (``None`` withholds it);
        :meth:`deliver` sends one the strategy never sent. Every delivered server message and
        every answer (the decoded client message, or the error reply's text) is kept."""

        def __init__(self, app, nodes, **kw):
            super().__init__(app, nodes, **kw)
            self.cid = {nid: i + 1 for i, nid in enumerate(sorted(self.nodes))}
            self.node = {c: nid for nid, c in self.cid.items()}
            self.lies: Dict[str, Callable[[int, dict], Optional[dict]]] = {}
            self.sent: Dict[tuple, dict] = {}
            self.answers: Dict[tuple, object] = {}

        def send_and_receive(self, messages, *, timeout=None):  # noqa: D102
            out, stages = [], {}
            for msg in messages:
                nid = msg.metadata.dst_node_id
                rec = msg.content.config_records.get(SECAGG_RECORD)
                if rec is not None and "config" in rec:
                    self.threshold = sa.RoundConfig.from_bytes(bytes(rec["config"])).threshold
                if rec is not None and "message" in rec:
                    stage = str(rec["stage"])
                    m = sa.decode_message(bytes(rec["message"]), sender="server")
                    if stage in self.lies:
                        m = self.lies[stage](self.cid[nid], m)
                        if m is None:
                            self.log.append((nid, stage, False))
                            continue
                        msg = _with_message(msg, rec, m)
                    self.sent[(self.cid[nid], stage)] = m
                    stages[nid] = stage
                out.append(msg)
            return self._keep(super().send_and_receive(out, timeout=timeout), stages)

        def deliver(self, cid: int, stage: str, message: dict):
            """Sends node ``cid`` a ``stage`` message of the attacker's own; returns the
            answer (the decoded client message, or the error text)."""
            nid = self.node[cid]
            content = RecordDict({SECAGG_RECORD: ConfigRecord(
                {"stage": stage, "message": sa.encode_message(message, sender="server")})})
            msg = Message(content=content, dst_node_id=nid, message_type=MessageType.TRAIN)
            self.sent[(cid, stage)] = message
            self._keep(InProcessGrid.send_and_receive(self, [msg]), {nid: stage})
            return self.answers[(cid, stage)]

        def _keep(self, replies, stages):
            for r in replies:
                nid = r.metadata.src_node_id
                if nid not in stages:
                    continue
                key = (self.cid[nid], stages[nid])
                if r.has_error():
                    self.answers[key] = r.error.reason
                else:
                    data = bytes(r.content.config_records[SECAGG_RECORD]["message"])
                    self.answers[key] = sa.decode_message(data, sender="client")
            return replies

        def status(self, cid: int) -> Optional[str]:
            st = self.contexts[self.node[cid]].state.config_records.get(STATE)
            return None if st is None else str(st["status"])

    def _with_message(msg, rec, m):
        new = ConfigRecord(dict(rec.items()))
        new["message"] = sa.encode_message(m, sender="server")
        content = RecordDict(dict(msg.content.items()))
        content[SECAGG_RECORD] = new
        return Message(content=content, dst_node_id=msg.metadata.dst_node_id,
                       message_type=msg.metadata.message_type)

    return LyingGrid


def _round(tmp_path, threat_model, lies, *, rounds=1):
    """One round of ``DistributedDpStrategy`` over ``NODES`` behind ``distributed_dp_mod``,
    its messages passed through ``lies``; active rounds with enrolled devices and a roster the
    nodes' authority signed. Returns (grid, strategy, outcome)."""
    from test_flwr import _enrolled_grid, _model_dim, _secagg_app, _start, _strategy

    dim = _model_dim()
    if threat_model == "active":
        authority = sa.DeviceKey.generate()
        grid, keys = _enrolled_grid(_secagg_app(dim), NODES, tmp_path, authority=authority,
                                    grid_class=_lying_grid_class())
        kw = {"threat_model": "active",
              "roster": sa.Roster.sign(authority, list(keys.values()))}
    else:
        grid = _lying_grid_class()(_secagg_app(dim), NODES)
        kw = {}
    grid.lies.update(lies(grid))
    strat = _strategy(NODES, dim, **kw)
    _start(strat, grid, rounds)
    (outcome,) = strat.rounds
    return grid, strat, outcome


def _forward_only_t(grid, peers: list):
    """The masked-input stage's lie: the target gets only ``t`` of its ciphertexts (``peers``
    receives P_u, the senders kept)."""

    def lie(cid, m):
        if cid == TARGET:
            _, body = _payload(m)
            body["shares"] = sorted(body["shares"], key=lambda s: s["peer"])[:grid.threshold]
            peers[:] = [s["peer"] for s in body["shares"]]
        return m

    return lie


def _stories(graph_neighbours, u, peers_of_u, held, t, *, room=True):
    """For each client, the peers of ``u`` it is told dropped: every ``v ∈ P_u`` is named by
    ``t`` of the clients holding its shares. With ``room`` a client names at most
    ``|held| − t`` (an honest-but-curious client refuses to be left fewer than ``t`` surviving
    neighbours). ``privfed_secagg::adversary``'s greedy assignment, scarcest peer first."""
    left = {w: (len(h) - t if room else len(h)) for w, h in held.items() if w != u}

    def holders(v):
        return [w for w in graph_neighbours(v) if w != u and v in held.get(w, ())]

    dropped: Dict[int, set] = {}
    for v in sorted(peers_of_u, key=lambda v: len(holders(v))):
        cands = sorted((w for w in holders(v) if left.get(w, 0) > 0), key=lambda w: -left[w])
        assert len(cands) >= t, f"no consistent stories for peer {v}: {cands}"
        for w in cands[:t]:
            left[w] -= 1
            dropped.setdefault(w, set()).add(v)
    return dropped


def _released(grid, stage="unmasking"):
    """The shares the attacker collected at ``stage``: {(kind, owner): count}."""
    got: Dict[tuple, int] = {}
    for (_, st), a in grid.answers.items():
        if st != stage or not isinstance(a, dict):
            continue
        kind, body = _payload(a)
        assert kind == "Unmasking", a
        for k in ("self_mask", "mask_key"):
            for o in body[k]:
                got[(k, o["owner"])] = got.get((k, o["owner"]), 0) + 1
    return got


def _complete(n):
    return lambda v: [w for w in range(1, n + 1) if w != v]


TARGET = 2


# ================================================================ honest-but-curious: recovers
def test_the_neighbour_share_attack_gets_what_it_needs_from_an_honest_but_curious_round(
        tmp_path):
    """The documented limitation, pinned on the Flower path: a server that lies about
    dropouts in an honest-but-curious round collects ``t`` shares of the target's self-mask
    seed ``b_u``, ``t`` shares of the mask key ``s_v`` of each of the target's ``t`` mask peers
    and the target's masked input — from which the Rust attack (same client code) unmasks the
    exact input — and no client aborts."""
    n = len(NODES)
    peers: list = []
    told: Dict[str, dict] = {}

    def lies(grid):
        def unmask(cid, m):
            if cid == TARGET:
                return None  # the target is never asked: it would see through the story
            if not told:
                held = {w: {s["peer"] for s in _payload(grid.sent[(w, "masked_input")])[1][
                    "shares"]} for w in range(1, n + 1)}
                told.update(held=held,
                            dropped=_stories(_complete(n), TARGET, peers, held, grid.threshold))
            d = told["dropped"].get(cid, set())
            _, body = _payload(m)
            body["survivors"] = sorted((told["held"][cid] - d) | {cid})
            body["dropped"] = sorted(d)
            return m

        return {"masked_input": _forward_only_t(grid, peers), "unmasking": unmask}

    grid, _, _ = _round(tmp_path, "honest-but-curious", lies)
    t = grid.threshold
    assert len(peers) == t == 3
    kind, _ = _payload(grid.answers[(TARGET, "masked_input")])
    assert kind == "MaskedInput"  # y_u, masked with P_u only
    errors = {k: a for k, a in grid.answers.items() if not isinstance(a, dict)}
    assert not errors, errors
    assert all(grid.status(c) != "aborted" for c in range(1, n + 1))
    got = _released(grid)
    assert got.get(("self_mask", TARGET), 0) >= t, got
    for v in peers:
        assert got.get(("mask_key", v), 0) >= t, (v, got)
    # every story was told: the peers were named dropped to clients that answered
    assert sum(len(d) for d in told["dropped"].values()) == t * len(peers)


# ================================================================ active: every attack fails
def _no_share_of(grid, owners, kinds=("mask_key",)):
    got = _released(grid)
    return not any(got.get((k, v), 0) for k in kinds for v in owners)


@pytest.mark.parametrize("strategy", ["per-client-stories", "one-u3-without-peers"])
def test_the_neighbour_share_attack_makes_an_active_round_abort(tmp_path, strategy, caplog):
    """The same attack on an active round (device-signed keys, a roster, the consistency
    check): the stories become per-client survivor sets U3 (or one U3 without the target's
    peers). Every client refuses to sign a U3 it cannot vouch for — one that lists a neighbour
    it never masked with, leaves out the client itself, or is too small for the threshold — so
    the
    round aborts at the consistency check with the clients' typed errors in the server's log,
    every node's state is the ``aborted`` marker, and the unmasking requests the attacker sends
    anyway are refused: no share of anything is released."""
    n = len(NODES)
    everyone = set(range(1, n + 1))
    peers: list = []
    dropped: Dict[int, set] = {}

    def lies(grid):
        def survivors(cid, m):
            if strategy == "one-u3-without-peers":
                u3 = everyone - set(peers)
            else:
                if not dropped:
                    held = {w: {s["peer"] for s in _payload(grid.sent[(w, "masked_input")])[1][
                        "shares"]} for w in everyone}
                    dropped.update(_stories(_complete(n), TARGET, peers, held, grid.threshold,
                                            room=False))
                u3 = everyone - dropped.get(cid, set())
            _, body = _payload(m)
            body["u3"] = sorted(u3)
            return m

        return {"masked_input": _forward_only_t(grid, peers), "consistency_check": survivors,
                "unmasking": lambda cid, m: None}

    with caplog.at_level(logging.WARNING):
        grid, _, o = _round(tmp_path, "active", lies)
    t = grid.threshold
    assert len(peers) == t == 4
    assert o.aborted and o.mean is None, o.abort_reason
    refusals = {c: grid.answers[(c, "consistency_check")] for c in range(1, n + 1)}
    assert all(isinstance(a, str) for a in refusals.values()), refusals
    # the target's U3 lists a neighbour it never masked with (stories), or is too small
    assert ("never received" if strategy == "per-client-stories" else "clients in U3") in (
        refusals[TARGET])
    assert all("U3" in a for a in refusals.values()), refusals
    for c in range(1, n + 1):
        assert grid.status(c) == "aborted"
        assert f"node {grid.node[c]} failed at consistency_check" in caplog.text
    # the unmasking request the attacker sends anyway (whatever it carries) is refused
    for c in range(1, n + 1):
        header = grid.sent[(c, "consistency_check")]["header"]
        a = grid.deliver(c, "unmasking", {"header": header,
                                          "payload": {"SignedSurvivors": {"signatures": []}}})
        assert isinstance(a, str) and "aborted" in a, a
    assert _released(grid) == {}


def test_forwarding_the_target_only_t_ciphertexts_is_caught_by_the_target(tmp_path, caplog):
    """The direct attack on an active round: the target masks with only ``t`` peers; the
    server then needs those peers' mask keys, which no client releases while they are in U3.
    The target refuses to sign a U3 listing the neighbour it never masked with (its typed error
    in the server's log, its state the ``aborted`` marker); the others unmask honestly and
    release no mask-key share, so what the server holds is the aggregate with the one
    unmatched pairwise mask left in — not the target's input, and not even the plain sum.
    Re-sent, the refused stage is refused again ("aborted the round"), even with the U3 the
    target would have signed; the last stage re-sent to a client that answered it is refused
    too."""
    from test_flwr import _expected_mean

    n = len(NODES)
    peers: list = []

    def lies(grid):
        return {"masked_input": _forward_only_t(grid, peers)}

    with caplog.at_level(logging.WARNING):
        grid, strat, o = _round(tmp_path, "active", lies)
    t = grid.threshold
    refused = grid.answers[(TARGET, "consistency_check")]
    assert isinstance(refused, str) and "never received" in refused, refused
    assert f"node {grid.node[TARGET]} failed at consistency_check" in caplog.text
    assert grid.status(TARGET) == "aborted"
    others = [c for c in range(1, n + 1) if c != TARGET]
    assert all(isinstance(grid.answers[(c, "unmasking")], dict) for c in others)
    assert _no_share_of(grid, range(1, n + 1)), _released(grid)
    assert _released(grid).get(("self_mask", TARGET), 0) >= t  # b_u: useless without s_v
    assert not o.aborted and o.contributors == n
    assert not np.array_equal(o.mean, np.asarray(_expected_mean(strat, o)))
    # (d) the refused stage again, with the U3 the target would have signed: refused
    header = grid.sent[(TARGET, "consistency_check")]["header"]
    would_sign = sorted(set(peers) | {TARGET})  # t + 1 clients, all of them masked with
    a = grid.deliver(TARGET, "consistency_check",
                     {"header": header, "payload": {"Survivors": {"u3": would_sign}}})
    assert isinstance(a, str) and "aborted the round" in a, a
    a = grid.deliver(TARGET, "unmasking", {"header": header, "payload": {
        "SignedSurvivors": {"signatures": []}}})
    assert isinstance(a, str) and "aborted the round" in a, a
    # ... and an answered stage again, to a client that answered it: refused (only the
    # ``finished`` marker is left: nothing to answer from)
    c = others[0]
    assert grid.status(c) == "finished"
    a = grid.deliver(c, "unmasking", grid.sent[(c, "unmasking")])
    assert isinstance(a, str) and "the round is over on this node" in a, a


def test_two_survivor_sets_make_every_client_refuse_to_unmask(tmp_path):
    """Two halves of the cohort are sent different U3s (each half's set holds it). Each client
    signs its own; the honest server refuses the half whose signatures are not on its U3 and
    aborts, and the attacker then asks every client to unmask with the signatures on that
    client's own U3 (fewer than ``t`` neighbours' each): every client refuses ("neighbours
    signed U3"), nothing is released, and the refusal sticks when the attacker re-sends the
    stage with every signature it holds."""
    n = len(NODES)
    half_a = set(range(1, n // 2 + 1))
    u3_a = sorted(range(1, n + 1))
    u3_b = sorted(set(range(1, n + 1)) - {1})

    def lies(grid):
        def survivors(cid, m):
            _, body = _payload(m)
            body["u3"] = u3_a if cid in half_a else u3_b
            return m

        return {"consistency_check": survivors, "unmasking": lambda cid, m: None}

    grid, _, o = _round(tmp_path, "active", lies)
    t = grid.threshold
    sigs = {c: _payload(grid.answers[(c, "consistency_check")])[1]["signature"]
            for c in range(1, n + 1)}
    assert o.aborted, o
    for c in range(1, n + 1):
        mine = half_a if c in half_a else set(range(1, n + 1)) - half_a
        header = grid.sent[(c, "consistency_check")]["header"]
        on_mine = [{"id": s, "signature": sigs[s]} for s in sorted(mine) if s != c]
        assert len(on_mine) < t
        a = grid.deliver(c, "unmasking", {"header": header, "payload": {
            "SignedSurvivors": {"signatures": on_mine}}})
        assert isinstance(a, str) and "neighbours signed U3" in a, a
        assert grid.status(c) == "aborted"
        every = [{"id": s, "signature": sigs[s]} for s in sorted(sigs) if s != c]
        a = grid.deliver(c, "unmasking", {"header": header, "payload": {
            "SignedSurvivors": {"signatures": every}}})
        assert isinstance(a, str) and "aborted the round" in a, a
    assert _released(grid) == {}
