//! PLD accountant and calibration against Google's dp_accounting 0.6.0 (tolerances in
//! `common::tol`).

use crate::common::{oracle, tol};
use privfed_accounting::calibrate::{AccountantKind, calibrate_noise_multiplier};
use privfed_accounting::{DpEvent, PldAccountant};
use serde_json::json;

fn cases() -> Vec<(DpEvent, f64)> {
    let mut v = Vec::new();
    // Kept small: dp_accounting is slow (seconds per case on a loaded machine).
    for (z, steps) in [(0.8, 1), (2.0, 100)] {
        v.push((DpEvent::poisson_gaussian(1.0, z, steps), 1e-5));
    }
    for (q, z, steps, delta) in [
        (0.01, 0.8, 1000, 1e-5),
        (0.1, 1.1, 100, 1e-7),
        (0.1, 2.0, 300, 1e-6),
        (0.001, 0.6, 300, 1e-5),
    ] {
        v.push((DpEvent::poisson_gaussian(q, z, steps), delta));
    }
    for (b, steps) in [(1.0, 1), (3.0, 10)] {
        v.push((
            DpEvent::SelfComposed {
                event: Box::new(DpEvent::Laplace { scale: b }),
                count: steps,
            },
            1e-5,
        ));
    }
    for (q, b, steps) in [(0.01, 1.0, 1000), (0.2, 3.0, 50)] {
        v.push((
            DpEvent::SelfComposed {
                event: Box::new(DpEvent::PoissonSampled {
                    rate: q,
                    event: Box::new(DpEvent::Laplace { scale: b }),
                }),
                count: steps,
            },
            1e-6,
        ));
    }
    // A heterogeneous composition: Gaussian part folded in at query time.
    v.push((
        DpEvent::Composed {
            events: vec![
                DpEvent::poisson_gaussian(0.05, 1.5, 100),
                DpEvent::Gaussian {
                    noise_multiplier: 4.0,
                },
                DpEvent::SelfComposed {
                    event: Box::new(DpEvent::Laplace { scale: 5.0 }),
                    count: 3,
                },
            ],
        },
        1e-6,
    ));
    v
}

#[test]
#[cfg_attr(not(has_dp_accounting), ignore = "python3 cannot import dp_accounting")]
fn pld_epsilon_agrees_and_is_not_below() {
    let cases = cases();
    let queries: Vec<_> = cases
        .iter()
        .map(|(e, d)| json!({"kind": "pld_epsilon", "event": e, "delta": d}))
        .collect();
    let answers = oracle(&json!(queries));
    for ((event, delta), ans) in cases.iter().zip(answers) {
        let theirs = ans["epsilon"].as_f64().unwrap();
        let mut acc = PldAccountant::new();
        acc.compose(event).unwrap();
        let ours = acc.get_epsilon(*delta).unwrap();
        let rel = ours / theirs - 1.0;
        eprintln!(
            "{} δ={delta}: ours {ours:.6} dp_accounting {theirs:.6} ({:+.4}%)",
            event.name(),
            100.0 * rel
        );
        assert!(
            rel.abs() <= tol::PLD_EPS_REL,
            "{} δ={delta}: ours {ours} vs dp_accounting {theirs}",
            event.name()
        );
        assert!(
            rel >= -tol::PLD_EPS_MAX_BELOW,
            "{} δ={delta}: ours {ours} below dp_accounting {theirs}",
            event.name()
        );
    }
}

#[test]
#[cfg_attr(not(has_dp_accounting), ignore = "python3 cannot import dp_accounting")]
fn pld_delta_agrees() {
    let cases: Vec<(DpEvent, f64)> = vec![
        (DpEvent::poisson_gaussian(0.02, 1.1, 300), 1.0),
        (
            DpEvent::SelfComposed {
                event: Box::new(DpEvent::Laplace { scale: 2.0 }),
                count: 20,
            },
            5.0,
        ),
    ];
    let queries: Vec<_> = cases
        .iter()
        .map(|(e, eps)| json!({"kind": "pld_delta", "event": e, "epsilon": eps}))
        .collect();
    let answers = oracle(&json!(queries));
    for ((event, eps), ans) in cases.iter().zip(answers) {
        let theirs = ans["delta"].as_f64().unwrap();
        let mut acc = PldAccountant::new();
        acc.compose(event).unwrap();
        let ours = acc.get_delta(*eps).unwrap();
        // δ is far more sensitive than ε (δ ≈ e^{−ε²/…}); 2% in δ is ≪ 0.5% in ε here.
        let rel = ours / theirs - 1.0;
        assert!(
            rel.abs() <= tol::PLD_DELTA_REL,
            "{} ε={eps}: ours {ours} vs dp_accounting {theirs}",
            event.name()
        );
    }
}

#[test]
#[cfg_attr(not(has_dp_accounting), ignore = "python3 cannot import dp_accounting")]
fn calibration_agrees_with_dp_accounting() {
    let cases = [
        (AccountantKind::Rdp, 2.0, 1e-5, 0.01, 1000u64),
        (AccountantKind::Rdp, 8.0, 1e-6, 1.0, 1),
        // One PLD case (dp_accounting's PLD calibration costs ~10 s of CPU per subsampled case);
        // the PLD accountant itself is compared on subsampled cases above.
        (AccountantKind::Pld, 3.0, 1e-6, 1.0, 10),
    ];
    let queries: Vec<_> = cases
        .iter()
        .map(|&(k, e, d, q, t)| {
            json!({"kind": "calibrate", "accountant": k, "target_epsilon": e, "delta": d,
                   "rate": q, "steps": t})
        })
        .collect();
    let answers = oracle(&json!(queries));
    for (&(kind, eps, delta, q, steps), ans) in cases.iter().zip(answers) {
        let theirs = ans["noise_multiplier"].as_f64().unwrap();
        let ours = calibrate_noise_multiplier(kind, eps, delta, q, steps).unwrap();
        assert!(ours.epsilon <= eps);
        assert!(
            (ours.parameter / theirs - 1.0).abs() <= tol::CALIBRATION_REL,
            "{kind:?} ε={eps} δ={delta} q={q} T={steps}: ours {} vs dp_accounting {theirs}",
            ours.parameter
        );
    }
}
