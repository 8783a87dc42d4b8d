"""privfed.flwr: the Flower mods and strategies, in process (the Deployment Engine's tests are in
test_flwr_deployment.py).

Tests that need Flower (``pip install "privfed[flwr]"``), the example's also Ray
(``flwr[simulation]``) and the shared data sets, follow conftest's policy: skipped with the
reason when it is absent, failed under CI. All seeds are fixed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import privfed
from privfed import accounting
from privfed import distributed as _dist

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "flwr" / "run_simulation.py"

needs_flwr = pytest.mark.requires("flwr", install='pip install "privfed[flwr]"')
pytestmark = pytest.mark.usefixtures("flower_task_identity")
# The example runs on Flower's simulation engine (Ray); the other tests need flwr alone.
needs_simulation = pytest.mark.requires(
    "flwr", "ray", install='the example needs Flower\'s simulation engine: pip install "flwr[simulation]"')


def test_import_without_flwr_names_the_extra():
    code = textwrap.dedent("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "flwr" or name.startswith("flwr."):
                    raise ImportError("blocked for the test: " + name)
        sys.meta_path.insert(0, Block())
        try:
            import privfed.flwr
        except ImportError as e:
            print(str(e))
        else:
            print("IMPORTED")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert 'pip install "privfed[flwr]"' in out, out


# ============================================================ helpers (Flower messages by hand)
def _model(seed=0):
    rng = np.random.default_rng(seed)
    return {"w": rng.normal(size=(6, 4)).astype(np.float32),
            "b": rng.normal(size=4).astype(np.float32)}


def _train_message(params, node_id=7):
    from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MessageType, RecordDict

    content = RecordDict({"arrays": ArrayRecord(array_dict={k: Array(v) for k, v in params.items()}),
                          "config": ConfigRecord({"server-round": 1})})
    msg = Message(content=content, dst_node_id=node_id, message_type=MessageType.TRAIN)
    msg.metadata.__dict__["_message_id"] = "m1"
    return msg


def _trainer(delta):
    """A ClientApp 'train' that returns received + delta (flattened over w, b)."""
    from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict

    def call_next(msg, ctxt):
        arrs = msg.content["arrays"]
        at, out = 0, {}
        for k, a in arrs.items():
            v = a.numpy()
            out[k] = Array((v.astype(np.float64) + delta[at:at + v.size].reshape(v.shape))
                           .astype(np.float32))
            at += v.size
        content = RecordDict({"arrays": ArrayRecord(array_dict=out),
                              "metrics": MetricRecord({"num-examples": 10})})
        return Message(content=content, reply_to=msg)

    return call_next


def _context():
    from flwr.app import Context, RecordDict

    return Context(run_id=1, node_id=7, node_config={"partition-id": 0}, state=RecordDict(),
                   run_config={})


def _flat(record):
    return np.concatenate([np.asarray(a.numpy(), np.float64).ravel() for a in record.values()])


# ============================================================ local DP: the mod
@needs_flwr
@pytest.mark.parametrize("mech", ["privunit2", "privunitg", "gaussian"])
def test_privatize_mod_replaces_the_update_by_the_report(mech):
    from privfed.flwr import privatize_mod

    params = _model()
    dim = sum(v.size for v in params.values())
    delta = np.random.default_rng(3).normal(size=dim) * 0.7  # norm ~3.5: clipped at 1
    make = {
        "privunit2": lambda s: privfed.PrivUnit2(epsilon=4.0, dim=dim, seed=s),
        "privunitg": lambda s: privfed.PrivUnitG(epsilon=4.0, dim=dim, seed=s),
        "gaussian": lambda s: privfed.Gaussian(2.0, 1e-5, dim, radius=1.0, seed=s),
    }[mech]
    clip = 1.0
    mod = privatize_mod(make(11), clip=clip)
    msg = _train_message(params)
    g = _flat(msg.content["arrays"])
    out = mod(msg, _context(), _trainer(delta))
    arrays = out.content["arrays"]
    # same keys, shapes, dtypes as the model
    assert list(arrays.keys()) == ["w", "b"]
    for k, v in params.items():
        assert arrays[k].numpy().shape == v.shape and arrays[k].numpy().dtype == v.dtype
    # the update sent is exactly the randomizer's report of the clipped update (same seed)
    update = _flat(_trainer(delta)(msg, None).content["arrays"]) - g
    twin = make(11)
    if mech == "gaussian":
        n = np.linalg.norm(update)
        expected = np.asarray(twin.privatize(update * min(1.0, clip / n) * (1 - 1e-12)))
    else:
        expected = np.asarray(twin.privatize(update / np.linalg.norm(update))) * clip
    sent = _flat(arrays)
    want = np.concatenate([(g + expected)[:24].astype(np.float32).astype(np.float64),
                           (g + expected)[24:].astype(np.float32).astype(np.float64)])
    assert np.array_equal(sent, want)
    assert not np.allclose(sent - g, update, atol=1e-3)  # not the raw update
    rec = out.content.config_records["privfed"]
    assert rec["epsilon"] == twin.epsilon and rec["mechanism"] == twin.name


@needs_flwr
def test_privatize_mod_factory_and_dimension_checks():
    from flwr.app import MessageType

    from privfed.flwr import privatize_mod

    params = _model()
    dim = sum(v.size for v in params.values())
    built = []
    mod = privatize_mod(lambda d: built.append(d) or privfed.PrivUnitG(epsilon=2.0, dim=d),
                        clip=0.5)
    out = mod(_train_message(params), _context(), _trainer(np.ones(dim)))
    assert built == [dim] and out.content["arrays"]["w"].numpy().shape == (6, 4)
    wrong = privatize_mod(privfed.PrivUnitG(epsilon=2.0, dim=dim + 1), clip=0.5)
    with pytest.raises(ValueError, match="dimension"):
        wrong(_train_message(params), _context(), _trainer(np.ones(dim)))
    with pytest.raises(ValueError, match="domain"):
        privatize_mod(privfed.ScalarDP(1.0), clip=1.0)
    # non-TRAIN messages pass through untouched
    msg = _train_message(params)
    msg.metadata.__dict__["_message_type"] = MessageType.EVALUATE
    assert mod(msg, _context(), lambda m, c: "passed") == "passed"


# ============================================================ local DP: the strategy's ε
@needs_flwr
def test_local_strategy_epsilon_is_the_accountants_and_refuses_unprivatized_replies():
    from flwr.app import ConfigRecord
    from flwr.serverapp.strategy import FedAvg

    from privfed.flwr import LocalDpStrategy, privatize_mod

    params = _model()
    dim = sum(v.size for v in params.values())
    eps = 3.0
    strat = LocalDpStrategy(FedAvg(fraction_evaluate=0.0), epsilon=eps, delta=1e-6,
                            accountant=accounting.RdpAccountant())
    mod = privatize_mod(privfed.PrivUnitG(epsilon=eps, dim=dim, seed=5), clip=1.0)
    loose = privatize_mod(privfed.PrivUnitG(epsilon=2 * eps, dim=dim, seed=6), clip=1.0)
    for rnd in (1, 2, 3):
        replies = [mod(_train_message(params), _context(), _trainer(np.ones(dim) * i))
                   for i in range(3)]
        raw = _trainer(np.ones(dim))(_train_message(params), None)  # no privfed record
        replies.append(raw)
        replies.append(loose(_train_message(params), _context(), _trainer(np.ones(dim))))
        arrays, metrics = strat.aggregate_train(rnd, replies)
        assert arrays is not None
        assert metrics["privfed-refused"] == 2
    want = accounting.RdpAccountant().compose(
        accounting.SelfComposedDpEvent(accounting.PureDpEvent(eps), 3)).get_epsilon(1e-6)
    assert strat.ledger.epsilon == pytest.approx(want, rel=1e-12)
    assert metrics["privfed-epsilon"] == strat.ledger.epsilon
    assert [h.contributors for h in strat.history] == [3, 3, 3]
    # a round with no privatized reply composes nothing
    strat.aggregate_train(4, [raw])
    assert strat.ledger.epsilon == pytest.approx(want, rel=1e-12)
    # sampled: the locally sampled event
    s2 = LocalDpStrategy(FedAvg(), epsilon=eps, delta=1e-6, sample_rate=0.1,
                         accountant=accounting.PldAccountant())
    s2.aggregate_train(1, [mod(_train_message(params), _context(), _trainer(np.ones(dim)))])
    want2 = accounting.PldAccountant().compose(
        accounting.LocalSampledDpEvent(0.1, accounting.PureDpEvent(eps))).get_epsilon(1e-6)
    assert s2.ledger.epsilon == pytest.approx(want2, rel=1e-12)
    # the default accountant: pure-capped RDP (one round of ε₀-LDP reports is exactly ε₀)
    s3 = LocalDpStrategy(FedAvg(), epsilon=eps, delta=1e-6)
    s3.aggregate_train(1, [mod(_train_message(params), _context(), _trainer(np.ones(dim)))])
    assert s3.ledger.epsilon == pytest.approx(eps, rel=1e-12)
    assert ConfigRecord is not None


# ============================================================ distributed DP + secure aggregation
UPDATES: dict = {}


def _secagg_app(dim, scale=0.3):
    """A ClientApp behind distributed_dp_mod whose train returns received + a fixed update per
    node and round (recorded in UPDATES, as the float64 difference the mod will compute)."""
    from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp

    from privfed.flwr import distributed_dp_mod

    mod = distributed_dp_mod(encoder_seed=lambda ctxt, rnd: ctxt.node_id * 1000 + rnd)
    app = ClientApp(mods=[mod])

    @app.train()
    def train(msg, context):
        rnd = int(msg.content["config"]["server-round"])
        g = msg.content["arrays"]
        rng = np.random.default_rng(context.node_id * 7919 + rnd)
        delta = rng.normal(size=dim) * scale
        at, out = 0, {}
        for k, a in g.items():
            v = a.numpy()
            out[k] = (v.astype(np.float64) + delta[at:at + v.size].reshape(v.shape)).astype(
                np.float32)
            at += v.size
        new = ArrayRecord(array_dict={k: Array(v) for k, v in out.items()})
        UPDATES[(context.node_id, rnd)] = _flat(new) - _flat(g)
        return Message(RecordDict({"arrays": new, "metrics": MetricRecord(
            {"num-examples": 10, "train-loss": 0.5})}), reply_to=msg)

    return app


def _strategy(nodes, dim, **kw):
    from flwr.serverapp.strategy import FedAvg

    from privfed.flwr import DistributedDpStrategy

    plan = _dist.plan(dim, 1.0, 16, len(nodes), noise_stddev=0.5)
    fedavg = FedAvg(fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=len(nodes),
                    min_available_nodes=len(nodes))
    return DistributedDpStrategy(fedavg, plan=plan, delta=1e-5, stage_timeout=None, **kw)


def _model_dim(seed=1):
    """The length of the flattened model _start sends (the apps must train in it)."""
    return sum(v.size for v in _model(seed).values())


def _start(strategy, grid, rounds):
    from flwr.app import Array, ArrayRecord

    init = ArrayRecord(array_dict={k: Array(v) for k, v in _model(1).items()})
    return strategy.start(grid=grid, initial_arrays=init, num_rounds=rounds)


def _expected_mean(strategy, outcome):
    """What privfed.distributed alone decodes from the same survivors' encodings."""
    p = strategy.plan
    rseed = _dist.rotation_seed(outcome.session_id, outcome.server_round)
    acc = _dist.ModularSum(p.bits, p.padded_dim)
    for nid in outcome.survivor_nodes:
        enc = _dist.SkellamEncoder(p, rseed, seed=nid * 1000 + outcome.server_round)
        acc.add(enc.encode(UPDATES[(nid, outcome.server_round)], threads=1))
    return _dist.SkellamDecoder(p, rseed).decode(acc.value, len(outcome.survivor_nodes)).mean


@needs_flwr
def test_secagg_round_decodes_bit_for_bit_what_privfed_distributed_decodes():
    from flwr_harness import InProcessGrid

    nodes = [101, 57, 3003, 8, 999, 42]
    dim = _model_dim()
    grid = InProcessGrid(_secagg_app(dim), nodes)
    strat = _strategy(nodes, dim)
    result = _start(strat, grid, 2)
    assert [o.contributors for o in strat.rounds] == [6, 6]
    # node ids sorted -> secagg ids 1..n
    assert strat.rounds[0].node_to_client == {n: i + 1 for i, n in enumerate(sorted(nodes))}
    arrays = None
    for o in strat.rounds:
        want = np.asarray(_expected_mean(strat, o))
        assert np.array_equal(o.mean, want), np.abs(o.mean - want).max()
    # the model the inner FedAvg produced is global + the decoded mean (float32 arrays)
    g0 = _flat(_model_record(1))
    after1 = (g0 + strat.rounds[0].mean)
    after2 = _flat_f32(after1) + strat.rounds[1].mean
    assert np.array_equal(_flat(result.arrays), _flat_f32(after2))
    # ε: the accountant's answer for the two rounds' events, with the actual contributors
    acct = accounting.RdpAccountant()
    for o in strat.rounds:
        acct.compose(_dist.round_event(strat.plan, o.contributors))
    assert strat.ledger.epsilon == pytest.approx(acct.get_epsilon(1e-5), rel=1e-12)
    assert arrays is None


def _model_record(seed):
    from flwr.app import Array, ArrayRecord

    return ArrayRecord(array_dict={k: Array(v) for k, v in _model(seed).items()})


def _flat_f32(v):
    return np.asarray(v, np.float64).astype(np.float32).astype(np.float64)


@needs_flwr
@pytest.mark.parametrize("stage", ["advertise_keys", "share_keys", "masked_input", "unmasking"])
def test_secagg_round_survives_a_dropout_at_each_stage(stage):
    from flwr_harness import InProcessGrid

    nodes = [11, 12, 13, 14, 15, 16]
    dim = _model_dim()
    grid = InProcessGrid(_secagg_app(dim), nodes, drop_at={13: stage})
    strat = _strategy(nodes, dim)
    _start(strat, grid, 1)
    (o,) = strat.rounds
    assert not o.aborted
    in_sum = stage == "unmasking"  # its masked input arrived before it vanished
    assert (13 in o.survivor_nodes) == in_sum
    assert o.contributors == (6 if in_sum else 5)
    assert np.array_equal(o.mean, np.asarray(_expected_mean(strat, o)))
    want = accounting.RdpAccountant().compose(
        _dist.round_event(strat.plan, o.contributors)).get_epsilon(1e-5)
    assert strat.ledger.epsilon == pytest.approx(want, rel=1e-12)


@needs_flwr
def test_colluding_fraction_accounts_only_the_honest_survivors():
    """A plan with γ: each round is accounted with survivors − ⌈γ·sampled⌉ (a colluder
    subtracts its own noise), and the outcome and metrics say γ and that count; a γ that
    disagrees with the plan's is refused."""
    from flwr.serverapp.strategy import FedAvg
    from flwr_harness import InProcessGrid

    from privfed.flwr import DistributedDpStrategy

    nodes = [11, 12, 13, 14, 15, 16]
    dim = _model_dim()
    plan = _dist.plan(dim, 1.0, 16, len(nodes), noise_stddev=0.5, colluding_fraction=0.2)
    assert plan.honest_contributors == 4  # ⌈0.2·6⌉ = 2 colluders

    def strategy(**kw):
        fedavg = FedAvg(fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=len(nodes),
                        min_available_nodes=len(nodes))
        return DistributedDpStrategy(fedavg, plan=plan, delta=1e-5, stage_timeout=None, **kw)

    strat = strategy()
    grid = InProcessGrid(_secagg_app(dim), nodes, drop_at={13: "masked_input"})
    result = _start(strat, grid, 1)
    (o,) = strat.rounds
    assert (o.contributors, o.honest_contributors, o.colluding_fraction) == (5, 3, 0.2)
    want = accounting.RdpAccountant().compose(
        _dist.round_event(plan, 3)).get_epsilon(1e-5)
    assert strat.ledger.epsilon == pytest.approx(want, rel=1e-12)
    counted_all = accounting.RdpAccountant().compose(
        _dist.round_event(plan, 5)).get_epsilon(1e-5)
    assert want > counted_all
    m = result.train_metrics_clientapp[1]
    assert m["privfed-honest-contributors"] == 3 and m["privfed-colluding-fraction"] == 0.2
    with pytest.raises(ValueError, match="colluding_fraction"):
        strategy(colluding_fraction=0.0)


@needs_flwr
def test_secagg_round_below_threshold_aborts_reveals_nothing_and_accounts_nothing():
    from flwr_harness import InProcessGrid

    from privfed.errors import ProtocolAbort
    from privfed.flwr import SecAggRoundAborted

    nodes = [1, 2, 3, 4, 5, 6]  # complete graph: threshold 3
    dim = _model_dim()
    drops = {2: "masked_input", 3: "masked_input", 4: "masked_input", 5: "share_keys"}
    strat = _strategy(nodes, dim)
    result = _start(strat, InProcessGrid(_secagg_app(dim), nodes, drop_at=drops), 1)
    (o,) = strat.rounds
    assert o.aborted and o.mean is None and "abort" in strat.history[-1].note
    assert strat.ledger.epsilon == 0.0 and strat.history[-1].event is None
    # no model came out of the round (Flower's Result holds arrays of aggregated rounds only)
    assert len(result.arrays) == 0 and 1 not in result.train_metrics_clientapp
    strict = _strategy(nodes, dim, on_abort="raise")
    with pytest.raises(SecAggRoundAborted) as err:
        _start(strict, InProcessGrid(_secagg_app(dim), nodes, drop_at=drops), 1)
    assert isinstance(err.value, ProtocolAbort)


@needs_flwr
def test_distributed_mod_never_sends_a_plain_update():
    from privfed.errors import ProtocolError
    from privfed.flwr import distributed_dp_mod

    params = _model()
    dim = sum(v.size for v in params.values())
    with pytest.raises(ProtocolError, match="never sent in the clear"):
        distributed_dp_mod()(_train_message(params), _context(), _trainer(np.ones(dim)))


@needs_flwr
def test_planned_noise_holds_for_the_minimum_and_the_range_for_the_whole_cohort():
    """DistributedDpStrategy.planned: ε(δ) after the rounds is the target with only the minimum
    contributors (to 1e-6: not over-noised), smaller with the whole cohort; the range is sized
    for the whole cohort, so its sum is not flagged as wrapped. The flag's threshold is
    expected + 6·√expected + 6 boundary hits (decoder.rs), a false-positive rate below 1e-8 per
    sum, so 5 clean sums fail this test with probability below 1e-7."""
    from flwr.serverapp.strategy import FedAvg

    from privfed.flwr import DistributedDpStrategy

    dim, cohort, rounds, eps, delta = 7850, 5, 2, 10.0, 1e-5
    strat = DistributedDpStrategy.planned(
        FedAvg(fraction_evaluate=0.0), dim=dim, clip=1.0, bits=16, clients=cohort,
        epsilon=eps, delta=delta, rounds=rounds, dropout_tolerance=0.2)
    plan = strat.plan
    assert plan.clients == 4 and plan.max_contributors == cohort

    def eps_with(m):
        acc = accounting.RdpAccountant()
        acc.compose(_dist.round_event(plan, m), count=rounds)
        return acc.get_epsilon(delta)

    assert eps * (1 - 1e-6) <= eps_with(4) <= eps
    assert eps_with(5) < eps_with(4)
    rseed = _dist.rotation_seed(b"\x01" * 32, 1)
    rng = np.random.default_rng(0)
    for _ in range(5):
        total = _dist.ModularSum(plan.bits, plan.padded_dim)
        for _ in range(cohort):
            x = rng.normal(size=dim)
            total.add(_dist.SkellamEncoder(plan, rseed).encode(x / np.linalg.norm(x)))
        assert not _dist.SkellamDecoder(plan, rseed).decode(total.value, cohort).wrap_suspected


# ============================================================ failing loudly
def _planned(nodes, dim, **kw):
    from flwr.serverapp.strategy import FedAvg

    from privfed.flwr import DistributedDpStrategy

    fedavg = FedAvg(fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=len(nodes),
                    min_available_nodes=len(nodes))
    args = dict(dim=dim, clip=1.0, bits=16, clients=len(nodes), epsilon=4.0, delta=1e-5,
                rounds=1, dropout_tolerance=0.34, stage_timeout=None)
    args.update(kw)
    return DistributedDpStrategy.planned(fedavg, **args)


@needs_flwr
def test_a_plan_for_another_model_size_fails_before_round_1():
    from flwr_harness import InProcessGrid

    nodes = [1, 2, 3, 4]
    dim = _model_dim()
    grid = InProcessGrid(_secagg_app(dim), nodes)
    strat = _strategy(nodes, dim + 1)
    with pytest.raises(ValueError, match=f"plan is for a model of {dim + 1} parameters, the "
                                         f"model has {dim}"):
        _start(strat, grid, 2)
    assert grid.log == [] and strat.rounds == []  # nothing was sent


@needs_flwr
def test_a_clients_error_text_reaches_the_servers_log_and_the_round(caplog):
    """A ClientApp that raises answers with an error reply (as a SuperNode does); the server
    logs the client's text as a WARNING and keeps it in the round's outcome."""
    from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr_harness import InProcessGrid

    from privfed.flwr import distributed_dp_mod

    nodes = [1, 2, 3, 4, 5]
    dim = _model_dim()
    app = ClientApp(mods=[distributed_dp_mod()])

    @app.train()
    def train(msg, context):
        if context.node_id == 3:
            raise RuntimeError("node 3 cannot read its data: /data/shard-3 is missing")
        g = msg.content["arrays"]
        return Message(RecordDict({"arrays": ArrayRecord(
            array_dict={k: Array(a.numpy()) for k, a in g.items()}),
            "metrics": MetricRecord({"num-examples": 1})}), reply_to=msg)

    strat = _strategy(nodes, dim)
    with caplog.at_level("WARNING"):
        _start(strat, InProcessGrid(app, nodes), 1)
    (o,) = strat.rounds
    assert not o.aborted and o.contributors == 4 and 3 not in o.survivor_nodes
    assert "/data/shard-3 is missing" in o.errors[3] and o.errors[3].startswith("masked_input")
    assert any("/data/shard-3 is missing" in r.getMessage() and r.levelname == "WARNING"
               for r in caplog.records)


@needs_flwr
def test_consecutive_aborted_rounds_stop_the_run_with_the_cause():
    from flwr_harness import InProcessGrid

    from privfed.flwr import SecAggRoundAborted

    nodes = [1, 2, 3, 4, 5, 6]
    dim = _model_dim()
    drops = {2: "masked_input", 3: "masked_input", 4: "masked_input", 5: "share_keys"}
    strat = _strategy(nodes, dim)  # max_consecutive_aborts=2 by default
    with pytest.raises(SecAggRoundAborted, match=r"2 rounds in a row aborted .*round 2"):
        _start(strat, InProcessGrid(_secagg_app(dim), nodes, drop_at=drops), 5)
    assert [o.aborted for o in strat.rounds] == [True, True]
    assert strat.ledger.epsilon == 0.0
    # configurable: 3 in a row
    strat3 = _strategy(nodes, dim, max_consecutive_aborts=3)
    with pytest.raises(SecAggRoundAborted, match="3 rounds in a row"):
        _start(strat3, InProcessGrid(_secagg_app(dim), nodes, drop_at=drops), 5)
    assert len(strat3.rounds) == 3
    # a completed round resets the streak: one abort between completed rounds goes on
    ok = _strategy(nodes, dim)
    ok.consecutive_aborts = 1
    _start(ok, InProcessGrid(_secagg_app(dim), nodes), 1)
    assert ok.consecutive_aborts == 0


@needs_flwr
def test_the_planned_epsilon_is_a_budget_by_default():
    """Planned for 1 round: the second round would cross the target ε even if every client
    contributed, so it is refused with PrivacyBudgetExceeded before any message is sent."""
    from flwr_harness import InProcessGrid

    from privfed.errors import PrivacyBudgetExceeded

    nodes = [1, 2, 3, 4, 5, 6]
    dim = _model_dim()
    grid = InProcessGrid(_secagg_app(dim), nodes)
    strat = _planned(nodes, dim)
    assert strat.ledger.budget == pytest.approx(strat.plan.epsilon) == 4.0
    with pytest.raises(PrivacyBudgetExceeded, match="round 2: .* past the budget 4"):
        _start(strat, grid, 2)
    assert len(strat.rounds) == 1 and strat.ledger.epsilon <= 4.0
    assert {stage for _, stage, _ in grid.log} == {"advertise_keys", "share_keys",
                                                     "masked_input", "unmasking"}
    assert len(grid.log) == 4 * len(nodes)  # round 2 sent nothing
    # on_budget="stop": a WARNING, the run ends without round 2
    stop = _planned(nodes, dim, on_budget="stop")
    _start(stop, InProcessGrid(_secagg_app(dim), nodes), 3)
    assert len(stop.rounds) == 1 and stop.stopped
    assert "budget reached" in stop.history[-1].note
    # budget=None: no budget (ε goes past the plan's target)
    free = _planned(nodes, dim, budget=None)
    _start(free, InProcessGrid(_secagg_app(dim), nodes), 2)
    assert len(free.rounds) == 2 and free.ledger.epsilon > 4.0


@needs_flwr
def test_too_few_survivors_for_the_budget_are_refused_before_unmasking():
    """Planned for 6 of 8 contributors; 5 survive the masked-input stage (enough for secure
    aggregation's threshold). Their sum would cross the planned ε: the round aborts before
    any unmasking share is requested, and nothing is accounted."""
    from flwr_harness import InProcessGrid

    nodes = [1, 2, 3, 4, 5, 6, 7, 8]
    dim = _model_dim()
    drops = {6: "masked_input", 7: "masked_input", 8: "masked_input"}
    grid = InProcessGrid(_secagg_app(dim), nodes, drop_at=drops)
    strat = _planned(nodes, dim, dropout_tolerance=0.25)
    assert strat.plan.clients == 6
    _start(strat, grid, 1)
    (o,) = strat.rounds
    assert o.aborted and "before unmasking: 5 survivors" in o.abort_reason, o.abort_reason
    assert strat.ledger.epsilon == 0.0 and strat.history[-1].event is None
    assert "unmasking" not in {stage for _, stage, _ in grid.log}


@needs_flwr
def test_dropout_tolerance_states_the_dropouts_it_covers_and_refuses_none():
    from flwr.serverapp.strategy import FedAvg

    from privfed.flwr import DistributedDpStrategy, dropouts_covered

    assert dropouts_covered(4, 0.25) == 1 and dropouts_covered(5, 0.2) == 1
    assert dropouts_covered(20, 0.2) == 4 and dropouts_covered(4, 0.0) == 0
    assert dropouts_covered(10, 0.3) == 3  # 10·0.3 is 2.9999999999999996 in binary
    with pytest.raises(ValueError, match=r"dropout_tolerance=0.2 of 4 clients covers no "
                                         r"dropout .*≥ 0.25"):
        DistributedDpStrategy.planned(FedAvg(), dim=10, clip=1.0, bits=16, clients=4,
                                      epsilon=10.0, delta=1e-5, rounds=1,
                                      dropout_tolerance=0.2)
    s = DistributedDpStrategy.planned(FedAvg(), dim=10, clip=1.0, bits=16, clients=4,
                                      epsilon=10.0, delta=1e-5, rounds=1,
                                      dropout_tolerance=0.25)
    assert s.plan.clients == 3 and s.plan.max_contributors == 4


@needs_flwr
def test_mods_passed_uncalled_are_named_with_the_fix():
    from flwr.app import Message
    from flwr.clientapp import ClientApp
    from flwr_harness import InProcessGrid

    from privfed.flwr import DistributedDpMod, distributed_dp_mod, privatize_mod

    params = _model()
    dim = sum(v.size for v in params.values())
    msg, ctxt, nxt = _train_message(params), _context(), _trainer(np.ones(dim))
    with pytest.raises(TypeError, match=r"mods=\[distributed_dp_mod\(\)\]"):
        distributed_dp_mod(msg, ctxt, nxt)
    with pytest.raises(TypeError, match=r"mods=\[privatize_mod\(randomizer, clip\)\]"):
        privatize_mod(msg, ctxt, nxt)
    with pytest.raises(TypeError, match=r"DistributedDpMod\(\)"):
        DistributedDpMod(msg, ctxt, nxt)
    # through a ClientApp: the client's reply carries the message to the server
    nodes = [1, 2, 3, 4]
    app = ClientApp(mods=[distributed_dp_mod])

    @app.train()
    def train(m, context):
        return Message(m.content, reply_to=m)

    strat = _strategy(nodes, _model_dim(), max_consecutive_aborts=1)
    with pytest.raises(Exception, match=r"mods=\[distributed_dp_mod\(\)\]"):
        _start(strat, InProcessGrid(app, nodes), 1)


@needs_flwr
def test_local_strategy_budget_raises_before_the_round():
    from flwr.serverapp.strategy import FedAvg

    from privfed.errors import PrivacyBudgetExceeded
    from privfed.flwr import LocalDpStrategy

    params = _model()
    dim = sum(v.size for v in params.values())
    strat = LocalDpStrategy(FedAvg(), epsilon=3.0, delta=1e-6, budget=5.0)
    mod = privatize_mod_for(dim)
    strat.aggregate_train(1, [mod(_train_message(params), _context(), _trainer(np.ones(dim)))])
    assert strat.ledger.epsilon == pytest.approx(3.0)
    with pytest.raises(PrivacyBudgetExceeded, match="past the budget 5"):
        strat.configure_train(2, None, None, None)


def privatize_mod_for(dim):
    from privfed.flwr import privatize_mod

    return privatize_mod(privfed.PrivUnitG(epsilon=3.0, dim=dim, seed=5), clip=1.0)


# ============================================================ the example, end to end
def _run_example(tmp_path, data_dir, *extra):
    """The example on Flower's simulation engine (each run takes 20-60 s here). Once in CI the
    run hung for 15 minutes with no CPU inside Ray's start-up (``ray.init`` →
    ``start_gcs_server`` → ``subprocess.Popen`` waiting on its exec pipe, under
    ``flwr.simulation.run_simulation``), before privfed's code ran on any client. A run that
    does not finish within 3 minutes (about twice the slowest run seen at load 10) is therefore
    started once more, with a warning; a second hang, a failed run or a wrong result fails the
    test."""
    out = tmp_path / "rounds.json"
    cmd = [sys.executable, str(EXAMPLE), "--rounds", "2", "--clients", "10", "--cohort", "5",
           "--data-dir", str(data_dir), "--json", str(out), *extra]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        warnings.warn("the example hung for 180 s (Ray start-up); running it once more")
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout


@pytest.mark.simulation
@needs_simulation
def test_example_local_dp_end_to_end(tmp_path, shared_data):
    res, stdout = _run_example(tmp_path, shared_data, "--privacy", "local",
                               "--local-epsilon", "8")
    rounds = res["rounds"]
    assert [r["round"] for r in rounds] == [0, 1, 2]
    eps_local = privfed.PrivUnitG(epsilon=8.0, dim=7850).epsilon
    acct = accounting.PureCappedRdpAccountant()
    for r in rounds[1:]:
        assert r["contributors"] == 5
        acct.compose(accounting.PureDpEvent(eps_local))
        assert r["epsilon"] == pytest.approx(acct.get_epsilon(1e-5), rel=1e-12)
    assert "ε =" in stdout


@pytest.mark.simulation
@needs_simulation
def test_example_distributed_dp_end_to_end(tmp_path, shared_data):
    """The example with distributed DP at ε = 100 over 2 rounds of 5 clients (at ε = 10 the
    noise on a 5-client mean of 7,850 weights drowns the update: that run tests nothing about
    learning). Each round is accounted with its contributors; every sum is decoded and applied
    (not aborted, no wrap flagged) and the model learns: accuracy after 2 rounds was 0.79-0.82
    in 6 runs (sd 0.011, fresh noise each run; 0.90 without noise), so the 0.5 bar is more than
    25 sd below what the example reaches."""
    res, stdout = _run_example(tmp_path, shared_data, "--privacy", "distributed",
                               "--epsilon", "100")
    rounds = res["rounds"]
    assert [r["round"] for r in rounds] == [0, 1, 2]
    plan = res["plan"]
    acct = accounting.RdpAccountant()
    for r in rounds[1:]:
        assert 1 <= r["contributors"] <= 5
        assert not r["aborted"] and not r["wrap_suspected"]
        acct.compose(_dist.round_event(plan, r["contributors"]))
        assert r["epsilon"] == pytest.approx(acct.get_epsilon(1e-5), rel=1e-12)
    # planned for 4 of the 5 (dropout tolerance 0.2): at most the target ε
    assert rounds[-1]["epsilon"] <= 100.0 * (1 + 1e-9)
    assert rounds[-1]["accuracy"] > 0.5


@pytest.mark.simulation
@needs_simulation
def test_example_central_dp_end_to_end(tmp_path, shared_data):
    """The example's central mode is privfed's CentralDpStrategy: each of the 2 rounds samples
    5 of the 10 virtual clients and is accounted as SampledWithoutReplacementDpEvent(10, 5,
    GaussianDpEvent(z/2)) under replace-one neighbours; ε after each round is
    RdpAccountant(neighboring_relation="replace_one") composed directly, and the noise on the
    mean is z·C/k."""
    z = 1.0
    res, stdout = _run_example(tmp_path, shared_data, "--privacy", "central",
                               "--noise-multiplier", str(z), "--clip", "1.0")
    rounds = res["rounds"]
    assert [r["round"] for r in rounds] == [0, 1, 2]
    acct = accounting.RdpAccountant(neighboring_relation="replace_one")
    for r in rounds[1:]:
        assert r["population"] == 10 and r["sampled"] == 5
        assert r["contributors"] == 5 and r["refused"] == 0 and r["failed"] == 0
        assert r["clipping_norm"] == 1.0 and r["noise_stddev"] == pytest.approx(z / 5)
        acct.compose(accounting.SampledWithoutReplacementDpEvent(
            10, 5, accounting.GaussianDpEvent(z / 2)))
        assert r["epsilon"] == pytest.approx(acct.get_epsilon(1e-5), rel=1e-12)
    assert 0 < rounds[1]["epsilon"] < rounds[2]["epsilon"]
    assert "ε =" in stdout


# ============================================================ the active mode on Flower
def _enrolled_grid(app, nodes, tmp_path, *, authority=None, grid_class=None, **kw):
    """An in-process grid (``grid_class``, default InProcessGrid) whose nodes each keep a device
    key (node config ``privfed-device-key``) and, with ``authority``, trust that enrollment
    authority."""
    from flwr_harness import InProcessGrid

    from privfed import secagg

    grid = (grid_class or InProcessGrid)(app, nodes, **kw)
    tmp_path.mkdir(parents=True, exist_ok=True)
    keys = {}
    for nid in nodes:
        path = tmp_path / f"device-{nid}.key"
        keys[nid] = secagg.DeviceKey.load(path, create=True).verifying_key
        grid.contexts[nid].node_config["privfed-device-key"] = str(path)
        if authority is not None:
            grid.contexts[nid].node_config["privfed-secagg-authority"] = (
                authority.verifying_key.hex())
    return grid, keys


@needs_flwr
@pytest.mark.parametrize("drop", [None, "consistency_check"])
def test_active_secagg_round_with_a_roster_decodes_bit_for_bit(tmp_path, drop):
    """DistributedDpStrategy(threat_model="active", roster=...): five stages over Flower, keys
    signed by enrolled devices, the roster verified by every node against its authority; the
    decoded mean is what privfed.distributed decodes from the same encodings."""
    from privfed import secagg

    nodes = [21, 22, 23, 24, 25, 26]
    dim = _model_dim()
    authority = secagg.DeviceKey.generate()
    grid, keys = _enrolled_grid(_secagg_app(dim), nodes, tmp_path, authority=authority,
                                drop_at={24: drop} if drop else None)
    roster = secagg.Roster.sign(authority, list(keys.values()))
    strat = _strategy(nodes, dim, threat_model="active", roster=roster)
    _start(strat, grid, 1)
    (o,) = strat.rounds
    assert not o.aborted, (o.abort_reason, o.errors)
    assert "consistency_check" in o.stage_seconds
    # a node that vanished after its masked input is still in the sum (U3)
    assert o.contributors == 6
    assert np.array_equal(o.mean, np.asarray(_expected_mean(strat, o)))
    assert {s for (_, s, _) in grid.log} >= {"consistency_check"}


@needs_flwr
def test_the_round_is_sized_for_the_colluding_fraction_the_plan_accounts(tmp_path):
    """DistributedDpStrategy sizes its secure-aggregation round for the γ its accounting
    assumes: on the active complete graph t = ⌊(n + ⌈γn⌉)/2⌋ + 1. A plan without γ keeps the
    round sized for 0.1, as before; a γ the cohort cannot hold is refused (InvalidParameter) when
    the round is configured. Played over Flower with enrolled devices: one of six nodes vanishes
    before the masked input; the active server needs more than t masked inputs, so a round
    sized for γ = 0.2 (t = 5) aborts and one sized for 0.1 (t = 4) finishes with the five
    survivors."""
    from flwr.serverapp.strategy import FedAvg

    from privfed import secagg
    from privfed.errors import InvalidParameter
    from privfed.flwr import DistributedDpStrategy

    nodes = [51, 52, 53, 54, 55, 56]
    dim = _model_dim()
    authority = secagg.DeviceKey.generate()

    def strategy(gamma, roster=None):
        plan = _dist.plan(dim, 1.0, 16, len(nodes), noise_stddev=0.5, colluding_fraction=gamma)
        fedavg = FedAvg(fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=len(nodes),
                        min_available_nodes=len(nodes))
        return DistributedDpStrategy(fedavg, plan=plan, delta=1e-5, stage_timeout=None,
                                     threat_model="active", roster=roster)

    n = len(nodes)
    before = secagg.round_config(n, 16, 8, threat_model="active").threshold
    assert strategy(0.0).round_config(n).threshold == before == (n + 1) // 2 + 1
    # ⌈0.2·6⌉ = 2 colluders: t = ⌊8/2⌋ + 1; ⌈0.4·6⌉ = 3: t = ⌊9/2⌋ + 1
    assert strategy(0.2).round_config(n).threshold == 5
    assert strategy(0.4).round_config(n).threshold == 5
    assert strategy(0.4).round_config(10).threshold == (10 + 4) // 2 + 1
    with pytest.raises(InvalidParameter, match="colluding_fraction"):
        strategy(0.4).round_config(4)  # ⌊(4 + 2)/2⌋ + 1 = 4 > n − 1 = 3
    drops = {52: "masked_input"}
    outcomes = {}
    for gamma in (0.0, 0.2):
        grid, keys = _enrolled_grid(_secagg_app(dim), nodes, tmp_path / str(gamma),
                                    authority=authority, drop_at=drops)
        strat = strategy(gamma, roster=secagg.Roster.sign(authority, list(keys.values())))
        _start(strat, grid, 1)
        (outcomes[gamma],) = strat.rounds
    assert not outcomes[0.0].aborted and outcomes[0.0].contributors == 5, (
        outcomes[0.0].abort_reason, outcomes[0.0].errors)
    assert outcomes[0.2].aborted and outcomes[0.2].mean is None


@needs_flwr
def test_nodes_that_trust_an_authority_refuse_weaker_rounds(tmp_path):
    """A node with an enrollment authority joins only active rounds that name a roster: an
    honest-but-curious round, or an active one without a roster (the server could be every
    other client), is refused at advertise_keys and the round aborts."""
    from privfed import secagg

    nodes = [31, 32, 33, 34]
    dim = _model_dim()
    authority = secagg.DeviceKey.generate()
    for tm, why in (("honest-but-curious", "joins active rounds only"),
                    ("active", "names no roster")):
        grid, _ = _enrolled_grid(_secagg_app(dim), nodes, tmp_path / tm, authority=authority)
        strat = _strategy(nodes, dim, threat_model=tm)
        _start(strat, grid, 1)
        (o,) = strat.rounds
        assert o.aborted and len(o.errors) == 4, o.errors
        assert all(why in e and e.startswith("advertise_keys") for e in o.errors.values())
    # a roster signed by another authority: refused by every node
    grid, keys = _enrolled_grid(_secagg_app(dim), nodes, tmp_path / "other", authority=authority)
    forged = secagg.Roster.sign(secagg.DeviceKey.generate(), list(keys.values()))
    strat = _strategy(nodes, dim, threat_model="active", roster=forged)
    _start(strat, grid, 1)
    (o,) = strat.rounds
    assert o.aborted and all("authority" in e for e in o.errors.values()), o.errors


@needs_flwr
def test_nodes_refuse_an_older_or_expired_roster(tmp_path):
    """A node keeps the newest roster version it accepted from its authority (in its journal):
    once it has taken part with version 2, a server relaying version 1 — which the authority
    signed too, and which may still list a device it since removed — is refused, and so is a
    roster whose ``not_after`` has passed by the node's clock."""
    from privfed import secagg

    nodes = [41, 42, 43, 44, 45, 46]
    dim = _model_dim()
    authority = secagg.DeviceKey.generate()
    grid, keys = _enrolled_grid(_secagg_app(dim), nodes, tmp_path, authority=authority)
    devices = list(keys.values())
    v1 = secagg.Roster.sign(authority, devices, version=1)
    v2 = secagg.Roster.sign(authority, devices, version=2)
    assert (v1.version, v2.version) == (1, 2) and v2.not_after > time.time()
    strat = _strategy(nodes, dim, threat_model="active", roster=v2)
    _start(strat, grid, 1)
    (o,) = strat.rounds
    assert not o.aborted, (o.abort_reason, o.errors)
    for roster, why in ((v1, "older than version 2"),
                        (secagg.Roster.sign(authority, devices, version=3, not_after=1),
                         "expired")):
        strat = _strategy(nodes, dim, threat_model="active", roster=roster)
        _start(strat, grid, 1)
        (o,) = strat.rounds
        assert o.aborted and len(o.errors) == len(nodes), o.errors
        assert all(why in e for e in o.errors.values()), o.errors


# ============================================================ canary audits (AuditStrategy, canary_mod)
class _Clients:
    """A ClientApp (``mods``, then train) whose train returns received + a seeded random update
    of norm ``scale`` per (node, round) over every array; it records who trained when."""

    def __init__(self, mods=(), scale=0.5):
        from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
        from flwr.clientapp import ClientApp

        self.trained = []
        app = ClientApp(mods=list(mods))

        @app.train()
        def train(msg, context):
            rnd = int(msg.content["config"]["server-round"])
            self.trained.append((context.node_id, rnd))
            g = msg.content["arrays"]
            rng = np.random.default_rng([context.node_id, rnd])
            out = {}
            for k, a in g.items():
                v = a.numpy()
                out[k] = (v + scale * rng.normal(size=v.shape) / np.sqrt(v.size)).astype(v.dtype)
            return Message(RecordDict({"arrays": ArrayRecord(array_dict={k: Array(v) for k, v in
                                                                         out.items()}),
                                       "metrics": MetricRecord({"num-examples": 20})}),
                           reply_to=msg)

        self.app = app


def _audit_run(inner_kind, rounds=3, canaries=100, dim=(40, 50), noise=1.0, eps0=0.5,
               mods=None, **kw):
    """Real nodes 1..5 (all sampled every round) and canary node 99, through the in-process
    grid; returns the AuditStrategy, the clients and the accounted ε after the last round.
    ``"local"``: every node runs ``privatize_mod(PrivUnitG(eps0), clip=1)`` then canary_mod
    (``mods`` replaces that list)."""
    from flwr.app import Array, ArrayRecord
    from flwr.serverapp.strategy import FedAvg
    from flwr_harness import InProcessGrid

    from privfed.flwr import (AuditStrategy, CentralDpStrategy, LocalDpStrategy, canary_mod,
                              privatize_mod)

    real = [1, 2, 3, 4, 5]
    fedavg = FedAvg(fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=5,
                    min_available_nodes=5)
    if inner_kind == "central":
        inner = CentralDpStrategy(fedavg, noise_multiplier=noise, clipping_norm=1.0,
                                  population=5, delta=1e-5, seed=77)
        extra = {}
    elif inner_kind == "distributed":
        from privfed.flwr import DistributedDpStrategy, distributed_dp_mod

        d = dim[0] * dim[1] + dim[1]
        # the modular range holds the sum of the 5 clients and every canary
        plan = _dist.plan(d, 1.0, 16, 5 + canaries, noise_stddev=noise)
        inner = DistributedDpStrategy(fedavg, plan=plan, delta=1e-5, stage_timeout=None,
                                      budget=None)
        extra = {"canary_nodes": list(range(200, 200 + canaries))}
        if mods is None:
            mods = [distributed_dp_mod(encoder_seed=lambda ctxt, rnd: ctxt.node_id * 1000 + rnd),
                    canary_mod()]
    elif inner_kind == "local":
        inner = LocalDpStrategy(fedavg, epsilon=eps0, delta=1e-5)
        extra = {"norm": 1.0}
        if mods is None:
            mods = [privatize_mod(lambda d: privfed.PrivUnitG(epsilon=eps0, dim=d, seed=11),
                                  clip=1.0),
                    canary_mod()]
    else:
        inner, extra = fedavg, {"delta": 1e-5}
    extra.update(kw)
    extra.setdefault("canary_nodes", [99])
    strategy = AuditStrategy(inner, canaries, seed=2025, **extra)
    clients = _Clients(mods=[canary_mod()] if mods is None else mods)
    grid = InProcessGrid(clients.app, real + extra["canary_nodes"])
    rng = np.random.default_rng(0)
    model = {"w": rng.normal(size=dim).astype(np.float32), "b": np.zeros(dim[1], np.float32)}
    strategy.start(grid=grid, initial_arrays=ArrayRecord(
        array_dict={k: Array(v) for k, v in model.items()}), num_rounds=rounds)
    return strategy, clients


@needs_flwr
def test_audit_without_privacy_finds_the_canaries(caplog):
    """Power: without privacy, 100 canaries (50 guesses) in a 2,050-parameter model are told
    apart from the model after 3 rounds: the one-run 95% lower bound exceeds 2 (fixed seeds; the
    canaries reach the model as one client each, so a failure means they did not). The canary
    node never trains and never takes a real client's place; one log line per round."""
    import logging

    with caplog.at_level(logging.INFO):
        s, clients = _audit_run("none")
    assert [h["round"] for h in s.history] == [1, 2, 3]
    last = s.history[-1]
    assert last["epsilon_lower_bound"] > 2.0, last
    assert last["epsilon_estimate"] > 2.0 and last["accounted_canary_epsilon"] is None
    assert all(h["canaries_sent"] == sum(s.canary_set.included) for h in s.history)
    # canary node 99 never trained; the five real nodes trained in every round
    assert all(node != 99 for node, _ in clients.trained)
    assert sorted(clients.trained) == [(n, r) for n in range(1, 6) for r in (1, 2, 3)]
    # the summary is `privfed fl train --json`'s `audit`
    a = s.audit
    assert (a["canaries"], a["guesses"], a["confidence"]) == (100, 50, 0.95)
    assert a["epsilon_lower_bound"] == last["epsilon_lower_bound"]
    assert a["included"] == sum(s.canary_set.included)
    lines = [r.getMessage() for r in caplog.records if "privfed audit: round" in r.getMessage()]
    assert len(lines) == 3 and "ε_lb" in lines[-1] and "ε̂" in lines[-1], lines


@needs_flwr
def test_audit_under_central_dp_stays_below_the_accounted_epsilon():
    """Honesty: with CentralDpStrategy (C = 1, z = 2, every client every round) the one-run 95%
    lower bound stays below the canaries' own ε, itself at most the accounted ε (fixed seeds; the
    bound exceeds a true ε with probability at most 5%), and the one-shot estimate (no
    confidence level) below the accounted ε. The canaries did go through the clipped sum: the
    same run at z = 0.01 finds them (lower bound > 2)."""
    s, clients = _audit_run("central", noise=2.0)
    last = s.history[-1]
    eps, canary_eps = last["epsilon"], last["accounted_canary_epsilon"]
    assert eps is not None and canary_eps is not None and canary_eps <= eps
    assert last["epsilon_lower_bound"] < canary_eps, last
    assert last["epsilon_estimate"] < eps, last
    assert last["norm"] == 1.0  # the clipping norm: the largest contribution a client makes
    # canaries are not contributors: the central strategy counted the five real clients
    assert [r.contributors for r in s.inner.rounds] == [5, 5, 5]
    loud, _ = _audit_run("central", noise=0.01)
    assert loud.history[-1]["epsilon_lower_bound"] > 2.0, loud.history[-1]


@needs_flwr
def test_audit_clips_canaries_like_clients():
    """A canary sent at norm 50 under C = 1 is projected to C before the sum: the audit at
    z = 0.01 sees the same canaries as with norm = C, and the model moves by at most what C
    allows (the mean's norm is at most (5 + K_in)·C/5 plus the noise)."""
    s, _ = _audit_run("central", noise=0.01, rounds=1, norm=50.0)
    k_in = sum(s.canary_set.included)
    r = s.inner.rounds[0]
    assert np.linalg.norm(r.mean) <= (5 + k_in) * 1.0 / 5 + 0.01 * 1.0 / 5 * 6 * np.sqrt(r.mean.size)


@needs_flwr
def test_audit_under_local_dp_privatizes_canaries_and_stays_below_the_accounted_epsilon(caplog):
    """Local DP (PrivUnitG at ε₀ = 0.5 per report, clip 1, every client every round): the canary
    node's canaries go through its privatize_mod like a client's update, are checked and
    averaged by LocalDpStrategy without being counted as contributors, and each round reports
    the one-run lower bound and the one-shot estimate beside the accounted ε (3 rounds: at most
    1.5). Honesty: the 95% lower bound stays below the accounted ε, which the canaries' own
    guarantee equals here (a canary is in every round, as every client is; fixed seeds: the
    bound exceeds a true ε with probability at most 5%). The check has teeth: raw canaries reach
    a bound above 2 at these sizes (test_audit_without_privacy_finds_the_canaries), above the
    accounted 1.5."""
    import logging

    with caplog.at_level(logging.INFO):
        s, clients = _audit_run("local", eps0=0.5)
    k_in = sum(s.canary_set.included)
    assert [h["round"] for h in s.history] == [1, 2, 3]
    for h, rec in zip(s.history, s.inner.history):
        assert h["canaries_sent"] == k_in  # every canary was privatized and accepted
        assert h["epsilon"] == rec.epsilon and rec.contributors == 5
        assert "epsilon_lower_bound" in h and "epsilon_estimate" in h
    last = s.history[-1]
    assert 0 < last["epsilon"] <= 1.5 + 1e-9
    assert last["epsilon_lower_bound"] < last["epsilon"], last
    assert last["norm"] == 1.0 and last["accounted_canary_epsilon"] is None
    assert all(node != 99 for node, _ in clients.trained)
    lines = [r.getMessage() for r in caplog.records if "privfed audit: round" in r.getMessage()]
    assert len(lines) == 3 and "ε_lb" in lines[-1] and "accounted ε" in lines[-1], lines


@needs_flwr
def test_a_canary_under_local_dp_is_a_privatized_report():
    """On a canary node (privatize_mod, then canary_mod) a canary message is answered without
    training by received + the randomizer's report of the clipped canary update, with the
    "privfed" record of that randomizer — not by received + the raw update; canary_mod placed
    first would send the raw update, which AuditStrategy leaves out with a WARNING."""
    from flwr.app import ConfigRecord

    from privfed.flwr import canary_mod, privatize_mod
    from privfed.flwr.audit import CANARY_RECORD

    model = _model()
    dim = sum(v.size for v in model.values())
    called = []

    def trainer(msg, ctxt):
        called.append(1)
        return _trainer(np.zeros(dim))(msg, ctxt)

    priv = privatize_mod(privfed.PrivUnitG(epsilon=1.0, dim=dim, seed=5), clip=1.0)
    canary = canary_mod()
    upd = np.zeros(dim)
    upd[3] = 5.0  # norm 5: clipped to the clip norm 1 before the randomizer
    msg = _train_message(model)
    msg.content[CANARY_RECORD] = ConfigRecord(
        {"index": 3, "arrays": ["w", "b"], "weight": 7.0, "update": [float(x) for x in upd]})
    out = priv(msg, _context(), lambda m, c: canary(m, c, trainer))
    assert not called
    rec = out.content.config_records["privfed"]
    assert rec["mechanism"] == "privunitg" and rec["epsilon"] == pytest.approx(1.0)
    assert out.content[CANARY_RECORD]["index"] == 3
    sent = _flat(out.content["arrays"]) - _flat(msg.content["arrays"])
    # a PrivUnitG report of a unit vector in 28 dimensions at ε = 1 is far longer than 1 and
    # not along e_3 alone
    assert np.linalg.norm(sent) > 2.0 and not np.allclose(sent, upd, atol=0.1)
    raw = canary(msg, _context(), trainer)
    assert "privfed" not in raw.content.config_records
    # the wrong order through the strategy: canaries come back raw and are left out
    s, _ = _audit_run("local", rounds=1, mods=[canary_mod(), privatize_mod(
        lambda d: privfed.PrivUnitG(epsilon=0.5, dim=d, seed=12), clip=1.0)])
    assert s.history[0]["canaries_sent"] == 0


@needs_flwr
def test_audit_under_distributed_dp_sums_canaries_securely_and_stays_below_the_accounted_epsilon():
    """Distributed DP (Skellam, clip 1, local noise σ = 2 per client, every client every round):
    each included canary joins the secure-aggregation round from a canary node of its own
    (distributed_dp_mod, then canary_mod): its update is encoded, noised and masked like a
    client's and reaches the model only through the unmasked sum. The canaries are in the sum
    and not contributors (the accounting counts the 5 clients' noise alone); each round reports
    the one-run lower bound and the one-shot estimate beside the accounted ε, and the 95% lower
    bound stays below it (fixed seeds; the bound exceeds a true ε with probability at most 5%).
    The canaries do reach the model: with almost no noise (σ = 10⁻³) the same run finds them
    (lower bound > 2)."""
    s, clients = _audit_run("distributed", noise=2.0)
    k_in = sum(s.canary_set.included)
    assert [h["round"] for h in s.history] == [1, 2, 3]
    for h, o in zip(s.history, s.inner.rounds):
        assert not o.aborted
        assert h["canaries_sent"] == k_in and len(o.canary_survivors) == k_in
        assert o.contributors == 5 and o.honest_contributors == 5
        assert len(o.survivors) == 5 + k_in
        assert h["epsilon"] == o.epsilon
        assert "epsilon_lower_bound" in h and "epsilon_estimate" in h
    last = s.history[-1]
    assert last["norm"] == 1.0  # the plan's clip: the largest contribution a client makes
    assert last["epsilon_lower_bound"] < last["epsilon"], last
    # the canary nodes never trained (canary_mod answered inside the secure round)
    assert all(node < 200 for node, _ in clients.trained)
    loud, _ = _audit_run("distributed", noise=1e-3)
    assert loud.history[-1]["epsilon_lower_bound"] > 2.0, loud.history[-1]


@needs_flwr
def test_audit_refuses_bad_configurations():
    from flwr.serverapp.strategy import FedAvg

    from privfed import errors
    from privfed.flwr import AuditStrategy, CentralDpStrategy, LocalDpStrategy

    fedavg = FedAvg(fraction_evaluate=0.0)
    for bad in (0, 1, 2.5, True):
        with pytest.raises(errors.ConfigError, match="canaries"):
            AuditStrategy(fedavg, bad, delta=1e-5)
    with pytest.raises(errors.ConfigError, match="guesses"):
        AuditStrategy(fedavg, 10, delta=1e-5, guesses=3)
    with pytest.raises(errors.ConfigError, match="delta"):
        AuditStrategy(fedavg, 10)
    with pytest.raises(errors.ConfigError, match="norm"):
        AuditStrategy(fedavg, 10, delta=1e-5, norm=-1.0)
    with pytest.raises(errors.ConfigError, match="canary_nodes"):
        AuditStrategy(fedavg, 10, delta=1e-5, canary_nodes=[])
    with pytest.raises(errors.ConfigError, match="norm="):
        AuditStrategy(LocalDpStrategy(fedavg, epsilon=4.0, delta=1e-5), 10)
    AuditStrategy(LocalDpStrategy(fedavg, epsilon=4.0, delta=1e-5), 10, norm=1.0)
    with pytest.raises(errors.ConfigError, match="canary_nodes="):
        AuditStrategy(_strategy([1, 2, 3], 28), 10)
    # under distributed DP each included canary needs its own node: refused in round 1
    with pytest.raises(errors.ConfigError, match="a node of its own"):
        _audit_run("distributed", rounds=1, canaries=20, canary_nodes=[99])
    adaptive = CentralDpStrategy(fedavg, 1.0, 1.0, population=5, delta=1e-5, adaptive=True)
    with pytest.raises(errors.ConfigError, match="adaptive"):
        AuditStrategy(adaptive, 10)
    # canaries ≥ the model's parameters: refused in the first round, before anything is sent
    with pytest.raises(errors.ConfigError, match="fewer canaries than parameters"):
        _audit_run("none", canaries=30, dim=(3, 5))


@needs_flwr
def test_canary_mod_answers_canary_messages_only():
    """A TRAIN message with the canary record is answered with received + update without
    training; any other message trains; a malformed record is refused."""
    from flwr.app import ConfigRecord

    from privfed import errors
    from privfed.flwr import canary_mod
    from privfed.flwr.audit import CANARY_RECORD

    model = _model()
    called = []

    def trainer(msg, ctxt):
        called.append(1)
        return _trainer(np.zeros(28))(msg, ctxt)

    mod = canary_mod()
    upd = np.arange(24, dtype=np.float64) / 100
    msg = _train_message(model)
    msg.content[CANARY_RECORD] = ConfigRecord(
        {"index": 3, "arrays": ["w"], "weight": 7.0, "update": [float(x) for x in upd]})
    out = mod(msg, None, trainer)
    assert not called
    np.testing.assert_allclose(out.content["arrays"]["w"].numpy(),
                               (model["w"].astype(np.float64) + upd.reshape(6, 4)).astype(np.float32))
    np.testing.assert_array_equal(out.content["arrays"]["b"].numpy(), model["b"])
    assert out.content[CANARY_RECORD]["index"] == 3
    assert out.content.metric_records["metrics"]["num-examples"] == 7.0
    mod(_train_message(model), None, trainer)
    assert called == [1]
    bad = _train_message(model)
    bad.content[CANARY_RECORD] = ConfigRecord({"index": 3, "arrays": ["w"], "weight": 1.0,
                                               "update": [0.0] * 5})
    with pytest.raises(errors.ProtocolError):
        mod(bad, None, trainer)
    with pytest.raises(TypeError, match="canary_mod()"):
        canary_mod(msg, None, trainer)


@needs_flwr
def test_the_clients_policy_refuses_unsafe_rounds_and_the_refusal_sticks():
    """A node's own floors (node config) on the cohort and the noise, and its cap on the clip,
    refuse a round that falls short; each is an abort at advertise_keys that leaves no running
    round (no seed) behind. At the boundary the same round runs. (A plan without noise, which
    the default plan policy refuses, cannot be made by the strategy at all.)"""
    from flwr_harness import InProcessGrid

    from privfed.flwr import DistributedDpStrategy
    from flwr.serverapp.strategy import FedAvg

    nodes = [41, 42, 43, 44]
    dim = _model_dim()

    def strategy(noise):
        plan = _dist.plan(dim, 1.0, 16, len(nodes), noise_stddev=noise)
        fedavg = FedAvg(fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=4,
                        min_available_nodes=4)
        return DistributedDpStrategy(fedavg, plan=plan, delta=1e-5, stage_timeout=None)

    cases = [
        (0.5, {"privfed-min-local-noise-stddev": 0.6}, "min_local_noise_stddev"),
        (0.5, {"privfed-min-clients": 5}, "min_clients: n = 4"),
        (0.5, {"privfed-max-clip": 0.5}, "max_clip: clip = 1"),
    ]
    for noise, conf, rule in cases:
        grid = InProcessGrid(_secagg_app(dim), nodes)
        for nid in nodes:
            grid.contexts[nid].node_config.update(conf)
        strat = strategy(noise)
        _start(strat, grid, 1)
        (o,) = strat.rounds
        assert o.aborted and len(o.errors) == 4, (rule, o.errors)
        assert all(rule in e and e.startswith("advertise_keys") for e in o.errors.values()), (
            o.errors)
        for nid in nodes:
            st = grid.contexts[nid].state.config_records.get("privfed-secagg-state")
            assert st is None or st.get("status") != "running"
    # at every boundary: the round runs
    grid = InProcessGrid(_secagg_app(dim), nodes)
    for nid in nodes:
        grid.contexts[nid].node_config.update({
            "privfed-min-clients": 4, "privfed-min-local-noise-stddev": 0.5,
            "privfed-max-clip": 1.0})
    strat = strategy(0.5)
    _start(strat, grid, 1)
    (o,) = strat.rounds
    assert not o.aborted and o.contributors == 4, (o.abort_reason, o.errors)
