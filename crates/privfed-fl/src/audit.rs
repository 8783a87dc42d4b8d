//! Canary audits inside federated training (`[audit] canaries = K`; docs/FEDERATED_LEARNING.md
//! "Auditing a training run").
//!
//! **Canaries.** Canary `i ∈ 1..K` has a random unit direction `c_i` (isotropic in the model's
//! `d` parameters) and an inclusion bit `S_i`, each `true` with probability ½; both are drawn
//! from the run's seed on their own streams, so a resumed run recomputes them. An included canary
//! contributes the update `norm·c_i` in **every** round (Andrew et al. 2024 insert the canary in
//! every round), through the same mechanism as a real client: without privacy it is one more
//! update in the mean; with central DP (DP-FedAvg) it is clipped and added to the clipped sum
//! before the noise; under local DP it is clipped and privatized by the clients' randomizer;
//! under distributed DP it is encoded (clip, rotation, rounding, its own noise share) and summed
//! with the clients' encodings. Its randomizer or encoder noise comes from its own stream of the
//! run's seed. Canaries are extra clients: they are not sampled real clients, the round's
//! `contributors` do not count them, and the accounted ε is the real clients'.
//!
//! **The canary norm** (`[audit] norm`, when not given) is the largest contribution a client
//! could make to the round, so that the audit tests the worst case the guarantee covers:
//! * with central, local or distributed DP, the clip norm (every larger update is clipped to
//!   it);
//! * without privacy nothing bounds a contribution, so the largest **real** update norm of the
//!   round (a canary then looks like an in-distribution client: no real client contributed
//!   more); in a round without real updates, the previous round's canary norm (1 before any).
//!
//! **Scores.** After each round, the score of canary `i` is `cos_i = ⟨c_i, Δ⟩/‖Δ‖` with the
//! cumulative model delta `Δ = θ_t − θ_0` ([`privfed_audit::one_shot::cosine`]).
//!
//! **The two numbers.**
//! * `epsilon_lower_bound`: the one-run audit of Steinke, Nasr, Jagielski 2023 ("Privacy
//!   auditing with one (1) training run"): the `r/2` highest scores guess "included", the `r/2`
//!   lowest "excluded" ([`privfed_audit::one_run::guesses`]), `v` of the `r` guesses are right,
//!   and [`privfed_audit::one_run::epsilon_lower_bound`]`(K, r, v, δ, 1 − confidence)` is a lower
//!   bound on the ε of the run **with respect to one canary** at that confidence: if the training
//!   is (ε, δ)-DP for each canary, the bound exceeds ε with probability at most `1 − confidence`.
//! * `epsilon_lower_bound_gaussian`: the same guesses tested against a Gaussian (μ-GDP) claim,
//!   Mahloujifar, Melis, Chaudhuri 2025 ([`privfed_audit::one_run_gdp::epsilon_lower_bound`]):
//!   a lower bound at the same confidence **for a training whose tradeoff curve with respect to
//!   one canary is Gaussian** — exactly the case of the canaries under central DP, which are in
//!   every round (μ = √T/z, `accounted_canary_epsilon` below), and a tighter bound there than the
//!   (ε, δ) analysis; for other privacy it is a reading, not a bound. `None` at δ = 0.
//! * `epsilon_estimate`: the one-shot estimate of Andrew, Kairouz, Oh, Oprea, McMahan,
//!   Suriyakumar 2024 ("One-shot empirical privacy estimation for federated learning"), read as
//!   μ-GDP: `μ̂ = (m̂_in − m̂_out)/ŝ` from the mean cosines of the included and the never-inserted
//!   canaries and their pooled standard deviation, and `ε̂ = ε_{μ̂}(δ)` at the run's δ
//!   ([`privfed_audit::one_shot::one_shot_epsilon`]). An estimate without a confidence level;
//!   `None` when no canary (or every canary) was included, `Δ` is zero or the fit is degenerate
//!   (no spread). `epsilon_estimate_unequal_variance` is the paper's own reading (included
//!   cosines `N(μ̂, σ̂²)` against the null `N(0, 1/d)`,
//!   [`privfed_audit::one_shot::one_shot_epsilon_unequal_variance`]), kept for comparison: at
//!   small δ the sampling error of `σ̂` alone inflates it, so it is not the number to report.
//!   `epsilon_estimate_known_null` reads the included cosines against the **known** null of a
//!   never-inserted isotropic canary, mean 0 and variance exactly `1/d`: `μ̂ = √d·m̂_in`,
//!   `ε̂ = ε_{μ̂}(δ)` ([`privfed_audit::one_shot::one_shot_epsilon_known_null`]), with
//!   `known_null_p_value` = `1 − Φ(√k_in·μ̂)` for "the included canaries left no trace".
//! * `accounted_canary_epsilon` (central DP): the exact ε at δ of a client clipped to the clip
//!   norm and present in every one of the `T` rounds so far — the canaries' own guarantee,
//!   μ-GDP with `μ = √T/z` ([`privfed_audit::gdp::epsilon_for_mu`]). The numbers above should
//!   stay below it; at sampling rate 1 it is at most the run's accounted ε (which the RDP
//!   accountant bounds from above).
//!
//! A canary inserted every round is released in every round, so its privacy is that of `T`
//! unsampled rounds; a real client sampled at rate `q < 1` enjoys amplification by sampling. Only
//! with every real client in every round (rate 1) is the accounted ε the canaries' ε too.

use privfed_audit::gdp::epsilon_for_mu;
use privfed_audit::one_run::{epsilon_lower_bound, guesses};
use privfed_audit::one_run_gdp;
use privfed_audit::one_shot::{
    cosine, one_shot_epsilon, one_shot_epsilon_known_null, one_shot_epsilon_unequal_variance,
};
use privfed_mechanisms::rng::NoiseRng;
use rand::RngExt;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

use super::FlError;
use super::config::{AuditConfig, Seed};
use super::train::{PURPOSE_CANARY_DIRECTION, PURPOSE_CANARY_INCLUSION, stream};

/// The most numbers the canaries' directions may hold (`K·d`, 128 MiB of `f64`).
pub const MAX_CANARY_VALUES: usize = 1 << 24;

/// The generator of canary `i`'s direction in a run with `seed`.
fn direction_stream(seed: &Seed, i: u64) -> NoiseRng {
    stream(seed, PURPOSE_CANARY_DIRECTION, 0, i)
}

/// The generator of the canaries' inclusion bits in a run with `seed`.
fn inclusion_stream(seed: &Seed) -> NoiseRng {
    stream(seed, PURPOSE_CANARY_INCLUSION, 0, 0)
}

/// `k` unit directions in dimension `dim`, row after row: direction `i` is `dim` i.i.d.
/// standard normals from `direction_rng(i)`, divided by their norm (an isotropic direction on
/// the sphere; redrawn in the measure-zero event of a zero vector).
fn draw_directions(
    k: usize,
    dim: usize,
    direction_rng: &mut impl FnMut(u64) -> NoiseRng,
) -> Result<Vec<f64>, FlError> {
    if dim == 0 || k.saturating_mul(dim) > MAX_CANARY_VALUES {
        return Err(FlError::Config(format!(
            "audit.canaries: {k} canaries of the model's {dim} parameters are more than \
             {MAX_CANARY_VALUES} numbers; use fewer canaries"
        )));
    }
    let mut directions = Vec::with_capacity(k * dim);
    for i in 0..k {
        let mut rng = direction_rng(i as u64);
        let start = directions.len();
        loop {
            directions.extend((0..dim).map(|_| -> f64 { StandardNormal.sample(&mut rng) }));
            let n = directions[start..]
                .iter()
                .map(|x| x * x)
                .sum::<f64>()
                .sqrt();
            if n > 0.0 {
                directions[start..].iter_mut().for_each(|x| *x /= n);
                break;
            }
            directions.truncate(start);
        }
    }
    Ok(directions)
}

/// The `k` canary directions of a run with `seed` in dimension `dim` (the model's parameter
/// count), row after row — exactly those `privfed fl train` inserts with `[audit] canaries = k`
/// and this seed, and those `privfed.audit.CanarySet` and the Flower audit use.
///
/// # Errors
/// `dim = 0` or `k·dim` above [`MAX_CANARY_VALUES`].
pub fn canary_directions(seed: &Seed, k: usize, dim: usize) -> Result<Vec<f64>, FlError> {
    draw_directions(k, dim, &mut |i| direction_stream(seed, i))
}

/// The `k` inclusion bits `S_i` of a run with `seed` (one fair coin per canary, in order).
pub fn canary_inclusion(seed: &Seed, k: usize) -> Vec<bool> {
    let mut rng = inclusion_stream(seed);
    (0..k).map(|_| rng.random_bool(0.5)).collect()
}

/// One round's audit (the `audit` of a round in the JSON output).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RoundAudit {
    /// The one-run lower bound on ε at the configured confidence (Steinke et al. 2023).
    pub epsilon_lower_bound: f64,
    /// The one-run lower bound against a Gaussian claim (Mahloujifar et al. 2025; see the
    /// [module docs](self)); `None` at δ = 0.
    #[serde(default)]
    pub epsilon_lower_bound_gaussian: Option<f64>,
    /// The one-shot estimate ε̂ (Andrew et al. 2024), read as μ-GDP; `None` when it is
    /// undefined.
    pub epsilon_estimate: Option<f64>,
    /// The paper's unequal-variance reading of the one-shot estimate (inflated by the sampling
    /// error of `σ̂`; for comparison only).
    pub epsilon_estimate_unequal_variance: Option<f64>,
    /// The one-shot estimate against the known null `N(0, 1/d)` of a never-inserted canary's
    /// cosine, from the included canaries alone
    /// ([`privfed_audit::one_shot::one_shot_epsilon_known_null`]); `None` when undefined.
    #[serde(default)]
    pub epsilon_estimate_known_null: Option<f64>,
    /// The one-sided p-value of "the included canaries left no trace" under the known null.
    #[serde(default)]
    pub known_null_p_value: Option<f64>,
    /// The exact ε at δ of a client at the clip norm in every round so far (central DP only).
    pub accounted_canary_epsilon: Option<f64>,
    /// Correct guesses `v` of the `r` made.
    pub correct: u64,
    /// The canary update's norm in this round, before the mechanism.
    pub norm: f64,
}

/// The run's audit (the `audit` of the summary and of `privfed fl train --json`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AuditSummary {
    /// K.
    pub canaries: usize,
    /// Canaries included (inserted every round).
    pub included: usize,
    /// The canary update's norm before the mechanism in the last round (`None` before any
    /// round when it is chosen per round).
    pub norm: Option<f64>,
    /// Confidence of `epsilon_lower_bound`.
    pub confidence: f64,
    /// Guesses `r` made.
    pub guesses: u64,
    /// Correct guesses `v` after the last round.
    pub correct: u64,
    /// The one-run lower bound after the last round (0 before any round).
    pub epsilon_lower_bound: f64,
    /// The one-run lower bound against a Gaussian claim after the last round.
    pub epsilon_lower_bound_gaussian: Option<f64>,
    /// The one-shot estimate after the last round.
    pub epsilon_estimate: Option<f64>,
    /// The paper's unequal-variance reading after the last round (for comparison only).
    pub epsilon_estimate_unequal_variance: Option<f64>,
    /// The known-null one-shot estimate after the last round.
    pub epsilon_estimate_known_null: Option<f64>,
    /// Its p-value of "the included canaries left no trace" after the last round.
    pub known_null_p_value: Option<f64>,
    /// The canaries' own accounted ε after the last round (central DP only).
    pub accounted_canary_epsilon: Option<f64>,
}

/// The canaries of a run and the statistics of their audit.
#[derive(Debug, Clone)]
pub struct Canaries {
    /// Unit directions `c_i`, row after row (`K·d`).
    directions: Vec<f64>,
    dim: usize,
    included: Vec<bool>,
    /// The configured norm, or the clip under central DP (`None`: the round's largest update).
    fixed_norm: Option<f64>,
    /// Central DP's noise multiplier `z` (the canaries' own accounting).
    noise_multiplier: Option<f64>,
    confidence: f64,
    guesses: usize,
    delta: f64,
}

impl Canaries {
    /// Draws the canaries of `cfg` in dimension `dim`: direction `i` from `direction_rng(i)`
    /// (i.i.d. standard normals, normalized), the inclusion bits from `inclusion_rng` (one fair
    /// coin per canary, in order). `clip_and_z` is central DP's clip norm (the canary norm when
    /// `cfg.norm` is absent) and noise multiplier; without it the norm is chosen per round
    /// ([`Canaries::norm_for_round`]).
    ///
    /// # Errors
    /// `K·d` above [`MAX_CANARY_VALUES`].
    pub fn new(
        cfg: &AuditConfig,
        dim: usize,
        clip_and_z: Option<(f64, f64)>,
        delta: f64,
        mut direction_rng: impl FnMut(u64) -> NoiseRng,
        inclusion_rng: &mut NoiseRng,
    ) -> Result<Self, FlError> {
        let k = cfg.canaries;
        let directions = draw_directions(k, dim, &mut direction_rng)?;
        let included = (0..k).map(|_| inclusion_rng.random_bool(0.5)).collect();
        Ok(Self {
            directions,
            dim,
            included,
            fixed_norm: cfg.norm.or(clip_and_z.map(|(c, _)| c)),
            noise_multiplier: clip_and_z.map(|(_, z)| z),
            confidence: cfg.confidence,
            guesses: cfg.guesses(),
            delta,
        })
    }

    /// The canaries of a run with `seed`, as `privfed fl train` draws them: direction `i` from
    /// the seed's canary-direction stream `i`, the inclusion bits from its canary-inclusion
    /// stream ([`canary_directions`], [`canary_inclusion`]; the other arguments as in
    /// [`Canaries::new`]). Anyone who knows the seed knows which canaries were included: the
    /// auditor keeps it secret.
    ///
    /// # Errors
    /// As [`Canaries::new`].
    pub fn from_seed(
        cfg: &AuditConfig,
        dim: usize,
        clip_and_z: Option<(f64, f64)>,
        delta: f64,
        seed: &Seed,
    ) -> Result<Self, FlError> {
        Self::new(
            cfg,
            dim,
            clip_and_z,
            delta,
            |i| direction_stream(seed, i),
            &mut inclusion_stream(seed),
        )
    }

    /// The unit directions `c_i`, row after row (`K·d` numbers).
    pub fn directions(&self) -> &[f64] {
        &self.directions
    }

    /// `d`, the model's number of parameters.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The inclusion bits `S_i`.
    pub fn included(&self) -> &[bool] {
        &self.included
    }

    fn direction(&self, i: usize) -> &[f64] {
        &self.directions[i * self.dim..(i + 1) * self.dim]
    }

    /// The canary norm of a round (see the [module docs](self)): the fixed norm if there is
    /// one, else the round's `largest_update` (the largest real update norm), else the
    /// `previous` round's canary norm, else 1.
    pub fn norm_for_round(&self, largest_update: Option<f64>, previous: Option<f64>) -> f64 {
        self.fixed_norm
            .or(largest_update.filter(|n| *n > 0.0 && n.is_finite()))
            .or(previous)
            .unwrap_or(1.0)
    }

    /// The included canaries' updates `norm·c_i`, in canary order.
    pub fn updates(&self, norm: f64) -> Vec<Vec<f64>> {
        (0..self.included.len())
            .filter(|&i| self.included[i])
            .map(|i| self.direction(i).iter().map(|x| x * norm).collect())
            .collect()
    }

    /// The audit of the model delta `Δ` after `rounds` released rounds in which the canaries
    /// were sent with `norm` (see the [module docs](self)). A zero `Δ` scores every canary 0
    /// (the guesses then do not depend on the truth).
    ///
    /// # Errors
    /// A `Δ` of the wrong length or not finite; from the estimators.
    pub fn audit(
        &self,
        model_delta: &[f64],
        norm: f64,
        rounds: u64,
    ) -> Result<RoundAudit, FlError> {
        let err = |e: privfed_audit::AuditError| FlError::Config(format!("audit: {e}"));
        if model_delta.len() != self.dim || !model_delta.iter().all(|x| x.is_finite()) {
            return Err(FlError::Config(
                "audit: the model delta is not finite or has the wrong length".into(),
            ));
        }
        let zero = model_delta.iter().all(|x| *x == 0.0);
        let scores: Vec<f64> = if zero {
            vec![0.0; self.included.len()]
        } else {
            (0..self.included.len())
                .map(|i| cosine(self.direction(i), model_delta))
                .collect::<Result<_, _>>()
                .map_err(err)?
        };
        let half = self.guesses / 2;
        let (r, v) = guesses(&scores, &self.included, half, half).map_err(err)?;
        let bound = epsilon_lower_bound(
            self.included.len() as u64,
            r,
            v,
            self.delta,
            1.0 - self.confidence,
        )
        .map_err(err)?;
        let bound_gaussian = if self.delta > 0.0 {
            Some(
                one_run_gdp::epsilon_lower_bound(
                    self.included.len() as u64,
                    r,
                    v,
                    self.delta,
                    1.0 - self.confidence,
                )
                .map_err(err)?,
            )
        } else {
            None
        };
        let group = |want: bool| -> Vec<f64> {
            scores
                .iter()
                .zip(&self.included)
                .filter(|(_, s)| **s == want)
                .map(|(c, _)| *c)
                .collect()
        };
        let (inserted, excluded) = (group(true), group(false));
        // Undefined (too few canaries in a group, or all cosines equal: no spread to fit) is
        // `None`, not an error: the estimate never stops a run.
        let (estimate, unequal, known_null) = if zero {
            (None, None, None)
        } else {
            (
                one_shot_epsilon(&inserted, &excluded, self.delta)
                    .ok()
                    .map(|e| e.epsilon),
                one_shot_epsilon_unequal_variance(&inserted, self.dim, self.delta)
                    .ok()
                    .map(|(e, _, _)| e),
                one_shot_epsilon_known_null(&inserted, self.dim, self.delta).ok(),
            )
        };
        let accounted = match self.noise_multiplier {
            Some(z) if rounds > 0 => {
                Some(epsilon_for_mu((rounds as f64).sqrt() / z, self.delta).map_err(err)?)
            }
            _ => None,
        };
        Ok(RoundAudit {
            epsilon_lower_bound: bound,
            epsilon_lower_bound_gaussian: bound_gaussian,
            epsilon_estimate: estimate,
            epsilon_estimate_unequal_variance: unequal,
            epsilon_estimate_known_null: known_null.map(|e| e.epsilon),
            known_null_p_value: known_null.map(|e| e.p_value),
            accounted_canary_epsilon: accounted,
            correct: v,
            norm,
        })
    }

    /// The run's audit from its last round's (`None`: no round yet).
    pub fn summary(&self, last: Option<&RoundAudit>) -> AuditSummary {
        AuditSummary {
            canaries: self.included.len(),
            included: self.included.iter().filter(|s| **s).count(),
            norm: last.map(|a| a.norm).or(self.fixed_norm),
            confidence: self.confidence,
            guesses: self.guesses as u64,
            correct: last.map_or(0, |a| a.correct),
            epsilon_lower_bound: last.map_or(0.0, |a| a.epsilon_lower_bound),
            epsilon_lower_bound_gaussian: last.and_then(|a| a.epsilon_lower_bound_gaussian),
            epsilon_estimate: last.and_then(|a| a.epsilon_estimate),
            epsilon_estimate_unequal_variance: last
                .and_then(|a| a.epsilon_estimate_unequal_variance),
            epsilon_estimate_known_null: last.and_then(|a| a.epsilon_estimate_known_null),
            known_null_p_value: last.and_then(|a| a.known_null_p_value),
            accounted_canary_epsilon: last.and_then(|a| a.accounted_canary_epsilon),
        }
    }
}
