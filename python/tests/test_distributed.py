"""privfed.distributed: paper 001's Skellam pipeline (planner, encoder, modular sum, decoder,
round events) through the bindings, against the Rust CLI and against its own predictions."""

from __future__ import annotations

import hashlib
import hmac
import math

import numpy as np
import pytest

from privfed import accounting, errors
from privfed import distributed as dd

SESSION = b"test-session"


def hkdf_sha256(salt: bytes, ikm: bytes, info: bytes, length: int = 32) -> bytes:
    """RFC 5869, written out independently of the Rust crates."""
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    okm, block, i = b"", b"", 1
    while len(okm) < length:
        block = hmac.new(prk, block + info + bytes([i]), hashlib.sha256).digest()
        okm += block
        i += 1
    return okm[:length]


def test_rotation_seed_is_rfc5869_hkdf():
    for sid, rnd in [(b"s", 7), (SESSION, 0), (bytes(32), 2**40)]:
        want = hkdf_sha256(
            b"privfed/distributed-dp/v1", sid, b"rotation" + rnd.to_bytes(8, "big")
        )
        assert dd.rotation_seed(sid, rnd) == want
    assert dd.rotation_seed(SESSION, 0) != dd.rotation_seed(SESSION, 1)


def test_plan_matches_the_cli(cli):
    """The planner through Python gives the Rust CLI's numbers (`privfed dme skellam --json`),
    with the same default β (e^{-1/2}, conditional rounding) and with plain rounding."""
    for bits, eps, beta in [(16, 2.0, None), (20, 0.5, None), (16, 2.0, 0.0)]:
        args = [
            "dme", "skellam", "--dim", "200", "--clip", "1", "--bits", str(bits),
            "--clients", "50", "--epsilon", str(eps), "--delta", "1e-5", "--trials", "1",
            "--seed", "1", "--json", "--quiet",
        ]
        kwargs = {}
        if beta is not None:
            args += ["--beta", str(beta)]
            kwargs["beta"] = beta
        rust = cli(*args)
        p = dd.plan(200, 1.0, bits, 50, epsilon=eps, delta=1e-5, **kwargs)
        assert p.scale == rust["scale"]
        assert p.local_noise_stddev == rust["local_noise_stddev"]
        assert p.epsilon == rust["planned_epsilon"]
        assert p.epsilon <= eps
        assert p.predicted_mse(50)["wrap"] == pytest.approx(rust["predicted_wrap_mse"], rel=1e-12)
    assert dd.plan(10, 1.0, 16, 5, noise_stddev=0.1).params["beta"] == math.exp(-0.5)


def test_plan_properties_and_describe():
    p = dd.plan(100, 1.0, 16, 10, noise_stddev=0.1, delta=1e-5)
    assert (p.dim, p.padded_dim, p.bits, p.clients, p.clip) == (100, 128, 16, 10, 1.0)
    assert p.local_noise_stddev == 0.1
    assert p.central_noise_stddev == pytest.approx(0.1 * math.sqrt(10))
    assert p.share == "skellam"
    d = p.describe()
    assert d["scale"] == p.scale and d["epsilon"] == p.epsilon
    assert set(d["params"]) == {
        "dim", "clip", "bits", "scale", "local_noise_stddev", "beta", "k", "padded_dim",
    }
    mse = p.predicted_mse(5)
    assert mse["total"] == pytest.approx(mse["quantization"] + mse["noise"] + mse["wrap"])
    assert mse["noise"] == pytest.approx(100 * 0.01 / 5)
    # Without δ there is no ε report.
    assert dd.plan(100, 1.0, 16, 10, noise_stddev=0.1).epsilon is None
    assert "SkellamPlan" in repr(p)


def test_plan_errors_are_typed():
    with pytest.raises(errors.InfeasibleParameters) as e:
        dd.plan(1000, 1.0, 6, 100, epsilon=0.5, delta=1e-5)
    assert "move `bits`" in str(e.value)
    assert isinstance(e.value, ValueError)
    with pytest.raises(errors.InvalidParameter, match="not both"):
        dd.plan(10, 1.0, 16, 10, epsilon=1.0, delta=1e-5, noise_stddev=0.1)
    with pytest.raises(errors.InvalidParameter, match="delta"):
        dd.plan(10, 1.0, 16, 10, epsilon=1.0)
    with pytest.raises(errors.InvalidParameter, match="noise_stddev"):
        dd.plan(10, 1.0, 16, 10)
    with pytest.raises(errors.InvalidParameter, match="bits"):
        dd.plan(10, 1.0, 0, 10, noise_stddev=0.1)
    with pytest.raises(errors.InvalidParameter, match="dim"):
        dd.plan(0, 1.0, 16, 10, noise_stddev=0.1)
    with pytest.raises(errors.InvalidParameter, match="share"):
        dd.plan(10, 1.0, 16, 10, noise_stddev=0.1, share="gaussian")


def test_encoder_output_and_inputs():
    p = dd.plan(100, 1.0, 16, 10, noise_stddev=0.1)
    seed = dd.rotation_seed(SESSION, 0)
    enc = dd.SkellamEncoder(p, seed, seed=1)
    x = np.full(100, 0.05)
    y = enc.encode(x)
    assert y.dtype == np.uint64 and y.shape == (128,)
    assert int(y.max()) < 2**16
    y32, stats = enc.encode(x.astype(np.float32), return_stats=True)
    assert y32.shape == (128,) and stats == {"clipped": False, "rounding_tries": 1}
    _, stats = enc.encode(np.full(100, 1.0), return_stats=True)  # norm 10 > clip 1
    assert stats["clipped"] is True
    batch, stats = enc.encode(np.zeros((3, 100)), return_stats=True)
    assert batch.shape == (3, 128) and len(stats) == 3
    # The same seed draws the same noise; the params dict builds the same encoder.
    a = dd.SkellamEncoder(p, seed, seed=7).encode(x)
    b = dd.SkellamEncoder(p.params, seed, seed=7).encode(x)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, dd.SkellamEncoder(p, seed, seed=8).encode(x))
    # ... and does not depend on the number of threads.
    c = dd.SkellamEncoder(p, seed, seed=7).encode(x, threads=1)
    assert np.array_equal(a, c)
    with pytest.raises(errors.InvalidDtype):
        enc.encode(np.zeros(100, dtype=np.int64))
    with pytest.raises(errors.InvalidInput):
        enc.encode(np.zeros(99))
    with pytest.raises(errors.InvalidParameter, match="not finite"):
        enc.encode(np.full(100, np.nan))
    with pytest.raises(errors.InvalidParameter, match="32 bytes"):
        dd.SkellamEncoder(p, b"short")
    with pytest.raises(errors.InvalidParameter):
        dd.SkellamEncoder({"dim": 10}, seed)


def test_modular_sum():
    s = dd.ModularSum(8, 3)
    s.add(np.array([200, 1, 255], dtype=np.uint64))
    s.add([100, 2, 1])
    assert s.value.tolist() == [(300) % 256, 3, 0]
    assert s.contributions == 2 and s.bits == 8 and s.length == 3
    with pytest.raises(errors.InvalidParameter):
        s.add(np.array([0, 256, 0], dtype=np.uint64))
    with pytest.raises(errors.InvalidInput):
        s.add(np.array([0, -1, 0]))
    with pytest.raises(errors.InvalidDtype):
        s.add(np.zeros(3))
    # A batch is added row by row, and not at all if any row is bad.
    with pytest.raises(errors.InvalidParameter):
        s.add(np.array([[1, 1, 1], [0, 0, 999]], dtype=np.uint64))
    assert s.contributions == 2 and s.value.tolist() == [44, 3, 0]
    s.add(np.ones((2, 3), dtype=np.uint32))
    assert s.contributions == 4 and s.value.tolist() == [46, 5, 2]
    with pytest.raises(errors.InvalidParameter):
        dd.ModularSum(63, 3)


def _trial(p, seed_bytes, xs, rng_seed):
    enc = dd.SkellamEncoder(p, seed_bytes, seed=rng_seed)
    total = dd.ModularSum(p.bits, p.padded_dim)
    for x in xs:
        total.add(enc.encode(x))
    return dd.SkellamDecoder(p, seed_bytes).decode(total.value, total.contributions)


@pytest.mark.parametrize("share", ["skellam", "ddg"])
def test_pipeline_error_matches_the_plan(share):
    """Statistical: over T trials of n clients, the mean ‖x̂ − x̄‖² lies between the noise term
    d·σ²/m (exact) and noise + d/(4s²m) (rounding variance ≤ 1/4 per coordinate), within 6
    standard errors (β = 0: plain unbiased rounding). Each trial's error is a sum of d' near-Gaussian coordinate errors, so the
    mean over T trials has relative standard error ≤ √(2/(T·d)) (d of the d' coordinates carry
    it); a 6σ miss has probability ≈ 2e-9 (normal approximation)."""
    n, d, trials = 20, 64, 25
    p = dd.plan(d, 1.0, 20, n, noise_stddev=0.05, delta=1e-5, share=share, beta=0.0)
    rng = np.random.default_rng(4)
    mses = []
    for t in range(trials):
        xs = rng.normal(size=(n, d))
        xs /= np.linalg.norm(xs, axis=1, keepdims=True) * 1.25  # inside the clip
        out = _trial(p, dd.rotation_seed(SESSION, t), xs, rng_seed=100 + t)
        assert not out.wrap_suspected and out.contributors == n
        mses.append(float(np.sum((out.mean - xs.mean(axis=0)) ** 2)))
    mean = float(np.mean(mses))
    noise = d * 0.05**2 / n
    rounding_max = d / (4 * p.scale**2 * n)
    rel = 6 * math.sqrt(2 / (trials * d))
    assert noise * (1 - rel) <= mean <= (noise + rounding_max) * (1 + rel), (mean, noise)


def test_decoder_report_and_errors():
    p = dd.plan(30, 1.0, 12, 5, noise_stddev=0.01)
    seed = dd.rotation_seed(SESSION, 3)
    dec = dd.SkellamDecoder(p, seed)
    # Every coordinate at the boundary 2^(b-1): what a wrapped sum looks like.
    wrapped = dec.decode(np.full(32, 2**11, dtype=np.uint64), 5)
    assert wrapped.wrap_suspected and wrapped.near_boundary == 32
    assert wrapped.expected_near_boundary < 1
    ok = dec.decode(np.zeros(32, dtype=np.uint64), 5)
    assert not ok.wrap_suspected and np.array_equal(ok.mean, np.zeros(30))
    d = ok.to_dict()
    assert d["contributors"] == 5 and len(d["sum"]) == 30
    with pytest.raises(errors.InvalidParameter, match="padded dimension"):
        dec.decode(np.zeros(30, dtype=np.uint64), 5)
    with pytest.raises(errors.InvalidParameter):
        dec.decode(np.full(32, 2**12, dtype=np.uint64), 5)
    with pytest.raises(errors.InvalidParameter):
        dec.decode(np.zeros(32, dtype=np.uint64), 0)


def test_round_event_is_accounted_with_the_contributors():
    p = dd.plan(100, 1.0, 16, 20, epsilon=1.0, delta=1e-5)
    e = dd.round_event(p, 20)
    assert isinstance(e, accounting.SkellamDpEvent)
    mu_local = (p.scale * p.local_noise_stddev) ** 2
    assert e.mu == pytest.approx(20 * mu_local, rel=1e-12)
    eps = accounting.RdpAccountant().compose(e).get_epsilon(1e-5)
    assert eps == pytest.approx(p.epsilon, rel=1e-9)
    fewer = accounting.RdpAccountant().compose(dd.round_event(p, 10)).get_epsilon(1e-5)
    assert fewer > eps
    with pytest.raises(errors.InvalidParameter, match="no contribution"):
        dd.round_event(p, 0)
    ddg = dd.plan(100, 1.0, 16, 20, epsilon=1.0, delta=1e-5, share="ddg")
    assert isinstance(dd.round_event(ddg, 20), accounting.DistributedDiscreteGaussianDpEvent)
    # No noise: no guarantee to account.
    with pytest.raises(errors.InvalidParameter):
        dd.round_event(dd.plan(10, 1.0, 16, 5, noise_stddev=0.0), 5)


def test_max_contributors_sizes_the_range_for_the_cohort():
    """Noise for the guaranteed contributors, range for the whole cohort (Rust's planner)."""
    cohort = dd.plan(1000, 1.0, 16, 100, noise_stddev=0.1)
    p = dd.plan(1000, 1.0, 16, 80, noise_stddev=0.1, max_contributors=100, delta=1e-5)
    assert p.clients == 80 and p.max_contributors == 100
    assert p.scale == cohort.scale
    assert p.central_noise_stddev == pytest.approx(0.1 * math.sqrt(80), rel=1e-12)
    assert dd.plan(1000, 1.0, 16, 80, noise_stddev=0.1).scale > p.scale
    with pytest.raises(errors.InvalidParameter):
        dd.plan(1000, 1.0, 16, 80, noise_stddev=0.1, max_contributors=79)


def test_colluding_fraction_counts_only_the_honest_noise(cli):
    """γ through the binding: the plan reports γ, ⌈γ·cohort⌉ colluders and the honest count; its
    ε is the round event's for the honest count; an ε target holds for that count (more noise);
    the numbers are the CLI's; a bad γ is a typed error."""
    base = dd.plan(200, 1.0, 18, 40, epsilon=2.0, delta=1e-5)
    assert (base.colluding_fraction, base.colluders, base.honest_contributors) == (0.0, 0, 40)
    p = dd.plan(200, 1.0, 18, 40, epsilon=2.0, delta=1e-5, colluding_fraction=0.2)
    assert (p.colluding_fraction, p.colluders, p.honest_contributors) == (0.2, 8, 32)
    assert p.local_noise_stddev > base.local_noise_stddev
    d = p.describe()
    assert (d["colluding_fraction"], d["colluders"], d["honest_contributors"]) == (0.2, 8, 32)
    eps = accounting.RdpAccountant().compose(dd.round_event(p, 32)).get_epsilon(1e-5)
    assert eps == pytest.approx(p.epsilon, rel=1e-9) and p.epsilon <= 2.0
    assert dd.honest_contributors(40, 40, 0.2) == 32
    rust = cli("describe", "skellam", "--dim", "200", "--clip", "1", "--bits", "18",
               "--clients", "40", "--epsilon", "2", "--delta", "1e-5",
               "--colluding-fraction", "0.2", "--json")
    assert rust["local_noise_stddev"] == p.local_noise_stddev
    assert rust["honest_contributors"] == 32 and rust["epsilon"] == p.epsilon
    for gamma in (-0.1, 1.0):
        with pytest.raises(errors.InvalidParameter, match="colluding_fraction"):
            dd.plan(200, 1.0, 18, 40, epsilon=2.0, delta=1e-5, colluding_fraction=gamma)
    with pytest.raises(errors.InvalidParameter, match="no honest contributor"):
        dd.plan(200, 1.0, 18, 4, epsilon=2.0, delta=1e-5, max_contributors=40,
                colluding_fraction=0.1)
    with pytest.raises(errors.InvalidParameter, match="no honest contributor"):
        dd.honest_contributors(40, 4, 0.1)
