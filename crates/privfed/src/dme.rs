//! `privfed dme`: distributed mean estimation as in the papers (docs/ALGORITHMS.md §6).
//!
//! Each trial draws `N` client inputs uniformly from the mechanism's domain; each client
//! privatizes its input; the server averages. The MSE `‖x̂ − x̄‖²` is averaged over trials and
//! compared with its exact expectation `Σ_i Var(x_i)/N²`, computed from the mechanism's exact
//! per-input variance.
//!
//! Work is split into a fixed number of client chunks per trial, each with its own generator
//! drawn in order from the master generator, so a seeded run gives the same numbers whatever the
//! number of threads.

use crate::build::{MechanismArgs, build};
use crate::output::print_report;
use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use privfed_mechanisms::rng::{ExperimentRng, seeded_rng_for_experiments};
use privfed_mechanisms::{AnyRandomizer, LocalRandomizer};
use rand::SeedableRng;
use serde_json::json;
use std::time::Instant;

/// Arguments of `privfed dme`.
#[derive(Debug, Args)]
pub struct DmeArgs {
    #[command(flatten)]
    mech: MechanismArgs,
    /// Number of clients N.
    #[arg(long)]
    clients: usize,
    /// Number of independent trials T.
    #[arg(long, default_value_t = 10)]
    trials: usize,
    /// Seed for a reproducible run (ChaCha20; for experiments only). Without it the run is
    /// seeded from the operating system.
    #[arg(long)]
    seed: Option<u64>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

/// Client chunks per trial (fixed, so results do not depend on the thread count).
const CHUNKS: usize = 16;

/// Sums produced by one chunk of clients.
struct ChunkSums {
    inputs: Vec<f64>,
    outputs: Vec<f64>,
    predicted: f64,
}

fn run_chunk(
    mech: &AnyRandomizer,
    clients: usize,
    rng: &mut ExperimentRng,
    progress: &ProgressBar,
) -> Result<ChunkSums> {
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
        progress.inc(1);
    }
    Ok(sums)
}

/// Two-sided 97.5% Student-t quantile for `df` degrees of freedom.
fn t_quantile_975(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::NAN,
        1..=30 => TABLE[df - 1],
        _ => 1.959_964 + 2.4 / df as f64,
    }
}

/// Runs `privfed dme`.
pub fn run(args: &DmeArgs) -> Result<()> {
    if args.clients == 0 {
        bail!("--clients must be at least 1");
    }
    if args.trials == 0 {
        bail!("--trials must be at least 1");
    }
    let mech = build(&args.mech)?;
    let d = mech.dim();
    let threads = args
        .threads
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
        .max(1);
    let mut master: ExperimentRng = match args.seed {
        Some(s) => seeded_rng_for_experiments(s),
        None => rand::make_rng(),
    };
    let total = (args.clients as u64) * (args.trials as u64);
    let progress = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total)
    };
    progress.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} privatizations ({per_sec}, eta {eta})",
        )
        .context("progress template")?
        .progress_chars("=> "),
    );

    let start = Instant::now();
    let mut mses = Vec::with_capacity(args.trials);
    let mut predicted = Vec::with_capacity(args.trials);
    let n = args.clients as f64;
    for _ in 0..args.trials {
        let sizes: Vec<usize> = (0..CHUNKS)
            .map(|c| args.clients / CHUNKS + usize::from(c < args.clients % CHUNKS))
            .collect();
        let mut rngs: Vec<ExperimentRng> = (0..CHUNKS)
            .map(|_| ExperimentRng::from_rng(&mut master))
            .collect();
        let mut results: Vec<Option<Result<ChunkSums>>> = (0..CHUNKS).map(|_| None).collect();
        // Deterministic parallel map: each thread takes a contiguous block of chunks.
        let per_thread = CHUNKS.div_ceil(threads.min(CHUNKS));
        std::thread::scope(|s| {
            let mut handles = Vec::new();
            for (t, (rng_block, size_block)) in rngs
                .chunks_mut(per_thread)
                .zip(sizes.chunks(per_thread))
                .enumerate()
            {
                let (mech, progress) = (&mech, &progress);
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
                let block = h.join().expect("worker thread panicked");
                for (i, r) in block.into_iter().enumerate() {
                    results[t * per_thread + i] = Some(r);
                }
            }
        });
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
    progress.finish_and_clear();
    let seconds = start.elapsed().as_secs_f64();

    let t = args.trials as f64;
    let mean = mses.iter().sum::<f64>() / t;
    let predicted_mse = predicted.iter().sum::<f64>() / t;
    let (lo, hi, se) = if args.trials > 1 {
        let var = mses.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (t - 1.0);
        let se = (var / t).sqrt();
        let half = t_quantile_975(args.trials - 1) * se;
        (mean - half, mean + half, se)
    } else {
        (f64::NAN, f64::NAN, f64::NAN)
    };
    let g = mech.guarantee();
    let report = json!({
        "mechanism": mech.name(),
        "epsilon": g.epsilon(),
        "delta": g.delta(),
        "dim": d,
        "clients": args.clients,
        "trials": args.trials,
        "seed": args.seed,
        "mse": mean,
        "mse_ci95": [lo, hi],
        "predicted_mse": predicted_mse,
        "mse_standard_error": se,
        "mse_z": (mean - predicted_mse) / se,
        "mse_over_predicted": mean / predicted_mse,
        "worst_case_variance": mech.worst_case_variance(),
        "seconds": seconds,
        "privatizations_per_second": total as f64 / seconds,
        "params": mech,
    });
    print_report(&report, args.json)?;
    Ok(())
}
