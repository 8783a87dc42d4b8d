"""Empirical privacy auditing (``privfed-audit``; ``docs/AUDIT.md``), for Python.

Thin bindings over the Rust crate, so Python, ``privfed audit``, ``privfed fl train`` and the
Flower audit (:mod:`privfed.flwr.audit`) compute the same numbers:

* :func:`epsilon_lower_bound`, :func:`one_run_p_value`, :func:`guesses` — the one-run audit of
  Steinke, Nasr, Jagielski 2023 ("Privacy Auditing with One (1) Training Run");
* :func:`cosine`, :func:`one_shot_epsilon` — the one-shot estimate of Andrew et al. 2024
  ("One-shot empirical privacy estimation for federated learning"), read as μ-GDP;
* :func:`clopper_pearson` — exact binomial bounds (Clopper & Pearson 1934);
* :func:`gdp_epsilon`, :func:`gdp_mu_from_tradeoff` — μ-GDP (Dong, Roth, Su 2022);
* :class:`CanarySet` and :func:`canary_directions` — the canaries of a federated-learning audit,
  drawn from a seed exactly as ``privfed fl train`` draws them, and its per-round audit::

    from privfed import audit
    c = audit.CanarySet(100, dim=7850, seed=1, clip_norm=1.0, noise_multiplier=1.0)
    a = c.audit(theta_t - theta_0, norm=1.0, rounds=10)
    a["epsilon_lower_bound"], a["epsilon_estimate"], a["accounted_canary_epsilon"]

Bad arguments raise :class:`privfed.errors.InvalidParameter` (a ``ValueError``), bad vectors
:class:`privfed.errors.InvalidInput`, an unusable canary configuration
:class:`privfed.errors.ConfigError`.
"""

from . import _privfed as _native

epsilon_lower_bound = _native.epsilon_lower_bound
one_run_p_value = _native.one_run_p_value
guesses = _native.guesses
cosine = _native.cosine
one_shot_epsilon = _native.one_shot_epsilon
clopper_pearson = _native.clopper_pearson
gdp_epsilon = _native.gdp_epsilon
gdp_mu_from_tradeoff = _native.gdp_mu_from_tradeoff
canary_directions = _native.canary_directions
CanarySet = _native.CanarySet

for _f in (
    epsilon_lower_bound,
    one_run_p_value,
    guesses,
    cosine,
    one_shot_epsilon,
    clopper_pearson,
    gdp_epsilon,
    gdp_mu_from_tradeoff,
    canary_directions,
):
    _f.__module__ = __name__
del _f

__all__ = [
    "epsilon_lower_bound",
    "one_run_p_value",
    "guesses",
    "cosine",
    "one_shot_epsilon",
    "clopper_pearson",
    "gdp_epsilon",
    "gdp_mu_from_tradeoff",
    "canary_directions",
    "CanarySet",
]
