//! Sampling without replacement (replace-one) against Google's dp_accounting 0.6.0: stored
//! values (always run; `tests/data/rdp_wor_reference.json`, written by
//! `python3 scripts/reference/dp_accounting_wor.py`) and the live oracle on further cases
//! (ignored, with the reason, where python3 cannot import dp_accounting). Tolerances in
//! `common::tol`.

use crate::common::{dp_accounting_orders, oracle, tol};
use privfed_accounting::{DpEvent, NeighbouringRelation, RdpAccountant};
use serde_json::json;

fn wor(n: u64, m: u64, z: f64) -> DpEvent {
    DpEvent::SampledWithoutReplacement {
        source_dataset_size: n,
        sample_size: m,
        event: Box::new(DpEvent::Gaussian {
            noise_multiplier: z,
        }),
    }
}

fn replace_one(orders: Vec<f64>) -> RdpAccountant {
    RdpAccountant::with_relation(orders, NeighbouringRelation::ReplaceOne).unwrap()
}

/// Ours against theirs at one order: equal, except that ours is capped by the un-sampled
/// Gaussian `α/(2z²)` (never looser).
fn check_order(what: &str, alpha: f64, z: f64, ours: f64, theirs: Option<f64>) {
    let cap = alpha / (2.0 * z * z);
    let Some(theirs) = theirs else {
        assert!(ours.is_finite() && ours <= cap, "{what} α={alpha}: {ours}");
        return;
    };
    let want = theirs.min(cap);
    assert!(
        (ours - want).abs() <= tol::RDP_CURVE_REL * want + tol::RDP_CURVE_ABS,
        "{what} α={alpha}: ours {ours} vs dp_accounting {theirs} (cap {cap})"
    );
}

#[test]
fn stored_dp_accounting_values_agree() {
    let data: serde_json::Value =
        serde_json::from_str(include_str!("../data/rdp_wor_reference.json")).unwrap();
    let orders: Vec<f64> = data["orders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    // dp_accounting 0.6.0's DEFAULT_RDP_ORDERS (it has 11, which `dp_accounting_orders` skips).
    assert!(dp_accounting_orders().iter().all(|a| orders.contains(a)));
    for c in data["cases"].as_array().unwrap() {
        let (n, m, z) = (
            c["n"].as_u64().unwrap(),
            c["m"].as_u64().unwrap(),
            c["z"].as_f64().unwrap(),
        );
        let event = wor(n, m, z);
        let mut acc = replace_one(orders.clone());
        acc.compose(&event).unwrap();
        let curve = acc.rdp();
        for (i, theirs) in c["rdp"].as_array().unwrap().iter().enumerate() {
            check_order(
                &format!("n={n} m={m} z={z}"),
                orders[i],
                z,
                curve[i],
                theirs.as_f64(),
            );
        }
        for p in c["epsilons"].as_array().unwrap() {
            let (steps, delta, theirs) = (
                p["steps"].as_u64().unwrap(),
                p["delta"].as_f64().unwrap(),
                p["epsilon"].as_f64().unwrap(),
            );
            // The same orders: the same ε (or smaller where the cap bites).
            let mut same = replace_one(orders.clone());
            same.compose_repeated(&event, steps).unwrap();
            let e = same.get_epsilon(delta).unwrap();
            assert!(
                e <= theirs * (1.0 + 1e-9) && e >= theirs * (1.0 - 1e-6),
                "n={n} m={m} z={z} x{steps} δ={delta}: ours {e} vs dp_accounting {theirs}"
            );
            // privfed's default grid (a superset): never looser than the tolerance.
            let mut default = RdpAccountant::with_relation(
                privfed_accounting::rdp::default_orders(),
                NeighbouringRelation::ReplaceOne,
            )
            .unwrap();
            default.compose_repeated(&event, steps).unwrap();
            let d = default.get_epsilon(delta).unwrap();
            assert!(
                d <= theirs * (1.0 + tol::RDP_EPS_MAX_LOOSER),
                "n={n} m={m} z={z} x{steps} δ={delta}: default grid {d} vs {theirs}"
            );
        }
    }
}

#[test]
#[cfg_attr(not(has_dp_accounting), ignore = "python3 cannot import dp_accounting")]
fn live_dp_accounting_curves_agree() {
    let orders = dp_accounting_orders();
    let cases = [
        (50u64, 7u64, 0.7),
        (3000, 30, 1.3),
        (200, 199, 3.0),
        (100_000, 100, 0.9),
    ];
    let queries: Vec<_> = cases
        .iter()
        .map(|&(n, m, z)| {
            json!({"kind": "rdp_curve", "event": wor(n, m, z), "orders": orders,
                   "relation": "replace_one"})
        })
        .collect();
    let answers = oracle(&json!(queries));
    for (&(n, m, z), ans) in cases.iter().zip(answers) {
        let mut acc = replace_one(orders.clone());
        acc.compose(&wor(n, m, z)).unwrap();
        let curve = acc.rdp();
        for (i, theirs) in ans["rdp"].as_array().unwrap().iter().enumerate() {
            check_order(
                &format!("n={n} m={m} z={z}"),
                orders[i],
                z,
                curve[i],
                theirs.as_f64(),
            );
        }
    }
}
