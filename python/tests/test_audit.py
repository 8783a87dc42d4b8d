"""privfed.audit: the bindings of privfed-audit and of the FL canaries — against privfed.fl (whose
audit equals `privfed fl train --json`'s, test_fl.py), against independent formulas (scipy,
numpy), and statistically at fixed seeds with stated false-positive rates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfed import audit, errors, fl
from stats import assert_mean, normal_two_sided_critical

# test_fl.py's synthetic run (22 parameters), with 20 canaries under central DP.
CONFIG = {
    "rounds": 4,
    "seed": 3,
    "data": {"dataset": "synthetic_logistic", "dim": 10, "examples": 400, "signal": 3.0,
             "clients": 40, "test_examples": 300, "population_samples": 1000},
    "model": {"kind": "softmax", "features": 10, "classes": 2},
    "sampling": {"kind": "poisson", "rate": 0.5},
    "local": {"epochs": 1, "batch_size": 5, "learning_rate": 0.2},
    "privacy": {"mechanism": "central_gaussian", "clip": 1.0, "noise_multiplier": 0.8},
    "server": {"kind": "sgd", "learning_rate": 1.0, "momentum": 0.5},
    "accounting": {"delta": 1e-5, "accountant": "rdp"},
    "audit": {"canaries": 20},
}


# ============================================================ the FL canaries, against privfed.fl
def test_canary_set_reproduces_the_training_runs_audit():
    """Same seed, same canaries: the CanarySet's audit of the run's cumulative model delta is the
    run's own `audit` after every round (and its summary the run's), bit for bit."""
    t = fl.Trainer(CONFIG, threads=1)
    p0 = t.params.astype(np.float64)
    cs = audit.CanarySet(20, p0.size, seed=3, delta=1e-5, clip_norm=1.0, noise_multiplier=0.8)
    assert (cs.canaries, cs.dim) == (20, 22)
    rounds = 0
    last = None
    while (r := t.step()) is not None:
        rounds += 1
        mine = cs.audit(t.params.astype(np.float64) - p0, 1.0, rounds)
        assert mine == r["audit"], rounds
        last = mine
    assert rounds == 4
    assert cs.summary(last) == t.summary()["audit"]
    # another seed draws other canaries: the scores (and so the audit) differ
    other = audit.CanarySet(20, 22, seed=4, delta=1e-5, clip_norm=1.0, noise_multiplier=0.8)
    assert not np.array_equal(other.directions, cs.directions)


def test_canary_directions_are_the_sets_and_unit_vectors():
    cs = audit.CanarySet(30, 50, seed=7)
    d = audit.canary_directions(7, 30, 50)
    assert d.shape == (30, 50) and d.dtype == np.float64
    assert np.array_equal(d, cs.directions)
    np.testing.assert_allclose(np.linalg.norm(d, axis=1), 1.0, rtol=1e-12)
    # the seed forms agree: int 7 is its 8 little-endian bytes then zeros
    key = (7).to_bytes(8, "little") + bytes(24)
    assert np.array_equal(audit.canary_directions(key, 30, 50), d)
    assert np.array_equal(audit.canary_directions(key.hex(), 30, 50), d)
    assert cs.included == audit.CanarySet(30, 50, seed=key).included


def test_canary_directions_are_isotropic():
    """For an isotropic unit direction c in d dimensions, d·c_j² has mean 1 for every
    coordinate j (E c_j² = 1/d). z-test on 4,000 directions, α = 10⁻⁴ per coordinate tested."""
    d = audit.canary_directions(11, 4000, 20)
    for j in (0, 7, 19):
        assert_mean(20 * d[:, j] ** 2, 1.0, 1e-4, f"d·c_{j}²")
    # and the sign of a coordinate is a fair coin
    assert_mean(np.sign(d[:, 3]), 0.0, 1e-4, "sign of c_3")


def test_inclusion_bits_are_fair_coins():
    """Σ S_i ~ Binomial(K, ½): two-sided z-test at α = 10⁻⁴ over K = 4,000 canaries."""
    k = 4000
    s = sum(audit.CanarySet(k, k + 1, seed=5).included)
    z = (s - k / 2) / math.sqrt(k / 4)
    assert abs(z) < normal_two_sided_critical(1e-4), (s, z)


def test_canary_norm_follows_the_run():
    assert audit.CanarySet(4, 10, seed=1, clip_norm=2.0, noise_multiplier=1.0).norm_for_round(
        5.0) == 2.0
    free = audit.CanarySet(4, 10, seed=1)
    assert free.norm_for_round(5.0, 3.0) == 5.0
    assert free.norm_for_round(None, 3.0) == 3.0
    assert free.norm_for_round() == 1.0
    assert audit.CanarySet(4, 10, seed=1, norm=0.5).norm_for_round(5.0) == 0.5


def test_bad_canary_configurations_are_refused():
    with pytest.raises(errors.ConfigError, match="canaries"):
        audit.CanarySet(0, 10, seed=1)
    with pytest.raises(errors.ConfigError, match="fewer canaries than parameters"):
        audit.CanarySet(10, 10, seed=1)
    with pytest.raises(errors.ConfigError, match="guesses"):
        audit.CanarySet(10, 100, seed=1, guesses=3)
    with pytest.raises(errors.ConfigError, match="confidence"):
        audit.CanarySet(10, 100, seed=1, confidence=1.0)
    with pytest.raises(errors.InvalidParameter, match="central DP needs both"):
        audit.CanarySet(10, 100, seed=1, clip_norm=1.0)
    with pytest.raises(errors.InvalidParameter, match="seed"):
        audit.CanarySet(10, 100, seed=b"short")
    with pytest.raises(errors.ConfigError, match="seed"):
        audit.CanarySet(10, 100, seed="xyz")
    cs = audit.CanarySet(4, 10, seed=1)
    with pytest.raises(errors.ConfigError, match="wrong length"):
        cs.audit(np.ones(9), 1.0, 1)
    with pytest.raises(errors.ConfigError, match="not finite"):
        cs.audit(np.full(10, np.nan), 1.0, 1)


# ============================================================ the estimators, against formulas
needs_scipy = pytest.mark.requires("scipy", install="pip install scipy")


@needs_scipy
def test_one_run_bound_is_where_the_p_value_crosses_alpha():
    e = audit.epsilon_lower_bound(1000, 200, 150, 1e-5, 0.95)
    assert e > 0
    assert audit.one_run_p_value(1000, 200, 150, e, 1e-5) <= 0.05
    assert audit.one_run_p_value(1000, 200, 150, e + 1e-6, 1e-5) > 0.05
    # δ = 0: the p-value is the binomial tail P[Bin(r, q) ≥ v], q = e^ε/(1 + e^ε) (scipy)
    import scipy.stats as stats

    q = 1 / (1 + math.exp(-1.0))
    assert audit.one_run_p_value(100, 40, 30, 1.0, 0.0) == pytest.approx(
        stats.binom.sf(29, 40, q), rel=1e-10)
    # chance-level guessing bounds nothing
    assert audit.epsilon_lower_bound(1000, 200, 100, 1e-5) == 0.0


def test_one_run_bound_is_honest_and_has_power():
    """Canaries scored through an ε-DP randomized response (score = S_i with probability
    e^ε/(1+e^ε), else flipped; plus a tie-breaking jitter): at ε = 1 the 95% bound may exceed 1 in
    at most 5% of runs — over 60 runs more than 9 such runs has probability < 10⁻³ (binomial
    tail) — and at ε = 4 it clears 2 in every one of 10 runs (m = 1,000, r = 200)."""
    rng = np.random.default_rng(2024)

    def run(eps, m=1000, r=200):
        s = rng.random(m) < 0.5
        keep = rng.random(m) < math.exp(eps) / (1 + math.exp(eps))
        scores = np.where(keep, s, ~s).astype(np.float64) + 1e-3 * rng.random(m)
        n, v = audit.guesses(scores, [bool(x) for x in s], r // 2, r // 2)
        return audit.epsilon_lower_bound(m, n, v, 0.0, 0.95)

    above = sum(run(1.0) > 1.0 for _ in range(60))
    assert above <= 9, above
    assert all(run(4.0) > 2.0 for _ in range(10))


def test_guesses_count_the_right_ones():
    scores = np.array([3.0, 2.0, 1.0, 0.0])
    assert audit.guesses(scores, [True, False, True, False], 1, 1) == (2, 2)
    assert audit.guesses(scores, [True, False, True, False], 2, 0) == (2, 1)
    with pytest.raises(errors.InvalidParameter):
        audit.guesses(scores, [True, False, True, False], 3, 2)
    with pytest.raises(errors.InvalidParameter):
        audit.guesses(scores, [True], 1, 0)


def test_one_shot_is_the_pooled_gaussian_reading():
    rng = np.random.default_rng(8)
    inc, exc = rng.normal(0.3, 0.1, 40), rng.normal(0.0, 0.1, 60)
    est = audit.one_shot_epsilon(inc, exc, 1e-5)
    sd = math.sqrt((((inc - inc.mean()) ** 2).sum() + ((exc - exc.mean()) ** 2).sum()) / 98)
    mu = (inc.mean() - exc.mean()) / sd
    assert est["mu"] == pytest.approx(mu, rel=1e-12)
    assert est["sd"] == pytest.approx(sd, rel=1e-12)
    assert est["epsilon"] == audit.gdp_epsilon(est["mu"], 1e-5)
    with pytest.raises(errors.InvalidInput):
        audit.one_shot_epsilon([0.1], [], 1e-5)
    assert audit.cosine([1.0, 0.0], [1.0, 1.0]) == pytest.approx(1 / math.sqrt(2), rel=1e-15)
    with pytest.raises(errors.InvalidParameter):
        audit.cosine([1.0, 0.0], [0.0, 0.0])


@needs_scipy
def test_gdp_epsilon_solves_the_gaussian_privacy_profile():
    """δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) at the returned ε is δ (scipy's Φ)."""
    import scipy.stats as stats

    for mu in (0.5, 1.0, 3.0):
        e = audit.gdp_epsilon(mu, 1e-5)
        d = stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2)
        assert d == pytest.approx(1e-5, rel=1e-6), mu
    assert audit.gdp_epsilon(-1.0, 1e-5) == 0.0
    # μ through a tradeoff point: Φ⁻¹(1 − FPR) − Φ⁻¹(FNR)
    mu = audit.gdp_mu_from_tradeoff(0.05, 0.2)
    assert mu == pytest.approx(stats.norm.ppf(0.95) - stats.norm.ppf(0.2), rel=1e-9)


@needs_scipy
def test_clopper_pearson_is_the_beta_quantile():
    import scipy.stats as stats

    lo, hi = audit.clopper_pearson(7, 50, 0.95)
    assert lo == pytest.approx(stats.beta.ppf(0.05, 7, 44), rel=1e-9)
    assert hi == pytest.approx(stats.beta.ppf(0.95, 8, 43), rel=1e-9)
    lo2, hi2 = audit.clopper_pearson(7, 50, 0.95, two_sided=True)
    assert lo2 == pytest.approx(stats.beta.ppf(0.025, 7, 44), rel=1e-9)
    assert hi2 == pytest.approx(stats.beta.ppf(0.975, 8, 43), rel=1e-9)
    assert audit.clopper_pearson(0, 10)[0] == 0.0 and audit.clopper_pearson(10, 10)[1] == 1.0
    with pytest.raises(errors.InvalidParameter):
        audit.clopper_pearson(11, 10)
    with pytest.raises(errors.InvalidParameter, match="confidence"):
        audit.clopper_pearson(1, 10, 1.5)
