//! Shared statistical helpers for the integration tests. Every test that uses them states its
//! false-positive rate (FPR) at the call site.
#![allow(dead_code)]

/// Kolmogorov–Smirnov statistic `sup |F_n − F|` of `samples` against `cdf`.
pub fn ks_statistic(samples: &mut [f64], cdf: impl Fn(f64) -> f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let n = samples.len() as f64;
    let mut d: f64 = 0.0;
    for (i, &x) in samples.iter().enumerate() {
        let f = cdf(x);
        d = d
            .max((f - i as f64 / n).abs())
            .max(((i + 1) as f64 / n - f).abs());
    }
    d
}

/// Asymptotic KS critical value at level `alpha`: `√(−ln(α/2)/(2n))` (conservative for n ≥ 1000).
pub fn ks_critical(n: usize, alpha: f64) -> f64 {
    (-(alpha / 2.0).ln() / (2.0 * n as f64)).sqrt()
}

/// Mean and unbiased sample variance.
pub fn mean_var(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var)
}

/// z-score of a sample mean against `expected`.
pub fn z_score(xs: &[f64], expected: f64) -> f64 {
    let (mean, var) = mean_var(xs);
    (mean - expected) / (var / xs.len() as f64).sqrt()
}
