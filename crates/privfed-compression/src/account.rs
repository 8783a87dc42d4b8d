//! Accounting for uses of an MVU design (paper 004 §4.3; `docs/ALGORITHMS.md` §3.5, §5.1): the
//! per-step RDP curve and pure ε of the scalar or vector mechanism ([`scalar_step`],
//! [`vector_step`]) and the accountant for `T` locally sampled steps ([`steps_accountant`]).
//!
//! The RDP formulas of MVU are in [`crate::rdp`]; the composition, local sampling, pure-DP RDP
//! and the pure-composition cap are privfed-accounting's ([`PureCappedRdpAccountant`]).

use privfed_accounting::rdp::{local_sampled_rdp, pure_dp_rdp};
use privfed_accounting::report::{Answer, Query, rdp_answer};
use privfed_accounting::{DpEvent, PureCappedRdpAccountant};
use privfed_mechanisms::Result;
use privfed_mechanisms::mvu::{DpConstraint, MvuDesign};
use serde::Serialize;

use crate::rdp::{check_dim, check_vector, mvu_rdp_curve, vector_rdp_greedy, vector_rdp_lp};

/// Per order, which bound of [`vector_step`] gave the value (counts of orders).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct OrdersPerBound {
    /// Orders where the LP relaxation (4) is the smallest (up to rounding).
    pub lp_relaxation: usize,
    /// Orders where the greedy bound (Lemma 7) is the smallest.
    pub greedy: usize,
    /// Orders where the pure-DP RDP at the vector's pure ε is the smallest.
    pub pure_dp: usize,
}

/// The vector mechanism's parameters, as reported.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct VectorParams {
    /// The dimension d.
    pub dim: usize,
    /// The ℓp distance Δ between neighbouring rescaled dithered inputs.
    pub sensitivity: f64,
    /// The metric power p (1 for an LDP design).
    pub p: u32,
}

/// Which RDP bound a step uses (serialized as the CLI's `bound` object).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RdpBoundReport {
    /// `exact_scalar`, or the bounds used by the vector mechanism joined by `+`
    /// (`lp_relaxation`, `greedy`, `pure_dp`).
    pub rdp_bound: String,
    /// Vector only: how many orders each bound won.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub orders_per_bound: Option<OrdersPerBound>,
    /// What the bound is.
    pub note: &'static str,
    /// Vector only: its parameters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector: Option<VectorParams>,
}

/// One use of an MVU design: its RDP curve on the given orders, its pure ε and the bound used.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MvuStep {
    /// `ε(α)` per order.
    pub curve: Vec<f64>,
    /// The step's pure ε.
    pub pure_epsilon: f64,
    /// Which bound the curve is.
    pub bound: RdpBoundReport,
}

/// Scalar mechanism: the exact curve `max_{i,i'} D^α_{i,i'}` ([`mvu_rdp_curve`]), pure ε the
/// design's exact ε-LDP.
pub fn scalar_step(design: &MvuDesign, orders: &[f64]) -> Result<MvuStep> {
    Ok(MvuStep {
        curve: mvu_rdp_curve(design, orders)?,
        pure_epsilon: design.ldp_epsilon(),
        bound: RdpBoundReport {
            rdp_bound: "exact_scalar".into(),
            orders_per_bound: None,
            note: "max over pairs of input levels of D_alpha(P_i || P_i'); exact over continuous inputs",
            vector: None,
        },
    })
}

/// The metric power p of the vector budget: the design's for metric DP, 1 for LDP.
fn vector_power(design: &MvuDesign) -> u32 {
    match design.constraint() {
        DpConstraint::Metric { power } => power,
        DpConstraint::Ldp => 1,
    }
}

/// Pure ε of the `dim`-coordinate vector mechanism whose rescaled dithered inputs differ by at
/// most `sensitivity` (Δ) in `ℓp` (Lemma 6): each coordinate whose level changes costs at least 1
/// in `Σ_l |i_l − i'_l|^p ≤ ((B_in − 1)·Δ)^p` and contributes at most the design's ε-LDP, so at
/// most `min(d, ⌊((B_in − 1)Δ)^p⌋)·ε_LDP`; for a metric design also `ε_metric·Δ^p`.
pub fn vector_pure_epsilon(design: &MvuDesign, dim: usize, sensitivity: f64) -> Result<f64> {
    let p = vector_power(design);
    check_vector(p, sensitivity)?;
    check_dim(dim)?;
    let budget = ((design.num_inputs() - 1) as f64 * sensitivity).powi(p as i32);
    // A tiny relative slack so that a budget that is an integer up to rounding counts fully.
    let changed = (budget * (1.0 + 1e-12)).floor().min(dim as f64);
    let mut pure = changed * design.ldp_epsilon();
    if let DpConstraint::Metric { .. } = design.constraint() {
        pure = pure.min(design.exact_epsilon() * sensitivity.powi(p as i32));
    }
    Ok(pure)
}

/// Vector mechanism (Lemma 6; dithered inputs whose rescaled ℓp distance is at most
/// `sensitivity`): per order the smallest of three valid upper bounds — the LP relaxation (4)
/// ([`vector_rdp_lp`]), the greedy bound (Lemma 7, [`vector_rdp_greedy`]; never below the LP,
/// kept as a check) and the RDP of a pure ε-DP mechanism ([`pure_dp_rdp`]) at the vector's pure
/// ε ([`vector_pure_epsilon`]).
pub fn vector_step(
    design: &MvuDesign,
    orders: &[f64],
    dim: usize,
    sensitivity: f64,
) -> Result<MvuStep> {
    let pure = vector_pure_epsilon(design, dim, sensitivity)?;
    let p = vector_power(design);
    let mut curve = Vec::with_capacity(orders.len());
    let mut wins = OrdersPerBound::default();
    for &a in orders {
        let lp = vector_rdp_lp(design, a, p, sensitivity, dim)?;
        let greedy = vector_rdp_greedy(design, a, p, sensitivity)?;
        let pure_rdp = pure_dp_rdp(pure, a);
        // The value is the smallest; the credit goes to the LP unless another bound is below it
        // by more than rounding (the LP and the greedy bound coincide when the best ratio
        // D_k/k^p is at a distance the budget per coordinate covers, up to one ulp).
        let v = lp.min(greedy).min(pure_rdp);
        if lp <= v * (1.0 + 1e-12) {
            wins.lp_relaxation += 1;
        } else if greedy <= pure_rdp {
            wins.greedy += 1;
        } else {
            wins.pure_dp += 1;
        }
        curve.push(v);
    }
    let used: Vec<&str> = [
        (wins.lp_relaxation, "lp_relaxation"),
        (wins.greedy, "greedy"),
        (wins.pure_dp, "pure_dp"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|&(_, name)| name)
    .collect();
    Ok(MvuStep {
        curve,
        pure_epsilon: pure,
        bound: RdpBoundReport {
            rdp_bound: used.join("+"),
            orders_per_bound: Some(wins),
            note: "per order the smallest of the LP relaxation (4), the greedy bound (Lemma 7) and the pure-DP RDP at the vector's pure epsilon",
            vector: Some(VectorParams {
                dim,
                sensitivity,
                p,
            }),
        },
    })
}

/// `steps` uses of `step` (computed on `orders`), each client taking part with probability
/// `rate` (local sampling, [`local_sampled_rdp`] per order when `rate < 1`): the event
/// `SelfComposed(RdpCurve, steps)` and a [`PureCappedRdpAccountant`] that has composed it with
/// the pure total `steps·ε_pure` (which local sampling does not reduce).
pub fn steps_accountant(
    step: &MvuStep,
    orders: &[f64],
    rate: f64,
    steps: u64,
) -> privfed_accounting::Result<(DpEvent, PureCappedRdpAccountant)> {
    if !(rate > 0.0 && rate <= 1.0) {
        return Err(privfed_accounting::AccountingError::invalid(
            "sampling_rate",
            rate,
            "must lie in (0, 1]",
        ));
    }
    let curve = if rate < 1.0 {
        step.curve
            .iter()
            .zip(orders)
            .map(|(&e, &a)| local_sampled_rdp(rate, e, a))
            .collect::<privfed_accounting::Result<Vec<_>>>()?
    } else {
        step.curve.clone()
    };
    let event = DpEvent::SelfComposed {
        event: Box::new(DpEvent::RdpCurve {
            orders: orders.to_vec(),
            epsilons: curve,
        }),
        count: steps,
    };
    let mut acc = PureCappedRdpAccountant::new();
    acc.compose_with_pure_epsilon(&event, step.pure_epsilon * steps as f64)?;
    Ok((event, acc))
}

/// `steps` locally sampled uses of an MVU design (`privfed account --mechanism mvu`): the
/// step's bound, the composed RDP curve and the capped RDP accountant's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MvuAccountReport {
    /// Always `rdp` (the PLD accountant does not take RDP curves).
    pub accountant: &'static str,
    /// Always `mvu`.
    pub mechanism: &'static str,
    /// Where the design came from (the file name the caller gives).
    pub design: String,
    /// The design's constraint (ε-LDP or metric DP).
    pub design_constraint: DpConstraint,
    /// Number of steps T.
    pub steps: u64,
    /// Local sampling rate q.
    pub sampling_rate: f64,
    /// The pure ε of one step.
    pub pure_epsilon_per_step: f64,
    /// Which RDP bound a step uses.
    pub bound: RdpBoundReport,
    /// The composed event `SelfComposed(RdpCurve, T)`.
    pub event: DpEvent,
    /// How local sampling is accounted (only when q < 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampling: Option<&'static str>,
    /// ε at δ (and the optimal order) or δ at ε, capped by `T·ε_pure`.
    #[serde(flatten)]
    pub answer: Answer,
}

/// The [`MvuAccountReport`] of `steps` uses of `step` (a step of `design`, computed on
/// `orders`) at local sampling rate `rate` ([`steps_accountant`]), answering `query`.
pub fn account_steps(
    design: &MvuDesign,
    label: String,
    step: MvuStep,
    orders: &[f64],
    rate: f64,
    steps: u64,
    query: Query,
) -> privfed_accounting::Result<MvuAccountReport> {
    let (event, acc) = steps_accountant(&step, orders, rate, steps)?;
    Ok(MvuAccountReport {
        accountant: "rdp",
        mechanism: "mvu",
        design: label,
        design_constraint: design.constraint(),
        steps,
        sampling_rate: rate,
        pure_epsilon_per_step: step.pure_epsilon,
        bound: step.bound,
        event,
        sampling: (rate < 1.0).then_some(
            "local: each step the client reports with probability q, else nothing; per order \
             ln(1 - q + q*exp((alpha-1)*eps(alpha)))/(alpha-1), exact when absence is visible",
        ),
        answer: rdp_answer(&acc, query)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::designer::grr_design;
    use privfed_accounting::BoundSource;
    use privfed_accounting::rdp::default_orders;

    #[test]
    fn scalar_step_is_the_exact_curve() {
        let d = grr_design(2, 2, 1.0, DpConstraint::Ldp).unwrap();
        let orders = [2.0, 4.0, 16.0];
        let s = scalar_step(&d, &orders).unwrap();
        assert_eq!(s.curve, mvu_rdp_curve(&d, &orders).unwrap());
        assert_eq!(s.pure_epsilon, d.ldp_epsilon());
        let v = serde_json::to_value(&s.bound).unwrap();
        assert_eq!(v["rdp_bound"], "exact_scalar");
        assert!(v.get("vector").is_none() && v.get("orders_per_bound").is_none());
    }

    #[test]
    fn vector_pure_epsilon_counts_changed_coordinates() {
        // LDP design, B_in = 4: budget (3Δ)^1; Δ = 1/3 changes one coordinate, Δ = 1 three.
        let d = grr_design(2, 2, 1.0, DpConstraint::Ldp).unwrap();
        let e = d.ldp_epsilon();
        assert_eq!(vector_pure_epsilon(&d, 10, 1.0 / 3.0).unwrap(), e);
        assert_eq!(vector_pure_epsilon(&d, 10, 1.0).unwrap(), 3.0 * e);
        // At most d coordinates change.
        assert_eq!(vector_pure_epsilon(&d, 2, 1.0).unwrap(), 2.0 * e);
        // Metric design: also ε_metric·Δ^p.
        let m = grr_design(2, 2, 1.0, DpConstraint::Metric { power: 1 }).unwrap();
        let pm = vector_pure_epsilon(&m, 10, 1.0).unwrap();
        assert!(pm <= m.exact_epsilon() * 1.0 + 1e-15);
        assert!(vector_pure_epsilon(&d, 0, 1.0).is_err());
        assert!(vector_pure_epsilon(&d, 3, 0.0).is_err());
        assert!(vector_pure_epsilon(&d, 3, f64::NAN).is_err());
    }

    #[test]
    fn vector_step_takes_the_smallest_bound_per_order() {
        let d = grr_design(2, 2, 2.0, DpConstraint::Ldp).unwrap();
        let orders = default_orders();
        let (dim, sens) = (4, 0.5);
        let s = vector_step(&d, &orders, dim, sens).unwrap();
        let pure = vector_pure_epsilon(&d, dim, sens).unwrap();
        assert_eq!(s.pure_epsilon, pure);
        for (&a, &v) in orders.iter().zip(&s.curve) {
            let lp = vector_rdp_lp(&d, a, 1, sens, dim).unwrap();
            let g = vector_rdp_greedy(&d, a, 1, sens).unwrap();
            assert_eq!(v, lp.min(g).min(pure_dp_rdp(pure, a)), "α = {a}");
        }
        let w = s.bound.orders_per_bound.unwrap();
        assert_eq!(w.lp_relaxation + w.greedy + w.pure_dp, orders.len());
        let names: Vec<&str> = s.bound.rdp_bound.split('+').collect();
        assert_eq!(names.contains(&"pure_dp"), w.pure_dp > 0);
        assert_eq!(names.contains(&"lp_relaxation"), w.lp_relaxation > 0);
        let v = serde_json::to_value(&s.bound).unwrap();
        assert_eq!(v["vector"]["dim"], 4);
        assert_eq!(v["vector"]["p"], 1);
        assert!(vector_step(&d, &orders, 0, sens).is_err());
    }

    #[test]
    fn steps_accountant_samples_composes_and_caps() {
        let d = grr_design(1, 1, 1.0, DpConstraint::Ldp).unwrap();
        let orders = default_orders();
        let s = scalar_step(&d, &orders).unwrap();
        let (event, acc) = steps_accountant(&s, &orders, 1.0, 2).unwrap();
        assert_eq!(acc.pure_total(), Some(2.0 * s.pure_epsilon));
        assert_eq!(acc.ledger().events(), std::slice::from_ref(&event));
        // Two uses of 1-DP binary RR: pure composition (ε = 2) beats RDP at δ = 1e-9.
        let e = acc.epsilon_answer(1e-9).unwrap();
        assert_eq!(e.epsilon_from, Some(BoundSource::PureComposition));
        assert!((e.epsilon - 2.0 * s.pure_epsilon).abs() < 1e-15);
        // Local sampling shrinks the curve per order, not the pure total.
        let (ev_q, acc_q) = steps_accountant(&s, &orders, 0.1, 2).unwrap();
        assert_eq!(acc_q.pure_total(), acc.pure_total());
        let DpEvent::SelfComposed { event: inner, .. } = ev_q else {
            panic!("{ev_q:?}")
        };
        let DpEvent::RdpCurve { epsilons, .. } = *inner else {
            panic!("{inner:?}")
        };
        for ((&sampled, &full), &a) in epsilons.iter().zip(&s.curve).zip(&orders) {
            assert_eq!(sampled, local_sampled_rdp(0.1, full, a).unwrap());
            assert!(sampled <= full);
        }
        assert!(steps_accountant(&s, &orders, 0.0, 2).is_err());
    }
}
