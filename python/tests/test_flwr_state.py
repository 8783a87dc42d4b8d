"""privfed.flwr: the secure-aggregation client's state in ``ctxt.state`` against a server that
re-drives stages. The server here is privfed's honest SecAggServer driven by hand, so the test
can re-send, replay and tamper with its messages the way a malicious SuperLink operator would;
each message reaches ``distributed_dp_mod`` through Flower's serialisation. A "process restart"
is a new mod object with the Context round-tripped through Flower's protobuf form (what the
Deployment Engine hands a fresh ClientApp process); a "rolled-back Context" is an older copy of
it (what the simulation engine keeps when a ClientApp raises, or a concurrent delivery reads).

Needs Flower (``pip install "privfed[flwr]"``): skipped without it, failed under CI.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from privfed import distributed as dist
from privfed import secagg as sa
from privfed.errors import ProtocolAbort, ProtocolError

pytestmark = [pytest.mark.requires("flwr", install='pip install "privfed[flwr]"'),
              pytest.mark.usefixtures("flower_task_identity")]

STATE = "privfed-secagg-state"
NODES = (11, 12, 13, 14, 15)


def _model():
    rng = np.random.default_rng(3)
    return {"w": rng.normal(size=(2, 3)).astype(np.float32),
            "b": rng.normal(size=4).astype(np.float32)}


DIM = 10


def _trainer(msg, ctxt):
    """A ClientApp train step: received + 0.01."""
    from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict

    g = msg.content["arrays"]
    new = ArrayRecord(array_dict={k: Array(a.numpy() + np.float32(0.01)) for k, a in g.items()})
    return Message(RecordDict({"arrays": new, "metrics": MetricRecord({"num-examples": 1})}),
                   reply_to=msg)


def _copy_context(ctxt):
    """The Context as a fresh ClientApp process receives it (Flower's protobuf round trip)."""
    from flwr.common.serde import context_from_proto, context_to_proto

    return context_from_proto(context_to_proto(ctxt))


class Round:
    """One secure-aggregation round of ``NODES`` behind ``distributed_dp_mod``, with the
    server's messages under the test's control."""

    def __init__(self, vault_dir, server_round=1):
        from flwr.app import Context, RecordDict

        from privfed.flwr import distributed_dp_mod

        plan = dist.plan(DIM, 1.0, 16, len(NODES), noise_stddev=0.5)
        self.plan_json = json.dumps(dict(plan.params))
        self.cfg = sa.round_config(len(NODES), int(plan.params["bits"]),
                                   int(plan.params["padded_dim"]))
        self.server = sa.SecAggServer(self.cfg)
        self.vault_dir = vault_dir
        self.mod = distributed_dp_mod(state_dir=vault_dir)
        self.server_round = server_round
        self.ids = {nid: i + 1 for i, nid in enumerate(NODES)}
        self.ctx = {nid: Context(run_id=1, node_id=nid, node_config={}, state=RecordDict(),
                                 run_config={}) for nid in NODES}

    def send(self, nid, stage, message=None, *, mod=None, ctxt=None, config=None):
        """Delivers one stage message to node ``nid``; returns the answer's bytes (or raises
        what the mod raised)."""
        from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MessageType, RecordDict
        from flwr_harness import wire_copy

        if stage == "advertise_keys":
            rec = ConfigRecord({"stage": stage, "config": bytes((config or self.cfg).to_bytes()),
                                "client-id": self.ids[nid], "round": self.server_round,
                                "plan": self.plan_json})
        else:
            rec = ConfigRecord({"stage": stage, "message": bytes(message)})
        content = {"privfed-secagg": rec}
        if stage == "masked_input":
            rec["arrays"] = ["w", "b"]
            content["arrays"] = ArrayRecord(array_dict={k: Array(v) for k, v in
                                                        _model().items()})
            content["config"] = ConfigRecord({"server-round": self.server_round})
        msg = Message(RecordDict(content), dst_node_id=nid, message_type=MessageType.TRAIN)
        msg.metadata.__dict__["_message_id"] = f"{nid}-{stage}"
        reply = (mod or self.mod)(wire_copy(msg), self.ctx[nid] if ctxt is None else ctxt,
                                  _trainer)
        assert not reply.has_error(), reply.error.reason
        return bytes(reply.content.config_records["privfed-secagg"]["message"])

    def run_stage(self, stage, skip=()):
        """The honest server's stage: every pending node but ``skip`` answers."""
        for nid in NODES:
            if nid in skip:
                continue
            if stage == "advertise_keys":
                self.server.receive(self.send(nid, stage))
            else:
                cid = self.ids[nid]
                if cid not in self.server.pending:
                    continue
                self.server.receive(self.send(nid, stage, self.server.message_for(cid)))
        return self.server.close_stage()

    def state(self, nid):
        return self.ctx[nid].state.config_records.get(STATE)

    def genuine(self, nid):
        return bytes(self.server.message_for(self.ids[nid]))


def _contradictory_unmasking(r, nid):
    """The server's genuine unmasking request for ``nid`` with one survivor also listed as
    dropped: it asks for both kinds of share of that client, which an honest client refuses."""
    m = sa.decode_message(r.genuine(nid), sender="server")
    (kind, body), = m["payload"].items()
    assert kind == "Unmask", m
    other = next(c for c in body["survivors"] if c != r.ids[nid])
    body["dropped"] = sorted(set(body["dropped"]) | {other})
    return sa.encode_message(m, sender="server")


def _refused(fn, match):
    with pytest.raises((ProtocolAbort, ProtocolError), match=match):
        fn()


def test_a_refused_unmasking_request_sticks_across_resends_and_process_restarts(tmp_path):
    """The attack the sticky abort stops: the server's first unmasking request is refused, it
    re-sends one the client would have answered — from the same process, from a fresh process
    with the persisted Context, and from a rolled-back Context — and is refused every time."""
    from privfed.flwr import distributed_dp_mod

    r = Round(tmp_path / "vault")
    for stage in ("advertise_keys", "share_keys", "masked_input"):
        assert r.run_stage(stage) == "collecting"
    target, control = NODES[0], NODES[1]
    before = _copy_context(r.ctx[target])  # a Context copy from before the refusal
    _refused(lambda: r.send(target, "unmasking", _contradictory_unmasking(r, target)),
             "both|survivor|dropped|share")
    st = r.state(target)
    assert st["status"] == "aborted" and "sealed-seed" not in st and "messages" not in st
    assert st["answered"] == ["advertise_keys", "share_keys", "masked_input"]
    # the genuine request, re-sent: refused
    _refused(lambda: r.send(target, "unmasking", r.genuine(target)), "aborted the round")
    # ... by a fresh ClientApp process handed the persisted Context
    fresh = distributed_dp_mod(state_dir=tmp_path / "vault")
    _refused(lambda: r.send(target, "unmasking", r.genuine(target), mod=fresh,
                            ctxt=_copy_context(r.ctx[target])), "aborted the round")
    # ... and by one handed the Context from before the refusal (its sealed seed still inside)
    assert before.state.config_records[STATE]["status"] == "running"
    _refused(lambda: r.send(target, "unmasking", r.genuine(target), mod=fresh, ctxt=before),
             "aborted round")
    # power: the same genuine request is answered by a node that did not refuse, and the
    # round still finishes without the target's answer
    r.server.receive(r.send(control, "unmasking", r.genuine(control)))
    for nid in NODES[2:]:
        r.server.receive(r.send(nid, "unmasking", r.genuine(nid)))
    assert r.server.close_stage() == "finished"
    assert r.state(control)["status"] == "finished"


def test_a_stage_is_answered_once_and_a_replayed_advertise_does_not_restart_the_round(tmp_path):
    r = Round(tmp_path / "vault")
    assert r.run_stage("advertise_keys") == "collecting"
    a, b, c = NODES[:3]
    # the server re-sends advertise_keys of the same round: no fresh seed, no second answer
    _refused(lambda: r.send(a, "advertise_keys"), "already answered")
    assert r.state(a)["status"] == "aborted"
    _refused(lambda: r.send(a, "share_keys", r.genuine(a)), "aborted the round")
    # a share_keys request answered once is not answered again (same bytes, or other bytes)
    keys_b = r.genuine(b)
    r.send(b, "share_keys", keys_b)
    _refused(lambda: r.send(b, "share_keys", keys_b), "already answered")
    assert r.state(b)["status"] == "aborted"
    # and the abort sticks for the next stage too
    r.server.receive(r.send(c, "share_keys", r.genuine(c)))
    _refused(lambda: r.send(b, "masked_input", b"\x00"), "aborted the round")


def test_context_copies_cannot_answer_a_stage_twice(tmp_path):
    """Two ClientApp processes holding the same Context (a concurrent re-delivery, or a
    Context rolled back after an answer) answer a stage at most once between them."""
    r = Round(tmp_path / "vault")
    assert r.run_stage("advertise_keys") == "collecting"
    nid = NODES[0]
    copy = _copy_context(r.ctx[nid])
    msg = r.genuine(nid)
    r.server.receive(r.send(nid, "share_keys", msg))
    _refused(lambda: r.send(nid, "share_keys", msg, ctxt=copy), "already answered")
    # the copy that was refused is now an aborted marker, and so is the journal's entry:
    # the live Context (which answered) cannot go on either
    assert copy.state.config_records[STATE]["status"] == "aborted"
    assert r.run_stage("share_keys", skip=(nid,)) == "collecting"
    _refused(lambda: r.send(nid, "masked_input", r.genuine(nid)), "aborted round")


def _open_with_cryptography(r, nid):
    """The seed node ``nid`` sealed, opened with Python's ``cryptography`` package (an
    implementation of ChaCha20-Poly1305 independent of privfed's) from the vault's key and the
    state's binding."""
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    from privfed.flwr.vault import aad

    st = r.state(nid)
    sealed = bytes(st["sealed-seed"])
    key = (r.vault_dir / "secagg-state.key").read_bytes()
    binding = aad(bytes(st["session"]), str(nid), int(st["client-id"]), int(st["created"]))
    return ChaCha20Poly1305(key).decrypt(sealed[:12], sealed[12:], binding), key, binding


def test_ctxt_state_holds_the_seed_sealed_under_the_nodes_key_only(tmp_path):
    from flwr.common.serde import context_to_proto

    from privfed.flwr import distributed_dp_mod

    r = Round(tmp_path / "vault")
    nid = NODES[0]
    adv = r.send(nid, "advertise_keys")
    st = r.state(nid)
    assert st["status"] == "running" and "seed" not in st
    assert len(bytes(st["sealed-seed"])) == 12 + 32 + 16
    # the key is in the node's vault directory, private to its owner
    key = tmp_path / "vault" / "secagg-state.key"
    assert key.stat().st_mode & 0o077 == 0 and len(key.read_bytes()) == 32
    # power: the sealed bytes are the seed the node's keys came from (drawn in Rust, opened
    # here by another implementation), and that seed is nowhere in the Context
    seed, _, _ = _open_with_cryptography(r, nid)
    assert adv == bytes(sa.SecAggClient(r.cfg, r.ids[nid], seed=seed).advertise_message)
    blob = context_to_proto(r.ctx[nid]).SerializeToString()
    assert seed not in blob
    # the same Context on a node with another key: the seed does not open, the round aborts
    for other in NODES[1:]:
        r.server.receive(r.send(other, "advertise_keys"))
    r.server.receive(adv)
    r.server.close_stage()
    elsewhere = distributed_dp_mod(state_dir=tmp_path / "elsewhere")
    _refused(lambda: r.send(nid, "share_keys", r.genuine(nid), mod=elsewhere,
                            ctxt=_copy_context(r.ctx[nid])), "does not open")
    # a key that others can read is refused
    key2 = tmp_path / "loose" / "secagg-state.key"
    key2.parent.mkdir()
    key2.write_bytes(os.urandom(32))
    key2.chmod(0o644)
    loose = distributed_dp_mod(state_dir=tmp_path / "loose")
    with pytest.raises(Exception, match="chmod 600"):
        r.send(NODES[1], "share_keys", r.genuine(NODES[1]), mod=loose,
               ctxt=_copy_context(r.ctx[NODES[1]]))


def test_a_seed_sealed_by_the_earlier_python_vault_still_opens(tmp_path):
    """privfed's earlier vault sealed in Python (``cryptography``'s ChaCha20-Poly1305, ``nonce ‖
    ciphertext ‖ tag``, the same associated data). A round whose Context holds such a blob goes
    on after the upgrade: the Rust core opens it and the round finishes; a blob altered or
    bound to another client is refused."""
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    r = Round(tmp_path / "vault")
    r.run_stage("advertise_keys")
    for nid in NODES:
        # re-seal each node's seed the way the earlier Python vault did, with a fresh nonce
        seed, key, binding = _open_with_cryptography(r, nid)
        nonce = os.urandom(12)
        old = nonce + ChaCha20Poly1305(key).encrypt(nonce, seed, binding)
        assert old != bytes(r.state(nid)["sealed-seed"])
        r.state(nid)["sealed-seed"] = old
        # the binding's own bytes open it; another client id's do not
        opened = sa.SecAggClient.open_sealed(r.cfg, r.ids[nid], old, aad=binding,
                                             key_file=str(r.vault_dir / "secagg-state.key"))
        assert bytes(opened.advertise_message) == bytes(
            sa.SecAggClient(r.cfg, r.ids[nid], seed=seed).advertise_message)
        st = r.state(nid)
        from privfed.flwr.vault import aad

        other = aad(bytes(st["session"]), str(nid), int(st["client-id"]) + 1, int(st["created"]))
        with pytest.raises(ProtocolAbort, match="does not open"):
            sa.SecAggClient.open_sealed(r.cfg, r.ids[nid], old, aad=other,
                                        key_file=str(r.vault_dir / "secagg-state.key"))
        flipped = old[:20] + bytes([old[20] ^ 1]) + old[21:]
        with pytest.raises(ProtocolAbort, match="does not open"):
            sa.SecAggClient.open_sealed(r.cfg, r.ids[nid], flipped, aad=binding,
                                        key_file=str(r.vault_dir / "secagg-state.key"))
    for stage in ("share_keys", "masked_input", "unmasking"):
        r.run_stage(stage)
    assert r.server.status == "finished"
    assert sorted(r.server.output["survivors"]) == [1, 2, 3, 4, 5]


def test_a_finished_round_leaves_a_marker_only_and_a_new_round_supersedes(tmp_path):
    r = Round(tmp_path / "vault")
    for stage in ("advertise_keys", "share_keys", "masked_input", "unmasking"):
        r.run_stage(stage)
    assert r.server.status == "finished" and sorted(r.server.output["survivors"]) == [1, 2, 3,
                                                                                        4, 5]
    nid = NODES[0]
    st = r.state(nid)
    assert st["status"] == "finished" and set(st.keys()) == {
        "version", "status", "session", "round", "client-id", "answered"}
    assert st["answered"] == ["advertise_keys", "share_keys", "masked_input", "unmasking"]
    _refused(lambda: r.send(nid, "unmasking", b"\x00"), "over on this node")
    # a new round (new session) starts over; a round left unfinished is superseded, its seed
    # dropped, and its stages refused afterwards
    r2 = Round(tmp_path / "vault", server_round=2)
    r2.ctx = r.ctx
    r2.run_stage("advertise_keys")
    assert r2.state(nid)["status"] == "running" and r2.state(nid)["round"] == 2
    r3 = Round(tmp_path / "vault", server_round=3)
    r3.ctx = r.ctx
    r3.run_stage("advertise_keys")
    assert bytes(r3.state(nid)["session"]) == bytes(r3.cfg.session_id)
    stale = r2.genuine(nid)
    _refused(lambda: r2.send(nid, "share_keys", stale), "binding|another|round")
    # the stale round's refusal aborted the current one as well (any refusal is sticky)
    assert r3.state(nid)["status"] == "aborted"
    from privfed.flwr.vault import vault_for

    j = vault_for(tmp_path / "vault").stages(bytes(r2.cfg.session_id), str(nid))
    assert "superseded" in (j.get("aborted") or "")


def test_a_refused_plan_sticks_for_the_round(tmp_path):
    """A node that refuses the server's plan at advertise_keys (here: less local noise than it
    accepts) has refused the round: the same round re-sent with a plan it would accept is
    refused too, while another node accepts that plan."""
    from privfed.flwr import distributed_dp_mod

    r = Round(tmp_path / "vault")
    strict = distributed_dp_mod(state_dir=tmp_path / "vault", min_local_noise_stddev=1.0)
    target, control = NODES[0], NODES[1]
    _refused(lambda: r.send(target, "advertise_keys", mod=strict), "min_local_noise_stddev")
    assert r.state(target) is None  # nothing was started: no seed was ever made
    # the same round (same configuration, so the same session) with a plan it accepts
    _refused(lambda: r.send(target, "advertise_keys"), "aborted round")
    assert r.send(control, "advertise_keys")  # the plan itself is fine for another node
