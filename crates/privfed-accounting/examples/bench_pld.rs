//! Benchmark: PLD accounting of the Poisson-subsampled Gaussian, q = 0.01, z = 1.1,
//! 10^4 steps, δ = 1e-5. Compare with `scripts/bench/bench_pld_dp_accounting.py`.
//!
//! `cargo run --release -p privfed-accounting --example bench_pld`

use std::time::Instant;

use privfed_accounting::{DpEvent, PldAccountant, RdpAccountant};

fn main() {
    let (q, z, steps, delta) = (0.01, 1.1, 10_000u64, 1e-5);
    let event = DpEvent::poisson_gaussian(q, z, steps);
    let reps = 5;
    for h in [1e-4, 2e-4, 5e-4, 1e-3, 2e-3] {
        let mut times = Vec::new();
        let mut eps = 0.0;
        for _ in 0..reps {
            let t = Instant::now();
            let mut acc = PldAccountant::with_discretization(h).expect("valid h");
            acc.compose(&event).expect("supported event");
            eps = acc.get_epsilon(delta).expect("valid delta");
            times.push(t.elapsed().as_secs_f64());
        }
        let first = times[0];
        times.sort_by(f64::total_cmp);
        println!(
            "privfed PLD (h={h:e}): epsilon = {eps:.6}  first run {first:.4} s  median {:.4} s  min {:.4} s  ({reps} runs)",
            times[reps / 2],
            times[0]
        );
    }
    let t = Instant::now();
    let mut rdp = RdpAccountant::new();
    rdp.compose(&event).expect("supported event");
    let r = rdp.get_epsilon_and_order(delta).expect("valid delta");
    println!(
        "privfed RDP: epsilon = {:.6} (order {})  {:.4} s",
        r.epsilon,
        r.optimal_order,
        t.elapsed().as_secs_f64()
    );
}
