//! Time per call of the incomplete beta and its inverse at the PrivUnit2 size
//! `a = b = 499999.5` (d = 10⁶), across the regions that pick different algorithms (Temme's
//! expansion near the median, continued fractions in the tails), and of the binomial and
//! reconstruction shapes the accountants use. A benchmark, kept out of the test suite: it
//! prints times and asserts nothing.
//!
//! `cargo run --release -p privfed-special --example beta_bench`

use privfed_special::{beta_inc_complement, beta_inc_complement_inv_ln, ln_beta_inc};
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let a = 499_999.5;
    let sd = 0.5 / (2.0 * a + 1.0_f64).sqrt();
    for (label, x) in [
        ("median", 0.5 + 0.3 * sd),
        ("1 sd", 0.5 + sd),
        ("3 sd", 0.5 + 3.0 * sd),
        ("7 sd", 0.5 + 7.0 * sd),
        ("12 sd (Temme edge)", 0.5 + 12.0 * sd),
        ("20 sd", 0.5 + 20.0 * sd),
        ("tail x=0.6", 0.6),
    ] {
        let n = 20_000;
        let t = Instant::now();
        let mut s = 0.0;
        for i in 0..n {
            s += beta_inc_complement(a, a, black_box(x + i as f64 * 1e-15));
        }
        let per = t.elapsed().as_secs_f64() / n as f64;
        println!(
            "beta_inc_complement a=b={a} {label:<20} x={x:.6}: {:.3} µs/call ({s:e})",
            per * 1e6
        );
    }
    for (label, a, b, x) in [
        ("binomial n=1e6, k=n/2", 500_000.0, 500_001.0, 0.5),
        ("binomial n=1e6, 5 sd", 502_500.0, 497_501.0, 0.5),
        ("reconstruction t=0.003", 499_999.5, 0.5, 1.0 - 9e-6),
        ("reconstruction t=0.1", 499_999.5, 0.5, 0.99),
    ] {
        let n = 20_000;
        let t = Instant::now();
        let mut s = 0.0;
        for i in 0..n {
            s += ln_beta_inc(a, b, black_box(x - i as f64 * 1e-17));
        }
        let per = t.elapsed().as_secs_f64() / n as f64;
        println!("ln_beta_inc {label:<26}: {:.3} µs/call ({s:e})", per * 1e6);
    }
    for lq in [-1.0, -28.0, -700.0, -5000.0] {
        let n = 2000;
        let t = Instant::now();
        let mut s = 0.0;
        for i in 0..n {
            s += beta_inc_complement_inv_ln(a, a, black_box(lq - i as f64 * 1e-12));
        }
        let per = t.elapsed().as_secs_f64() / n as f64;
        println!(
            "beta_inc_complement_inv_ln a=b={a} ln_q={lq}: {:.2} µs/call ({s})",
            per * 1e6
        );
    }
}
