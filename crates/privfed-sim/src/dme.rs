//! Distributed mean estimation as in the papers (`docs/ALGORITHMS.md` §6).
//!
//! Each trial draws `N` client inputs uniformly from the mechanism's domain; each client
//! privatizes its input; the server averages. The MSE `‖x̂ − x̄‖²` is averaged over trials and
//! compared with its exact expectation `Σ_i Var(x_i)/N²`, computed from the mechanism's exact
//! per-input variance ([`LocalRandomizer::variance_at`]).
//!
//! Work is split into a fixed number of client chunks per trial ([`CHUNKS`]), each with its own
//! generator drawn in order from the master generator, so a seeded run gives the same numbers
//! whatever the number of threads.

use privfed_mechanisms::rng::{ExperimentRng, seeded_rng_for_experiments};
use privfed_mechanisms::{LocalRandomizer, MechanismError};
use rand::SeedableRng;
use serde::Serialize;
use std::time::Instant;

use privfed_plot::stats::t_quantile_975;

/// Client chunks per trial (fixed, so results do not depend on the thread count).
pub const CHUNKS: usize = 16;

/// Why a DME run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DmeError {
    /// `clients` or `trials` was 0.
    #[error("{0} must be at least 1")]
    Empty(&'static str),
    /// The mechanism failed on an input drawn from its own domain.
    #[error(transparent)]
    Mechanism(#[from] MechanismError),
    /// A worker thread panicked (a bug, not an input error).
    #[error("a DME worker thread panicked")]
    Worker,
}

/// The parameters of a DME run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmeConfig {
    /// Number of clients N (at least 1).
    pub clients: usize,
    /// Number of independent trials T (at least 1).
    pub trials: usize,
    /// Seed of a reproducible run (AES-256-CTR, the noise generator; for experiments only); `None`: seeded from the
    /// operating system.
    pub seed: Option<u64>,
    /// Worker threads; `None`: all cores.
    pub threads: Option<usize>,
}

/// The result of a DME run (the JSON report of `privfed dme`, keys in this order).
#[derive(Debug, Clone, Serialize)]
pub struct DmeReport<'a, M: Serialize> {
    /// The mechanism's stable name.
    pub mechanism: &'static str,
    /// Its exact ε.
    pub epsilon: f64,
    /// Its δ (0 for pure DP).
    pub delta: f64,
    /// Dimension d.
    pub dim: usize,
    /// Clients N.
    pub clients: usize,
    /// Trials T.
    pub trials: usize,
    /// The seed, if any.
    pub seed: Option<u64>,
    /// Mean over the trials of `‖x̂ − x̄‖²`.
    pub mse: f64,
    /// 95% confidence interval of the MSE (Student t with T − 1 degrees of freedom; NaN, i.e.
    /// `null` in JSON, for a single trial).
    pub mse_ci95: [f64; 2],
    /// The exact expected MSE `Σ_i Var(x_i)/N²`, averaged over the trials.
    pub predicted_mse: f64,
    /// Standard error of the MSE (NaN for a single trial).
    pub mse_standard_error: f64,
    /// `(mse − predicted_mse) / mse_standard_error`.
    pub mse_z: f64,
    /// `mse / predicted_mse`.
    pub mse_over_predicted: f64,
    /// The mechanism's worst-case variance.
    pub worst_case_variance: f64,
    /// Wall-clock seconds of the trials.
    pub seconds: f64,
    /// `N·T / seconds`.
    pub privatizations_per_second: f64,
    /// The mechanism's parameters.
    pub params: &'a M,
}

/// Sums produced by one chunk of clients.
struct ChunkSums {
    inputs: Vec<f64>,
    outputs: Vec<f64>,
    predicted: f64,
}

fn run_chunk<M: LocalRandomizer>(
    mech: &M,
    clients: usize,
    rng: &mut ExperimentRng,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<ChunkSums, MechanismError> {
    let d = mech.dim();
    let domain = mech.domain();
    let mut sums = ChunkSums {
        inputs: vec![0.0; d],
        outputs: vec![0.0; d],
        predicted: 0.0,
    };
    let mut out = vec![0.0; d];
    for _ in 0..clients {
        let x = domain.sample_uniform(rng);
        mech.privatize_into(&x, &mut out, rng)?;
        sums.predicted += mech.variance_at(&x)?;
        for ((si, so), (xi, oi)) in sums
            .inputs
            .iter_mut()
            .zip(sums.outputs.iter_mut())
            .zip(x.iter().zip(&out))
        {
            *si += xi;
            *so += oi;
        }
        progress(1);
    }
    Ok(sums)
}

/// Mean, 95% interval and standard error of per-trial MSEs (`t_{0.975, T−1} · se` half-width;
/// NaN interval and standard error for a single trial).
fn mean_ci95(mses: &[f64]) -> (f64, [f64; 2], f64) {
    let t = mses.len() as f64;
    let mean = mses.iter().sum::<f64>() / t;
    if mses.len() < 2 {
        return (mean, [f64::NAN, f64::NAN], f64::NAN);
    }
    let var = mses.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (t - 1.0);
    let se = (var / t).sqrt();
    let half = t_quantile_975(mses.len() - 1) * se;
    (mean, [mean - half, mean + half], se)
}

/// Runs `config.trials` DME trials of `config.clients` clients with `mech`. `progress` is called
/// with the number of privatizations done since its last call (from the worker threads).
pub fn run_dme<'a, M>(
    mech: &'a M,
    config: &DmeConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<DmeReport<'a, M>, DmeError>
where
    M: LocalRandomizer + Serialize + Sync,
{
    if config.clients == 0 {
        return Err(DmeError::Empty("clients"));
    }
    if config.trials == 0 {
        return Err(DmeError::Empty("trials"));
    }
    let d = mech.dim();
    let threads = config
        .threads
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
        .max(1);
    let mut master: ExperimentRng = match config.seed {
        Some(s) => seeded_rng_for_experiments(s),
        None => rand::make_rng(),
    };
    let total = (config.clients as u64) * (config.trials as u64);
    let start = Instant::now();
    let mut mses = Vec::with_capacity(config.trials);
    let mut predicted = Vec::with_capacity(config.trials);
    let n = config.clients as f64;
    for _ in 0..config.trials {
        let sizes: Vec<usize> = (0..CHUNKS)
            .map(|c| config.clients / CHUNKS + usize::from(c < config.clients % CHUNKS))
            .collect();
        let mut rngs: Vec<ExperimentRng> = (0..CHUNKS)
            .map(|_| ExperimentRng::from_rng(&mut master))
            .collect();
        let mut results: Vec<Option<Result<ChunkSums, MechanismError>>> =
            (0..CHUNKS).map(|_| None).collect();
        // Deterministic parallel map: each thread takes a contiguous block of chunks.
        let per_thread = CHUNKS.div_ceil(threads.min(CHUNKS));
        let joined = std::thread::scope(|s| {
            let mut handles = Vec::new();
            for (t, (rng_block, size_block)) in rngs
                .chunks_mut(per_thread)
                .zip(sizes.chunks(per_thread))
                .enumerate()
            {
                handles.push((
                    t,
                    s.spawn(move || {
                        rng_block
                            .iter_mut()
                            .zip(size_block)
                            .map(|(rng, &size)| run_chunk(mech, size, rng, progress))
                            .collect::<Vec<_>>()
                    }),
                ));
            }
            for (t, h) in handles {
                let block = h.join().map_err(|_| DmeError::Worker)?;
                for (i, r) in block.into_iter().enumerate() {
                    results[t * per_thread + i] = Some(r);
                }
            }
            Ok::<(), DmeError>(())
        });
        joined?;
        let mut sum_in = vec![0.0; d];
        let mut sum_out = vec![0.0; d];
        let mut pred = 0.0;
        for r in results.into_iter().flatten() {
            let c = r?;
            sum_in.iter_mut().zip(&c.inputs).for_each(|(a, b)| *a += b);
            sum_out
                .iter_mut()
                .zip(&c.outputs)
                .for_each(|(a, b)| *a += b);
            pred += c.predicted;
        }
        let mse: f64 = sum_in
            .iter()
            .zip(&sum_out)
            .map(|(a, b)| ((b - a) / n).powi(2))
            .sum();
        mses.push(mse);
        predicted.push(pred / (n * n));
    }
    let seconds = start.elapsed().as_secs_f64();

    let (mean, ci, se) = mean_ci95(&mses);
    let predicted_mse = predicted.iter().sum::<f64>() / config.trials as f64;
    let g = mech.guarantee();
    Ok(DmeReport {
        mechanism: mech.name(),
        epsilon: g.epsilon(),
        delta: g.delta(),
        dim: d,
        clients: config.clients,
        trials: config.trials,
        seed: config.seed,
        mse: mean,
        mse_ci95: ci,
        predicted_mse,
        mse_standard_error: se,
        mse_z: (mean - predicted_mse) / se,
        mse_over_predicted: mean / predicted_mse,
        worst_case_variance: mech.worst_case_variance(),
        seconds,
        privatizations_per_second: total as f64 / seconds,
        params: mech,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use privfed_mechanisms::grid_rr::GridRr;
    use privfed_mechanisms::privunit2::PrivUnit2;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn config(clients: usize, trials: usize, threads: usize) -> DmeConfig {
        DmeConfig {
            clients,
            trials,
            seed: Some(11),
            threads: Some(threads),
        }
    }

    #[test]
    fn interval_of_the_trials() {
        let (m, ci, se) = mean_ci95(&[1.0, 2.0, 3.0]);
        assert_eq!(m, 2.0);
        let want_se = (1.0f64 / 3.0).sqrt();
        assert!((se - want_se).abs() < 1e-15);
        assert!((ci[1] - ci[0] - 2.0 * 4.303 * want_se).abs() < 1e-12);
        let (m, ci, se) = mean_ci95(&[5.0]);
        assert_eq!(m, 5.0);
        assert!(ci[0].is_nan() && ci[1].is_nan() && se.is_nan());
    }

    /// A seeded run gives the same numbers whatever the thread count, reports every
    /// privatization to the progress callback, and its MSE matches the exact prediction.
    #[test]
    fn seeded_runs_do_not_depend_on_threads_and_match_the_prediction() {
        let mech = PrivUnit2::optimized(4.0, 8).unwrap();
        let count = AtomicU64::new(0);
        let progress = |k: u64| {
            count.fetch_add(k, Ordering::Relaxed);
        };
        let a = run_dme(&mech, &config(400, 40, 1), &progress).unwrap();
        assert_eq!(count.load(Ordering::Relaxed), 400 * 40);
        let b = run_dme(&mech, &config(400, 40, 3), &|_| {}).unwrap();
        assert_eq!(a.mse, b.mse);
        assert_eq!(a.predicted_mse, b.predicted_mse);
        // PrivUnit2's variance does not depend on the input on the sphere.
        let exact = mech.worst_case_variance() / 400.0;
        assert!((a.predicted_mse - exact).abs() < 1e-9 * exact);
        // 40 trials: |z| beyond 4 would be a 1-in-15000 event for a correct mechanism.
        assert!(a.mse_z.abs() < 4.0, "z = {}", a.mse_z);
        assert!(a.mse_ci95[0] < a.mse && a.mse < a.mse_ci95[1]);
    }

    /// The report serializes with the keys of `privfed dme --json`, in order; a single trial
    /// has a null interval.
    #[test]
    fn report_keys() {
        let mech = GridRr::unbiased_grr(2.0, 3, -1.0, 1.0).unwrap();
        let r = run_dme(&mech, &config(50, 1, 2), &|_| {}).unwrap();
        let v = serde_json::to_value(&r).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "mechanism",
                "epsilon",
                "delta",
                "dim",
                "clients",
                "trials",
                "seed",
                "mse",
                "mse_ci95",
                "predicted_mse",
                "mse_standard_error",
                "mse_z",
                "mse_over_predicted",
                "worst_case_variance",
                "seconds",
                "privatizations_per_second",
                "params"
            ]
        );
        assert_eq!(v["mse_ci95"], serde_json::json!([null, null]));
        assert_eq!(v["seed"], 11);
        assert!(run_dme(&mech, &config(0, 1, 1), &|_| {}).is_err());
        assert!(run_dme(&mech, &config(1, 0, 1), &|_| {}).is_err());
    }
}
