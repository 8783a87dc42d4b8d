//! Benchmark: the accounting cases of `scripts/bench/py_accounting.py` timed in Rust alone
//! (PLD at h = 1e-4 and 1e-3; calibration with each accountant), to see where time goes
//! without Python in the way.
//!
//! `cargo run --release -p privfed-accounting --example bench_accounting_cases [-- --min-seconds S]`

use std::time::Instant;

use privfed_accounting::calibrate::calibrate_noise_multiplier;
use privfed_accounting::{AccountantKind, DpEvent, PldAccountant};

fn psg(q: f64, z: f64, n: u64) -> DpEvent {
    DpEvent::poisson_gaussian(q, z, n)
}

fn self_composed(event: DpEvent, count: u64) -> DpEvent {
    DpEvent::SelfComposed {
        event: Box::new(event),
        count,
    }
}

/// Median and minimum of repeated calls, at least 5 calls and `min_seconds` in all.
fn timed<T>(min_seconds: f64, mut f: impl FnMut() -> T) -> (T, f64, f64) {
    let mut times = Vec::new();
    let start = Instant::now();
    let mut value;
    loop {
        let t = Instant::now();
        value = f();
        times.push(t.elapsed().as_secs_f64());
        if times.len() >= 5 && start.elapsed().as_secs_f64() >= min_seconds {
            break;
        }
    }
    times.sort_by(f64::total_cmp);
    (value, times[times.len() / 2], times[0])
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let min_seconds = args
        .iter()
        .position(|a| a == "--min-seconds")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let delta = 1e-5;
    let cases = [
        ("psg1k", psg(0.01, 1.1, 1000)),
        ("psg10k", psg(0.01, 1.1, 10_000)),
        ("psg100k", psg(0.001, 1.1, 100_000)),
        (
            "mixed",
            DpEvent::Composed {
                events: vec![
                    psg(0.01, 1.1, 1000),
                    self_composed(
                        DpEvent::Gaussian {
                            noise_multiplier: 5.0,
                        },
                        10,
                    ),
                    self_composed(DpEvent::Laplace { scale: 20.0 }, 10),
                    psg(0.02, 2.0, 500),
                ],
            },
        ),
    ];
    for (name, event) in &cases {
        for h in [1e-4, 1e-3] {
            let (eps, med, min) = timed(min_seconds, || {
                let mut acc = PldAccountant::with_discretization(h).expect("valid h");
                acc.compose(event).expect("supported event");
                acc.get_epsilon(delta).expect("valid delta")
            });
            println!(
                "{name:8} PLD h={h:e}: epsilon {eps:.9}  median {:.3} ms  min {:.3} ms",
                med * 1e3,
                min * 1e3
            );
        }
    }
    for kind in [AccountantKind::Rdp, AccountantKind::Pld] {
        let (c, med, min) = timed(min_seconds, || {
            calibrate_noise_multiplier(kind, 2.0, delta, 0.01, 1000).expect("feasible")
        });
        println!(
            "calibration {kind:?}: z {:.9} (epsilon {:.9})  median {:.3} ms  min {:.3} ms",
            c.parameter,
            c.epsilon,
            med * 1e3,
            min * 1e3
        );
    }
}
