"""privfed.flwr's central DP (CentralDpStrategy, central_dp_mod) and the array selection every
mod shares (include/exclude, non-float arrays skipped, run-config keys, unknown records).

Rounds run with real Flower objects: Flower's FedAvg samples the cohort, messages go through
Flower's serialisation to a real ClientApp (flwr_harness.InProcessGrid). Statistical checks
state their false-positive rate; every seed is fixed (``seed=`` of the strategy is for
experiments only). Without Flower they skip, or fail under CI (conftest's `requires` marker).
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest

from privfed import accounting
from stats import assert_mean, normal_two_sided_critical

pytestmark = [pytest.mark.requires("flwr", install='pip install "privfed[flwr]"'),
              pytest.mark.usefixtures("flower_task_identity")]


# ============================================================ helpers
def _record(arrays):
    from flwr.app import Array, ArrayRecord

    return ArrayRecord(array_dict={k: Array(np.asarray(v)) for k, v in arrays.items()})


def _float_model(shape=(6, 4), seed=1):
    rng = np.random.default_rng(seed)
    return {"w": rng.normal(size=shape).astype(np.float32),
            "b": rng.normal(size=shape[-1]).astype(np.float32)}


def _bn_model(seed=1):
    """A model with PyTorch-style BatchNorm buffers: running stats (float) and the int64
    ``num_batches_tracked``."""
    rng = np.random.default_rng(seed)
    return {"w": rng.normal(size=(5, 3)).astype(np.float32),
            "bn.running_mean": np.zeros(3, np.float32),
            "bn.running_var": np.ones(3, np.float32),
            "bn.num_batches_tracked": np.array(7, dtype=np.int64)}


def _float_names(arrays):
    return [k for k, v in arrays.items()
            if np.issubdtype(np.asarray(v.numpy()).dtype, np.floating)]


def _flat(record, names=None):
    names = list(record.keys()) if names is None else names
    return np.concatenate([np.asarray(record[k].numpy(), np.float64).ravel() for k in names])


def _unit(rng, dim):
    v = rng.normal(size=dim)
    return v / np.linalg.norm(v)


class Updates:
    """A ClientApp whose train returns received + update(node, round) on the float arrays and
    increments integer arrays by 3 (as a training loop increments num_batches_tracked); the
    realized float64 updates (after the float32 round trip) are kept in ``self.seen``."""

    def __init__(self, update, mods=(), metrics=None):
        from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
        from flwr.clientapp import ClientApp

        self.seen = {}
        app = ClientApp(mods=list(mods))

        @app.train()
        def train(msg, context):
            rnd = int(msg.content["config"]["server-round"])
            g = msg.content["arrays"]
            names = _float_names(g)
            dim = sum(g[k].numpy().size for k in names)
            u = np.asarray(update(context.node_id, rnd, dim), np.float64)
            at, out = 0, {}
            for k, a in g.items():
                v = a.numpy()
                if k in names:
                    step = u[at:at + v.size].reshape(v.shape)
                    out[k] = (v.astype(np.float64) + step).astype(v.dtype)
                    at += v.size
                else:
                    out[k] = np.asarray(v + 3)
            new = ArrayRecord(array_dict={k: Array(v) for k, v in out.items()})
            self.seen[(context.node_id, rnd)] = _flat(new, names) - _flat(g, names)
            met = {"num-examples": 10 + context.node_id}
            met.update(metrics or {})
            return Message(RecordDict({"arrays": new, "metrics": MetricRecord(met)}),
                           reply_to=msg)

        self.app = app


def _fedavg(nodes, cohort=None):
    from flwr.serverapp.strategy import FedAvg

    cohort = len(nodes) if cohort is None else cohort
    return FedAvg(fraction_train=cohort / len(nodes), fraction_evaluate=0.0,
                  min_train_nodes=cohort, min_available_nodes=len(nodes))


def _central(nodes, cohort=None, **kw):
    from privfed.flwr import CentralDpStrategy

    args = dict(noise_multiplier=1.0, clipping_norm=1.0, population=len(nodes), delta=1e-5,
                seed=12345)
    args.update(kw)
    return CentralDpStrategy(_fedavg(nodes, cohort), **args)


def _run(strategy, app, nodes, rounds, model):
    from flwr_harness import InProcessGrid

    grid = InProcessGrid(app, nodes)
    result = strategy.start(grid=grid, initial_arrays=_record(model), num_rounds=rounds)
    return grid, result


def _project(u, c):
    n = np.linalg.norm(u)
    return u * min(1.0, c / n) if n > 0 else u


# ============================================================ clipping
@pytest.mark.parametrize("clipping", ["server", "client"])
def test_fixed_clipping_bounds_each_update_before_the_noise(clipping):
    """Updates of norm 0.3 to 12 clipped at C = 1: with negligible noise (z = 1e-9: σ on the
    mean 2.5e-10) the released mean is the mean of the clipped updates — so its norm is at most
    C — and the model FedAvg returns is global + that mean."""
    from privfed.flwr import central_dp_mod

    nodes = [3, 5, 8, 13]
    norms = {3: 0.3, 5: 2.0, 8: 12.0, 13: 0.99}

    def update(nid, rnd, dim):
        return _unit(np.random.default_rng(nid * 100 + rnd), dim) * norms[nid]

    mods = [central_dp_mod()] if clipping == "client" else []
    app = Updates(update, mods)
    strat = _central(nodes, noise_multiplier=1e-9, clipping_norm=1.0, clipping=clipping)
    model = _float_model()
    _, result = _run(strat, app.app, nodes, 2, model)
    g = _flat(_record(model))
    for rnd in strat.rounds:
        raw = [app.seen[(n, rnd.server_round)] for n in nodes]
        if clipping == "client":  # what the server received: the client's clip, float32
            expected = np.mean([_project(u, 1.0) for u in raw], axis=0)
            tol = 1e-6
        else:
            expected = np.mean([_project(u, 1.0) for u in raw], axis=0)
            tol = 1e-8  # 40 σ of the negligible noise
        assert np.linalg.norm(rnd.mean) <= 1.0 + 1e-6
        assert np.abs(rnd.mean - expected).max() <= tol, np.abs(rnd.mean - expected).max()
        assert np.linalg.norm(np.mean(raw, axis=0)) > 1.5  # unclipped, the mean would be far
        assert rnd.contributors == 4 and rnd.refused == 0
        if rnd.server_round == 1:
            after1 = (g + rnd.mean).astype(np.float32).astype(np.float64)
    # the inner FedAvg applied the mean (its weighted average of identical arrays)
    final = _flat(result.arrays)
    want = (after1 + strat.rounds[1].mean).astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(final, want, rtol=0, atol=1e-6)


def test_the_server_projects_what_a_client_claims_to_have_clipped():
    """clipping="client": a client that sends an unclipped update with a well-formed record
    still enters the sum projected onto the C-ball (the sensitivity is the server's)."""
    from flwr.app import ConfigRecord

    nodes = [1, 2, 3]

    def update(nid, rnd, dim):
        return np.full(dim, 5.0)  # norm 5·√28 ≫ C

    def liar(msg, ctxt, call_next):  # a mod that claims a clip it did not do
        out = call_next(msg, ctxt)
        out.content["privfed-central"] = ConfigRecord(
            {"clip": float(msg.content["privfed-central"]["clip"]), "unclipped": 1,
             "arrays": ["w", "b"]})
        return out

    app = Updates(update, [liar])
    strat = _central(nodes, noise_multiplier=1e-9, clipping_norm=0.5, clipping="client")
    _run(strat, app.app, nodes, 1, _float_model())
    (rnd,) = strat.rounds
    assert rnd.contributors == 3
    assert np.linalg.norm(rnd.mean) == pytest.approx(0.5, rel=1e-6)


# ============================================================ noise
@pytest.mark.parametrize("adaptive", [False, True])
def test_noise_standard_deviation_is_z_c_over_k(adaptive):
    """Zero updates: the released mean is the noise alone. Over 4 rounds × 5,100 coordinates
    (n = 20,400 draws) the sample variance is tested against σ² = (z_Δ·C/k)² with the normal
    approximation of (n−1)S²/σ² ~ χ²(n−1) (relative sd √(2/n) = 1%), and the mean against 0;
    each test fails a correct implementation with probability 1e-6. A σ off by 6% fails."""
    from privfed.flwr import adjusted_noise_multiplier

    nodes = [1, 2, 3, 4, 5, 6, 7, 8]
    z, c, k = 1.3, 0.5, 8
    app = Updates(lambda nid, rnd, dim: np.zeros(dim))
    kw = dict(adaptive=True, clipped_count_stddev=2.0) if adaptive else {}
    strat = _central(nodes, noise_multiplier=z, clipping_norm=c, seed=2024, **kw)
    _run(strat, app.app, nodes, 4, _float_model(shape=(101, 50)))
    # Andrew et al.'s z_Δ, written out here (not the library's function)
    z_delta = (z ** -2 - (2 * 2.0) ** -2) ** -0.5 if adaptive else z
    assert z_delta == pytest.approx(adjusted_noise_multiplier(z, 2.0) if adaptive else z)
    if adaptive:
        assert z_delta > z
    draws = np.concatenate([r.mean for r in strat.rounds])
    cs = [r.clipping_norm for r in strat.rounds]
    # adaptive: C moves between rounds; standardize each round by its own σ
    sig = np.concatenate([np.full(r.mean.size, z_delta * r.clipping_norm / k)
                          for r in strat.rounds])
    assert all(r.noise_stddev == pytest.approx(z_delta * r.clipping_norm / k)
               for r in strat.rounds)
    if not adaptive:
        assert cs == [c] * 4
    x = draws / sig
    n = x.size
    assert n == 4 * 5100
    s2 = float(np.var(x, ddof=1))
    zscore = (s2 - 1.0) / math.sqrt(2.0 / (n - 1))
    crit = normal_two_sided_critical(1e-6)
    assert abs(zscore) <= crit, f"variance ratio {s2:.4f}, z = {zscore:.2f}"
    assert_mean(x, 0.0, 1e-6, "noise mean")


# ============================================================ accounting and budget
def test_epsilon_per_round_is_the_accountants_for_the_same_event():
    """A cohort of 4 of 10 (FedAvg samples); each round's ε is what privfed's replace-one RDP
    accountant says for SampledWithoutReplacementDpEvent(10, 4, GaussianDpEvent(z/2)) composed
    that many times; sampling amplifies (ε below the cohort-of-10 value); adaptive clipping
    costs the same per round as fixed clipping."""
    nodes = list(range(1, 11))
    z, delta = 1.1, 1e-6
    app = Updates(lambda nid, rnd, dim: np.full(dim, 0.01))
    fixed = _central(nodes, cohort=4, noise_multiplier=z, delta=delta)
    _run(fixed, app.app, nodes, 3, _float_model())
    adaptive = _central(nodes, cohort=4, noise_multiplier=z, delta=delta, adaptive=True,
                        clipped_count_stddev=1.0)
    _run(adaptive, app.app, nodes, 3, _float_model())
    event = accounting.SampledWithoutReplacementDpEvent(10, 4, accounting.GaussianDpEvent(z / 2))
    acct = accounting.RdpAccountant(neighboring_relation="replace_one")
    for r in range(3):
        acct.compose(event)
        want = acct.get_epsilon(delta)
        assert fixed.history[r].epsilon == pytest.approx(want, rel=1e-12)
        assert adaptive.history[r].epsilon == pytest.approx(want, rel=1e-12)
        assert fixed.rounds[r].sampled == 4 and fixed.rounds[r].population == 10
    assert fixed.history[-1].event == event
    full = accounting.RdpAccountant(neighboring_relation="replace_one").compose(
        accounting.SampledWithoutReplacementDpEvent(10, 10, accounting.GaussianDpEvent(z / 2)),
        count=3).get_epsilon(delta)
    assert fixed.ledger.epsilon < full


def test_budget_stops_before_the_round_that_would_exceed_it():
    from privfed.errors import PrivacyBudgetExceeded

    nodes = [1, 2, 3, 4, 5]
    z, delta = 2.0, 1e-5
    event = accounting.SampledWithoutReplacementDpEvent(5, 5, accounting.GaussianDpEvent(z / 2))

    def eps(r):
        return accounting.RdpAccountant(neighboring_relation="replace_one").compose(
            event, count=r).get_epsilon(delta)

    budget = (eps(2) + eps(3)) / 2  # two rounds fit, the third would not
    app = Updates(lambda nid, rnd, dim: np.full(dim, 0.01))
    strat = _central(nodes, noise_multiplier=z, delta=delta, budget=budget)
    with pytest.raises(PrivacyBudgetExceeded,
                       match=r"round 3: .* would take ε from [0-9.]+ to [0-9.]+ at δ = 1e-05, "
                             r"past the budget"):
        grid, _ = _run(strat, app.app, nodes, 5, _float_model())
    assert len(strat.rounds) == 2 and strat.ledger.epsilon <= budget
    assert strat.ledger.epsilon == pytest.approx(eps(2), rel=1e-12)
    # on_budget="stop": round 3 is not started, nothing sent after round 2
    from flwr_harness import InProcessGrid

    stop = _central(nodes, noise_multiplier=z, delta=delta, budget=budget, on_budget="stop")
    grid = InProcessGrid(app.app, nodes)
    stop.start(grid=grid, initial_arrays=_record(_float_model()), num_rounds=5)
    assert stop.stopped and len(stop.rounds) == 2
    assert len(grid.log) == 2 * len(nodes)
    assert "budget reached" in stop.history[-1].note


def test_population_is_required_and_checked():
    from privfed.flwr import CentralDpStrategy

    nodes = [1, 2, 3, 4]
    with pytest.raises(TypeError, match="population"):
        CentralDpStrategy(_fedavg(nodes), 1.0, 1.0, delta=1e-5)
    with pytest.raises(ValueError, match="population"):
        CentralDpStrategy(_fedavg(nodes), 1.0, 1.0, population=0, delta=1e-5)
    # a population smaller than the cohort is refused before anything is sent
    app = Updates(lambda nid, rnd, dim: np.zeros(dim))
    small = _central(nodes, population=3)
    with pytest.raises(ValueError, match="more than the population 3"):
        _run(small, app.app, nodes, 1, _float_model())
    # fewer nodes connected than the declared population: accounted with the connected ones
    big = _central(nodes, cohort=2, population=100)
    _run(big, app.app, nodes, 1, _float_model())
    assert big.rounds[0].population == 4
    assert big.history[0].event == accounting.SampledWithoutReplacementDpEvent(
        4, 2, accounting.GaussianDpEvent(0.5))
    # an accountant that cannot compose the event is refused up front
    with pytest.raises(ValueError, match="replace_one"):
        _central(nodes, accountant=accounting.RdpAccountant())


# ============================================================ adaptive clipping
def test_adaptive_clipping_update_rule_and_its_noisy_count():
    """One round: the server's count of unclipped updates is the true one, the released
    fraction is (count + N(0, σ_b²))/k, and C moves by exp(−η(b̄ − γ))."""
    nodes = list(range(1, 11))
    norms = {n: 0.2 * n for n in nodes}  # 0.2 … 2.0; at C = 1: 5 unclipped

    def update(nid, rnd, dim):
        return _unit(np.random.default_rng(nid), dim) * norms[nid]

    app = Updates(update)
    strat = _central(nodes, clipping_norm=1.0, adaptive=True, target_clipped_quantile=0.8,
                     clip_norm_lr=0.3, clipped_count_stddev=0.9, noise_multiplier=1.0)
    _run(strat, app.app, nodes, 2, _float_model())
    r1, r2 = strat.rounds
    assert r1.unclipped == 5
    assert r1.next_clipping_norm == pytest.approx(
        1.0 * math.exp(-0.3 * (r1.unclipped_fraction - 0.8)), rel=1e-15)
    assert r2.clipping_norm == r1.next_clipping_norm
    assert r1.noise_multiplier == pytest.approx((1.0 - (2 * 0.9) ** -2) ** -0.5)
    # σ_b > z/2 is required (else the count alone costs more than z)
    with pytest.raises(ValueError, match="σ_b > z/2"):
        _central(nodes, adaptive=True, clipped_count_stddev=0.5, noise_multiplier=1.0)


def test_the_noisy_count_has_standard_deviation_sigma_b():
    """(k·b̄ − count)/σ_b over 300 rounds (4 clients, one-coordinate model) is N(0, 1): its
    mean and variance each fail a correct implementation with probability 1e-6 (variance by
    the normal approximation of χ²(299): sd √(2/299) = 8%; σ_b off by 30% fails)."""
    nodes = [1, 2, 3, 4]
    app = Updates(lambda nid, rnd, dim: np.full(dim, 0.1 * nid))
    sb = 0.8
    strat = _central(nodes, adaptive=True, clipped_count_stddev=sb, noise_multiplier=0.5,
                     clipping_norm=0.25, clip_norm_lr=1e-9, seed=77)
    _run(strat, app.app, nodes, 300, {"w": np.zeros(1, np.float32)})
    x = np.array([(r.unclipped_fraction * 4 - r.unclipped) / sb for r in strat.rounds])
    assert all(r.unclipped == 2 for r in strat.rounds)  # norms 0.1, 0.2 ≤ 0.25 < 0.3, 0.4
    crit = normal_two_sided_critical(1e-6)
    s2 = float(np.var(x, ddof=1))
    assert abs((s2 - 1) / math.sqrt(2 / (x.size - 1))) <= crit, s2
    assert_mean(x, 0.0, 1e-6, "count noise mean")


@pytest.mark.parametrize("start", [0.05, 20.0])
def test_adaptive_clipping_moves_c_to_the_target_quantile(start):
    """20 clients with update norms log-spaced over [0.1, 10] (median 1); γ = 0.5, η = 0.5,
    σ_b = k/20 = 1. From C = 0.05 or 20 the geometric update brings C within the clients'
    30%–70% norm quantiles after 40 rounds. (With fresh noise: the stationary sd of ln C is
    about 0.06 against a band of ±0.4 around the median, so a correct implementation fails
    with probability far below 1e-6; a sign error or a missing exp sends C away.)"""
    nodes = list(range(1, 21))
    norms = {n: 0.1 * 100 ** ((n - 1) / 19) for n in nodes}

    def update(nid, rnd, dim):
        return _unit(np.random.default_rng(1000 * nid + rnd), dim) * norms[nid]

    app = Updates(update)
    strat = _central(nodes, clipping_norm=start, adaptive=True, target_clipped_quantile=0.5,
                     clip_norm_lr=0.5, noise_multiplier=1.0, seed=99)
    _run(strat, app.app, nodes, 40, _float_model())
    lo, hi = np.quantile(list(norms.values()), [0.3, 0.7])
    final = strat.clipping_norm
    assert lo <= final <= hi, (final, lo, hi, [round(r.clipping_norm, 3) for r in strat.rounds])
    frac = np.mean([norms[n] <= final for n in nodes])
    assert 0.3 <= frac <= 0.7
    assert strat.rounds[0].clipping_norm == start


# ============================================================ selection: include/exclude, int64
def _train_message(arrays, records=None):
    from flwr.app import ConfigRecord, Message, MessageType, RecordDict

    content = RecordDict({"arrays": _record(arrays), "config": ConfigRecord({"server-round": 1})})
    for name, rec in (records or {}).items():
        content[name] = ConfigRecord(rec)
    msg = Message(content=content, dst_node_id=7, message_type=MessageType.TRAIN)
    msg.metadata.__dict__["_message_id"] = "m1"
    return msg


def _context(run_config=None):
    from flwr.app import Context, RecordDict

    return Context(run_id=1, node_id=7, node_config={"partition-id": 0}, state=RecordDict(),
                   run_config=dict(run_config or {}))


def _trainer(step=0.5):
    """call_next: float arrays + step, int arrays + 3 (num_batches_tracked counts batches)."""
    from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict

    def call_next(msg, ctxt):
        out = {}
        for k, a in msg.content["arrays"].items():
            v = a.numpy()
            out[k] = Array((v + np.asarray(step, v.dtype)) if np.issubdtype(v.dtype, np.floating)
                           else np.asarray(v + 3))
        return Message(RecordDict({"arrays": ArrayRecord(array_dict=out),
                                   "metrics": MetricRecord({"num-examples": 10})}), reply_to=msg)

    return call_next


def _mods():
    """Each client mod with what it needs to handle a plain TRAIN message."""
    import privfed
    from privfed.flwr import central_dp_mod, privatize_mod

    return {
        "privatize_mod": (lambda **kw: privatize_mod(
            lambda d: privfed.Gaussian(4.0, 1e-5, d, radius=1.0, seed=3), clip=1.0, **kw), {}),
        "central_dp_mod": (lambda **kw: central_dp_mod(**kw), {"privfed-central": {"clip": 1.0}}),
    }


@pytest.mark.parametrize("which", ["privatize_mod", "central_dp_mod"])
def test_mods_skip_int64_buffers_and_name_them(which, caplog):
    make, records = _mods()[which]
    model = _bn_model()
    mod = make()
    with caplog.at_level(logging.INFO, logger="privfed.flwr"):
        out = mod(_train_message(model, records), _context(), _trainer())
    arrays = out.content["arrays"]
    nbt = arrays["bn.num_batches_tracked"].numpy()
    assert nbt.dtype == np.int64
    # privatize_mod sends it back as received; central_dp_mod as trained (7 + 3)
    assert int(nbt) == (7 if which == "privatize_mod" else 10)
    lines = [r.getMessage() for r in caplog.records if "not privatized" in r.getMessage()]
    assert any("bn.num_batches_tracked (int64, not floating point)" in ln and which in ln
               for ln in lines), lines
    # the float arrays did change (privatized or clipped)
    assert not np.array_equal(arrays["w"].numpy(), model["w"] + np.float32(0.5)) or \
        which == "central_dp_mod"
    assert not np.array_equal(arrays["w"].numpy(), model["w"])


@pytest.mark.parametrize("which", ["privatize_mod", "central_dp_mod"])
def test_mods_take_include_exclude_from_arguments_and_the_run_config(which, caplog):
    make, records = _mods()[which]
    model = _bn_model()
    trained = {k: (v + np.asarray(0.5, v.dtype)) if v.dtype.kind == "f" else v + 3
               for k, v in model.items()}
    kept = model if which == "privatize_mod" else trained  # what a skipped array becomes

    def run(mod, rc=None):
        with caplog.at_level(logging.INFO, logger="privfed.flwr"):
            return mod(_train_message(model, records), _context(rc), _trainer())

    # exclude="bn.*": only w is privatized/clipped; the BN running stats are skipped
    out = run(make(exclude="bn.*")).content["arrays"]
    for k in ("bn.running_mean", "bn.running_var"):
        assert np.array_equal(out[k].numpy(), kept[k]), k
    assert not np.array_equal(out["w"].numpy(), trained["w"])
    # the run config replaces the arguments, read on each call
    mod = make()
    out = run(mod, {"privfed-include": "bn.running_*"}).content["arrays"]
    assert np.array_equal(out["w"].numpy(), kept["w"])
    assert not np.array_equal(out["bn.running_var"].numpy(), trained["bn.running_var"])
    out = run(mod, {}).content["arrays"]  # next call, no key: every float array again
    assert not np.array_equal(out["w"].numpy(), trained["w"])
    assert not np.array_equal(out["w"].numpy(), model["w"])
    # an include pattern that matches nothing, or a selection that leaves nothing: refused
    with pytest.raises(ValueError, match="matches no array"):
        run(mod, {"privfed-include": "weights"})
    with pytest.raises(ValueError, match="no array of the model is left"):
        run(mod, {"privfed-exclude": "*"})
    if which == "central_dp_mod":
        rec = run(make(exclude="bn.*")).content.config_records["privfed-central"]
        assert list(rec["arrays"]) == ["w"]


@pytest.mark.parametrize("which", ["privatize_mod", "central_dp_mod"])
def test_mods_refuse_unknown_run_config_keys_and_records(which):
    from privfed.errors import ConfigError, ProtocolError

    make, records = _mods()[which]
    model = _bn_model()
    mod = make()
    with pytest.raises(ConfigError, match=r"unknown run-config key\(s\) \['privfed-exlude'\]"):
        mod(_train_message(model, records), _context({"privfed-exlude": "bn.*"}), _trainer())
    with pytest.raises(ConfigError, match="must be a string"):
        mod(_train_message(model, records), _context({"privfed-include": 3}), _trainer())
    other = dict(records, **{"privfed-secagg": {"stage": "advertise_keys"}})
    with pytest.raises(ProtocolError, match="'privfed-secagg' this mod does not handle"):
        mod(_train_message(model, other), _context(), _trainer())
    if which == "central_dp_mod":
        with pytest.raises(ProtocolError, match=r"unknown key\(s\) \['noise'\]"):
            mod(_train_message(model, {"privfed-central": {"clip": 1.0, "noise": 2.0}}),
                _context(), _trainer())
        with pytest.raises(ProtocolError, match="without the server's clipping norm"):
            mod(_train_message(model), _context(), _trainer())
    # keys outside privfed's namespace are the app's own: ignored
    mod(_train_message(model, records), _context({"lr": 0.1, "privacy": "central"}), _trainer())


def test_strategy_skips_int64_arrays_and_excluded_ones(caplog):
    """Server side: int64 arrays and excluded arrays are not clipped or noised (FedAvg
    aggregates them as sent, an INFO line names them); the float arrays get the noisy mean."""
    nodes = [1, 2, 3]
    app = Updates(lambda nid, rnd, dim: np.full(dim, 0.01 * nid))
    strat = _central(nodes, exclude="bn.running_var", noise_multiplier=1e-9)
    with caplog.at_level(logging.INFO, logger="privfed.flwr"):
        _, result = _run(strat, app.app, nodes, 2, _bn_model())
    # FedAvg averages the int64 counter to float64; the strategy keeps the model's dtype, so
    # round 2 skips it again instead of taking it for a float parameter
    assert [r.names for r in strat.rounds] == [["w", "bn.running_mean"]] * 2
    out = result.arrays
    nbt = np.asarray(out["bn.num_batches_tracked"].numpy())
    assert nbt.dtype == np.int64 and int(nbt) == 13  # 7 + 3 + 3 (each client adds 3)
    # excluded: FedAvg's weighted average of what the clients sent (weights 11, 12, 13)
    w = np.array([11, 12, 13], float)
    step = np.average([0.01 * n for n in nodes], weights=w)
    np.testing.assert_allclose(out["bn.running_var"].numpy(), np.full(3, 1 + 2 * step),
                               rtol=1e-6)
    # selected: global + the unweighted mean of the (unclipped, small) updates, twice
    np.testing.assert_allclose(out["w"].numpy(), _bn_model()["w"] + 2 * 0.02, atol=1e-6)
    msgs = [r.getMessage() for r in caplog.records if "not privatized" in r.getMessage()]
    assert any("CentralDpStrategy" in m and "bn.num_batches_tracked (int64" in m and
               "bn.running_var (excluded)" in m for m in msgs), msgs


def test_client_mode_refuses_replies_clipped_differently(caplog):
    """clipping="client": a reply without the mod's record, or clipped over other arrays than
    the server selects, is left out (a WARNING names why) and counts as a zero update."""
    from privfed.flwr import central_dp_mod

    nodes = [1, 2, 3, 4]

    class Selective:
        def __init__(self):
            self.inner = central_dp_mod()

        def __call__(self, msg, ctxt, call_next):
            if ctxt.node_id == 1:  # no mod at all
                return call_next(msg, ctxt)
            if ctxt.node_id == 2:  # another selection
                ctxt.run_config["privfed-exclude"] = "b"
            return self.inner(msg, ctxt, call_next)

    app = Updates(lambda nid, rnd, dim: np.full(dim, 0.01), [Selective()])
    strat = _central(nodes, clipping="client", noise_multiplier=1e-9)
    with caplog.at_level(logging.WARNING):
        _run(strat, app.app, nodes, 1, _float_model())
    (rnd,) = strat.rounds
    assert rnd.contributors == 2 and rnd.refused == 2
    np.testing.assert_allclose(rnd.mean, np.full(28, 0.01) * 2 / 4, atol=1e-7)
    text = " ".join(r.getMessage() for r in caplog.records)
    assert "no 'privfed-central' record" in text and "clipped the arrays ['w']" in text


def test_an_erroring_mod_reaches_the_server_as_a_failed_reply(caplog):
    """A mod that refuses (here: a misspelt run-config key) answers with an error reply; the
    server logs its text and leaves the client out."""
    from privfed.flwr import central_dp_mod

    nodes = [1, 2, 3]

    class Typo:
        def __init__(self):
            self.inner = central_dp_mod()

        def __call__(self, msg, ctxt, call_next):
            if ctxt.node_id == 3:
                ctxt.run_config["privfed-includes"] = "w"
            return self.inner(msg, ctxt, call_next)

    app = Updates(lambda nid, rnd, dim: np.full(dim, 0.01), [Typo()])
    strat = _central(nodes, clipping="client", noise_multiplier=1e-9)
    with caplog.at_level(logging.WARNING):
        _run(strat, app.app, nodes, 1, _float_model())
    (rnd,) = strat.rounds
    assert rnd.failed == 1 and rnd.contributors == 2
    assert any("privfed-includes" in r.getMessage() for r in caplog.records)


def test_mod_passed_uncalled_names_the_fix():
    from privfed.flwr import central_dp_mod

    msg = _train_message(_float_model(), {"privfed-central": {"clip": 1.0}})
    with pytest.raises(TypeError, match=r"mods=\[central_dp_mod\(\)\]"):
        central_dp_mod(msg, _context(), _trainer())


# ============================================================ distributed_dp_mod: the same rules
def test_distributed_dp_skips_int64_arrays_end_to_end(caplog):
    """distributed_dp_mod and DistributedDpStrategy privatize the float arrays only: the plan
    is for their length, num_batches_tracked is never sent and keeps its global value, an INFO
    line names it on both sides."""
    from privfed import distributed as dist
    from privfed.flwr import DistributedDpStrategy, distributed_dp_mod

    nodes = [1, 2, 3, 4]
    model = _bn_model()
    dim = sum(np.asarray(v).size for k, v in model.items() if np.asarray(v).dtype.kind == "f")
    assert dim == 21
    app = Updates(lambda nid, rnd, d: np.full(d, 0.01),
                  [distributed_dp_mod(encoder_seed=lambda c, r: c.node_id)])
    plan = dist.plan(dim, 1.0, 16, len(nodes), noise_stddev=0.01)
    strat = DistributedDpStrategy(_fedavg(nodes), plan=plan, delta=1e-5, stage_timeout=None)
    with caplog.at_level(logging.INFO, logger="privfed.flwr"):
        _, result = _run(strat, app.app, nodes, 2, model)
    assert len(strat.rounds) == 2
    for o in strat.rounds:  # round 2 too: the counter is still int64 (kept through FedAvg)
        assert not o.aborted and o.contributors == 4
        assert o.names == ["w", "bn.running_mean", "bn.running_var"]
    nbt = np.asarray(result.arrays["bn.num_batches_tracked"].numpy())
    assert nbt.dtype == np.int64 and int(nbt) == 7
    np.testing.assert_allclose(result.arrays["w"].numpy(), model["w"] + 0.02, atol=0.02)
    msgs = [r.getMessage() for r in caplog.records if "not privatized" in r.getMessage()]
    for who in ("distributed_dp_mod", "DistributedDpStrategy"):
        assert any(who in m and "bn.num_batches_tracked (int64" in m for m in msgs), (who, msgs)
    # a plan for the whole model (int array counted) is refused before round 1
    wrong = DistributedDpStrategy(_fedavg(nodes), plan=dist.plan(dim + 1, 1.0, 16, 4,
                                                                 noise_stddev=0.01),
                                  delta=1e-5, stage_timeout=None)
    with pytest.raises(ValueError, match=r"has 21 .*not privatized: \['bn.num_batches_tracked'\]"):
        _run(wrong, app.app, nodes, 1, model)


def test_distributed_mod_refuses_unknown_keys_records_and_selections():
    from privfed.errors import ConfigError, ProtocolError
    from privfed.flwr import distributed_dp_mod

    mod = distributed_dp_mod()
    model = _bn_model()
    adv = {"privfed-secagg": {"stage": "advertise_keys"}}
    with pytest.raises(ConfigError, match="privfed-exclud"):
        mod(_train_message(model, adv), _context({"privfed-exclud": "w"}), _trainer())
    with pytest.raises(ProtocolError, match=r"unknown key\(s\) \['epsilon'\]"):
        mod(_train_message(model, {"privfed-secagg": {"stage": "advertise_keys",
                                                      "epsilon": 1.0}}), _context(), _trainer())
    with pytest.raises(ProtocolError, match="'privfed-central' this mod does not handle"):
        mod(_train_message(model, dict(adv, **{"privfed-central": {"clip": 1.0}})), _context(),
            _trainer())


def test_local_dp_keeps_int64_counters_across_rounds(caplog):
    """privatize_mod sends num_batches_tracked back as received; FedAvg would average it to
    float64, LocalDpStrategy keeps it int64, so round 2 skips it again (no float noise on a
    counter)."""
    import privfed
    from privfed.flwr import LocalDpStrategy, privatize_mod

    nodes = [1, 2, 3]
    mod = privatize_mod(lambda d: privfed.PrivUnitG(epsilon=4.0, dim=d), clip=0.1)
    app = Updates(lambda nid, rnd, d: np.full(d, 0.01), [mod])
    strat = LocalDpStrategy(_fedavg(nodes), epsilon=mod.randomizer(21).epsilon, delta=1e-5)
    with caplog.at_level(logging.INFO, logger="privfed.flwr"):
        _, result = _run(strat, app.app, nodes, 2, _bn_model())
    nbt = np.asarray(result.arrays["bn.num_batches_tracked"].numpy())
    assert nbt.dtype == np.int64 and int(nbt) == 7
    assert [h.contributors for h in strat.history] == [3, 3]
