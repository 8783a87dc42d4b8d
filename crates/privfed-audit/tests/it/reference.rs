//! Reference values: Clopper–Pearson against scipy's `beta.ppf`, the one-run p-value and ε
//! bound against an independent scipy computation (`scripts/reference/audit_oracle.py`), and
//! both against jax_privacy 2.0.0's own estimators (`scripts/reference/audit_jax_privacy.py`).
//! Tolerances: `common`.

use crate::common::{
    CP_RELATIVE, JAX_EVENT_EPS_RELATIVE, JAX_ONE_RUN_EPS_ABSOLUTE, JAX_ONE_RUN_P_ABSOLUTE,
    JAX_ONE_RUN_P_RELATIVE, ONE_RUN_EPS_ABSOLUTE, ONE_RUN_P_RELATIVE, close_rel, jax_privacy,
    oracle,
};
use privfed_audit::distinguish::{EventCounts, event_bound};
use privfed_audit::{clopper_pearson, one_run, one_run_gdp};
use serde_json::json;

/// Counts from tiny to audit-sized, rates from the far tail to the middle.
const CP_CASES: &[(u64, u64, f64)] = &[
    (0, 10, 0.05),
    (1, 10, 0.05),
    (5, 10, 0.025),
    (10, 10, 0.05),
    (3, 1000, 0.05),
    (17, 100_000, 1e-3),
    (512, 1_000_000, 2.5e-4),
    (49_000, 100_000, 1e-6),
    (250_000, 500_000, 0.0125),
    (999_990, 1_000_000, 0.05),
    (1, 10_000_000, 1e-10),
];

#[test]
#[cfg_attr(not(has_scipy), ignore = "python3 cannot import scipy")]
fn clopper_pearson_matches_scipy() {
    let q: Vec<_> = CP_CASES.iter().map(|&(k, n, a)| json!([k, n, a])).collect();
    let r = oracle(&json!({ "clopper_pearson": q }));
    for (i, &(k, n, a)) in CP_CASES.iter().enumerate() {
        let (lo, hi) = (
            clopper_pearson::lower(k, n, a).unwrap(),
            clopper_pearson::upper(k, n, a).unwrap(),
        );
        let (slo, shi) = (
            r["cp_lower"][i].as_f64().unwrap(),
            r["cp_upper"][i].as_f64().unwrap(),
        );
        assert!(
            close_rel(lo, slo, CP_RELATIVE),
            "lower({k},{n},{a}) = {lo}, scipy {slo}"
        );
        assert!(
            close_rel(hi, shi, CP_RELATIVE),
            "upper({k},{n},{a}) = {hi}, scipy {shi}"
        );
    }
}

/// (m, r, v, δ, α): the paper's regime (m = 1000 canaries, few hundred guesses), a large one,
/// pure DP, and a case at chance level (bound 0).
const ONE_RUN_CASES: &[(u64, u64, u64, f64, f64)] = &[
    (1000, 100, 90, 1e-5, 0.05),
    (1000, 200, 150, 1e-5, 0.05),
    (1000, 200, 150, 0.0, 0.05),
    (10_000, 1000, 620, 1e-6, 0.01),
    (100, 50, 50, 1e-5, 0.05),
    (1000, 200, 100, 1e-5, 0.05),
];

/// The ε values at which the one-run p-values are compared.
const ONE_RUN_P_EPSILONS: [f64; 4] = [0.0, 0.5, 1.0, 2.0];

/// The one-run bounds of [`ONE_RUN_CASES`] and their p-values at [`ONE_RUN_P_EPSILONS`] against
/// `reference` (`who` in messages): bounds to `eps_absolute`, p-values where `p_close(ours,
/// theirs)`.
fn check_one_run(
    who: &str,
    reference: fn(&serde_json::Value) -> serde_json::Value,
    eps_absolute: f64,
    p_close: impl Fn(f64, f64) -> bool,
) {
    let q: Vec<_> = ONE_RUN_CASES
        .iter()
        .map(|&(m, r, v, d, a)| json!([m, r, v, d, a]))
        .collect();
    let p_cases: Vec<(u64, u64, u64, f64, f64)> = ONE_RUN_CASES
        .iter()
        .flat_map(|&(m, r, v, d, _)| ONE_RUN_P_EPSILONS.map(move |e| (m, r, v, e, d)))
        .collect();
    let qp: Vec<_> = p_cases
        .iter()
        .map(|&(m, r, v, e, d)| json!([m, r, v, e, d]))
        .collect();
    let out = reference(&json!({ "one_run": q, "one_run_p": qp }));
    for (i, &(m, r, v, d, a)) in ONE_RUN_CASES.iter().enumerate() {
        let ours = one_run::epsilon_lower_bound(m, r, v, d, a).unwrap();
        let theirs = out["one_run_eps"][i].as_f64().unwrap();
        assert!(
            (ours - theirs).abs() <= eps_absolute,
            "one-run ε({m},{r},{v},{d},{a}) = {ours}, {who} {theirs}"
        );
    }
    for (i, &(m, r, v, e, d)) in p_cases.iter().enumerate() {
        let ours = one_run::p_value(m, r, v, e, d).unwrap();
        let theirs = out["one_run_p"][i].as_f64().unwrap();
        assert!(
            p_close(ours, theirs),
            "p({m},{r},{v},{e},{d}) = {ours}, {who} {theirs}"
        );
    }
}

#[test]
#[cfg_attr(not(has_scipy), ignore = "python3 cannot import scipy")]
fn one_run_matches_scipy() {
    check_one_run("scipy", oracle, ONE_RUN_EPS_ABSOLUTE, |ours, theirs| {
        close_rel(ours, theirs, ONE_RUN_P_RELATIVE)
    });
}

#[test]
#[cfg_attr(
    not(has_jax_privacy),
    ignore = "python3 cannot load jax_privacy's auditing module"
)]
fn one_run_matches_jax_privacy() {
    check_one_run(
        "jax_privacy",
        jax_privacy,
        JAX_ONE_RUN_EPS_ABSOLUTE,
        |ours, theirs| {
            (ours - theirs).abs() <= JAX_ONE_RUN_P_RELATIVE * theirs.abs() + JAX_ONE_RUN_P_ABSOLUTE
        },
    );
}

/// (m, k, c, δ, α) for the Gaussian one-run analysis: the one-run cases with δ > 0 (a Gaussian
/// claim has no finite ε at δ = 0) and two more in the regime where it is tighter.
const ONE_RUN_GDP_CASES: &[(u64, u64, u64, f64, f64)] = &[
    (1000, 100, 90, 1e-5, 0.05),
    (1000, 200, 150, 1e-5, 0.05),
    (10_000, 1000, 620, 1e-6, 0.01),
    (100, 50, 50, 1e-5, 0.05),
    (1000, 200, 100, 1e-5, 0.05),
    (1000, 500, 400, 1e-5, 0.05),
    (5000, 200, 180, 1e-6, 0.05),
];

#[test]
#[cfg_attr(
    not(has_jax_privacy),
    ignore = "python3 cannot load jax_privacy's auditing module"
)]
fn one_run_gdp_matches_jax_privacy() {
    let q: Vec<_> = ONE_RUN_GDP_CASES
        .iter()
        .map(|&(m, k, c, d, a)| json!([m, k, c, d, a]))
        .collect();
    let out = jax_privacy(&json!({ "one_run_fdp": q }));
    for (i, &(m, k, c, d, a)) in ONE_RUN_GDP_CASES.iter().enumerate() {
        let ours = one_run_gdp::epsilon_lower_bound(m, k, c, d, a).unwrap();
        let theirs = out["one_run_fdp_eps"][i].as_f64().unwrap();
        assert!(
            (ours - theirs).abs() <= JAX_ONE_RUN_EPS_ABSOLUTE,
            "one-run GDP ε({m},{k},{c},{d},{a}) = {ours}, jax_privacy {theirs}"
        );
    }
}

/// (hits_x, n_x, hits_x′, n_x′, δ, α): an audit-sized event near ε = 2, pure and approximate DP,
/// a far tail, one with no hits on `x′`, and one at chance (bound 0).
const EVENT_CASES: &[(u64, u64, u64, u64, f64, f64)] = &[
    (900, 1000, 100, 1000, 1e-5, 0.05),
    (88_080, 100_000, 11_920, 100_000, 0.0, 0.05),
    (500_000, 1_000_000, 67_668, 1_000_000, 1e-5, 0.01),
    (2_000, 500_000, 40, 500_000, 1e-6, 0.05),
    (1_000, 10_000, 0, 10_000, 1e-5, 0.05),
    (50, 100, 50, 100, 1e-5, 0.05),
];

#[test]
#[cfg_attr(
    not(has_jax_privacy),
    ignore = "python3 cannot load jax_privacy's auditing module"
)]
fn event_bound_matches_jax_privacy() {
    let q: Vec<_> = EVENT_CASES
        .iter()
        .map(|&(hx, nx, hxp, nxp, d, a)| json!([hx, nx, hxp, nxp, d, a]))
        .collect();
    let out = jax_privacy(&json!({ "event": q }));
    for (i, &(hits_x, n_x, hits_x_prime, n_x_prime, d, a)) in EVENT_CASES.iter().enumerate() {
        let counts = EventCounts {
            hits_x,
            n_x,
            hits_x_prime,
            n_x_prime,
        };
        let ours = event_bound(counts, d, a).unwrap().epsilon_lower_bound;
        let theirs = out["event_eps"][i].as_f64().unwrap();
        assert!(
            close_rel(ours, theirs, JAX_EVENT_EPS_RELATIVE),
            "event {counts:?} at δ = {d}, α = {a}: ε_lb = {ours}, jax_privacy {theirs}"
        );
    }
}
