//! `privfed bench`: measured costs of the randomizers (not a test: numbers go to BENCHMARKS.md).

use crate::output::print_report;
use anyhow::Result;
use clap::Args;
use privfed_mechanisms::LocalRandomizer;
use privfed_mechanisms::privunit2::PrivUnit2;
use privfed_mechanisms::privunitg::PrivUnitG;
use privfed_mechanisms::rng::seeded_rng_for_experiments;
use privfed_mechanisms::sampling::{fill_standard_normal, uniform_on_sphere};
use serde_json::json;
use std::time::{Duration, Instant};

/// Arguments of `privfed bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Dimensions to measure.
    #[arg(long, value_delimiter = ',', default_values_t = [1_000usize, 100_000, 1_000_000])]
    dims: Vec<usize>,
    /// ε of the randomizers.
    #[arg(long, default_value_t = 4.0)]
    epsilon: f64,
    /// Minimum measuring time per case, in seconds.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Median time per call of `f`, over batches filling at least `budget`.
fn time_per_call(budget: Duration, mut f: impl FnMut()) -> f64 {
    // Warm up and size a batch to ~1/20 of the budget.
    let t0 = Instant::now();
    f();
    let one = t0.elapsed().as_secs_f64().max(1e-9);
    let batch = ((budget.as_secs_f64() / 20.0 / one).ceil() as usize).max(1);
    let mut samples = Vec::new();
    let start = Instant::now();
    while start.elapsed() < budget || samples.len() < 5 {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        samples.push(t.elapsed().as_secs_f64() / batch as f64);
    }
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// Runs `privfed bench`.
pub fn run(args: &BenchArgs) -> Result<()> {
    let budget = Duration::from_secs_f64(args.seconds.max(0.01));
    let mut rows = Vec::new();
    for &d in &args.dims {
        let mut rng = seeded_rng_for_experiments(1);
        let u = uniform_on_sphere(d, &mut rng)?;
        let mut out = vec![0.0; d];
        let floor = time_per_call(budget, || fill_standard_normal(&mut rng, &mut out));
        let p2 = PrivUnit2::optimized(args.epsilon, d)?;
        let t2 = time_per_call(budget, || {
            p2.privatize_into(&u, &mut out, &mut rng)
                .expect("valid input")
        });
        let pg = PrivUnitG::optimized(args.epsilon, d)?;
        let tg = time_per_call(budget, || {
            pg.privatize_into(&u, &mut out, &mut rng)
                .expect("valid input")
        });
        let setup2 = time_per_call(budget / 4, || {
            PrivUnit2::optimized(args.epsilon, d).expect("valid parameters");
        });
        rows.push(json!({
            "dim": d,
            "normals_floor_ms": floor * 1e3,
            "privunit2_ms": t2 * 1e3,
            "privunit2_over_floor": t2 / floor,
            "privunitg_ms": tg * 1e3,
            "privunitg_over_floor": tg / floor,
            "privunit2_optimize_ms": setup2 * 1e3,
        }));
    }
    let report = json!({
        "generator": "ChaCha20 (rand 0.10), standard normals by ziggurat (rand_distr 0.6)",
        "epsilon": args.epsilon,
        "results": rows,
    });
    if args.json {
        print_report(&report, true)?;
    } else {
        let mut text = format!(
            "{:>9} {:>12} {:>14} {:>8} {:>14} {:>8} {:>14}",
            "dim", "floor ms", "privunit2 ms", "ratio", "privunitg ms", "ratio", "optimize ms"
        );
        for r in &rows {
            text.push('\n');
            text.push_str(&format!(
                "{:>9} {:>12.4} {:>14.4} {:>8.2} {:>14.4} {:>8.2} {:>14.3}",
                r["dim"],
                r["normals_floor_ms"].as_f64().unwrap_or(f64::NAN),
                r["privunit2_ms"].as_f64().unwrap_or(f64::NAN),
                r["privunit2_over_floor"].as_f64().unwrap_or(f64::NAN),
                r["privunitg_ms"].as_f64().unwrap_or(f64::NAN),
                r["privunitg_over_floor"].as_f64().unwrap_or(f64::NAN),
                r["privunit2_optimize_ms"].as_f64().unwrap_or(f64::NAN)
            ));
        }
        crate::output::emit(&text)?;
    }
    Ok(())
}
