//! TEMPORARY stand-in (not committed): replaced by the special-functions branch.
#![allow(missing_docs)]
pub fn ln_gamma(x: f64) -> f64 {
    libm::lgamma(x)
}
pub fn ln_beta(a: f64, b: f64) -> f64 {
    ln_gamma(a) + ln_gamma(b) - ln_gamma(a + b)
}
fn cf(a: f64, b: f64, x: f64) -> f64 {
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let tiny = 1e-300;
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < tiny {
        d = tiny;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..200000 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < tiny {
            d = tiny;
        }
        c = 1.0 + aa / c;
        if c.abs() < tiny {
            c = tiny;
        }
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < tiny {
            d = tiny;
        }
        c = 1.0 + aa / c;
        if c.abs() < tiny {
            c = tiny;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-16 {
            break;
        }
    }
    h
}
pub fn ln_beta_inc(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if x >= 1.0 {
        return 0.0;
    }
    let lf = a * x.ln() + b * (-x).ln_1p() - ln_beta(a, b);
    if x <= (a + 1.0) / (a + b + 2.0) {
        lf + cf(a, b, x).ln() - a.ln()
    } else {
        (-ln_beta_inc(b, a, 1.0 - x).exp()).ln_1p()
    }
}
pub fn ln_beta_inc_complement(a: f64, b: f64, x: f64) -> f64 {
    ln_beta_inc(b, a, 1.0 - x)
}
pub fn beta_inc(a: f64, b: f64, x: f64) -> f64 {
    ln_beta_inc(a, b, x).exp()
}
pub fn beta_inc_complement(a: f64, b: f64, x: f64) -> f64 {
    ln_beta_inc_complement(a, b, x).exp()
}
pub fn ln_beta_pdf(a: f64, b: f64, x: f64) -> f64 {
    (a - 1.0) * x.ln() + (b - 1.0) * (-x).ln_1p() - ln_beta(a, b)
}
pub fn beta_inc_complement_inv_ln(a: f64, b: f64, ln_q: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if ln_beta_inc_complement(a, b, mid) > ln_q {
            lo = mid
        } else {
            hi = mid
        }
    }
    0.5 * (lo + hi)
}
pub fn beta_inc_inv_ln(a: f64, b: f64, ln_p: f64) -> f64 {
    1.0 - beta_inc_complement_inv_ln(b, a, ln_p)
}
pub fn norm_pdf(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt()
}
pub fn norm_cdf(z: f64) -> f64 {
    0.5 * libm::erfc(-z / std::f64::consts::SQRT_2)
}
pub fn norm_sf(z: f64) -> f64 {
    norm_cdf(-z)
}
pub fn ln_norm_cdf(z: f64) -> f64 {
    if z < -30.0 {
        -0.5 * z * z - (-z).ln() - 0.5 * (2.0 * std::f64::consts::PI).ln()
            + (-1.0 / (z * z)).ln_1p()
    } else {
        norm_cdf(z).ln()
    }
}
pub fn ln_norm_sf(z: f64) -> f64 {
    ln_norm_cdf(-z)
}
pub fn norm_hazard(z: f64) -> f64 {
    (norm_pdf(z).ln() - ln_norm_sf(z)).exp()
}
pub fn norm_quantile(p: f64) -> f64 {
    let (mut lo, mut hi) = (-40.0, 40.0);
    for _ in 0..200 {
        let m = 0.5 * (lo + hi);
        if norm_cdf(m) < p { lo = m } else { hi = m }
    }
    0.5 * (lo + hi)
}
pub fn norm_sf_inv_ln(ln_q: f64) -> f64 {
    let (mut lo, mut hi) = (-40.0, 1e4);
    for _ in 0..300 {
        let m = 0.5 * (lo + hi);
        if ln_norm_sf(m) > ln_q { lo = m } else { hi = m }
    }
    0.5 * (lo + hi)
}
