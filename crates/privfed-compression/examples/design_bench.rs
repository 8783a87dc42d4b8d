//! Design times of the MVU designer for b_in = b_out ∈ {3, 4, 5} at ε ∈ {1, 3, 5, 10}
//! (results in BENCHMARKS.md, "Compression"). Prints a markdown table.
//!
//! `cargo run --release -p privfed-compression --example design_bench [-- BITS...]`

use privfed_compression::designer::{DesignOptions, design_mvu};
use privfed_mechanisms::mvu::DpConstraint;
use std::time::Instant;

fn main() {
    let bits: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let bits = if bits.is_empty() { vec![3, 4, 5] } else { bits };
    println!(
        "| b_in = b_out | ε | seconds | LP solves | variance (MVU) | variance (gRR) | MVU/gRR | worst case (MVU) | max violation | start |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for b in bits {
        for eps in [1.0, 3.0, 5.0, 10.0] {
            let t = Instant::now();
            let r = design_mvu(b, b, eps, DpConstraint::Ldp, &DesignOptions::default())
                .expect("design");
            let s = t.elapsed().as_secs_f64();
            println!(
                "| {b} | {eps} | {s:.3} | {} | {:.6e} | {:.6e} | {:.4} | {:.6e} | {:.1e} | {} |",
                r.lp_solves,
                r.variance,
                r.grr_variance,
                r.variance / r.grr_variance,
                r.worst_case_variance,
                r.violations.max(),
                r.start
            );
        }
    }
}
