"""privfed.ddml: the Draw-and-Discard client step of paper 003 (Alg. 1) through the bindings —
its calibration, its arithmetic against numpy, its noise's distribution, its errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import privfed
from privfed import ddml, errors


def test_noise_scales_follow_the_table():
    s = ddml.ClientStep(0.001, 10, epsilon=2.0)
    assert s.noise_scale == pytest.approx(0.001)  # 2γ/ε
    assert s.noise_variance == pytest.approx(2e-6)  # 2b²
    assert s.guarantee == {"kind": "pure", "epsilon": 2.0}
    assert (s.epsilon, s.delta, s.unit) == (2.0, 0.0, "feature")
    m = ddml.ClientStep(0.001, 10, epsilon=2.0, unit="model")
    assert m.noise_scale == pytest.approx(0.01)  # 2γp/ε
    g = ddml.ClientStep(0.5, 16, noise="gaussian", epsilon=1.0, delta=1e-5, unit="model")
    # The analytic Gaussian for ℓ2 sensitivity 2γ√p = 4: the same calibration as the Gaussian
    # mechanism on the ℓ2 ball of radius 2 (diameter 4).
    gm = privfed.Gaussian(1.0, 1e-5, 1, radius=2.0)
    assert g.noise_scale == pytest.approx(math.sqrt(gm.variance), rel=1e-12)
    assert (g.epsilon, g.delta) == (1.0, 1e-5)
    n = ddml.ClientStep(0.1, 3, noise="none")
    assert n.noise_scale == 0.0 and n.guarantee is None and n.epsilon == math.inf
    d = g.to_dict()
    assert d["learning_rate"] == 0.5 and d["num_weights"] == 16 and d["unit"] == "model"
    assert g.noise == {"kind": "gaussian", "epsilon": 1.0, "delta": 1e-5}


def test_step_clips_the_gradient():
    s = ddml.ClientStep(0.1, 3, noise="none")
    out = s.privatize_step(np.ones(3), np.array([5.0, -7.0, 0.5]))
    assert out.tolist() == [0.9, 1.1, 0.95]
    out32 = s.privatize_step(np.ones(3, dtype=np.float32), [5.0, -7.0, 0.5])
    assert out32.dtype == np.float32


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def test_apply_is_alg1_against_numpy():
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, size=(30, 5))
    y = (rng.uniform(size=30) < 0.5).astype(float)
    w = rng.normal(size=5)
    step = ddml.ClientStep(0.3, 5, noise="none")
    grad = ((sigmoid(x @ w) - y)[:, None] * x).mean(axis=0)
    want = w - 0.3 * np.clip(grad, -1, 1)
    assert np.allclose(step.apply(w, x, y, glm="logistic"), want, rtol=0, atol=1e-12)
    lin = ((x @ w - y)[:, None] * x).mean(axis=0)
    assert np.allclose(
        step.apply(w, x, y, glm="linear"), w - 0.3 * np.clip(lin, -1, 1), atol=1e-12
    )
    # Softmax over 3 classes: row-major (class × feature) weights.
    ys = rng.integers(0, 3, size=30).astype(float)
    ws = rng.normal(size=15)
    logits = x @ ws.reshape(3, 5).T
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(30), ys.astype(int)] -= 1
    gs = (p.T @ x / 30).ravel()
    soft = ddml.ClientStep(0.3, 15, noise="none")
    assert np.allclose(
        soft.apply(ws, x, ys, glm="softmax"), ws - 0.3 * np.clip(gs, -1, 1), atol=1e-12
    )


def test_noise_has_the_calibrated_distribution():
    """n = 200,000 weights: the noise around the clipped step has mean 0 and second moment
    σ² (2b² for Laplace), and E|Z| = b for Laplace. Each check is a 5-sigma z-test with the
    closed-form standard errors (Var Z² = 20b⁴ Laplace, 2σ⁴ Gaussian; Var|Z| = b²): false
    positive rate ≈ 6e-7 each."""
    n = 200_000
    for kwargs in [
        dict(noise="laplace", epsilon=0.5),
        dict(noise="gaussian", epsilon=1.0, delta=1e-6),
    ]:
        s = ddml.ClientStep(0.01, n, seed=3, **kwargs)
        z = s.privatize_step(np.full(n, 3.0), np.full(n, 0.25)) - (3.0 - 0.01 * 0.25)
        var = s.noise_variance
        assert abs(z.mean()) < 5 * math.sqrt(var / n)
        var_m2 = 20 * s.noise_scale**4 if kwargs["noise"] == "laplace" else 2 * var**2
        assert abs(np.mean(z**2) - var) < 5 * math.sqrt(var_m2 / n)
        if kwargs["noise"] == "laplace":
            b = s.noise_scale
            assert abs(np.mean(np.abs(z)) - b) < 5 * b / math.sqrt(n)


def test_seeded_steps_repeat_and_unseeded_differ():
    x = np.ones((4, 3))
    y = np.array([1.0, 0.0, 1.0, 1.0])
    a = ddml.ClientStep(0.1, 3, epsilon=1.0, seed=5).apply(np.zeros(3), x, y)
    b = ddml.ClientStep(0.1, 3, epsilon=1.0, seed=5).apply(np.zeros(3), x, y)
    c = ddml.ClientStep(0.1, 3, epsilon=1.0).apply(np.zeros(3), x, y)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_errors_are_typed():
    with pytest.raises(errors.InvalidParameter, match="epsilon"):
        ddml.ClientStep(0.1, 3)
    with pytest.raises(errors.InvalidParameter, match="delta"):
        ddml.ClientStep(0.1, 3, noise="gaussian", epsilon=1.0, delta=1.0)
    with pytest.raises(errors.InvalidParameter, match="delta"):
        ddml.ClientStep(0.1, 3, epsilon=1.0, delta=1e-5)
    with pytest.raises(errors.InvalidParameter, match="learning_rate"):
        ddml.ClientStep(0.0, 3, epsilon=1.0)
    with pytest.raises(errors.InvalidParameter, match="num_weights"):
        ddml.ClientStep(0.1, 0, epsilon=1.0)
    with pytest.raises(errors.InvalidParameter, match="noise"):
        ddml.ClientStep(0.1, 3, noise="uniform", epsilon=1.0)
    with pytest.raises(errors.InvalidParameter, match="unit"):
        ddml.ClientStep(0.1, 3, epsilon=1.0, unit="row")
    s = ddml.ClientStep(0.1, 3, epsilon=1.0)
    with pytest.raises(errors.InvalidInput, match="length"):
        s.privatize_step(np.zeros(4), np.zeros(4))
    with pytest.raises(errors.InvalidInput, match="not finite"):
        s.privatize_step(np.array([0.0, np.inf, 0.0]), np.zeros(3))
    with pytest.raises(errors.InvalidInput):
        s.apply(np.zeros(3), np.ones((2, 4)), np.ones(2))  # 4 features, 3 weights
    with pytest.raises(errors.InvalidInput, match="rows"):
        s.apply(np.zeros(3), np.ones((2, 3)), np.ones(3))
    with pytest.raises(errors.InvalidInput, match="empty"):
        s.apply(np.zeros(3), np.ones((0, 3)), np.ones(0))
    with pytest.raises(errors.InvalidInput, match="multiple"):
        ddml.ClientStep(0.1, 7, epsilon=1.0).apply(np.zeros(7), np.ones((2, 3)), np.ones(2),
                                                    glm="softmax")
    with pytest.raises(errors.InvalidInput, match="label"):
        ddml.ClientStep(0.1, 6, epsilon=1.0).apply(np.zeros(6), np.ones((2, 3)),
                                                   np.array([0.0, 5.0]), glm="softmax")
    with pytest.raises(errors.InvalidParameter, match="glm"):
        s.apply(np.zeros(3), np.ones((2, 3)), np.ones(2), glm="probit")
    with pytest.raises(errors.InvalidDtype):
        s.privatize_step(np.zeros(3, dtype=np.int64), np.zeros(3))


def test_weight_wire_format():
    w = np.array([1.0, -0.5, 3.25e7], dtype=np.float32)
    b = ddml.encode_weights(w)
    assert b == w.astype("<f4").tobytes()
    back = ddml.decode_weights(b)
    assert back.dtype == np.float32 and np.array_equal(back, w)
    with pytest.raises(errors.InvalidInput, match="float32"):
        ddml.decode_weights(b[:-1])


SIMULATIONS = [
    ("--epsilon 2", {"epsilon": 2.0}),
    ("--no-noise --strategy accept-one-in", {"epsilon": None, "strategy": "accept-one-in"}),
    ("--no-noise --server-batch 7", {"epsilon": None, "server_batch": 7}),
]


@pytest.mark.parametrize("args,kwargs", SIMULATIONS, ids=["laplace", "accept-one-in", "server-batch"])
def test_simulation_report_is_the_cli_report(cli, args, kwargs):
    """`ddml.simulate_in_process` returns the report `privfed ddml simulate --json` prints for
    the same seeded run (one library simulation behind both): the same keys in the same order
    and the same numbers, but the wall time."""
    common = "--dataset synthetic-production --k 5 --learning-rate 0.1 --passes 2 " \
        "--synthetic-train 3000 --synthetic-test 500 --seed 7 --quiet --json"
    want = cli("ddml", "simulate", *common.split(), *args.split())
    got = ddml.simulate_in_process(
        "synthetic-production", k=5, learning_rate=0.1, passes=2, synthetic_train=3000,
        synthetic_test=500, seed=7, **kwargs,
    )
    assert list(got) == list(want)
    assert got.pop("seconds") >= 0.0 and want.pop("seconds") >= 0.0
    assert got == want


def test_simulation_defaults_are_the_cli_defaults(cli):
    """`ddml.simulate_in_process` with `examples_per_client`, `strategy`, `synthetic_train` and
    `synthetic_test` left out runs what `privfed ddml simulate` runs without those options (one
    set of defaults behind both); one pass keeps it short."""
    want = cli("ddml", "simulate", *"--dataset synthetic-production --k 5 --learning-rate 0.1 "
               "--no-noise --passes 1 --seed 7 --quiet --json".split())
    got = ddml.simulate_in_process("synthetic-production", k=5, learning_rate=0.1, epsilon=None,
                                   passes=1, seed=7)
    assert got.pop("seconds") >= 0.0 and want.pop("seconds") >= 0.0
    assert got == want


def test_simulation_errors(tmp_path):
    run = dict(k=5, learning_rate=0.1, epsilon=None, passes=1, synthetic_train=100,
               synthetic_test=10, seed=1)
    with pytest.raises(privfed.InvalidParameter, match="dataset"):
        ddml.simulate_in_process("cifar", **run)
    with pytest.raises(privfed.InvalidParameter, match="strategy"):
        ddml.simulate_in_process("synthetic-production", **run, strategy="fastest")
    with pytest.raises(privfed.InvalidParameter, match="server_batch"):
        ddml.simulate_in_process("synthetic-production", **run, strategy="server-batch")
    with pytest.raises(privfed.InvalidParameter, match="server_batch"):
        ddml.simulate_in_process("synthetic-production", **run, strategy="replace-drawn",
                                 server_batch=3)
    with pytest.raises(privfed.InvalidParameter, match="k"):
        ddml.simulate_in_process("synthetic-production", **dict(run, k=0))
    with pytest.raises(privfed.InvalidParameter, match="passes"):
        ddml.simulate_in_process("synthetic-production", **dict(run, passes=0))
    with pytest.raises(errors.ConfigError):
        ddml.simulate_in_process("mnist", **run, data_dir=tmp_path / "nothing")
