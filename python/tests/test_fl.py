"""privfed.fl: the FL simulator (train, Trainer) and its models (Model) through the bindings —
against the Rust CLI, against their own accounting, checkpoints resumed bit for bit, errors."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from privfed import accounting, errors, fl

# Paper 000's synthetic logistic problem: drawn from the seed, no files needed.
CONFIG = {
    "rounds": 4,
    "seed": 3,
    "data": {
        "dataset": "synthetic_logistic",
        "dim": 10,
        "examples": 400,
        "signal": 3.0,
        "clients": 40,
        "test_examples": 300,
        "population_samples": 1000,
    },
    "model": {"kind": "softmax", "features": 10, "classes": 2},
    "sampling": {"kind": "poisson", "rate": 0.5},
    "local": {"epochs": 1, "batch_size": 5, "learning_rate": 0.2},
    "privacy": {"mechanism": "central_gaussian", "clip": 1.0, "noise_multiplier": 0.8},
    "server": {"kind": "sgd", "learning_rate": 1.0, "momentum": 0.5},
    "accounting": {"delta": 1e-5, "accountant": "rdp"},
}

TOML = """
rounds = 4
seed = 3

[data]
dataset = "synthetic_logistic"
dim = 10
examples = 400
signal = 3.0
clients = 40
test_examples = 300
population_samples = 1000

[model]
kind = "softmax"
features = 10
classes = 2

[sampling]
kind = "poisson"
rate = 0.5

[local]
epochs = 1
batch_size = 5
learning_rate = 0.2

[privacy]
mechanism = "central_gaussian"
clip = 1.0
noise_multiplier = 0.8

[server]
kind = "sgd"
learning_rate = 1.0
momentum = 0.5

[accounting]
delta = 1e-5
accountant = "rdp"
"""


def with_(config, **changes):
    c = copy.deepcopy(config)
    for path, value in changes.items():
        d = c
        keys = path.split("__")
        for k in keys[:-1]:
            d = d[k]
        if value is None:
            d.pop(keys[-1], None)
        else:
            d[keys[-1]] = value
    return c


def test_train_matches_the_cli(tmp_path, cli):
    """A run through Python and through `privfed fl train --json` ends with the same model
    (SHA-256 of the parameters), the same ε and the same report keys."""
    path = tmp_path / "run.toml"
    path.write_text(TOML)
    py = fl.train(path, threads=1, progress=False)
    rust = cli("fl", "train", "--config", str(path), "--json", "--quiet", "--threads", "1")
    assert set(py) == set(rust)
    assert py["model_sha256"] == rust["model_sha256"]
    assert py["final_epsilon"] == rust["final_epsilon"]
    assert py["final_accuracy"] == rust["final_accuracy"]
    assert [r["epsilon"] for r in py["rounds"]] == [r["epsilon"] for r in rust["rounds"]]


def test_canary_audit_matches_the_cli(tmp_path, cli):
    """`audit = {"canaries": K}`: the report from `fl.train` and the `Trainer`'s summary carry
    `audit` (`epsilon_lower_bound`, `epsilon_estimate`) at the top and in every round, equal to
    `privfed fl train --json`'s; without it there is no `audit` key."""
    config = with_(CONFIG, audit={"canaries": 20})
    py = fl.train(config, threads=1, progress=False)
    a = py["audit"]
    assert (a["canaries"], a["guesses"], a["confidence"], a["norm"]) == (20, 10, 0.95, 1.0)
    assert a["epsilon_lower_bound"] >= 0.0 and a["epsilon_estimate"] >= 0.0
    assert a["accounted_canary_epsilon"] > 0.0
    assert len(py["rounds"]) == 4
    for r in py["rounds"]:
        assert {"epsilon_lower_bound", "epsilon_estimate"} <= set(r["audit"])
    assert py["rounds"][-1]["audit"]["epsilon_estimate"] == a["epsilon_estimate"]
    path = tmp_path / "audit.toml"
    path.write_text(TOML + "\n[audit]\ncanaries = 20\n")
    rust = cli("fl", "train", "--config", str(path), "--json", "--quiet", "--threads", "1")
    assert rust["audit"] == a
    assert [r["audit"] for r in rust["rounds"]] == [r["audit"] for r in py["rounds"]]
    t = fl.Trainer(config, threads=1)
    while t.step() is not None:
        pass
    assert t.summary()["audit"] == a
    assert "audit" not in fl.train(CONFIG, threads=1, progress=False)


def test_config_forms_agree_and_epsilon_is_reported():
    by_dict = fl.train(CONFIG, threads=1, progress=False)
    by_text = fl.train(TOML, threads=2, progress=False)  # the thread count changes nothing
    assert by_dict["model_sha256"] == by_text["model_sha256"]
    assert by_dict["rounds_completed"] == 4 and len(by_dict["rounds"]) == 4
    eps = [r["epsilon"] for r in by_dict["rounds"]]
    assert all(e > 0 for e in eps) and eps == sorted(eps)
    assert by_dict["final_epsilon"] == eps[-1]
    assert by_dict["noise_multiplier"] == 0.8 and by_dict["delta"] == 1e-5
    assert by_dict["threads"] == 1 and by_dict["seconds"] > 0
    assert 0.5 < by_dict["final_accuracy"] <= 1.0


def test_trainer_steps_events_and_epsilon():
    t = fl.Trainer(CONFIG, threads=1)
    assert (t.round, t.rounds, t.finished, t.clients) == (0, 4, False, 40)
    assert t.epsilon == 0.0
    p0 = t.params
    assert p0.dtype == np.float32 and p0.shape == (22,)
    records = []
    while (r := t.step()) is not None:
        records.append(r)
    assert [r["round"] for r in records] == [1, 2, 3, 4] and t.finished
    assert t.step() is None
    assert not np.array_equal(t.params, p0)
    # ε after each round is the accountant's answer for exactly the events emitted.
    events = t.events
    one = accounting.SelfComposedDpEvent(
        accounting.PoissonSampledDpEvent(0.5, accounting.GaussianDpEvent(0.8)), 1
    )
    assert events == [one] * 4
    acc = accounting.RdpAccountant()
    for e, r in zip(events, records):
        acc.compose(e)
        assert acc.get_epsilon(1e-5) == pytest.approx(r["epsilon"], rel=1e-12)
    assert t.history == records
    s = t.summary()
    assert s["final_epsilon"] == records[-1]["epsilon"] and s["rounds_completed"] == 4
    assert t.config["seed"] == s["seed"]


def test_checkpoint_and_resume_give_the_same_params_bit_for_bit(tmp_path):
    whole = fl.Trainer(CONFIG, threads=1)
    whole.run()
    first = fl.Trainer(CONFIG, threads=2)
    first.step()
    first.step()
    ckpt = tmp_path / "ckpt.bin"
    first.save_checkpoint(ckpt)
    # Resumed from the file, with a config that leaves the seed out (the checkpoint's is used).
    resumed = fl.Trainer.resume(ckpt, with_(CONFIG, seed=None), threads=1)
    assert resumed.round == 2 and resumed.history == first.history
    summary = resumed.run()
    assert summary["rounds_completed"] == 4
    assert resumed.params.tobytes() == whole.params.tobytes()
    assert summary["model_sha256"] == whole.summary()["model_sha256"]
    assert summary["final_epsilon"] == whole.summary()["final_epsilon"]
    # ... and from the bytes.
    again = fl.Trainer.resume(first.checkpoint(), CONFIG)
    again.run()
    assert again.params.tobytes() == whole.params.tobytes()
    # A checkpoint of another config is refused.
    with pytest.raises(errors.ConfigError, match="different config"):
        fl.Trainer.resume(ckpt, with_(CONFIG, local__learning_rate=0.3))
    with pytest.raises(errors.ConfigError, match="not a privfed"):
        fl.Trainer.resume(b"garbage", CONFIG)


def test_train_resumes_from_its_out_dir(tmp_path):
    whole = fl.train(CONFIG, threads=1, progress=False)
    out = tmp_path / "run"
    part = fl.train(CONFIG, out_dir=out, max_rounds=2, progress=False)
    assert part["rounds_completed"] == 2 and part["out"] == str(out)
    for name in ("metrics.csv", "summary.json", "checkpoint.bin", "run.svg", "run.png"):
        assert (out / name).is_file(), name
    rest = fl.train(CONFIG, out_dir=out, progress=False)
    assert rest["rounds_completed"] == 4
    assert rest["model_sha256"] == whole["model_sha256"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model_sha256"] == whole["model_sha256"]
    assert len((out / "metrics.csv").read_text().strip().splitlines()) == 5
    fresh = fl.train(CONFIG, out_dir=out, fresh=True, max_rounds=1, progress=False)
    assert fresh["rounds_completed"] == 1


def test_ctrl_c_stops_a_run_that_resumes_from_its_checkpoint(tmp_path):
    """Ctrl-C (here `_thread.interrupt_main`) reaches a training run between rounds: it raises
    KeyboardInterrupt with the last round's checkpoint on disk, and the run resumed from it goes
    on exactly as an uninterrupted one."""
    import _thread
    import signal
    import threading

    # A process started in the background by a non-interactive shell (as CI may start it)
    # inherits SIGINT ignored, and then interrupt_main does nothing: install Python's handler
    # for the test. The run is finite, so a lost interrupt fails the test instead of hanging.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    cfg = with_(CONFIG, rounds=20_000)
    ckpt = tmp_path / "ckpt.bin"
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            fl.train(cfg, checkpoint=ckpt, threads=1, progress=False)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    resumed = fl.Trainer.resume(ckpt, cfg, threads=1)
    r = resumed.round
    assert r >= 1
    resumed.run(rounds=2)
    whole = fl.Trainer(cfg, threads=1)
    whole.run(rounds=r + 2)
    assert resumed.params.tobytes() == whole.params.tobytes()


def test_progress_lines_go_to_stderr(capfd):
    fl.train(with_(CONFIG, rounds=2), threads=1, progress=True)
    err = capfd.readouterr().err
    assert "round 1/2" in err and "round 2/2" in err and "ε" in err


def test_budget_stop():
    # z = 2, q = 1/2: ε(1e-5) after rounds 1..5 is 1.52, 2.06, 2.47, 2.81, 3.12 (RDP).
    cfg = with_(CONFIG, accounting__budget=3.0, privacy__noise_multiplier=2.0, rounds=50)
    t = fl.Trainer(cfg, threads=1)
    ran = 0
    with pytest.raises(errors.PrivacyBudgetExceeded, match="budget"):
        while t.step() is not None:
            ran += 1
    assert ran == 4 and t.finished
    s = t.summary()
    assert s["stopped"]["round"] == 5 and 2.8 < s["final_epsilon"] <= 3.0
    assert t.step() is None  # stopped: nothing more to run
    report = fl.train(cfg, threads=1, progress=False)
    assert report["stopped"] is not None and report["rounds_completed"] == ran
    assert report["final_epsilon"] == s["final_epsilon"]


def test_divergence_stops_training():
    # Finite as a config, infinite as the f32 step each client takes: round 1 diverges.
    cfg = with_(CONFIG, local__learning_rate=1e39)
    t = fl.Trainer(cfg, threads=1)
    with pytest.raises(errors.TrainingDiverged, match="not finite"):
        t.step()
    assert isinstance(errors.TrainingDiverged("x"), ArithmeticError)
    s = t.summary()
    assert s["stopped"]["kind"] == "diverged" and s["stopped"]["round"] == 1
    assert s["rounds_completed"] == 0 and s["final_epsilon"] == 0.0
    assert t.step() is None
    report = fl.train(cfg, threads=1, progress=False)
    assert report["stopped"]["kind"] == "diverged"


def test_config_errors():
    with pytest.raises(errors.ConfigError, match="unknown field `epochz`"):
        fl.train(with_(CONFIG, local__epochz=1), progress=False)
    with pytest.raises(errors.ConfigError, match="data"):
        fl.Trainer(with_(CONFIG, data=None))
    with pytest.raises(errors.ConfigError, match="features"):
        fl.Trainer(with_(CONFIG, model__features=11))
    with pytest.raises(errors.ConfigError, match="rate"):
        fl.Trainer(with_(CONFIG, sampling__rate=1.5))
    with pytest.raises(errors.ConfigError, match="TOML|expected"):
        fl.train("rounds = = 3", progress=False)
    with pytest.raises(errors.ConfigError, match="nonexistent.toml"):
        fl.train("nonexistent.toml", progress=False)
    mnist = with_(CONFIG, data={"dataset": "mnist", "clients": 10})
    with pytest.raises(errors.ConfigError, match="loading the data"):
        fl.Trainer(mnist, data_dir="/nonexistent/dir")
    with pytest.raises(errors.InvalidParameter, match="threads"):
        fl.Trainer(CONFIG, threads=0)
    with pytest.raises(errors.InvalidParameter, match="config"):
        fl.train(42, progress=False)


# --- Model ------------------------------------------------------------------------------


def numeric_grad(model, params, x, y, h=1e-2):
    """Central finite differences of the mean loss (float64 accumulation over float32)."""
    g = np.zeros_like(params, dtype=np.float64)
    for i in range(len(params)):
        up, down = params.copy(), params.copy()
        up[i] += h
        down[i] -= h
        g[i] = (model.loss_grad(up, x, y)[0] - model.loss_grad(down, x, y)[0]) / (2 * h)
    return g


def test_model_softmax_against_numpy():
    m = fl.Model({"kind": "softmax", "features": 4, "classes": 3})
    assert m.num_params == 15 and m.spec["kind"] == "softmax"
    p0 = m.init(seed=1)
    assert p0.dtype == np.float32 and p0.shape == (15,)
    rng = np.random.default_rng(0)
    p = rng.normal(size=15).astype(np.float32)
    x = rng.normal(size=(8, 4)).astype(np.float32)
    y = rng.integers(0, 3, size=8)
    loss, grad = m.loss_grad(p, x, y)
    assert grad.dtype == np.float32 and grad.shape == (15,)
    assert np.allclose(grad, numeric_grad(m, p, x, y), atol=2e-3)
    loss_sum, correct, count = m.evaluate(p, x, y)
    assert count == 8 and 0 <= correct <= 8
    assert loss == pytest.approx(loss_sum / count, rel=1e-5)
    # The mean cross-entropy, computed here for both layouts of (W, b): one of them is privfed's.
    def xent(w, b):
        z = x.astype(np.float64) @ w.T + b
        z -= z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        return -logp[np.arange(8), y].mean(), int((z.argmax(axis=1) == y).sum())
    pd = p.astype(np.float64)
    candidates = [xent(pd[:12].reshape(3, 4), pd[12:]), xent(pd[3:].reshape(3, 4), pd[:3])]
    assert any(abs(c[0] - loss) < 1e-5 and c[1] == correct for c in candidates)
    assert m.evaluate(p, x.astype(np.float64), y.astype(np.uint8))[2] == 8


def test_model_init_is_seeded():
    m = fl.Model({"kind": "mlp", "features": 5, "hidden": [8], "classes": 3})
    assert m.num_params == 5 * 8 + 8 + 8 * 3 + 3
    a = m.init(seed=1)
    assert np.array_equal(a, m.init(seed=1)) and not np.array_equal(a, m.init(seed=2))
    assert not np.array_equal(a, m.init()) and np.any(a != 0)


def test_model_mlp_and_cnn_gradients():
    rng = np.random.default_rng(1)
    mlp = fl.Model({"kind": "mlp", "features": 3, "hidden": [4], "classes": 2})
    p = mlp.init(seed=3)
    x = rng.normal(size=(5, 3)).astype(np.float32)
    y = rng.integers(0, 2, size=5)
    assert np.allclose(mlp.loss_grad(p, x, y)[1], numeric_grad(mlp, p, x, y), atol=3e-3)
    cnn = fl.Model({
        "kind": "cnn", "input": [1, 6, 6],
        "conv": [{"channels": 2, "kernel": 3, "padding": 1}], "hidden": [], "classes": 2,
    })
    pc = cnn.init(seed=4)
    xi = rng.normal(size=(3, 1, 6, 6)).astype(np.float32)  # images: (n, c, h, w)
    yi = rng.integers(0, 2, size=3)
    loss, grad = cnn.loss_grad(pc, xi, yi)
    assert np.isfinite(loss) and grad.shape == (cnn.num_params,)
    assert cnn.loss_grad(pc, xi.reshape(3, 36), yi)[0] == loss


def test_model_local_sgd():
    m = fl.Model({"kind": "softmax", "features": 4, "classes": 3})
    p = m.init(seed=1)
    rng = np.random.default_rng(2)
    x = rng.normal(size=(12, 4)).astype(np.float32)
    y = rng.integers(0, 3, size=12)
    # One epoch in one full batch: one gradient step.
    _, grad = m.loss_grad(p, x, y)
    new, loss = m.local_sgd(p, x, y, epochs=1, batch_size=12, learning_rate=0.5, seed=0,
                            return_loss=True)
    assert new.dtype == np.float32
    assert np.allclose(new, p - 0.5 * grad, atol=1e-6)
    assert loss == pytest.approx(m.loss_grad(p, x, y)[0], rel=1e-5)
    # Minibatches: the order comes from the seed; training lowers the loss.
    a = m.local_sgd(p, x, y, epochs=20, batch_size=3, learning_rate=0.2, seed=7)
    b = m.local_sgd(p, x, y, epochs=20, batch_size=3, learning_rate=0.2, seed=7)
    assert np.array_equal(a, b)
    assert m.loss_grad(a, x, y)[0] < m.loss_grad(p, x, y)[0]
    # The proximal term pulls towards the starting point; a zero step cap changes nothing.
    prox = m.local_sgd(p, x, y, epochs=20, batch_size=3, learning_rate=0.2, seed=7,
                       proximal=5.0)
    assert np.linalg.norm(prox - p) < np.linalg.norm(a - p)
    same = m.local_sgd(p, x, y, max_steps=0, seed=1)
    assert np.array_equal(same, p)


def test_model_char_gru_tokens():
    m = fl.Model({"kind": "char_gru", "vocab": 5, "embed": 3, "hidden": 4})
    p = m.init(seed=2)
    rng = np.random.default_rng(3)
    x = rng.integers(0, 5, size=(2, 6))
    y = rng.integers(0, 5, size=(2, 6))
    loss, grad = m.loss_grad(p, x, y)
    assert np.isfinite(loss) and grad.shape == p.shape
    assert m.evaluate(p, x, y)[2] == 12
    new = m.local_sgd(p, x, y, epochs=3, batch_size=1, learning_rate=0.5, seed=1)
    assert m.loss_grad(new, x, y)[0] < loss
    with pytest.raises(errors.InvalidInput, match="shape"):
        m.loss_grad(p, x, y[:, :5])
    with pytest.raises(errors.InvalidInput):
        m.loss_grad(p, x + 5, y)  # tokens outside the vocabulary


def test_model_errors():
    with pytest.raises(errors.ConfigError):
        fl.Model({"kind": "transformer"})
    with pytest.raises(errors.ConfigError):
        fl.Model({"kind": "softmax", "features": 0, "classes": 2})
    m = fl.Model({"kind": "softmax", "features": 4, "classes": 3})
    p = m.init(seed=1)
    x = np.zeros((2, 4), dtype=np.float32)
    with pytest.raises(errors.InvalidInput, match="params"):
        m.loss_grad(p[:-1], x, [0, 1])
    with pytest.raises(errors.InvalidInput, match="label|target"):
        m.loss_grad(p, x, [0, 3])
    with pytest.raises(errors.InvalidInput, match="outside"):
        m.loss_grad(p, x, [0, -1])
    with pytest.raises(errors.InvalidDtype):
        m.loss_grad(p, x, np.array([0.0, 1.0]))
    with pytest.raises(errors.InvalidInput, match="one label per row"):
        m.loss_grad(p, x, [0, 1, 2])
    with pytest.raises(errors.InvalidInput, match="features"):
        m.loss_grad(p, np.zeros((2, 5)), [0, 1])
    with pytest.raises(errors.InvalidParameter, match="batch_size"):
        m.local_sgd(p, x, [0, 1], batch_size=0)
    with pytest.raises(errors.InvalidParameter, match="learning_rate"):
        m.local_sgd(p, x, [0, 1], learning_rate=-1.0)
    with pytest.raises(errors.InvalidInput, match="no rows"):
        m.local_sgd(p, np.zeros((0, 4)), np.zeros(0, dtype=np.int64))


# --- real data -----------------------------------------------------------------------------


MNIST_BASE = {
    "rounds": 3,
    "seed": 11,
    "data": {"dataset": "mnist", "clients": 100,
             "subsample": {"clients": 10, "test_fraction": 0.02}},
    "model": {"kind": "softmax", "features": 784, "classes": 10},
    "sampling": {"kind": "poisson", "rate": 1.0},
    "local": {"epochs": 1, "batch_size": 20, "learning_rate": 0.1},
}


def test_tiny_mnist_run(shared_data):
    """Subsampled MNIST (10 clients of 600 digits, 2% of the test set): softmax regression
    learns (test accuracy above 0.8 after 3 rounds without privacy; chance is 0.1); a private
    run (central Gaussian calibrated to ε = 8) reports ε within its target."""
    plain = fl.train(MNIST_BASE, data_dir=shared_data, progress=False)
    assert plain["final_accuracy"] > 0.8
    assert plain["final_epsilon"] is None
    assert plain["data"].startswith("mnist") and plain["clients"] == 10
    private = with_(
        MNIST_BASE, privacy={"mechanism": "central_gaussian", "clip": 1.0, "epsilon": 8.0}
    )
    report = fl.train(private, data_dir=shared_data, progress=False)
    assert 0 < report["final_epsilon"] <= 8.0
    assert report["noise_multiplier"] > 0


def test_tiny_mnist_run_matches_the_cli(shared_data, cli, tmp_path):
    path = tmp_path / "mnist.toml"
    path.write_text(
        'rounds = 3\nseed = 11\n[data]\ndataset = "mnist"\nclients = 100\n'
        "subsample = { clients = 10, test_fraction = 0.02 }\n"
        '[model]\nkind = "softmax"\nfeatures = 784\nclasses = 10\n'
        '[sampling]\nkind = "poisson"\nrate = 1.0\n'
        "[local]\nepochs = 1\nbatch_size = 20\nlearning_rate = 0.1\n"
    )
    py = fl.train(path, data_dir=shared_data, progress=False)
    rust = cli("fl", "train", "--config", str(path), "--data-dir", str(shared_data), "--json",
               "--quiet")
    assert rust["model_sha256"] == py["model_sha256"]
    assert rust["final_accuracy"] == py["final_accuracy"]
