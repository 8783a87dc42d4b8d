//! Reports of the accounting questions the front ends ask (`privfed account`, `privfed
//! calibrate`, `privfed analyze ddml|reconstruction|gaussian`): each a `Serialize` struct whose
//! JSON is what the command line prints with `--json` and what the Python bindings return as a
//! dict, field for field in the same order.
//!
//! The computations are those of [`crate::rdp`], [`crate::pld`], [`crate::pure_cap`],
//! [`crate::calibrate`] and [`crate::analysis`]; this module only assembles their answers.

use crate::AccountingError;
use crate::analysis::{
    analytic_gaussian_sigma, draw_and_discard, max_epsilon_for_reconstruction, reconstruction_bound,
};
use crate::calibrate::{
    AccountantKind, calibrate_laplace_scale, calibrate_noise_multiplier, calibrate_skellam_variance,
};
use crate::error::Result;
use crate::event::DpEvent;
use crate::pld::PldAccountant;
use crate::pure_cap::{CappedDelta, CappedEpsilon, PureCappedRdpAccountant};
use serde::Serialize;

/// What an accounting report answers: ε at a δ, or δ at an ε.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Query {
    /// ε at this δ ∈ (0, 1).
    EpsilonAt {
        /// δ.
        delta: f64,
    },
    /// δ at this ε ≥ 0.
    DeltaAt {
        /// ε.
        epsilon: f64,
    },
}

/// The answer of an accountant to a [`Query`], in the report's order of keys.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Answer {
    /// The capped RDP accountant's ε at δ ([`PureCappedRdpAccountant::epsilon_answer`]).
    RdpEpsilon(CappedEpsilon),
    /// The capped RDP accountant's δ at ε ([`PureCappedRdpAccountant::delta_answer`]).
    RdpDelta(CappedDelta),
    /// The PLD accountant's ε at δ.
    PldEpsilon(PldEpsilonAnswer),
    /// The PLD accountant's δ at ε.
    PldDelta(PldDeltaAnswer),
}

/// The PLD accountant's ε at δ (keys `delta`, `epsilon`, `note`, `value_discretization`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PldEpsilonAnswer {
    /// The requested δ.
    pub delta: f64,
    /// ε at δ; `null` in JSON when unbounded (the mass at infinite privacy loss exceeds δ).
    pub epsilon: f64,
    /// Why ε is unbounded (only then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<&'static str>,
    /// The grid width of the privacy loss distribution (nats).
    pub value_discretization: f64,
}

/// The PLD accountant's δ at ε (keys `epsilon`, `delta`, `value_discretization`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PldDeltaAnswer {
    /// The requested ε.
    pub epsilon: f64,
    /// δ at ε.
    pub delta: f64,
    /// The grid width of the privacy loss distribution (nats).
    pub value_discretization: f64,
}

/// The note of an unbounded PLD ε.
const UNBOUNDED: &str = "epsilon is unbounded: the mass at infinite loss exceeds delta";

/// The capped RDP accountant's answer to `query` (with a pure total the RDP figure is kept as
/// `epsilon_rdp` / `delta_rdp` and the source named in `epsilon_from` / `delta_from`).
pub fn rdp_answer(acc: &PureCappedRdpAccountant, query: Query) -> Result<Answer> {
    Ok(match query {
        Query::EpsilonAt { delta } => Answer::RdpEpsilon(acc.epsilon_answer(delta)?),
        Query::DeltaAt { epsilon } => Answer::RdpDelta(acc.delta_answer(epsilon)?),
    })
}

/// What `privfed account` asks: `steps` uses of the per-step event `step`, each Poisson
/// subsampled at `sampling_rate` (central sampling; local sampling for a pure ε-DP step, as
/// [`DpEvent::sampled_steps`] decides).
#[derive(Debug, Clone, PartialEq)]
pub struct AccountRequest {
    /// The accountant.
    pub accountant: AccountantKind,
    /// The event of one step, before sampling and composition.
    pub step: DpEvent,
    /// Sampling rate q ∈ (0, 1].
    pub sampling_rate: f64,
    /// Number of steps T ≥ 1.
    pub steps: u64,
    /// ε at δ or δ at ε.
    pub query: Query,
    /// PLD grid width (default [`PldAccountant::new`]'s); PLD only.
    pub value_discretization: Option<f64>,
}

/// The privacy of `steps` sampled uses of a mechanism (`privfed account`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccountReport {
    /// The accountant (`rdp`: capped by pure composition when every step is pure; `pld`).
    pub accountant: AccountantKind,
    /// The step's mechanism ([`mechanism_name`]).
    pub mechanism: String,
    /// Number of steps T.
    pub steps: u64,
    /// Sampling rate q.
    pub sampling_rate: f64,
    /// The composed event: `SelfComposed(Sampled(step), T)` ([`DpEvent::sampled_steps`]).
    pub event: DpEvent,
    /// ε and δ (and, for RDP, the optimal order; for PLD, the grid width).
    #[serde(flatten)]
    pub answer: Answer,
}

/// The name of a step's mechanism in an [`AccountReport`]: `gaussian`, `laplace`, `pure` (a pure
/// ε-DP randomizer), `skellam`, or else the event's serde `type`
/// (`rdp_curve`, `composed`, ...).
pub fn mechanism_name(step: &DpEvent) -> String {
    match step {
        DpEvent::Gaussian { .. } => "gaussian".into(),
        DpEvent::Laplace { .. } => "laplace".into(),
        DpEvent::PureDp { .. } => "pure".into(),
        DpEvent::Skellam { .. } => "skellam".into(),
        DpEvent::DistributedDiscreteGaussian { .. } => "distributed_discrete_gaussian".into(),
        DpEvent::PoissonSampled { .. } => "poisson_sampled".into(),
        DpEvent::SampledWithoutReplacement { .. } => "sampled_without_replacement".into(),
        DpEvent::LocalSampled { .. } => "local_sampled".into(),
        DpEvent::Composed { .. } => "composed".into(),
        DpEvent::SelfComposed { .. } => "self_composed".into(),
        DpEvent::RdpCurve { .. } => "rdp_curve".into(),
    }
}

/// Answers an [`AccountRequest`]: the event `sampled_steps(step, q, T)` composed in a capped RDP
/// accountant (RDP, tighter `T·ε` for pure steps) or a PLD accountant.
pub fn account(req: &AccountRequest) -> Result<AccountReport> {
    let event = DpEvent::sampled_steps(req.step.clone(), req.sampling_rate, req.steps);
    let answer = match req.accountant {
        AccountantKind::Rdp => {
            if let Some(h) = req.value_discretization {
                return Err(AccountingError::invalid(
                    "value_discretization",
                    h,
                    "applies to the PLD accountant only",
                ));
            }
            let mut acc = PureCappedRdpAccountant::new();
            acc.compose(&event)?;
            rdp_answer(&acc, req.query)?
        }
        AccountantKind::Pld => {
            let mut acc = match req.value_discretization {
                Some(h) => PldAccountant::with_discretization(h)?,
                None => PldAccountant::new(),
            };
            acc.compose(&event)?;
            let value_discretization = acc.discretization();
            match req.query {
                Query::EpsilonAt { delta } => {
                    let epsilon = acc.get_epsilon(delta)?;
                    Answer::PldEpsilon(PldEpsilonAnswer {
                        delta,
                        epsilon,
                        note: (!epsilon.is_finite()).then_some(UNBOUNDED),
                        value_discretization,
                    })
                }
                Query::DeltaAt { epsilon } => Answer::PldDelta(PldDeltaAnswer {
                    epsilon,
                    delta: acc.get_delta(epsilon)?,
                    value_discretization,
                }),
            }
        }
    };
    Ok(AccountReport {
        accountant: req.accountant,
        mechanism: mechanism_name(&req.step),
        steps: req.steps,
        sampling_rate: req.sampling_rate,
        event,
        answer,
    })
}

/// The mechanism whose noise [`calibrate`] finds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Calibrated {
    /// The Gaussian mechanism's noise multiplier z ([`calibrate_noise_multiplier`]).
    Gaussian,
    /// The Laplace scale b per unit ℓ1 sensitivity ([`calibrate_laplace_scale`]).
    Laplace,
    /// The Skellam variance μ for integer sensitivities ([`calibrate_skellam_variance`]).
    Skellam {
        /// ℓ1 sensitivity.
        l1_sensitivity: f64,
        /// ℓ2 sensitivity.
        l2_sensitivity: f64,
    },
}

/// The calibrated parameter under the mechanism's own name (a JSON key of its own).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NamedParameter {
    /// The Gaussian noise multiplier z (σ / ℓ2 sensitivity).
    NoiseMultiplier(f64),
    /// The Laplace scale b per unit ℓ1 sensitivity.
    Scale(f64),
    /// The Skellam variance μ (integer domain).
    Variance(f64),
}

/// The noise that meets a target (ε, δ) (`privfed calibrate`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalibrationReport {
    /// The accountant used.
    pub accountant: AccountantKind,
    /// `gaussian`, `laplace` or `skellam`.
    pub mechanism: &'static str,
    /// The calibrated parameter (also under its own name, last).
    pub parameter: f64,
    /// The ε achieved by `parameter` (≤ `target_epsilon`).
    pub epsilon: f64,
    /// The target ε.
    pub target_epsilon: f64,
    /// δ.
    pub delta: f64,
    /// Poisson sampling rate q.
    pub sampling_rate: f64,
    /// Number of steps T.
    pub steps: u64,
    /// `noise_multiplier`, `scale` or `variance`: the same value as `parameter`.
    #[serde(flatten)]
    pub named: NamedParameter,
}

/// The smallest noise of `mechanism` whose `steps` uses at Poisson rate `sampling_rate` meet
/// (`target_epsilon`, `delta`) under `accountant` ([`crate::calibrate`]).
pub fn calibrate(
    accountant: AccountantKind,
    mechanism: Calibrated,
    target_epsilon: f64,
    delta: f64,
    sampling_rate: f64,
    steps: u64,
) -> Result<CalibrationReport> {
    let (k, e, d, q, t) = (accountant, target_epsilon, delta, sampling_rate, steps);
    let (name, c) = match mechanism {
        Calibrated::Gaussian => ("gaussian", calibrate_noise_multiplier(k, e, d, q, t)?),
        Calibrated::Laplace => ("laplace", calibrate_laplace_scale(k, e, d, q, t)?),
        Calibrated::Skellam {
            l1_sensitivity,
            l2_sensitivity,
        } => (
            "skellam",
            calibrate_skellam_variance(k, e, d, l1_sensitivity, l2_sensitivity, q, t)?,
        ),
    };
    let named = match mechanism {
        Calibrated::Gaussian => NamedParameter::NoiseMultiplier(c.parameter),
        Calibrated::Laplace => NamedParameter::Scale(c.parameter),
        Calibrated::Skellam { .. } => NamedParameter::Variance(c.parameter),
    };
    Ok(CalibrationReport {
        accountant,
        mechanism: name,
        parameter: c.parameter,
        epsilon: c.epsilon,
        target_epsilon,
        delta,
        sampling_rate,
        steps,
        named,
    })
}

/// The δ_T of adversary III unless the caller names another (`privfed analyze ddml`, the
/// Draw-and-Discard simulation, Python's `draw_and_discard_analysis`).
pub const DRAW_AND_DISCARD_DELTA_T: f64 = 1e-8;

/// Adversary I of Draw-and-Discard (the channel listener).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AdversaryI {
    /// The client's local ε.
    pub epsilon: f64,
}

/// Adversary II of Draw-and-Discard (sees the k instances).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AdversaryII {
    /// Expected privacy loss `((k−1)/k)·(ε/2)` (nats).
    pub expected_loss: f64,
}

/// Adversary III of Draw-and-Discard (sees an instance after T further updates).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AdversaryIII {
    /// Probability `1 − 1/k` that the contribution was discarded.
    pub discard_probability: f64,
    /// `ε_T` otherwise (`null` in JSON if unbounded).
    pub epsilon: f64,
    /// The δ_T of `ε_T`.
    pub delta: f64,
}

/// Draw-and-Discard privacy against adversaries I, II, III (`privfed analyze ddml`; paper 003
/// §IV, [`draw_and_discard`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DrawAndDiscardAnalysis {
    /// `draw_and_discard`.
    pub analysis: &'static str,
    /// The client's local ε.
    pub local_epsilon: f64,
    /// Model instances k.
    pub instances: u64,
    /// Further updates T before adversary III looks.
    pub updates: u64,
    /// Adversary I.
    pub adversary_i: AdversaryI,
    /// Adversary II.
    pub adversary_ii: AdversaryII,
    /// Adversary III.
    pub adversary_iii: AdversaryIII,
}

/// [`DrawAndDiscardAnalysis`] of local ε, `instances` k, `updates` T and `delta_t`.
pub fn draw_and_discard_analysis(
    local_epsilon: f64,
    instances: u64,
    updates: u64,
    delta_t: f64,
) -> Result<DrawAndDiscardAnalysis> {
    let r = draw_and_discard(local_epsilon, instances, updates, delta_t)?;
    Ok(DrawAndDiscardAnalysis {
        analysis: "draw_and_discard",
        local_epsilon,
        instances,
        updates,
        adversary_i: AdversaryI {
            epsilon: r.adversary_i_epsilon,
        },
        adversary_ii: AdversaryII {
            expected_loss: r.adversary_ii_expected_loss,
        },
        adversary_iii: AdversaryIII {
            discard_probability: r.adversary_iii_discard_probability,
            epsilon: r.adversary_iii_epsilon,
            delta: r.adversary_iii_delta,
        },
    })
}

/// Reconstruction protection for data uniform on `S^{k−1}` (`privfed analyze reconstruction`;
/// paper 000 §2.3, [`reconstruction_bound`]): the bound for an ε, or the largest ε for a bound.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ReconstructionAnalysis {
    /// The success bound of an ε.
    Bound(ReconstructionBound),
    /// The largest ε whose bound stays below a target.
    MaxEpsilon(ReconstructionMaxEpsilon),
}

/// The success bound of an ε-DP randomizer against reconstruction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReconstructionBound {
    /// `reconstruction`.
    pub analysis: &'static str,
    /// Dimension k of the data.
    pub dimension: u64,
    /// Success threshold t: the adversary wins if ⟨ĥ, Y⟩ ≥ t.
    pub threshold: f64,
    /// The randomizer's ε.
    pub epsilon: f64,
    /// `ln P₀`, the prior probability of the cap `⟨ĥ, Y⟩ ≥ t`.
    pub ln_prior_probability: f64,
    /// `P₀`.
    pub prior_probability: f64,
    /// `min(0, ε + ln P₀)`.
    pub ln_success_bound: f64,
    /// `min(1, e^ε·P₀)` (000 Lemma 2.2).
    pub success_bound: f64,
}

/// The largest ε that keeps the reconstruction bound below a target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReconstructionMaxEpsilon {
    /// `reconstruction`.
    pub analysis: &'static str,
    /// Dimension k of the data.
    pub dimension: u64,
    /// Success threshold t.
    pub threshold: f64,
    /// The target success probability.
    pub target_bound: f64,
    /// The largest ε with `e^ε·P₀ ≤ target_bound`.
    pub max_epsilon: f64,
    /// `ln P₀`.
    pub ln_prior_probability: f64,
    /// `P₀`.
    pub prior_probability: f64,
}

/// The question of a [`reconstruction_analysis`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reconstruction {
    /// The success bound of an ε-DP randomizer.
    BoundAt {
        /// ε.
        epsilon: f64,
    },
    /// The largest ε whose bound stays at or below `target_bound` ∈ (0, 1].
    MaxEpsilonFor {
        /// The target success probability.
        target_bound: f64,
    },
}

/// [`ReconstructionAnalysis`] for `dimension` k and `threshold` t: the bound at an ε, or the
/// largest ε for a target bound.
pub fn reconstruction_analysis(
    dimension: u64,
    threshold: f64,
    question: Reconstruction,
) -> Result<ReconstructionAnalysis> {
    let target_bound = match question {
        Reconstruction::MaxEpsilonFor { target_bound } => target_bound,
        Reconstruction::BoundAt { epsilon: eps } => {
            let r = reconstruction_bound(dimension, threshold, eps)?;
            return Ok(ReconstructionAnalysis::Bound(ReconstructionBound {
                analysis: "reconstruction",
                dimension,
                threshold,
                epsilon: eps,
                ln_prior_probability: r.ln_prior_probability,
                prior_probability: r.prior_probability,
                ln_success_bound: r.ln_success_bound,
                success_bound: r.success_bound,
            }));
        }
    };
    let eps = max_epsilon_for_reconstruction(dimension, threshold, target_bound)?;
    let r = reconstruction_bound(dimension, threshold, eps)?;
    Ok(ReconstructionAnalysis::MaxEpsilon(
        ReconstructionMaxEpsilon {
            analysis: "reconstruction",
            dimension,
            threshold,
            target_bound,
            max_epsilon: eps,
            ln_prior_probability: r.ln_prior_probability,
            prior_probability: r.prior_probability,
        },
    ))
}

/// The analytic Gaussian σ for (ε, δ) (`privfed analyze gaussian`; Balle & Wang 2018,
/// [`analytic_gaussian_sigma`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnalyticGaussianAnalysis {
    /// `analytic_gaussian`.
    pub analysis: &'static str,
    /// ε.
    pub epsilon: f64,
    /// δ.
    pub delta: f64,
    /// ℓ2 sensitivity Δ₂.
    pub sensitivity: f64,
    /// The smallest σ with an (ε, δ) guarantee.
    pub sigma: f64,
    /// `σ / Δ₂`.
    pub noise_multiplier: f64,
}

/// [`AnalyticGaussianAnalysis`] of (ε, δ) at ℓ2 sensitivity `sensitivity`.
pub fn analytic_gaussian_analysis(
    epsilon: f64,
    delta: f64,
    sensitivity: f64,
) -> Result<AnalyticGaussianAnalysis> {
    let sigma = analytic_gaussian_sigma(epsilon, delta, sensitivity)?;
    Ok(AnalyticGaussianAnalysis {
        analysis: "analytic_gaussian",
        epsilon,
        delta,
        sensitivity,
        sigma,
        noise_multiplier: sigma / sensitivity,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The top-level keys of `v`'s JSON in text order (struct fields serialize in declaration
    /// order whatever the map type; nested values are skipped).
    fn keys(v: &impl Serialize) -> Vec<String> {
        let s = serde_json::to_string(v).unwrap();
        let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&s).unwrap();
        let mut k: Vec<String> = map.keys().cloned().collect();
        k.sort_by_key(|key| {
            s.find(&format!("{{\"{key}\":"))
                .or_else(|| s.find(&format!(",\"{key}\":")))
        });
        k
    }

    #[test]
    fn pld_epsilon_report_has_its_keys_in_order_and_a_note_only_when_unbounded() {
        let req = AccountRequest {
            accountant: AccountantKind::Pld,
            step: DpEvent::Gaussian {
                noise_multiplier: 1.1,
            },
            sampling_rate: 0.01,
            steps: 100,
            query: Query::EpsilonAt { delta: 1e-5 },
            value_discretization: None,
        };
        let r = account(&req).unwrap();
        assert_eq!(
            keys(&r),
            [
                "accountant",
                "mechanism",
                "steps",
                "sampling_rate",
                "event",
                "delta",
                "epsilon",
                "value_discretization"
            ]
        );
        assert!(matches!(
            r.answer,
            Answer::PldEpsilon(PldEpsilonAnswer { note: None, .. })
        ));
    }

    #[test]
    fn calibration_names_its_parameter_last() {
        let r = calibrate(AccountantKind::Rdp, Calibrated::Laplace, 2.0, 1e-5, 1.0, 10).unwrap();
        let k = keys(&r);
        assert_eq!(k.last().unwrap(), "scale");
        assert_eq!(k[2], "parameter");
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["scale"], v["parameter"]);
        assert!(r.epsilon <= 2.0 + 1e-9);
    }

    #[test]
    fn rdp_rejects_a_pld_grid_width() {
        let req = AccountRequest {
            accountant: AccountantKind::Rdp,
            step: DpEvent::Gaussian {
                noise_multiplier: 1.0,
            },
            sampling_rate: 1.0,
            steps: 1,
            query: Query::DeltaAt { epsilon: 1.0 },
            value_discretization: Some(1e-3),
        };
        assert!(account(&req).is_err());
    }

    #[test]
    fn reconstruction_reports_the_bound_or_the_largest_epsilon() {
        let b = reconstruction_analysis(3, 0.5, Reconstruction::BoundAt { epsilon: 0.1 }).unwrap();
        let ReconstructionAnalysis::Bound(b) = b else {
            panic!("an ε gives the bound")
        };
        // P₀ of the cap ⟨h, Y⟩ ≥ 1/2 on S² is (1 − t)/2 = 1/4 (Archimedes).
        assert!((b.prior_probability - 0.25).abs() < 1e-12);
        let m =
            reconstruction_analysis(3, 0.5, Reconstruction::MaxEpsilonFor { target_bound: 0.5 })
                .unwrap();
        let ReconstructionAnalysis::MaxEpsilon(m) = m else {
            panic!("no ε gives the largest ε")
        };
        assert!((m.max_epsilon - 2f64.ln()).abs() < 1e-12);
    }
}
