"""The example app on Flower's Deployment Engine: a real ``flower-superlink`` and four
``flower-supernode`` processes on 127.0.0.1, runs submitted with ``flwr run`` and judged by the
run's status (``flwr ls``) and the result file the ServerApp writes.

Marked ``deployment`` and deselected by default (pyproject's addopts); run them with
``python -m pytest -m deployment python/tests/test_flwr_deployment.py`` or
``scripts/flwr_deployment_e2e.sh``. They need Flower's executables (``flower-superlink``,
``flower-supernode``, ``flwr``) beside this Python and the shared MNIST files; without them they
follow conftest's policy (skipped with the reason, failed under CI).

What is checked, per privacy mode:

* distributed DP (SecAgg over Flower messages): every round's decoded mean equals, bit for bit,
  what privfed.distributed decodes from the same clients' updates encoded with the same seeds
  (the SuperNodes run with fixed encoder seeds and write their updates in the clear to an audit
  directory, test hooks of the example's ClientApp); the survivors; ε after each round against
  the accountant's composition of ``round_event(plan, survivors)``; the decoded mean lies as
  close to the plain mean of the clipped updates as the plan's noise predicts;
* an active round (``threat-model = "active"``, five stages, device keys made on first use):
  decoded bit for bit;
* a SuperNode killed (SIGKILL) while it holds its masked input: the round completes with the
  three others, ε accounted with three;
* local DP: contributors and ε per round;
* central DP (privfed's CentralDpStrategy): the sample (4 of 4), ε per round against
  ``SampledWithoutReplacementDpEvent(N, m, GaussianDpEvent(z/2))`` composed under replace-one
  neighbours, the released mean as close to the mean of the clipped updates as the noise
  predicts;
* a run whose strategy refuses its parameters ends ``finished:failed`` with the cause;
* a run whose ClientApps all raise: each client's error text is in the run's log;
* a malicious ServerApp (``flwr_apps/replay``) that re-sends a refused unmasking stage: the
  fresh ClientApp process that gets it refuses it (the abort sticks across processes);
* the same app on the simulation engine through ``flwr run`` and a ``:local:`` connection
  (Flower 1.41's replacement of ``run_simulation``): completed, ε per round.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import privfed
from privfed import accounting
from privfed import distributed as dist

from conftest import have_module, missing
from flwr_deployment import QUIET_FLOWER, Deployment, flower_bin_dir, free_port, pid_listening_on

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "examples" / "flwr"
NODES = 4
RUN_SECONDS = 300  # a run that has not finished by then fails the test

pytestmark = pytest.mark.deployment

BIN = flower_bin_dir(sys.executable)


def _need_flower():
    if BIN is None:
        missing(f"Flower's executables (flower-superlink, flower-supernode, flwr) are not beside "
                f"{sys.executable}: pip install \"privfed[flwr]\"")


def _node_configs(audit: Path, hold_at: dict | None = None):
    hold_at = hold_at or {}
    out = []
    for i in range(NODES):
        cfg = {"partition-id": i, "num-partitions": NODES, "encoder-seed": 100 + i,
               "audit-dir": str(audit)}
        if i in hold_at:
            cfg["hold-at"] = hold_at[i]
        out.append(cfg)
    return out


def _run_config(shared_data: Path, result: Path, **kw):
    cfg = {"num-clients": NODES, "cohort": NODES, "num-rounds": 2, "data-dir": str(shared_data),
           "result-file": str(result), "local-epochs": 1, "seed": 1, "timeout": 60.0}
    cfg.update({k.replace("_", "-"): v for k, v in kw.items()})
    return cfg


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, shared_data):
    _need_flower()
    work = tmp_path_factory.mktemp("deployment")
    audit = work / "audit"
    audit.mkdir()
    with Deployment(BIN, work, _node_configs(audit)) as d:
        d.audit = audit
        yield d


def _run(d: Deployment, tmp_path: Path, shared_data: Path, **kw):
    for f in d.audit.glob("*"):
        f.unlink()
    result = tmp_path / "result.json"
    t0 = time.monotonic()
    run_id = d.submit(APP, _run_config(shared_data, result, **kw))
    res = d.wait(run_id, RUN_SECONDS, t0)
    doc = json.loads(result.read_text()) if result.exists() else None
    return res, doc


def _completed(res, doc, d):
    assert res.status == "finished:completed", (
        f"run {res.run_id}: {res.status} {res.details}\n{res.log[-4000:]}\n{d.logs()}")
    assert doc is not None and doc["status"] == "completed", doc and doc.get("error")
    print(f"\nrun {res.run_id}: {res.status} in {res.seconds:.1f} s "
          f"({[r.get('seconds') for r in doc['rounds']]} s per evaluation)")


def _nodes(audit: Path):
    """node id -> its node config, as the ClientApp wrote it."""
    return {int(p.stem.split("-")[1]): json.loads(p.read_text())
            for p in audit.glob("node-*.json")}


def _check_secagg_round(row, plan, audit: Path, nodes: dict):
    """The server's decoded mean is what privfed.distributed decodes from the survivors'
    updates encoded with their seeds, bit for bit; and it is as close to their plain mean as
    the plan's noise predicts."""
    rnd = int(row["round"])
    survivors = sorted(int(n) for n in row["survivor_nodes"])
    rseed = dist.rotation_seed(bytes.fromhex(row["session_id"]), rnd)
    total = dist.ModularSum(plan["bits"], plan["padded_dim"])
    updates = []
    for nid in survivors:
        u = np.load(audit / f"update-{nid}-r{rnd}.npy")
        updates.append(u)
        seed = int(nodes[nid]["encoder-seed"]) * 1009 + rnd
        total.add(dist.SkellamEncoder(plan, rseed, seed=seed).encode(u, threads=1))
    want = np.asarray(dist.SkellamDecoder(plan, rseed).decode(total.value, len(survivors)).mean)
    got = np.asarray(row["mean"], dtype=np.float64)
    assert np.array_equal(got, want), np.abs(got - want).max()
    # Against the plain mean of the clipped updates the error is the noise: each client adds
    # Skellam noise of standard deviation local_noise_stddev (in the update's units) to every
    # rotated coordinate, so E‖decoded − plain‖² = dim·sd²/m (plus quantization and wraps,
    # both below 1% of it here: privfed's predicted_mse). The squared error sums 7,850 nearly
    # independent terms, its relative standard deviation is about √(2/7850) ≈ 1.6%: the
    # bounds 0.8 and 1.25 times the expectation are more than 12 of them away. Below the
    # lower bound the noise is missing; above the upper, the sum is of other updates.
    clip = float(plan["clip"])
    plain = np.mean([u * min(1.0, clip / np.linalg.norm(u)) for u in updates], axis=0)
    err = float(np.sum((got - plain) ** 2))
    expected = plain.size * float(plan["local_noise_stddev"]) ** 2 / len(survivors)
    assert 0.8 * expected < err < 1.25 * expected, (err, expected)
    return survivors


# ================================================================= distributed DP
def test_deployment_distributed_dp_decodes_the_sum_and_accounts_each_round(
        deployment, tmp_path, shared_data):
    res, doc = _run(deployment, tmp_path, shared_data, privacy="distributed", epsilon=20.0,
                    dropout_tolerance=0.25)
    _completed(res, doc, deployment)
    plan = doc["plan"]
    nodes = _nodes(deployment.audit)
    assert len(nodes) == NODES
    rounds = doc["rounds"]
    assert [r["round"] for r in rounds] == [0, 1, 2]
    acct = accounting.RdpAccountant()
    for row in rounds[1:]:
        assert not row["aborted"] and not row["wrap_suspected"], row.get("abort_reason")
        assert row["contributors"] == NODES and row["errors"] == {}
        survivors = _check_secagg_round(row, plan, deployment.audit, nodes)
        assert survivors == sorted(nodes)
        acct.compose(dist.round_event(plan, NODES))
        assert row["epsilon"] == pytest.approx(acct.get_epsilon(1e-5), rel=1e-12)
    assert rounds[-1]["epsilon"] <= 20.0


def test_deployment_active_round_decodes_the_sum(deployment, tmp_path, shared_data):
    """threat-model = "active" (no roster): five stages on real SuperNodes, each signing its
    round keys with a device key it made in its state directory on first use; the decoded mean
    is bit for bit what privfed.distributed decodes from the same encodings."""
    res, doc = _run(deployment, tmp_path, shared_data, privacy="distributed", epsilon=20.0,
                    dropout_tolerance=0.25, num_rounds=1, threat_model="active")
    _completed(res, doc, deployment)
    (row,) = doc["rounds"][1:]
    assert not row["aborted"] and row["contributors"] == NODES, row.get("abort_reason")
    nodes = _nodes(deployment.audit)
    assert _check_secagg_round(row, doc["plan"], deployment.audit, nodes) == sorted(nodes)
    keys = list(Path(os.environ["PRIVFED_STATE_DIR"]).glob("secagg-device-*.key"))
    assert {int(k.stem.rsplit("-", 1)[1]) for k in keys} >= set(nodes)


def test_deployment_supernode_killed_mid_round_the_round_recovers(tmp_path_factory,
                                                                   shared_data):
    """SuperNode 3 holds its masked input (it has shared its keys); it is killed with SIGKILL.
    The round goes on with the other three: their sum is decoded (bit for bit as
    privfed.distributed decodes their encodings) and accounted with three contributors."""
    _need_flower()
    work = tmp_path_factory.mktemp("deployment-kill")
    audit = work / "audit"
    audit.mkdir()
    with Deployment(BIN, work, _node_configs(audit, {3: "masked_input"})) as d:
        d.audit = audit
        result = work / "result.json"
        t0 = time.monotonic()
        run_id = d.submit(APP, _run_config(shared_data, result, privacy="distributed",
                                           epsilon=20.0, dropout_tolerance=0.25,
                                           num_rounds=1, timeout=90.0))
        deadline = t0 + RUN_SECONDS
        while not list(audit.glob("hold-*")) and time.monotonic() < deadline:
            time.sleep(0.5)
        (marker,) = list(audit.glob("hold-*"))
        held_node = int(marker.name.split("-")[1])
        d.supernodes[3].kill()
        killed_at = time.monotonic() - t0
        res = d.wait(run_id, RUN_SECONDS, t0)
        doc = json.loads(result.read_text()) if result.exists() else None
        _completed(res, doc, d)
        print(f"SuperNode 3 (node {held_node}) killed {killed_at:.1f} s into the run")
        (row,) = doc["rounds"][1:]
        assert not row["aborted"], row["abort_reason"]
        assert row["contributors"] == NODES - 1 and row["sampled"] == NODES
        nodes = _nodes(audit)
        survivors = _check_secagg_round(row, doc["plan"], audit, nodes)
        assert held_node not in survivors and len(survivors) == NODES - 1
        want = accounting.RdpAccountant().compose(
            dist.round_event(doc["plan"], NODES - 1)).get_epsilon(1e-5)
        assert row["epsilon"] == pytest.approx(want, rel=1e-12)


# ================================================================= local and central DP
def test_deployment_local_dp_accounts_each_round(deployment, tmp_path, shared_data):
    res, doc = _run(deployment, tmp_path, shared_data, privacy="local", local_epsilon=8.0)
    _completed(res, doc, deployment)
    eps0 = privfed.PrivUnitG(epsilon=8.0, dim=7850).epsilon
    acct = accounting.PureCappedRdpAccountant()
    for row in doc["rounds"][1:]:
        assert row["contributors"] == NODES
        acct.compose(accounting.PureDpEvent(eps0))
        assert row["epsilon"] == pytest.approx(acct.get_epsilon(1e-5), rel=1e-12)


def test_deployment_central_dp_accounts_each_round(deployment, tmp_path, shared_data):
    """Central DP through privfed's CentralDpStrategy (z = 1, C = 1): every round is the
    cohort of 4 of the 4 SuperNodes, accounted as SampledWithoutReplacementDpEvent(4, 4,
    GaussianDpEvent(z/2)) under replace-one neighbours (the clipped sum moves by up to 2C when
    one client's data is replaced); ε after each round is RdpAccountant(neighboring_relation=
    "replace_one") composed directly. The released mean is the mean of the clipped updates
    (which the SuperNodes' audit hook wrote in the clear) plus noise of standard deviation
    z·C/k: its squared error against that plain mean sums 7,850 nearly independent terms of
    expectation (z·C/k)² each, relative standard deviation √(2/7850) ≈ 1.6%, so the bounds 0.8
    and 1.25 times the expectation are more than 12 of them away. Below the lower bound the
    noise is missing; above the upper, the mean is of other (or unclipped) updates."""
    z, clip = 1.0, 1.0
    res, doc = _run(deployment, tmp_path, shared_data, privacy="central", noise_multiplier=z,
                    clip=clip)
    _completed(res, doc, deployment)
    nodes = _nodes(deployment.audit)
    assert len(nodes) == NODES
    rounds = doc["rounds"]
    assert [r["round"] for r in rounds] == [0, 1, 2]
    acct = accounting.RdpAccountant(neighboring_relation="replace_one")
    for row in rounds[1:]:
        rnd = int(row["round"])
        assert row["contributors"] == NODES and row["refused"] == 0 and row["failed"] == 0
        assert row["population"] == NODES and row["sampled"] == NODES
        assert row["clipping_norm"] == clip and row["noise_multiplier"] == z
        assert row["noise_stddev"] == pytest.approx(z * clip / NODES, rel=1e-12)
        acct.compose(accounting.SampledWithoutReplacementDpEvent(
            NODES, NODES, accounting.GaussianDpEvent(z / 2)))
        assert row["epsilon"] == pytest.approx(acct.get_epsilon(1e-5), rel=1e-12)
        updates = [np.load(deployment.audit / f"update-{nid}-r{rnd}.npy") for nid in nodes]
        # the clipping is active: the test would not see a missing projection otherwise
        assert max(np.linalg.norm(u) for u in updates) > clip
        plain = np.mean([u * min(1.0, clip / np.linalg.norm(u)) for u in updates], axis=0)
        got = np.asarray(row["mean"], dtype=np.float64)
        err = float(np.sum((got - plain) ** 2))
        expected = plain.size * (z * clip / NODES) ** 2
        assert 0.8 * expected < err < 1.25 * expected, (err, expected)
    # the same noise multiplier without sampling under add/remove-one (what Flower's own
    # wrapper was accounted with before) gives another ε: the event above is the one used
    flower_like = accounting.RdpAccountant()
    for _ in rounds[1:]:
        flower_like.compose(accounting.GaussianDpEvent(z))
    assert rounds[-1]["epsilon"] != pytest.approx(flower_like.get_epsilon(1e-5), rel=1e-3)


# ================================================================= a failed run is a failure
def test_deployment_a_refused_plan_fails_the_run_with_its_cause(deployment, tmp_path,
                                                                shared_data):
    """4 clients at dropout_tolerance 0.2 cover no dropout: the ServerApp raises before round
    1, and the run's status says so (``flwr run`` itself printed success)."""
    res, doc = _run(deployment, tmp_path, shared_data, privacy="distributed",
                    dropout_tolerance=0.2)
    assert res.status == "finished:failed", (res.status, res.details)
    assert "covers no dropout" in res.details + res.log
    assert doc is not None and doc["status"] == "failed" and "covers no dropout" in doc["error"]


# ================================================================= flwr run on the simulation engine
def test_flwr_run_on_the_simulation_engine(tmp_path, shared_data):
    """``flwr run`` against a ``:local:`` connection: the CLI starts a detached SuperLink in
    simulation mode (Ray) on the ports we give it; it is stopped afterwards by the pid that
    listens on its port."""
    import signal
    import subprocess

    _need_flower()
    if not have_module("ray"):
        missing('the simulation engine needs Ray: pip install "flwr[simulation]"')
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[superlink]\ndefault = "local-simulation"\n\n[superlink.local-simulation]\n'
        'address = ":local:"\noptions.num-supernodes = 4\n'
        "options.backend.client-resources.num-cpus = 1\n"
        "options.backend.client-resources.num-gpus = 0.0\n"
        "options.backend.init-args.num-cpus = 2\n")
    port, control = free_port(), free_port()
    env = dict(os.environ, FLWR_HOME=str(home), FLWR_LOCAL_SUPERLINK_HTTP_API_PORT=str(port),
               FLWR_LOCAL_CONTROL_API_PORT=str(control),
               FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION="1",
               PATH=str(BIN) + os.pathsep + os.environ.get("PATH", ""), **QUIET_FLOWER)
    result = tmp_path / "result.json"
    cfg = tmp_path / "run-config.toml"
    cfg.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in _run_config(
        shared_data, result, privacy="local", local_epsilon=8.0).items()))

    def flwr(*args):
        return subprocess.run([str(BIN / "flwr"), *args], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)

    t0 = time.monotonic()
    try:
        out = flwr("run", str(APP), "local-simulation", "--run-config", str(cfg),
                   "--format", "json")
        run_id = str(json.loads(out.stdout)["run-id"])
        status, details = "", ""
        while time.monotonic() < t0 + RUN_SECONDS:
            doc = json.loads(flwr("ls", "local-simulation", "--run-id", run_id,
                                  "--format", "json").stdout)
            (run,) = doc["runs"]
            status, details = str(run["status"]), str(run["status-details"])
            if status.startswith("finished"):
                break
            time.sleep(1.0)
        log = flwr("log", run_id, "local-simulation", "--show").stdout
    finally:
        pid = pid_listening_on(port)
        if pid is not None:
            os.killpg(pid, signal.SIGTERM)  # it runs in its own session: its group is its pid
    assert status == "finished:completed", (status, details, log[-4000:])
    doc = json.loads(result.read_text())
    print(f"\nsimulation run {run_id}: {status} in {time.monotonic() - t0:.1f} s")
    assert doc["status"] == "completed"
    eps0 = privfed.PrivUnitG(epsilon=8.0, dim=7850).epsilon
    acct = accounting.PureCappedRdpAccountant()
    for row in doc["rounds"][1:]:
        assert row["contributors"] == NODES
        acct.compose(accounting.PureDpEvent(eps0))
        assert row["epsilon"] == pytest.approx(acct.get_epsilon(1e-5), rel=1e-12)


def test_deployment_a_clients_error_text_reaches_the_run_log(deployment, tmp_path,
                                                             shared_data):
    """Every ClientApp fails (``batch-size = 0`` makes its SGD loop raise): the ServerApp logs
    each client's own error text as a WARNING (read back with ``flwr log``), aggregates
    nothing and accounts nothing."""
    res, doc = _run(deployment, tmp_path, shared_data, privacy="local", num_rounds=1,
                    batch_size=0)
    _completed(res, doc, deployment)
    failed = [line for line in res.log.splitlines()
              if "privfed: round 1: node" in line and "failed" in line]
    nodes = {line.split("node ")[1].split()[0] for line in failed}
    assert len(nodes) == NODES and len(failed) == NODES, res.log[-4000:]  # once per node
    assert all("range() arg 3 must not be zero" in line for line in failed), failed
    assert doc["rounds"][-1]["epsilon"] == 0.0


def test_a_refused_stage_resent_to_a_fresh_clientapp_process_is_refused(deployment, tmp_path):
    """A malicious ServerApp (python/tests/flwr_apps/replay) sends a SuperNode a contradictory
    unmasking request, then the genuine one. Every message runs in a fresh ClientApp process
    (``--isolation subprocess``) that gets only the SuperNode's Context and the node's state
    directory: the refusal sticks, the genuine request is refused, and the round still
    finishes with the other nodes' shares."""
    result = tmp_path / "replay.json"
    t0 = time.monotonic()
    run_id = deployment.submit(REPO / "python" / "tests" / "flwr_apps" / "replay",
                               {"nodes": NODES, "result-file": str(result)})
    res = deployment.wait(run_id, RUN_SECONDS, t0)
    doc = json.loads(result.read_text()) if result.exists() else None
    assert res.status == "finished:completed", (res.status, res.details, doc, res.log[-3000:])
    assert doc["status"] == "completed", doc
    assert "listed both as survivor and as dropped" in doc["contradictory"], doc
    assert not doc["resent_answered"] and "aborted the round" in doc["resent"], doc
    assert doc["round"] == "finished" and doc["survivors"] == list(range(1, NODES + 1)), doc
