//! RDP accountant against Google's dp_accounting 0.6.0 (tolerances in `common::tol`).

use crate::common::{dp_accounting_orders, oracle, tol};
use privfed_accounting::{DpEvent, RdpAccountant};
use serde_json::json;

/// Single-step events, each with several (steps, δ) pairs (one dp_accounting curve each).
fn cases() -> Vec<(DpEvent, Vec<(u64, f64)>)> {
    let mut v = Vec::new();
    for z in [0.5, 1.0, 2.0, 5.0] {
        v.push((
            DpEvent::Gaussian {
                noise_multiplier: z,
            },
            vec![(1, 1e-5), (1, 1e-8), (100, 1e-5), (100, 1e-8)],
        ));
    }
    for q in [0.001, 0.01, 0.1, 0.5] {
        for z in [0.6, 0.8, 1.1, 2.0, 4.0] {
            v.push((
                DpEvent::poisson_gaussian(q, z, 1),
                vec![(1, 1e-5), (1000, 1e-8), (10_000, 1e-5)],
            ));
        }
    }
    v
}

#[test]
#[cfg_attr(not(has_dp_accounting), ignore = "python3 cannot import dp_accounting")]
fn epsilon_never_looser_than_dp_accounting() {
    let cases = cases();
    let queries: Vec<_> = cases
        .iter()
        .map(|(e, pairs)| json!({"kind": "rdp_epsilons", "event": e, "pairs": pairs}))
        .collect();
    let answers = oracle(&json!(queries));
    let (mut n, mut tighter) = (0, 0);
    let mut max_gain: f64 = 0.0;
    for ((event, pairs), ans) in cases.iter().zip(answers) {
        for (&(steps, delta), a) in pairs.iter().zip(ans.as_array().unwrap()) {
            n += 1;
            let theirs = a["epsilon"].as_f64().unwrap();
            let composed = DpEvent::SelfComposed {
                event: Box::new(event.clone()),
                count: steps,
            };
            let mut acc = RdpAccountant::new();
            acc.compose(&composed).unwrap();
            let ours = acc.get_epsilon_and_order(delta).unwrap();
            assert!(
                ours.epsilon <= theirs * (1.0 + tol::RDP_EPS_MAX_LOOSER),
                "{} x {steps} δ={delta}: ours {} (α={}) vs dp_accounting {theirs} (α={})",
                event.name(),
                ours.epsilon,
                ours.optimal_order,
                a["order"]
            );
            if ours.epsilon < theirs * (1.0 - 1e-9) {
                tighter += 1;
                max_gain = f64::max(max_gain, 1.0 - ours.epsilon / theirs);
                if 1.0 - ours.epsilon / theirs > 0.01 {
                    eprintln!(
                        "  {} x {steps} δ={delta}: ours {} (α={}) vs {theirs} (α={})",
                        event.name(),
                        ours.epsilon,
                        ours.optimal_order,
                        a["order"]
                    );
                }
            }
        }
    }
    eprintln!(
        "{tighter} of {n} cases tighter than dp_accounting (richer order grid, and orders it \
         drops or gets wrong), by at most {:.2}%",
        100.0 * max_gain
    );
}

#[test]
#[cfg_attr(not(has_dp_accounting), ignore = "python3 cannot import dp_accounting")]
fn per_order_curves_agree_with_dp_accounting() {
    // The same events on dp_accounting's integer orders (both use the exact binomial sum).
    // Fractional orders are checked against mpmath instead (`fractional_orders_match_mpmath`):
    // dp_accounting's series is inaccurate there (e.g. q = 0.001, z = 0.6, α = 1.1: it gives
    // 8.693e-6 where mpmath and we give 7.866e-6) or fails and returns +inf.
    let orders: Vec<f64> = dp_accounting_orders()
        .into_iter()
        .filter(|a| a.fract() == 0.0)
        .collect();
    let mut events = Vec::new();
    for q in [0.001, 0.01, 0.1, 0.5, 1.0] {
        for z in [0.6, 0.8, 1.1, 2.0, 4.0] {
            events.push(DpEvent::poisson_gaussian(q, z, 1));
        }
    }
    let queries: Vec<_> = events
        .iter()
        .map(|e| json!({"kind": "rdp_curve", "event": e, "orders": orders}))
        .collect();
    let answers = oracle(&json!(queries));
    let mut dropped = 0; // stays 0 at integer orders
    for (event, ans) in events.iter().zip(answers) {
        let mut acc = RdpAccountant::with_orders(orders.clone()).unwrap();
        acc.compose(event).unwrap();
        for (i, theirs) in ans["rdp"].as_array().unwrap().iter().enumerate() {
            let ours = acc.rdp()[i];
            assert!(
                ours.is_finite(),
                "{} α={}: ours not finite",
                event.name(),
                orders[i]
            );
            let Some(theirs) = theirs.as_f64().filter(|t| t.is_finite()) else {
                dropped += 1;
                continue;
            };
            let diff = (ours - theirs).abs();
            assert!(
                diff <= tol::RDP_CURVE_REL * theirs.abs() + tol::RDP_CURVE_ABS,
                "{} α={}: ours {ours} vs dp_accounting {theirs}",
                event.name(),
                orders[i]
            );
        }
    }
    eprintln!("dp_accounting dropped {dropped} (event, order) pairs; we computed all of them");
}

#[test]
fn fractional_orders_match_mpmath() {
    // tests/data/rdp_fractional_reference.json: mpmath quadrature at 40 digits
    // (scripts/reference/rdp_fractional_mpmath.py).
    let data: serde_json::Value =
        serde_json::from_str(include_str!("../data/rdp_fractional_reference.json")).unwrap();
    for c in data["cases"].as_array().unwrap() {
        let (q, z, a) = (
            c["q"].as_f64().unwrap(),
            c["z"].as_f64().unwrap(),
            c["alpha"].as_f64().unwrap(),
        );
        let want = c["rdp"].as_f64().unwrap();
        let got = privfed_accounting::rdp::poisson_gaussian_rdp(q, z, a);
        assert!(
            (got - want).abs() <= tol::RDP_FRACTIONAL_REL * want,
            "q={q} z={z} α={a}: {got} vs mpmath {want}"
        );
    }
}
