//! `privfed bench`: measured costs of the randomizers (not a test: numbers go to BENCHMARKS.md).

use crate::output::print_report;
use anyhow::Result;
use clap::Args;
use privfed_mechanisms::LocalRandomizer;
use privfed_mechanisms::batch::fill_normal;
use privfed_mechanisms::domain::Domain;
use privfed_mechanisms::gaussian::Gaussian;
use privfed_mechanisms::laplace::Laplace;
use privfed_mechanisms::privunit2::PrivUnit2;
use privfed_mechanisms::privunitg::PrivUnitG;
use privfed_mechanisms::rng::{
    NoiseRng, StreamKey, Threads, for_each_block, seeded_rng_for_experiments,
};
use privfed_mechanisms::sampling::uniform_on_sphere;
use rand::SeedableRng;
use serde::Serialize;
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
    /// Threads of the multi-core rows (one more row per dimension when above 1; 0 = every
    /// core the operating system reports). The outputs are the same for every thread count.
    #[arg(long, default_value_t = 0)]
    threads: usize,
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

/// The floor of one privatization: `d` standard normals, drawn as the mechanisms draw them
/// (blocks from the streams of a fresh key, on `threads` threads).
fn normals_floor(budget: Duration, d: usize, threads: Threads) -> f64 {
    let mut rng = seeded_rng_for_experiments(2);
    let mut out = vec![0.0; d];
    time_per_call(budget, || {
        let key = StreamKey::draw(&mut rng);
        for_each_block(&key, &mut out, threads, |_, s, chunk| fill_normal(s, chunk));
    })
}

/// `d` standard normals from one stream of a ChaCha generator with `R` rounds' type.
fn floor_with<R: SeedableRng + rand::Rng>(budget: Duration, d: usize) -> f64 {
    let mut rng = R::seed_from_u64(3);
    let mut out = vec![0.0; d];
    time_per_call(budget, || fill_normal(&mut rng, &mut out))
}

/// One row of `privfed bench`: every mechanism at one dimension on one thread count. Times are
/// medians per privatization, milliseconds; ratios are to the floor.
#[derive(Serialize)]
struct Row {
    /// Dimension d.
    dim: usize,
    /// Threads.
    threads: usize,
    /// `d` standard normals drawn as the mechanisms draw them.
    normals_floor_ms: f64,
    /// PrivUnit2.
    privunit2_ms: f64,
    /// PrivUnit2 over the floor.
    privunit2_over_floor: f64,
    /// PrivUnitG.
    privunitg_ms: f64,
    /// PrivUnitG over the floor.
    privunitg_over_floor: f64,
    /// The Gaussian mechanism.
    gaussian_ms: f64,
    /// The Gaussian mechanism over the floor.
    gaussian_over_floor: f64,
    /// The Laplace mechanism.
    laplace_ms: f64,
    /// One thread only: `PrivUnit2::optimized`'s parameter search.
    #[serde(skip_serializing_if = "Option::is_none")]
    privunit2_optimize_ms: Option<f64>,
    /// One thread only: the floor with each ChaCha generator on one stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    floor_by_generator_ms: Option<FloorByGenerator>,
    /// Several threads only: PrivUnit2's one-thread time over this row's.
    #[serde(skip_serializing_if = "Option::is_none")]
    speedup_privunit2: Option<f64>,
}

/// The normals floor by generator, milliseconds.
#[derive(Serialize)]
struct FloorByGenerator {
    /// ChaCha8.
    chacha8: f64,
    /// ChaCha12.
    chacha12: f64,
    /// ChaCha20.
    chacha20: f64,
}

/// What `privfed bench` prints.
#[derive(Serialize)]
struct Report {
    /// The noise generator and how normals are drawn.
    generator: String,
    /// ε of the randomizers.
    epsilon: f64,
    /// Threads of the multi-core rows.
    threads: usize,
    /// One row per dimension (two with several threads).
    results: Vec<Row>,
}

/// One row: every mechanism at dimension `d` on `threads` threads.
fn row(args: &BenchArgs, budget: Duration, d: usize, threads: Threads) -> Result<Row> {
    let mut rng = seeded_rng_for_experiments(1);
    let u = uniform_on_sphere(d, &mut rng)?;
    let mut out = vec![0.0; d];
    let floor = normals_floor(budget, d, threads);
    let mut time =
        |m: &dyn Fn(&mut [f64], &mut NoiseRng)| time_per_call(budget, || m(&mut out, &mut rng));
    let p2 = PrivUnit2::optimized(args.epsilon, d)?;
    let t2 = time(&|o, r| {
        p2.privatize_into_threads(&u, o, r, threads)
            .expect("valid input")
    });
    let pg = PrivUnitG::optimized(args.epsilon, d)?;
    let tg = time(&|o, r| {
        pg.privatize_into_threads(&u, o, r, threads)
            .expect("valid input")
    });
    let ball = Domain::L2Ball {
        dim: d,
        radius: 1.0,
    };
    let gm = Gaussian::new(args.epsilon, 1e-6, ball)?;
    let tgauss = time(&|o, r| {
        gm.privatize_into_threads(&u, o, r, threads)
            .expect("valid input")
    });
    let lm = Laplace::new(
        args.epsilon,
        Domain::L1Ball {
            dim: d,
            radius: (d as f64).sqrt(),
        },
    )?;
    let tlap = time(&|o, r| {
        lm.privatize_into_threads(&u, o, r, threads)
            .expect("valid input")
    });
    let mut r = Row {
        dim: d,
        threads: threads.get(),
        normals_floor_ms: floor * 1e3,
        privunit2_ms: t2 * 1e3,
        privunit2_over_floor: t2 / floor,
        privunitg_ms: tg * 1e3,
        privunitg_over_floor: tg / floor,
        gaussian_ms: tgauss * 1e3,
        gaussian_over_floor: tgauss / floor,
        laplace_ms: tlap * 1e3,
        privunit2_optimize_ms: None,
        floor_by_generator_ms: None,
        speedup_privunit2: None,
    };
    if threads == Threads::ONE {
        let setup2 = time_per_call(budget / 4, || {
            PrivUnit2::optimized(args.epsilon, d).expect("valid parameters");
        });
        r.privunit2_optimize_ms = Some(setup2 * 1e3);
        // The floor with each generator on one stream (the default is `NoiseRng`).
        r.floor_by_generator_ms = Some(FloorByGenerator {
            chacha8: floor_with::<rand::rngs::ChaCha8Rng>(budget, d) * 1e3,
            chacha12: floor_with::<rand::rngs::ChaCha12Rng>(budget, d) * 1e3,
            chacha20: floor_with::<rand::rngs::ChaCha20Rng>(budget, d) * 1e3,
        });
    }
    Ok(r)
}

/// Runs `privfed bench`.
pub fn run(args: &BenchArgs) -> Result<()> {
    let budget = Duration::from_secs_f64(args.seconds.max(0.01));
    let threads = match args.threads {
        0 => Threads::new(std::thread::available_parallelism().map_or(1, |n| n.get())),
        n => Threads::new(n),
    };
    let mut rows = Vec::new();
    for &d in &args.dims {
        let single = row(args, budget, d, Threads::ONE)?;
        if threads.get() > 1 {
            let mut multi = row(args, budget, d, threads)?;
            multi.speedup_privunit2 = Some(single.privunit2_ms / multi.privunit2_ms);
            rows.push(single);
            rows.push(multi);
        } else {
            rows.push(single);
        }
    }
    let report = Report {
        generator: format!(
            "{} (privfed_mechanisms::rng::NoiseRng), one stream per block of {} coordinates; \
             standard normals by the batched ziggurat (privfed_mechanisms::batch)",
            std::any::type_name::<NoiseRng>(),
            privfed_mechanisms::rng::BLOCK_LEN
        ),
        epsilon: args.epsilon,
        threads: threads.get(),
        results: rows,
    };
    if args.json {
        print_report(&serde_json::to_value(&report)?, true)?;
    } else {
        let mut text = format!(
            "{:>9} {:>3} {:>10} {:>13} {:>6} {:>13} {:>6} {:>12} {:>11}",
            "dim",
            "thr",
            "floor ms",
            "privunit2 ms",
            "ratio",
            "privunitg ms",
            "ratio",
            "gaussian ms",
            "laplace ms"
        );
        for r in &report.results {
            text.push('\n');
            text.push_str(&format!(
                "{:>9} {:>3} {:>10.4} {:>13.4} {:>6.2} {:>13.4} {:>6.2} {:>12.4} {:>11.4}",
                r.dim,
                r.threads,
                r.normals_floor_ms,
                r.privunit2_ms,
                r.privunit2_over_floor,
                r.privunitg_ms,
                r.privunitg_over_floor,
                r.gaussian_ms,
                r.laplace_ms,
            ));
            if let Some(g) = &r.floor_by_generator_ms {
                text.push_str(&format!(
                    "   floor by generator: ChaCha8 {:.4}, ChaCha12 {:.4}, ChaCha20 {:.4} ms; optimize {:.3} ms",
                    g.chacha8,
                    g.chacha12,
                    g.chacha20,
                    r.privunit2_optimize_ms.unwrap_or(f64::NAN)
                ));
            }
        }
        crate::output::emit(&text)?;
    }
    Ok(())
}
