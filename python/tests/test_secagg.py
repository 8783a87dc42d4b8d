"""privfed.secagg: rounds driven from Python over bytes (with dropouts at every stage, a lying
server, tampered and replayed messages), the end-to-end distributed-DP pipeline through it, and
the Rust CLI's simulation and planner for comparison."""

from __future__ import annotations

import math
import random
import time

import numpy as np
import pytest

from privfed import distributed as dd
from privfed import errors
from privfed import secagg

STAGES = ("share_keys", "masked_input", "unmasking")


def run_round(config, inputs, drop_before=None, *, server=None, clients=None, persist=False):
    """Drives a round: client ``i`` (1-based) holds ``inputs[i - 1]`` and goes silent before
    the stage ``drop_before.get(i)``. With ``persist`` the server is serialized and restored
    between every two messages (as a coordinator that persists its state would)."""
    drop_before = drop_before or {}
    server = server or secagg.SecAggServer(config)
    clients = clients if clients is not None else {}
    for i in range(1, config.clients + 1):
        if drop_before.get(i) == "advertise_keys":
            continue
        clients[i] = secagg.SecAggClient(config, i)
        assert server.receive(clients[i].advertise_message) == "accepted"
    assert server.close_stage() == "collecting"
    for stage in STAGES:
        if server.status != "collecting":
            break
        assert server.stage == stage
        for i in server.pending:
            if drop_before.get(i) == stage:
                continue
            x = inputs[i - 1] if stage == "masked_input" else None
            answer = clients[i].handle(server.message_for(i), x)
            if persist:
                server = secagg.SecAggServer.from_bytes(server.to_bytes())
            assert server.receive(answer) == "accepted"
        server.close_stage()
    return server, clients


def uniform_inputs(n, dim, bits, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 2**bits, size=dim, dtype=np.uint64) for _ in range(n)]


def test_round_with_dropouts_at_every_stage_is_exact():
    config = secagg.round_config(12, 16, 50)
    assert config.graph == "complete" and config.threshold == 6 and config.degree == 11
    inputs = uniform_inputs(12, 50, 16, seed=1)
    drops = {2: "advertise_keys", 5: "share_keys", 7: "masked_input", 11: "unmasking"}
    server, clients = run_round(config, inputs, drops)
    assert server.status == "finished" and server.stage is None and server.abort_reason is None
    out = server.output
    survivors = [i for i in range(1, 13) if i not in (2, 5, 7)]
    assert out["survivors"] == survivors and out["dropped"] == [7]
    want = dd.ModularSum(16, 50)
    for i in survivors:
        want.add(inputs[i - 1])
    assert out["sum"].dtype == np.uint64
    assert np.array_equal(out["sum"], want.value)
    assert all(clients[i].next_stage is None for i in survivors if i != 11)
    assert clients[11].next_stage == "unmasking" and not clients[11].aborted


def test_distributed_dp_end_to_end_over_secure_aggregation():
    """Encode n clients' vectors (paper 001), sum them through a secure-aggregation round over
    bytes with dropouts at every stage, decode. The modular sum equals ModularSum of the
    survivors' encodings exactly; the decoded mean is within 6 standard deviations of the
    survivors' true mean in every coordinate (per-coordinate error ≈ N(0, σ²/m + r), r ≤
    1/(4s²m) the rounding variance; P(any of d exceeds 6σ) ≈ d·2e-9)."""
    n, d, bits = 14, 40, 24
    p = dd.plan(d, 1.0, bits, n, noise_stddev=0.02, delta=1e-5, beta=0.0)
    config = secagg.round_config(n, bits, p.padded_dim)
    rot = dd.rotation_seed(config.session_id, 0)
    rng = np.random.default_rng(9)
    xs = rng.uniform(-1, 1, size=(n, d)) / math.sqrt(d) * 0.9
    enc = dd.SkellamEncoder(p.params, rot, seed=2)
    encodings = [enc.encode(x) for x in xs]
    drops = {3: "advertise_keys", 4: "share_keys", 8: "masked_input", 13: "unmasking"}
    server, _ = run_round(config, encodings, drops)
    out = server.output
    survivors = out["survivors"]
    assert survivors == [i for i in range(1, n + 1) if i not in (3, 4, 8)]
    plain = dd.ModularSum(bits, p.padded_dim)
    for i in survivors:
        plain.add(encodings[i - 1])
    assert np.array_equal(out["sum"], plain.value)
    m = len(survivors)
    dec = dd.SkellamDecoder(p, rot).decode(out["sum"], m)
    assert not dec.wrap_suspected
    truth = xs[[i - 1 for i in survivors]].mean(axis=0)
    sd = math.sqrt(0.02**2 / m + 1 / (4 * p.scale**2 * m))
    assert np.max(np.abs(dec.mean - truth)) < 6 * sd
    # The round is accounted with the m contributors, not the planned n.
    assert dd.round_event(p, m).mu == pytest.approx(m * (p.scale * 0.02) ** 2, rel=1e-12)


def test_server_state_round_trips_between_every_message():
    config = secagg.round_config(8, 32, 20)
    inputs = uniform_inputs(8, 20, 32, seed=2)
    server, _ = run_round(config, inputs, {6: "masked_input"}, persist=True)
    out = server.output
    want = dd.ModularSum(32, 20)
    for i in out["survivors"]:
        want.add(inputs[i - 1])
    assert np.array_equal(out["sum"], want.value) and out["dropped"] == [6]
    with pytest.raises(errors.ProtocolError):
        secagg.SecAggServer.from_bytes(b"\x01\x02garbage")


def test_harary_graph_round():
    config = secagg.round_config(40, 20, 10, graph="harary", degree=10, threshold=6)
    assert config.graph == "harary" and config.degree == 10 and config.threshold == 6
    assert len(config.neighbours(1)) == 10 and 1 not in config.neighbours(1)
    inputs = uniform_inputs(40, 10, 20, seed=3)
    server, _ = run_round(config, inputs, {5: "masked_input", 17: "share_keys"})
    out = server.output
    want = dd.ModularSum(20, 10)
    for i in out["survivors"]:
        want.add(inputs[i - 1])
    assert np.array_equal(out["sum"], want.value)
    assert 5 not in out["survivors"] and 17 not in out["survivors"]
    planned = secagg.round_config(1000, 16, 4, dropout=0.2, graph="harary")
    assert planned.graph == "harary" and planned.degree < 999


def test_too_few_survivors_abort_and_reveal_nothing():
    config = secagg.round_config(6, 16, 5)  # threshold 3: a sum needs 4
    inputs = uniform_inputs(6, 5, 16, seed=4)
    drops = {1: "masked_input", 2: "masked_input", 3: "masked_input"}
    server, clients = run_round(config, inputs, drops)
    assert server.status == "aborted" and "at least 4 needed" in server.abort_reason
    with pytest.raises(errors.ProtocolAbort, match="aborted"):
        server.output
    with pytest.raises(errors.ProtocolError):
        server.message_for(4)
    with pytest.raises(errors.ProtocolAbort):
        secagg.simulate(10, 5, 16, 0.8, seed=1)


def _unmask_request(config, inputs, target):
    """A round up to the unmasking stage; returns the server, the clients and the honest
    unmasking request for ``target`` as a dict."""
    server = secagg.SecAggServer(config)
    clients = {i: secagg.SecAggClient(config, i) for i in range(1, config.clients + 1)}
    for c in clients.values():
        server.receive(c.advertise_message)
    server.close_stage()
    for stage in ("share_keys", "masked_input"):
        for i in server.pending:
            x = inputs[i - 1] if stage == "masked_input" else None
            server.receive(clients[i].handle(server.message_for(i), x))
        server.close_stage()
    assert server.stage == "unmasking"
    honest = secagg.decode_message(server.message_for(target), sender="server")
    return server, clients, honest


def test_a_lying_server_gets_protocol_abort():
    """A server that asks one client for both the self-mask share and the key share of a peer
    (listing it as survivor and dropped) — what it needs to unmask that peer's input — is
    refused: ProtocolAbort, and the client drops its secrets. So is a request that omits a
    neighbour the client exchanged shares with."""
    config = secagg.round_config(7, 16, 8)
    inputs = uniform_inputs(7, 8, 16, seed=5)
    _, clients, honest = _unmask_request(config, inputs, target=1)
    payload = honest["payload"]["Unmask"]
    assert payload["survivors"] == list(range(1, 8)) and payload["dropped"] == []
    lie = {**honest, "payload": {"Unmask": {"survivors": payload["survivors"], "dropped": [4]}}}
    with pytest.raises(errors.ProtocolAbort, match="both as survivor and as dropped"):
        clients[1].handle(secagg.encode_message(lie, sender="server"))
    assert clients[1].aborted and clients[1].next_stage is None
    # Client 2: a request that leaves out neighbour 5.
    _, clients, honest = _unmask_request(config, inputs, target=2)
    omit = {
        **honest,
        "payload": {"Unmask": {"survivors": [1, 2, 3, 4, 6, 7], "dropped": []}},
    }
    with pytest.raises(errors.ProtocolAbort):
        clients[2].handle(secagg.encode_message(omit, sender="server"))
    assert clients[2].aborted


def test_tampered_forged_and_replayed_bytes_are_protocol_errors():
    config = secagg.round_config(5, 16, 6)
    other = secagg.round_config(5, 16, 6)  # another session
    inputs = uniform_inputs(5, 6, 16, seed=6)
    server = secagg.SecAggServer(config)
    clients = {i: secagg.SecAggClient(config, i) for i in range(1, 6)}
    foreign = secagg.SecAggServer(other)
    for i, c in clients.items():
        assert server.receive(c.advertise_message) == "accepted"
        # A retried identical message is a duplicate; a different one for the stage a conflict.
        assert server.receive(c.advertise_message) == "duplicate"
        with pytest.raises(errors.ProtocolError, match="another session"):
            foreign.receive(c.advertise_message)
    with pytest.raises(errors.ProtocolError, match="different message"):
        server.receive(secagg.SecAggClient(config, 1).advertise_message)
    server.close_stage()
    # A stage-0 message replayed in stage 1 (identical bytes or not): not an answer to stage 1.
    with pytest.raises(errors.ProtocolError, match="stage"):
        server.receive(clients[1].advertise_message)
    with pytest.raises(errors.ProtocolError, match="stage"):
        server.receive(secagg.SecAggClient(config, 1).advertise_message)
    keys = server.message_for(1)
    # Truncated bytes: malformed, the client ignores them and can go on.
    with pytest.raises(errors.ProtocolError, match="malformed"):
        clients[1].handle(keys[:-3])
    assert not clients[1].aborted
    # A message addressed to another client: the library treats the wrong party as fatal, so
    # client 2 aborts (and the round goes on without it).
    with pytest.raises(errors.ProtocolError, match="another client"):
        clients[2].handle(keys)
    assert clients[2].aborted
    for i in (1, 3, 4, 5):
        server.receive(clients[i].handle(server.message_for(i)))
    # Replayed: the keys message again, now that client 1 waits for shares.
    with pytest.raises(errors.ProtocolError, match="stage"):
        clients[1].handle(keys)
    server.close_stage()
    # A forged share ciphertext fails authentication: the client aborts.
    shares = secagg.decode_message(server.message_for(1), sender="server")
    ct = shares["payload"]["Shares"]["shares"][0]["ciphertext"]
    ct[5] ^= 0x01
    forged = secagg.encode_message(shares, sender="server")
    with pytest.raises(errors.ProtocolError, match="authentication"):
        clients[1].handle(forged, inputs[0])
    assert clients[1].aborted
    # Bad inputs are typed and do not abort the client.
    with pytest.raises(errors.InvalidInput, match="coordinates"):
        clients[3].handle(server.message_for(3), inputs[2][:5])
    with pytest.raises(errors.InvalidInput, match="outside"):
        clients[3].handle(server.message_for(3), np.full(6, 2**16, dtype=np.uint64))
    with pytest.raises(errors.InvalidDtype):
        clients[3].handle(server.message_for(3), np.zeros(6))
    assert not clients[3].aborted
    assert server.receive(clients[3].handle(server.message_for(3), inputs[2])) == "accepted"


def test_mangled_bytes_never_crash_the_server():
    """Random byte flips of a client message: the server raises ProtocolError or accepts a
    (syntactically valid) message; it never panics or raises anything else."""
    config = secagg.round_config(4, 16, 3)
    msg = secagg.SecAggClient(config, 1).advertise_message
    rnd = random.Random(7)
    outcomes = set()
    for _ in range(300):
        b = bytearray(msg)
        for _ in range(rnd.randint(1, 3)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        if rnd.random() < 0.3:
            b = b[: rnd.randrange(len(b))]
        server = secagg.SecAggServer(config)
        try:
            outcomes.add(server.receive(bytes(b)))
        except errors.ProtocolError:
            outcomes.add("error")
    assert "error" in outcomes
    # The same for a server message to a client: ProtocolError (or ProtocolAbort when the
    # mangled request is well-formed but inconsistent), never anything else.
    server = secagg.SecAggServer(config)
    for i in range(1, 5):
        server.receive(secagg.SecAggClient(config, i).advertise_message)
    server.close_stage()
    keys = server.message_for(1)
    seen = set()
    for _ in range(300):
        client = secagg.SecAggClient(config, 1)
        b = bytearray(keys)
        for _ in range(rnd.randint(1, 3)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        try:
            client.handle(bytes(b))
            seen.add("answered")
        except (errors.ProtocolError, errors.ProtocolAbort) as e:
            seen.add(type(e).__name__)
    assert "ProtocolError" in seen


def test_round_config_forms_and_errors():
    sid = bytes(range(32))
    c = secagg.round_config(10, 32, 100, session_id=sid)
    assert c.session_id == sid and c.clients == 10 and c.bits == 32 and c.dim == 100
    assert c["threshold"] == 5 and c["session_id"] == sid.hex() and "graph" in c.keys()
    assert secagg.RoundConfig.from_dict(c.to_dict()) == c
    assert secagg.RoundConfig.from_bytes(c.to_bytes()) == c
    assert secagg.round_config(10, 32, 100, session_id=sid.hex()) == c
    assert secagg.round_config(10, 32, 100) != c  # a fresh session id
    assert len(c.binding) == 32
    with pytest.raises(errors.InvalidParameter, match="clients"):
        secagg.round_config(1, 32, 100)
    with pytest.raises(errors.InvalidParameter, match="bits"):
        secagg.round_config(10, 65, 100)
    with pytest.raises(errors.InvalidParameter, match="degree"):
        secagg.round_config(10, 32, 100, graph="harary", degree=3, threshold=2)
    with pytest.raises(errors.InvalidParameter, match="threshold"):
        secagg.round_config(10, 32, 100, graph="harary", degree=4, threshold=2)
    with pytest.raises(errors.InvalidParameter, match="graph"):
        secagg.round_config(10, 32, 100, graph="ring")
    with pytest.raises(errors.InvalidParameter, match="session_id"):
        secagg.round_config(10, 32, 100, session_id=b"short")
    with pytest.raises(errors.InvalidParameter, match="threshold"):
        secagg.RoundConfig.from_dict({**c.to_dict(), "threshold": 2})
    with pytest.raises(errors.InvalidParameter, match="id"):
        secagg.SecAggClient(c, 0)
    with pytest.raises(errors.InvalidParameter, match="id"):
        secagg.SecAggClient(c, 11)


def test_simulate_matches_the_cli(cli):
    """The in-process simulation through Python gives the report of `privfed secagg simulate
    --json` (same keys; the same survivors, threshold and graph for the same seed)."""
    for clients, dropout, stage in [(20, 0.2, "masked_input"), (30, 0.1, "share_keys")]:
        py = secagg.simulate(clients, 100, 16, dropout, dropout_stage=stage, seed=3)
        rust = cli(
            "secagg", "simulate", "--clients", str(clients), "--dim", "100", "--bits", "16",
            "--dropout", str(dropout), "--dropout-stage", stage.split("_")[0], "--seed", "3",
            "--json", "--quiet",
        )
        assert set(py) == set(rust)
        assert py["exact"] is True and rust["exact"] is True
        for key in ("survivors", "recovered_dropouts", "clients", "threshold", "degree",
                    "graph", "dim", "bits", "seed", "transport"):
            assert py[key] == rust[key], key
        assert py["survivors"] == clients - round(dropout * clients)
        assert py["seconds"] > 0 and py["bytes_per_client"] > 0


def test_plan_secagg_plus_matches_the_cli(cli):
    """Python's planner is the honest-but-curious one; the CLI plans the active mode unless
    told otherwise."""
    for clients, dropout in [(100, 0.2), (1000, 0.1)]:
        py = secagg.plan_secagg_plus(clients, dropout)
        rust = cli("secagg", "plan", "--clients", str(clients), "--dropout", str(dropout),
                   "--threat-model", "honest-but-curious", "--json")
        assert py == rust
        assert 2 * py["threshold"] > py["degree"]
    with pytest.raises(errors.InvalidParameter, match="dropout"):
        secagg.plan_secagg_plus(100, 1.0)


# ============================================================ the active mode
ACTIVE_STAGES = ("share_keys", "masked_input", "consistency_check", "unmasking")


def _enroll(n):
    """An enrollment authority, n enrolled devices and their signed roster."""
    authority = secagg.DeviceKey.generate()
    devices = [secagg.DeviceKey.generate() for _ in range(n)]
    roster = secagg.Roster.sign(authority, [d.verifying_key for d in devices])
    return authority, devices, roster


def test_a_roster_carries_a_signed_version_and_expiry():
    """Roster.sign(version=, not_after=): both are signed; verify() and the client refuse an
    expired roster (by the clock, or `now=`) and one older than `min_version` — what a device
    keeps so that a server relaying an older roster cannot bring back a removed device."""
    authority = secagg.DeviceKey.generate()
    devices = [secagg.DeviceKey.generate() for _ in range(4)]
    keys = [d.verifying_key for d in devices]
    r = secagg.Roster.sign(authority, keys, version=7, not_after=2_000_000_000)
    assert (r.version, r.not_after) == (7, 2_000_000_000)
    assert "version=7" in repr(r)
    back = secagg.Roster.from_bytes(r.to_bytes())
    assert back == r and back.version == 7
    r.verify(authority.verifying_key, min_version=7, now=2_000_000_000)
    with pytest.raises(errors.ProtocolAbort, match="expired"):
        r.verify(authority.verifying_key, now=2_000_000_001)
    with pytest.raises(errors.ProtocolAbort, match="older"):
        r.verify(authority.verifying_key, min_version=8)
    # default expiry: 30 days from signing
    fresh = secagg.Roster.sign(authority, keys)
    assert fresh.version == 1
    assert abs(fresh.not_after - (time.time() + 30 * 86400)) < 120
    # the client applies the same checks, with the machine's clock
    config = secagg.round_config(4, 16, 8, threat_model="active", roster=r)
    with pytest.raises(errors.ProtocolAbort, match="older"):
        secagg.SecAggClient(config, 1, device=devices[0], roster=r,
                            authority=authority.verifying_key, min_roster_version=8)
    stale = secagg.Roster.sign(authority, keys, version=8, not_after=1)
    config = secagg.round_config(4, 16, 8, threat_model="active", roster=stale)
    with pytest.raises(errors.ProtocolAbort, match="expired"):
        secagg.SecAggClient(config, 1, device=devices[0], roster=stale,
                            authority=authority.verifying_key)


def test_active_round_with_a_roster_is_exact_with_dropouts():
    n, dim, bits = 8, 40, 16
    authority, devices, roster = _enroll(n)
    config = secagg.round_config(n, bits, dim, threat_model="active", roster=roster)
    assert config.threat_model == "active" and config.roster == roster.digest
    assert config.threshold == (n + math.ceil(0.1 * n)) // 2 + 1  # the active complete graph
    d = config.to_dict()
    assert d["threat_model"] == "active" and d["roster"] == roster.digest.hex()
    assert secagg.RoundConfig.from_dict(d) == config
    assert secagg.RoundConfig.from_bytes(config.to_bytes()) == config
    assert secagg.Roster.from_bytes(roster.to_bytes()) == roster and len(roster) == n
    roster.verify(authority.verifying_key)
    inputs = uniform_inputs(n, dim, bits, seed=5)
    server = secagg.SecAggServer(config)
    clients = {}
    for i in range(1, n + 1):
        clients[i] = secagg.SecAggClient(config, i, device=devices[i - 1], roster=roster,
                                         authority=authority.verifying_key)
        server.receive(clients[i].advertise_message)
    server.close_stage()
    drops = {3: "masked_input", 6: "unmasking"}
    for stage in ACTIVE_STAGES:
        assert server.stage == stage
        for i in server.pending:
            if drops.get(i) == stage or (drops.get(i) == "masked_input"
                                         and stage == "consistency_check"):
                continue
            assert clients[i].next_stage == stage
            x = inputs[i - 1] if stage == "masked_input" else None
            server.receive(clients[i].handle(server.message_for(i), x))
        server.close_stage()
    assert server.status == "finished"
    out = server.output
    assert sorted(out["survivors"]) == [1, 2, 4, 5, 6, 7, 8]
    want = sum(inputs[i - 1].astype(object) for i in out["survivors"]) % (1 << bits)
    assert np.array_equal(out["sum"].astype(object), want)


def test_active_mode_refuses_forged_keys_and_clients_without_credentials(tmp_path):
    n, dim, bits = 6, 8, 16
    authority, devices, roster = _enroll(n)
    config = secagg.round_config(n, bits, dim, threat_model="active", roster=roster)
    # credentials are required, the roster must verify, the device must be on it
    with pytest.raises(errors.ProtocolAbort, match="active"):
        secagg.SecAggClient(config, 1)
    with pytest.raises(errors.ProtocolAbort, match="authority"):
        secagg.SecAggClient(config, 1, device=devices[0], roster=roster,
                            authority=secagg.DeviceKey.generate().verifying_key)
    with pytest.raises(errors.ProtocolAbort, match="not on the roster"):
        secagg.SecAggClient(config, 1, device=secagg.DeviceKey.generate(), roster=roster,
                            authority=authority.verifying_key)
    with pytest.raises(errors.ProtocolAbort, match="roster"):
        secagg.SecAggClient(config, 1, device=devices[0])  # a round with a roster, none here
    _, _, other = _enroll(n)
    with pytest.raises(errors.ProtocolAbort, match="another roster"):
        secagg.SecAggClient(secagg.round_config(n, bits, dim, threat_model="active",
                                                roster=other),
                            1, device=devices[0], roster=roster,
                            authority=authority.verifying_key)
    hbc = secagg.round_config(n, bits, dim)
    with pytest.raises(errors.ProtocolAbort, match="honest-but-curious"):
        secagg.SecAggClient(hbc, 1, device=devices[0])
    with pytest.raises(errors.InvalidParameter, match="roster"):
        secagg.round_config(n, bits, dim, roster=roster)
    with pytest.raises(errors.InvalidParameter, match="authority"):
        secagg.SecAggClient(config, 1, device=devices[0], roster=roster)
    # a key list with one peer's keys altered (a substituted key): refused
    server = secagg.SecAggServer(config)
    clients = {i: secagg.SecAggClient(config, i, device=devices[i - 1], roster=roster,
                                      authority=authority.verifying_key)
               for i in range(1, n + 1)}
    for c in clients.values():
        server.receive(c.advertise_message)
    server.close_stage()
    m = secagg.decode_message(server.message_for(1), sender="server")
    (kind, body), = m["payload"].items()
    assert kind == "SignedKeyList"
    entry = body["entries"][1]
    key = list(entry["cipher_pk"])
    key[0] ^= 1
    entry["cipher_pk"] = key if not isinstance(entry["cipher_pk"], (bytes, bytearray)) \
        else bytes(key)
    with pytest.raises(errors.ProtocolAbort, match="signature"):
        clients[1].handle(secagg.encode_message(m, sender="server"))
    assert clients[1].aborted
    # the genuine list still works for the others
    clients[2].handle(server.message_for(2))


def test_device_keys_are_stored_private_and_reloaded(tmp_path):
    path = tmp_path / "device.key"
    k = secagg.DeviceKey.load(path, create=True)
    assert path.stat().st_mode & 0o077 == 0 and len(path.read_bytes()) == 32
    assert secagg.DeviceKey.load(path).verifying_key == k.verifying_key
    assert secagg.DeviceKey.load(path, create=True).verifying_key == k.verifying_key
    path.chmod(0o644)
    with pytest.raises(errors.InvalidParameter, match="chmod 600"):
        secagg.DeviceKey.load(path)
    with pytest.raises(OSError):
        secagg.DeviceKey.load(tmp_path / "missing.key")


# -- the client's policy and the response caps (one home: privfed_secagg::ClientPolicy,
# privfed_distributed::PlanPolicy; these check the bindings reach them) --

def test_the_default_policy_refuses_two_clients_and_names_the_rule():
    c2 = secagg.round_config(2, 16, 4)  # well formed: t = 1 of 1 neighbour
    with pytest.raises(errors.ProtocolAbort, match=r"min_clients: n = 2.*n ≥ 3"):
        secagg.SecAggClient(c2, 1)
    with pytest.raises(errors.ProtocolAbort, match="min_clients"):
        secagg.check_policy(c2)
    secagg.SecAggClient(c2, 1, policy="permissive")  # visibly relaxed
    secagg.SecAggClient(c2, 1, policy={"min_clients": 2, "min_threshold": 1,
                                      "min_threshold_fraction": 0.0})
    # at the boundary: three clients (t = 2 of 2 neighbours) pass the defaults
    secagg.check_policy(secagg.round_config(3, 16, 4))
    secagg.SecAggClient(secagg.round_config(3, 16, 4), 1)


def test_policy_rules_at_their_boundaries_and_malformed_policies():
    c = secagg.round_config(10, 16, 4, graph="harary", degree=4, threshold=3)
    secagg.check_policy(c, {"min_degree": 4})
    with pytest.raises(errors.ProtocolAbort, match="min_degree: k = 4"):
        secagg.check_policy(c, {"min_degree": 6})
    secagg.check_policy(c, {"min_threshold": 3})
    with pytest.raises(errors.ProtocolAbort, match="min_threshold: t = 3"):
        secagg.check_policy(c, {"min_threshold": 4})
    with pytest.raises(errors.ProtocolAbort, match="min_threshold_fraction"):
        secagg.check_policy(c, {"min_threshold_fraction": 0.75})  # 3 ≤ 0.75·4
    with pytest.raises(errors.ProtocolAbort, match="accept_honest_but_curious"):
        secagg.check_policy(c, {"accept_honest_but_curious": False})
    with pytest.raises(errors.InvalidParameter, match="min_clinets"):
        secagg.check_policy(c, {"min_clinets": 3})
    with pytest.raises(errors.InvalidParameter, match="policy"):
        secagg.check_policy(c, "lenient")
    with pytest.raises(errors.InvalidParameter, match="min_threshold_fraction"):
        secagg.check_policy(c, {"min_threshold_fraction": 1.0})


def test_a_server_message_over_the_stage_cap_aborts_the_client():
    config = secagg.round_config(5, 16, 4)
    client = secagg.SecAggClient(config, 1)
    with pytest.raises(errors.ProtocolAbort, match="exceeds the round's cap"):
        client.handle(b"\0" * (1 << 20))
    assert client.aborted
    # a short malformed message is only malformed (the client stays in the round)
    other = secagg.SecAggClient(config, 2)
    with pytest.raises(errors.ProtocolError):
        other.handle(b"\0" * 8)
    assert not other.aborted


def test_the_plan_policy_refuses_no_noise_by_default_and_takes_overrides():
    noisy = dd.plan(16, 1.0, 16, 5, noise_stddev=0.1)
    silent = dd.plan(16, 1.0, 16, 5, noise_stddev=0.0)
    dd.check_plan(noisy)
    dd.check_plan(noisy.params)  # as a client receives it
    with pytest.raises(errors.ProtocolAbort, match="allow_no_noise: local_noise_stddev = 0"):
        dd.check_plan(silent.params)
    dd.check_plan(silent.params, "permissive")
    dd.check_plan(silent.params, {"allow_no_noise": True})
    dd.check_plan(noisy.params, {"min_local_noise_stddev": 0.1, "max_clip": 1.0})
    with pytest.raises(errors.ProtocolAbort, match="min_local_noise_stddev"):
        dd.check_plan(noisy.params, {"min_local_noise_stddev": 0.11})
    with pytest.raises(errors.ProtocolAbort, match="max_clip: clip = 1"):
        dd.check_plan(noisy.params, {"max_clip": 0.99})
    with pytest.raises(errors.InvalidParameter, match="max_clp"):
        dd.check_plan(noisy.params, {"max_clp": 1.0})
