//! Why privfed has its own special functions: the quantities its mechanisms and accountants need
//! live far in the tails, where `1 − Φ(z)` or `I_x(a, b)` underflow or lose every digit in
//! double precision. In log space they stay exact to a few ulps. Each value is checked against
//! an independent closed form.
//!
//! Run: `cargo run -p privfed-special --example log_space`

use privfed_special::{
    ln_beta_inc, ln_binomial, ln_gamma, ln_norm_cdf, ln_poisson_pmf, log_sum_exp, norm_cdf,
};

fn main() {
    // The Gaussian mechanism's δ involves Φ far into the lower tail: Φ(−40) underflows to 0,
    // its logarithm does not. Mills' ratio gives ln Φ(−z) = −z²/2 − ln z − ½ln 2π
    // + ln(1 − 1/z² + 3/z⁴ − …).
    let z: f64 = 40.0;
    let asymptotic = -z * z / 2.0 - z.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln()
        + (1.0 - 1.0 / (z * z) + 3.0 / z.powi(4) - 15.0 / z.powi(6)).ln();
    println!(
        "Φ(−40) = {:e}, ln Φ(−40) = {:.10} (asymptotic series {asymptotic:.10})",
        norm_cdf(-z),
        ln_norm_cdf(-z)
    );
    assert_eq!(norm_cdf(-z), 0.0);
    assert!((ln_norm_cdf(-z) - asymptotic).abs() < 1e-9);

    // PrivUnit2 at d = 10⁶ needs I_x(a, a) with a = (d − 1)/2 ≈ 5·10⁵: at the median it is ½
    // by symmetry, and a few standard deviations away it is close to a normal tail.
    let a = (1e6 - 1.0) / 2.0;
    let half = ln_beta_inc(a, a, 0.5);
    let sd = 0.5 / (2.0 * a + 1.0).sqrt();
    let tail = ln_beta_inc(a, a, 0.5 - 5.0 * sd);
    println!(
        "ln I_0.5(a, a) = {half:.12} (ln ½ = {:.12}); 5 sd below: {tail:.6} (normal {:.6})",
        0.5f64.ln(),
        ln_norm_cdf(-5.0)
    );
    assert!((half - 0.5f64.ln()).abs() < 1e-12);
    assert!((tail - ln_norm_cdf(-5.0)).abs() < 1e-3);

    // Sums of probabilities that are each far below the smallest double: log-sum-exp.
    let terms = [-1000.0, -1000.0, -1000.0 + 2f64.ln()];
    println!(
        "ln(e^−1000 + e^−1000 + 2e^−1000) = {:.12}",
        log_sum_exp(&terms)
    );
    assert!((log_sum_exp(&terms) - (-1000.0 + 4f64.ln())).abs() < 1e-12);

    // Skellam and Poisson noise at large means: the pmf at the mode, by Stirling,
    // ≈ 1/√(2πλ); and C(n, n/2) through ln Γ.
    let lambda = 1e7;
    let mode = ln_poisson_pmf(1e7 as u64, lambda);
    let stirling = -0.5 * (2.0 * std::f64::consts::PI * lambda).ln() - 1.0 / (12.0 * lambda);
    println!("ln P(Poisson(1e7) = 1e7) = {mode:.12} (Stirling {stirling:.12})");
    assert!((mode - stirling).abs() < 1e-9);
    let n = 1e6;
    let via_gamma = ln_gamma(n + 1.0) - 2.0 * ln_gamma(n / 2.0 + 1.0);
    println!("ln C(10⁶, 5·10⁵) = {:.6}", ln_binomial(n, n / 2.0));
    assert!((ln_binomial(n, n / 2.0) - via_gamma).abs() < 1e-6);
}
