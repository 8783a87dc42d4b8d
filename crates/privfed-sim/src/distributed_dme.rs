//! Distributed mean estimation with distributed DP (paper 001's DME set-up): `n` clients each
//! hold a vector of ℓ2 norm `c` in a uniformly random direction; each encodes it
//! ([`privfed_distributed::SkellamEncoder`]), the encodings are summed modulo `2^b` (in process:
//! [`privfed_distributed::ModularSum`]), and the server decodes the mean. A fraction of clients
//! may drop out before sending; the mean is then over the survivors and the round is accounted
//! with their noise only. The continuous-Gaussian baseline adds `N(0, σ_c²/n)` per coordinate at
//! each client, no quantization, no modulus.
//!
//! Reported: the MSE `‖x̂ − x̄‖²` over trials with its 95% interval, the planner's prediction for
//! the survivors, the coordinates that truly wrapped (counted from the exact integer sum, which a
//! simulation can see and a server cannot) and the decoder's wrap flag, and ε per trial from the
//! survivors.

use privfed_distributed::modular::to_signed;
use privfed_distributed::{
    DistributedError, ModularSum, NoiseShare, NoiseTarget, PlanRequest, SkellamDecoder,
    SkellamEncoder, colluders, epsilon_for_rounds_with, honest_contributors, plan, rotation_seed,
};
use privfed_mechanisms::gaussian::{analytic_gaussian_sigma, gaussian_epsilon};
use privfed_mechanisms::rng::{ExperimentRng, seeded_rng_for_experiments};
use privfed_mechanisms::sampling::{fill_standard_normal, uniform_on_sphere};
use privfed_plot::stats::t_quantile_975;
use rand::{RngExt, SeedableRng};
use serde::Serialize;
use std::time::Instant;

/// Which noise the clients add.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DistributedNoise {
    /// Paper 001's Skellam pipeline (quantized, modular).
    Skellam,
    /// The same pipeline with discrete-Gaussian shares (DDG, Kairouz et al. 2021), accounted by
    /// the DDG bound.
    Ddg,
    /// Continuous Gaussian shares, central σ from the analytic Gaussian (no quantization).
    Gaussian,
}

/// A distributed DME run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DistributedDmeConfig {
    /// The noise.
    pub noise: DistributedNoise,
    /// Dimension, clip, bits, clients, k, β and the privacy target (ε with δ, or a local σ).
    pub request: PlanRequest,
    /// Trials.
    pub trials: usize,
    /// Seed of a reproducible run (experiments only); `None`: seeded from the OS.
    pub seed: Option<u64>,
    /// Probability that a client drops out before sending, in `[0, 1)`.
    pub dropout: f64,
    /// Sum the encodings through a real secure-aggregation round ([`privfed_secagg::local::secure_sum`]:
    /// every client advertises and shares keys, the dropped ones then go silent and their masks
    /// are recovered) instead of the in-process modular sum. Skellam and DDG only.
    pub secure_aggregation: bool,
    /// The threat model of that round (the active mode by default). In the active mode the
    /// round's thresholds are sized for the request's `colluding_fraction` γ
    /// ([`privfed_secagg::local::secure_sum_for_colluding`]), the same γ the accounting
    /// assumes (one value for both sides); a γ the cohort cannot be sized for is
    /// [`DistributedDmeError::Invalid`] naming `colluding_fraction`. Honest-but-curious rounds
    /// keep the planner's default sizing (their complete-graph threshold does not count
    /// colluders).
    pub secure_aggregation_threat: privfed_secagg::local::SecAggThreat,
    /// The rounds the clients agree to join ([`privfed_secagg::ClientPolicy`]; its defaults
    /// unless relaxed): a round it refuses fails the run with
    /// [`privfed_secagg::SecAggError::Refused`] naming the rule.
    pub secure_aggregation_policy: privfed_secagg::ClientPolicy,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DistributedDmeError {
    /// A bad option.
    #[error("invalid `{0}`: {1}")]
    Invalid(&'static str, String),
    /// From the pipeline or the planner (including an infeasible plan, naming the knob).
    #[error(transparent)]
    Distributed(#[from] DistributedError),
    /// From a mechanism.
    #[error(transparent)]
    Mechanism(#[from] privfed_mechanisms::MechanismError),
    /// From secure aggregation (including a round that aborted).
    #[error(transparent)]
    SecAgg(#[from] privfed_secagg::SecAggError),
}

/// The report (`privfed dme skellam|gaussian --json`).
#[derive(Debug, Clone, Serialize)]
pub struct DistributedDmeReport {
    /// `skellam` or `gaussian`.
    pub mechanism: DistributedNoise,
    /// Dimension d.
    pub dim: usize,
    /// Clients n (before dropout).
    pub clients: usize,
    /// Bits b of the modular sum (Skellam, DDG; 0 for Gaussian, which has no modulus).
    pub bits: u32,
    /// Clip c.
    pub clip: f64,
    /// Trials.
    pub trials: usize,
    /// Seed.
    pub seed: Option<u64>,
    /// Dropout probability.
    pub dropout: f64,
    /// Mean number of survivors per trial.
    pub mean_survivors: f64,
    /// Fewest survivors in a trial.
    pub min_survivors: usize,
    /// Mean over trials of `‖x̂ − x̄‖²`.
    pub mse: f64,
    /// 95% interval of the MSE (Student t; `null` for one trial).
    pub mse_ci95: [f64; 2],
    /// The predicted MSE without wraps for each trial's survivors (Skellam: the planner's
    /// quantization + noise terms; Gaussian: noise), averaged over trials.
    pub predicted_mse: f64,
    /// The planner's wrap term (the aligned-inputs worst case; 0 for Gaussian), averaged over
    /// trials: what wraps would add if the inputs all pointed the same way.
    pub predicted_wrap_mse: f64,
    /// Coordinates that wrapped, summed over trials (from the exact integer sum).
    pub wraps: u64,
    /// Trials the decoder flagged as wrapped.
    pub wrap_suspected_trials: usize,
    /// ε of the worst trial (fewest honest survivors), at `delta`, counting only the honest
    /// survivors' noise (`∞` for a trial whose survivors could all be colluders).
    pub epsilon: f64,
    /// ε the plan promises with all `clients` contributing, for its honest lower bound.
    pub planned_epsilon: f64,
    /// The fraction γ of the cohort assumed to collude with the server.
    pub colluding_fraction: f64,
    /// The colluders assumed, `⌈γ·clients⌉` (all of them survivors).
    pub colluders: usize,
    /// The honest contributors the worst trial's ε counts: its survivors minus the colluders
    /// (0 when the colluders could be every survivor).
    pub honest_contributors: usize,
    /// δ.
    pub delta: f64,
    /// Scale s (Skellam; 0 for Gaussian).
    pub scale: f64,
    /// Local noise standard deviation σ (unscaled).
    pub local_noise_stddev: f64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Whether the sum went through real secure aggregation.
    pub secure_aggregation: bool,
    /// The threshold `t` of the secure-aggregation round planned for the cohort at the
    /// configured dropout (in the active mode, sized for `colluding_fraction`); `null` without
    /// secure aggregation.
    pub secure_aggregation_threshold: Option<u32>,
}

/// The options the continuous-Gaussian baseline uses, checked by name: dimension, clients, clip
/// and a local σ (an ε target and δ are checked by the analytic Gaussian). `bits`, `k` and `β`
/// size the quantized pipelines and are not read.
fn check_gaussian(req: &PlanRequest) -> Result<(), DistributedDmeError> {
    if req.dim == 0 {
        return Err(DistributedDmeError::Invalid(
            "dim",
            "must be at least 1".into(),
        ));
    }
    if req.clients == 0 {
        return Err(DistributedDmeError::Invalid(
            "clients",
            "must be at least 1".into(),
        ));
    }
    if !(req.clip.is_finite() && req.clip > 0.0) {
        return Err(DistributedDmeError::Invalid(
            "clip",
            format!("must be finite and > 0, got {}", req.clip),
        ));
    }
    if let NoiseTarget::LocalStddev(s) = req.noise
        && !(s.is_finite() && s > 0.0)
    {
        return Err(DistributedDmeError::Invalid(
            "noise_stddev",
            format!("must be finite and > 0, got {s}"),
        ));
    }
    Ok(())
}

/// `n` vectors of norm `c` in uniformly random directions.
fn client_vectors(
    n: usize,
    dim: usize,
    clip: f64,
    rng: &mut ExperimentRng,
) -> Result<Vec<Vec<f64>>, DistributedDmeError> {
    (0..n)
        .map(|_| {
            Ok(uniform_on_sphere(dim, rng)?
                .iter()
                .map(|v| v * clip)
                .collect())
        })
        .collect()
}

/// Runs the trials; `progress` is called with the number of clients encoded.
pub fn run_distributed_dme(
    cfg: &DistributedDmeConfig,
    progress: &dyn Fn(u64),
) -> Result<DistributedDmeReport, DistributedDmeError> {
    if cfg.trials == 0 {
        return Err(DistributedDmeError::Invalid(
            "trials",
            "must be at least 1".into(),
        ));
    }
    if !(0.0..1.0).contains(&cfg.dropout) {
        return Err(DistributedDmeError::Invalid(
            "dropout",
            format!("must be in [0, 1), got {}", cfg.dropout),
        ));
    }
    if cfg.secure_aggregation && cfg.noise == DistributedNoise::Gaussian {
        return Err(DistributedDmeError::Invalid(
            "secagg",
            "secure aggregation sums integers mod 2^b: use skellam or ddg".into(),
        ));
    }
    let delta = cfg.request.delta.ok_or(DistributedDmeError::Invalid(
        "delta",
        "a δ is needed to report ε".into(),
    ))?;
    let start = Instant::now();
    let req = &cfg.request;
    let n = req.clients;
    let d = req.dim;
    let mut master = match cfg.seed {
        Some(s) => seeded_rng_for_experiments(s),
        None => rand::make_rng::<ExperimentRng>(),
    };
    // The quantized pipelines are planned (the plan also validates the shared options; DDG
    // plans its noise with its own accounting). The continuous Gaussian has no modulus, scale or
    // rounding, so it is not planned: the planner would size `bits` it never uses and refuse a
    // width that is too small for the Skellam pipeline.
    let share = match cfg.noise {
        DistributedNoise::Ddg => NoiseShare::DiscreteGaussian,
        _ => NoiseShare::Skellam,
    };
    let quantized = match cfg.noise {
        DistributedNoise::Skellam | DistributedNoise::Ddg => {
            Some(plan(&PlanRequest { share, ..*req })?)
        }
        DistributedNoise::Gaussian => {
            check_gaussian(req)?;
            None
        }
    };
    let gamma = req.colluding_fraction;
    let active =
        cfg.secure_aggregation_threat != privfed_secagg::local::SecAggThreat::HonestButCurious;
    // The round every trial runs, planned for the cohort: in the active mode sized for γ, so a
    // γ the cohort cannot hold is refused before any trial.
    let secure_aggregation_threshold = match (&quantized, cfg.secure_aggregation) {
        (Some(skellam), true) => {
            let model = if active {
                privfed_secagg::ThreatModel::Active { roster: None }
            } else {
                privfed_secagg::ThreatModel::HonestButCurious
            };
            let clients = u32::try_from(n).map_err(|_| {
                DistributedDmeError::Invalid("clients", format!("{n} is too many for one round"))
            })?;
            let planned = if active {
                privfed_secagg::round_config_for_colluding(
                    model,
                    clients,
                    req.bits,
                    skellam.padded_dim,
                    cfg.dropout,
                    privfed_secagg::GraphChoice::Auto,
                    [0; 32],
                    gamma,
                )
            } else {
                privfed_secagg::round_config_for(
                    model,
                    clients,
                    req.bits,
                    skellam.padded_dim,
                    cfg.dropout,
                    privfed_secagg::GraphChoice::Auto,
                    [0; 32],
                )
            };
            match planned {
                Ok(c) => Some(c.threshold),
                Err(privfed_secagg::SecAggError::InvalidConfig {
                    name: "colluding_fraction",
                    reason,
                    ..
                }) => {
                    return Err(DistributedDmeError::Invalid(
                        "colluding_fraction",
                        format!("{gamma}: {reason}"),
                    ));
                }
                Err(e) => return Err(e.into()),
            }
        }
        _ => None,
    };
    let assumed_colluders = colluders(n, gamma)?;
    // Honest survivors of a trial with `m` survivors; none when the colluders could be all.
    let honest = |m: usize| -> Result<Option<usize>, DistributedDmeError> {
        match honest_contributors(n, m, gamma) {
            Ok(h) => Ok(Some(h)),
            Err(DistributedError::NoHonestContributor { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    };
    let planned_honest = honest_contributors(n, n, gamma)?;
    let (planned_epsilon, local_sigma) = match &quantized {
        Some(skellam) => (
            skellam.epsilon.unwrap_or(f64::INFINITY),
            skellam.local_noise_stddev,
        ),
        None => {
            let sigma_c = match req.noise {
                NoiseTarget::Epsilon(eps) => analytic_gaussian_sigma(eps, delta, req.clip)?,
                NoiseTarget::LocalStddev(s) => s * (planned_honest as f64).sqrt(),
            };
            let eps = gaussian_epsilon(sigma_c, req.clip, delta)?;
            (eps, sigma_c / (planned_honest as f64).sqrt())
        }
    };
    let mut sq = Vec::with_capacity(cfg.trials);
    let mut predicted = 0.0;
    let mut predicted_wrap = 0.0;
    let mut wraps = 0u64;
    let mut flagged = 0usize;
    let mut survivors_total = 0usize;
    let mut min_survivors = usize::MAX;
    let mut worst_eps: f64 = 0.0;
    let mut worst_honest = usize::MAX;
    for trial in 0..cfg.trials {
        let mut rng = ExperimentRng::from_rng(&mut master);
        let xs = client_vectors(n, d, req.clip, &mut rng)?;
        // Dropout: each client independently; at least one survives (redraw otherwise).
        let alive: Vec<usize> = loop {
            let a: Vec<usize> = (0..n)
                .filter(|_| rng.random::<f64>() >= cfg.dropout)
                .collect();
            if !a.is_empty() {
                break a;
            }
        };
        let m = alive.len();
        let h = honest(m)?;
        worst_honest = worst_honest.min(h.unwrap_or(0));
        survivors_total += m;
        min_survivors = min_survivors.min(m);
        let truth: Vec<f64> = (0..d)
            .map(|j| alive.iter().map(|&i| xs[i][j]).sum::<f64>() / m as f64)
            .collect();
        let estimate = match &quantized {
            Some(skellam) => {
                let seed = rotation_seed(b"privfed dme", trial as u64);
                let enc = SkellamEncoder::with_noise(skellam.params, seed, share)?;
                let dec = SkellamDecoder::new(skellam.params, seed)?;
                let mut sum = ModularSum::new(req.bits, skellam.padded_dim)?;
                let mut exact = vec![0i128; skellam.padded_dim];
                let mut encodings = vec![Vec::new(); n];
                for &i in &alive {
                    let (v, _) = enc.encode(&xs[i], &mut rng)?;
                    for (e, &w) in exact.iter_mut().zip(&v) {
                        *e += to_signed(w, req.bits) as i128;
                    }
                    sum.add(&v)?;
                    if cfg.secure_aggregation {
                        encodings[i] = v;
                    }
                    progress(1);
                }
                let half = 1i128 << (req.bits - 1);
                wraps += exact.iter().filter(|&&e| e < -half || e >= half).count() as u64;
                let decoded = if cfg.secure_aggregation {
                    let mut dropped = vec![true; n];
                    for &i in &alive {
                        dropped[i] = false;
                    }
                    let out = if active {
                        privfed_secagg::local::secure_sum_for_colluding(
                            cfg.secure_aggregation_threat,
                            &cfg.secure_aggregation_policy,
                            gamma,
                            req.bits,
                            skellam.padded_dim,
                            encodings,
                            &dropped,
                            &mut rand::rng(),
                        )?
                    } else {
                        privfed_secagg::local::secure_sum_with_policy(
                            cfg.secure_aggregation_threat,
                            &cfg.secure_aggregation_policy,
                            req.bits,
                            skellam.padded_dim,
                            encodings,
                            &dropped,
                            &mut rand::rng(),
                        )?
                    };
                    // The accountant is told how many contributed: the protocol's survivors.
                    if out.survivors.len() != m {
                        return Err(DistributedDmeError::Invalid(
                            "secagg",
                            format!("{} survivors, expected {m}", out.survivors.len()),
                        ));
                    }
                    dec.decode(&out.sum, out.survivors.len())?
                } else {
                    dec.decode(sum.value(), m)?
                };
                flagged += decoded.wrap_suspected as usize;
                let p = skellam.predicted_mse(m);
                predicted += p.quantization + p.noise;
                predicted_wrap += p.wrap;
                let eps = match h {
                    Some(h) => {
                        epsilon_for_rounds_with(share, &skellam.params, h, 1.0, 1, delta)?.epsilon
                    }
                    None => f64::INFINITY,
                };
                worst_eps = worst_eps.max(eps);
                decoded.mean
            }
            None => {
                let mut total = vec![0.0; d];
                let mut z = vec![0.0; d];
                for &i in &alive {
                    fill_standard_normal(&mut rng, &mut z);
                    for ((t, x), zz) in total.iter_mut().zip(&xs[i]).zip(&z) {
                        *t += x + local_sigma * zz;
                    }
                    progress(1);
                }
                let sigma_m = local_sigma * (m as f64).sqrt();
                predicted += d as f64 * sigma_m * sigma_m / (m * m) as f64;
                let eps = match h {
                    Some(h) => gaussian_epsilon(local_sigma * (h as f64).sqrt(), req.clip, delta)?,
                    None => f64::INFINITY,
                };
                worst_eps = worst_eps.max(eps);
                total.iter().map(|t| t / m as f64).collect()
            }
        };
        sq.push(
            estimate
                .iter()
                .zip(&truth)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>(),
        );
    }
    let t = cfg.trials as f64;
    let mse = sq.iter().sum::<f64>() / t;
    let ci = if cfg.trials > 1 {
        let var = sq.iter().map(|v| (v - mse).powi(2)).sum::<f64>() / (t - 1.0);
        let half = t_quantile_975(cfg.trials - 1) * (var / t).sqrt();
        [mse - half, mse + half]
    } else {
        [f64::NAN, f64::NAN]
    };
    Ok(DistributedDmeReport {
        mechanism: cfg.noise,
        dim: d,
        clients: n,
        bits: quantized.as_ref().map_or(0, |_| req.bits),
        clip: req.clip,
        trials: cfg.trials,
        seed: cfg.seed,
        dropout: cfg.dropout,
        mean_survivors: survivors_total as f64 / t,
        min_survivors,
        mse,
        mse_ci95: ci,
        predicted_mse: predicted / t,
        predicted_wrap_mse: predicted_wrap / t,
        wraps,
        wrap_suspected_trials: flagged,
        epsilon: worst_eps,
        planned_epsilon,
        colluding_fraction: gamma,
        colluders: assumed_colluders,
        honest_contributors: worst_honest,
        delta,
        scale: quantized.as_ref().map_or(0.0, |p| p.scale),
        local_noise_stddev: local_sigma,
        seconds: start.elapsed().as_secs_f64(),
        secure_aggregation: cfg.secure_aggregation,
        secure_aggregation_threshold,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(noise: DistributedNoise, dropout: f64) -> DistributedDmeConfig {
        DistributedDmeConfig {
            noise,
            request: PlanRequest {
                dim: 64,
                clip: 1.0,
                bits: 20,
                clients: 20,
                max_contributors: None,
                k: 4.0,
                beta: 0.0,
                noise: NoiseTarget::Epsilon(2.0),
                delta: Some(1e-5),
                sampling_rate: 1.0,
                rounds: 1,
                share: Default::default(),
                colluding_fraction: 0.0,
            },
            trials: 300,
            seed: Some(4),
            dropout,
            secure_aggregation: false,
            secure_aggregation_threat: privfed_secagg::local::SecAggThreat::Active,
            secure_aggregation_policy: privfed_secagg::ClientPolicy::default(),
        }
    }

    /// The measured MSE lies in its own 99.9%-ish interval around the prediction: with 300 trials
    /// the t interval at 95% is used only for reporting; here |mse − predicted| must be within
    /// 4.9 standard errors (α ≈ 1e-6, two-sided) for Skellam and Gaussian, with and without
    /// dropout; dropouts raise ε above the plan.
    #[test]
    fn mse_matches_prediction_and_dropout_raises_epsilon() {
        for noise in [
            DistributedNoise::Skellam,
            DistributedNoise::Ddg,
            DistributedNoise::Gaussian,
        ] {
            for dropout in [0.0, 0.3] {
                let r = run_distributed_dme(&cfg(noise, dropout), &|_| {}).unwrap();
                let se = (r.mse_ci95[1] - r.mse) / t_quantile_975(r.trials - 1);
                let z = (r.mse - r.predicted_mse) / se;
                assert!(z.abs() < 4.9, "{noise:?} dropout {dropout}: z = {z}, {r:?}");
                assert_eq!(r.wraps, 0);
                assert_eq!(r.wrap_suspected_trials, 0);
                if dropout == 0.0 {
                    assert!((r.epsilon - r.planned_epsilon).abs() < 1e-9 * r.epsilon);
                    assert!(r.planned_epsilon <= 2.0 + 1e-9, "{}", r.planned_epsilon);
                } else {
                    assert!(r.epsilon > r.planned_epsilon, "{r:?}");
                    assert!(r.mean_survivors < 20.0);
                }
            }
        }
    }

    /// With colluders assumed, each trial is accounted with its honest survivors only: the
    /// report's ε is the accountant's for `survivors − ⌈γ·n⌉`, the target holds for that count
    /// without dropout, and an active secure-aggregation round refuses a γ other than the one
    /// its thresholds are sized for.
    #[test]
    fn colluders_are_accounted_and_reported() {
        for noise in [DistributedNoise::Skellam, DistributedNoise::Gaussian] {
            let mut c = cfg(noise, 0.0);
            c.trials = 3;
            c.request.colluding_fraction = 0.25;
            let r = run_distributed_dme(&c, &|_| {}).unwrap();
            assert_eq!(r.colluders, 5);
            assert_eq!(r.honest_contributors, 15);
            assert_eq!(r.colluding_fraction, 0.25);
            assert!((r.epsilon - r.planned_epsilon).abs() < 1e-9 * r.epsilon);
            assert!(
                r.planned_epsilon <= 2.0 + 1e-9,
                "{noise:?}: {}",
                r.planned_epsilon
            );
            // The same noise counted for all 20 would claim a smaller ε than the target.
            let all = run_distributed_dme(&cfg(noise, 0.0), &|_| {}).unwrap();
            assert!(
                r.local_noise_stddev > all.local_noise_stddev * 1.05,
                "{noise:?}"
            );
        }
        // An active round the cohort cannot be sized for (20 clients, γ = 0.9: t would be
        // ⌊(20 + 18)/2⌋ + 1 = 20 > 19) is refused, naming γ.
        let mut c = cfg(DistributedNoise::Skellam, 0.0);
        c.secure_aggregation = true;
        c.trials = 1;
        c.request.colluding_fraction = 0.9;
        assert!(matches!(
            run_distributed_dme(&c, &|_| {}),
            Err(DistributedDmeError::Invalid("colluding_fraction", _))
        ));
    }

    /// An active secure-aggregation round with γ ≠ 0.1 is sized for that γ and accounted with
    /// it: 20 clients, γ = 0.2, so t = ⌊(20 + 4)/2⌋ + 1 = 13 and 4 colluders; the mean decoded
    /// from the secure sum is bit for bit the plain modular sum's (same seed), and the report's
    /// γ, colluders and ε are the plain run's at the same γ. γ = 0 gives t = 11.
    #[test]
    fn an_active_secure_round_is_sized_for_the_colluding_fraction_it_accounts() {
        for (gamma, threshold, colluders) in [(0.2, 13, 4), (0.0, 11, 0), (0.1, 12, 2)] {
            let mut c = cfg(DistributedNoise::Skellam, 0.1);
            c.trials = 3;
            c.request.colluding_fraction = gamma;
            let plain = run_distributed_dme(&c, &|_| {}).unwrap();
            c.secure_aggregation = true;
            let secure = run_distributed_dme(&c, &|_| {}).unwrap();
            assert_eq!(
                secure.secure_aggregation_threshold,
                Some(threshold),
                "γ {gamma}"
            );
            assert_eq!(plain.secure_aggregation_threshold, None);
            assert_eq!(secure.colluding_fraction, gamma);
            assert_eq!(secure.colluders, colluders);
            assert_eq!(secure.mse, plain.mse, "γ {gamma}: the secure sum is exact");
            assert_eq!(secure.epsilon, plain.epsilon);
            assert_eq!(secure.honest_contributors, plain.honest_contributors);
            assert_eq!(
                secure.honest_contributors,
                secure.min_survivors - colluders,
                "γ {gamma}"
            );
        }
    }

    #[test]
    fn same_seed_same_answer_and_bad_options() {
        let a = run_distributed_dme(&cfg(DistributedNoise::Skellam, 0.1), &|_| {}).unwrap();
        let b = run_distributed_dme(&cfg(DistributedNoise::Skellam, 0.1), &|_| {}).unwrap();
        assert_eq!(a.mse, b.mse);
        let mut c = cfg(DistributedNoise::Skellam, 1.0);
        assert!(run_distributed_dme(&c, &|_| {}).is_err());
        c.dropout = 0.0;
        c.trials = 0;
        assert!(run_distributed_dme(&c, &|_| {}).is_err());
        c.trials = 1;
        c.request.delta = None;
        assert!(run_distributed_dme(&c, &|_| {}).is_err());
    }
}
