//! The 95% Student-t interval of a mean of replicates: the bands of figures drawn from an
//! experiment's trials ([`crate::table`]'s `average`) and the intervals the experiments report
//! (privfed-sim's DME) use this one quantile, so a figure and its report agree.

/// Two-sided 95% (upper 97.5%) Student-t quantile for `df` degrees of freedom: the table to three
/// decimals for `df ≤ 30`, `1.959964 + 2.4/df` beyond; NaN for `df = 0`.
pub fn t_quantile_975(df: usize) -> f64 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles() {
        assert!(t_quantile_975(0).is_nan());
        assert_eq!(t_quantile_975(1), 12.706);
        assert_eq!(t_quantile_975(30), 2.042);
        assert!((t_quantile_975(1000) - 1.962_364).abs() < 1e-12);
    }
}
