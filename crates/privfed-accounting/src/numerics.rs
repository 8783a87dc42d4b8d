//! The numerics the accountants use, all from `privfed-special` (the base crate shared with the
//! mechanisms; its tests hold the mpmath suites). Re-exported under the names the accounting
//! modules import.

pub(crate) use privfed_special::{
    NormPoint, bisect_smallest, ln_binomial as log_comb, ln_norm_cdf, log_add_exp as log_add,
    log_sum_exp,
};

/// `ln I_x(a,b)` at the point `(x, y = 1 − x)` ([`privfed_special::ln_beta_inc_xy`]), with its
/// NaN (invalid arguments, or a continued fraction that did not converge) turned into an error
/// message for `AccountingError::Numerical`.
pub(crate) fn ln_beta_inc(a: f64, b: f64, x: f64, y: f64) -> Result<f64, String> {
    let v = privfed_special::ln_beta_inc_xy(a, b, x, y);
    if v.is_nan() {
        Err(format!(
            "ln_beta_inc: bad arguments or no convergence (a={a}, b={b}, x={x}, y={y})"
        ))
    } else {
        Ok(v)
    }
}
