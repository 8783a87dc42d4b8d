//! Inverses of the incomplete beta function in log space.

use super::beta::{ln_one_minus_exp, tails};
use super::gamma::ln_beta;
use super::normal::norm_sf_inv_ln;
use super::point::Point;

/// Bracket of the search in the log-odds `w = ln(x/(1−x))`: `e^{−745}` underflows.
const W_MAX: f64 = 745.0;
/// Newton stops once a step is below this (in `w`; quadratic convergence makes the remaining
/// error far smaller).
const W_TOL: f64 = 1e-12;
/// Iteration cap (Newton with a bisection fallback converges in far fewer).
const MAX_ITER: usize = 300;

/// Which tail is matched to the target.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Tail {
    Lower,
    Upper,
}

/// The point with log-odds `w`, its smaller coordinate computed directly (so it is exact as the
/// defining value of the [`Point`]).
fn point_at(w: f64) -> Point {
    if w <= 0.0 {
        let e = w.exp();
        Point::from_x(e / (1.0 + e))
    } else {
        let e = (-w).exp();
        Point::from_y(e / (1.0 + e))
    }
}

/// The tail `F(w)` (lower: `ln I`, upper: `ln(1 − I)`) and its derivative in `w`,
/// `dF/dw = ± x^a y^b/(B(a,b)·e^F)` (the density in `w` is `x^a y^b/B(a,b)`).
fn eval(a: f64, b: f64, tail: Tail, w: f64) -> (f64, f64) {
    let t = tails(a, b, &point_at(w));
    match tail {
        Tail::Lower => (t.ln_lower, (t.ln_pref - t.ln_lower).exp()),
        Tail::Upper => (t.ln_upper, -(t.ln_pref - t.ln_upper).exp()),
    }
}

/// Starting points for the search: the normal approximation of the log-odds of Beta(a,b)
/// (mean `≈ ln(a/b)`, variance `≈ 1/a + 1/b`) and the power-law tail
/// `I_x ≈ x^a/(a·B(a,b))` (resp. `1 − I_x ≈ y^b/(b·B(a,b))`).
fn starts(a: f64, b: f64, tail: Tail, target: f64) -> [f64; 2] {
    let sd = (1.0 / a + 1.0 / b).sqrt();
    let mean = (a / b).ln();
    let lb = ln_beta(a, b);
    match tail {
        Tail::Lower => {
            let z = -norm_sf_inv_ln(target);
            let ln_x = (target + a.ln() + lb) / a;
            [mean + sd * z, ln_x - (-ln_x.min(-1e-300).exp()).ln_1p()]
        }
        Tail::Upper => {
            let z = norm_sf_inv_ln(target);
            let ln_y = (target + b.ln() + lb) / b;
            [mean + sd * z, (-ln_y.min(-1e-300).exp()).ln_1p() - ln_y]
        }
    }
}

/// Solves `F(w) = target` (with `target ≤ ln ½` on the chosen tail) and returns the point.
///
/// The density of `w` is log-concave, hence so are both `I` and `1 − I` as functions of `w`
/// (Prékopa): `F` is concave and monotone, so Newton's method converges monotonically after its
/// first step; a bracket with bisection guards against steps out of range. Returns `None` if
/// the tails fail to evaluate.
fn solve(a: f64, b: f64, tail: Tail, target: f64) -> Option<Point> {
    let increasing = tail == Tail::Lower;
    let (mut lo, mut hi) = (-W_MAX, W_MAX);
    // Pick the better of the two starting points.
    let mut best: Option<(f64, f64, f64)> = None;
    for w in starts(a, b, tail, target) {
        let w = w.clamp(-W_MAX, W_MAX);
        if !w.is_finite() {
            continue;
        }
        let (f, df) = eval(a, b, tail, w);
        if f.is_nan() {
            return None;
        }
        if best.is_none_or(|(_, bf, _)| (f - target).abs() < (bf - target).abs()) {
            best = Some((w, f, df));
        }
    }
    let (mut w, mut f, mut df) = best?;
    // The point with the smallest residual so far (a bisection step can move away from a
    // converged Newton iterate, so the last point is not necessarily the best).
    let mut best_w = w;
    let mut best_r = (f - target).abs();
    for _ in 0..MAX_ITER {
        // Update the bracket: below the root iff F is on the "before" side of the target.
        if (f < target) == increasing {
            lo = w;
        } else {
            hi = w;
        }
        if f == target || hi - lo <= 4.0 * f64::EPSILON * w.abs().max(1.0) {
            break;
        }
        let mut next = w - (f - target) / df;
        let newton = next.is_finite() && next > lo && next < hi;
        if !newton {
            next = 0.5 * (lo + hi);
        }
        let moved = (next - w).abs();
        w = next;
        let (nf, ndf) = eval(a, b, tail, w);
        if nf.is_nan() {
            return None;
        }
        f = nf;
        df = ndf;
        if (f - target).abs() <= best_r {
            best_r = (f - target).abs();
            best_w = w;
        }
        if newton && moved <= W_TOL {
            break;
        }
    }
    Some(point_at(best_w))
}

/// Validates and dispatches an inversion of `tail` at `ln_target`; returns `(x, 1 − x)`.
fn invert(a: f64, b: f64, ln_target: f64, tail: Tail) -> (f64, f64) {
    const NAN2: (f64, f64) = (f64::NAN, f64::NAN);
    if !(a > 0.0 && b > 0.0 && a.is_finite() && b.is_finite()) || ln_target.is_nan() {
        return NAN2;
    }
    if ln_target > 0.0 {
        return NAN2;
    }
    // End points: ln I = 0 at x = 1, −∞ at x = 0 (mirrored for the upper tail).
    let at_one = (ln_target == 0.0) == (tail == Tail::Lower);
    if ln_target == 0.0 || ln_target == f64::NEG_INFINITY {
        return if at_one { (1.0, 0.0) } else { (0.0, 1.0) };
    }
    // Work on whichever tail is below ½ (well conditioned in log space).
    let (t, target) = if ln_target <= -std::f64::consts::LN_2 {
        (tail, ln_target)
    } else {
        let other = if tail == Tail::Lower {
            Tail::Upper
        } else {
            Tail::Lower
        };
        (other, ln_one_minus_exp(ln_target))
    };
    match solve(a, b, t, target) {
        Some(p) => (p.x, p.y),
        None => NAN2,
    }
}

/// Upper-tail inverse in log space: `x` such that `ln(1 − I_x(a,b)) = ln_q`, for `ln_q ≤ 0`
/// (e.g. `ln_q = −700` or `−5000`, far below the underflow of `q`).
///
/// Solves in the log-odds `w = ln(x/(1−x))`, where both tails are log-concave (Prékopa, since
/// the density of `w`, `x^a(1−x)^b/B(a,b)`, is log-concave): Newton on `ln(1 − I)` (or on `ln I`
/// when `q > ½`) with derivative `d ln(1−I)/dw = −x^a(1−x)^b/(B(a,b)·(1−I))`, bracketed and with
/// bisection as a fallback, from the better of a normal approximation of `w` and the power-law
/// tail `1 − I ≈ (1−x)^b/(b·B(a,b))`.
///
/// The result is the f64 nearest the solution up to a few ulps; near `x = 1` the spacing of f64
/// (`1.1·10⁻¹⁶`) limits how well `1 − x` can be represented, e.g. for `Beta(1,1)` with
/// `q = 10⁻¹²` the returned `1 − x` carries a relative error up to `10⁻⁴`.
///
/// `ln_q = 0` gives 0, `ln_q = −∞` gives 1; invalid parameters, `ln_q > 0` or NaN return NaN.
pub fn beta_inc_complement_inv_ln(a: f64, b: f64, ln_q: f64) -> f64 {
    invert(a, b, ln_q, Tail::Upper).0
}

/// [`beta_inc_complement_inv_ln`] returning `(x, 1 − x)`, each to its own relative accuracy:
/// use it when the solution is so close to 1 that `1 − x` is not representable as `1 − (f64)`
/// (e.g. `Beta(2, 7.5)` at `ln_q = −5000`, where `1 − x ≈ 10⁻²⁹⁰`).
pub fn beta_inc_complement_inv_ln_xy(a: f64, b: f64, ln_q: f64) -> (f64, f64) {
    invert(a, b, ln_q, Tail::Upper)
}

/// Lower-tail inverse in log space: `x` such that `ln I_x(a,b) = ln_p`, for `ln_p ≤ 0`.
/// Same method as [`beta_inc_complement_inv_ln`]. `ln_p = 0` gives 1, `ln_p = −∞` gives 0;
/// invalid parameters, `ln_p > 0` or NaN return NaN.
pub fn beta_inc_inv_ln(a: f64, b: f64, ln_p: f64) -> f64 {
    invert(a, b, ln_p, Tail::Lower).0
}

/// [`beta_inc_inv_ln`] returning `(x, 1 − x)`, each to its own relative accuracy (see
/// [`beta_inc_complement_inv_ln_xy`]).
pub fn beta_inc_inv_ln_xy(a: f64, b: f64, ln_p: f64) -> (f64, f64) {
    invert(a, b, ln_p, Tail::Lower)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Round trips where `1 − x` is below the f64 spacing at 1: the pair keeps it.
    #[test]
    fn pair_inverse_keeps_tiny_complement() {
        for &(a, b, lq) in &[
            (2.0, 7.5, -5000.0),
            (24.5, 24.5, -5000.0),
            (1.0, 1.0, -700.0),
        ] {
            let (x, y) = beta_inc_complement_inv_ln_xy(a, b, lq);
            assert_eq!(x, 1.0);
            assert!(y > 0.0 && y < 1e-30, "a={a}: y={y}");
            let back = tails(a, b, &Point::from_y(y)).ln_upper;
            assert!(
                (back - lq).abs() <= 1e-12 * lq.abs(),
                "a={a} b={b}: {back} vs {lq}"
            );
            let (x, y) = beta_inc_inv_ln_xy(b, a, lq);
            assert!(x > 0.0 && x < 1e-30 && y == 1.0, "a={a}: x={x}");
            let back = tails(b, a, &Point::from_x(x)).ln_lower;
            assert!(
                (back - lq).abs() <= 1e-12 * lq.abs(),
                "a={a} b={b}: {back} vs {lq}"
            );
        }
        // Beta(1,1): 1 − I_x = 1 − x, so y = e^{ln_q} exactly.
        let (_, y) = beta_inc_complement_inv_ln_xy(1.0, 1.0, -700.0);
        assert!((y / (-700f64).exp() - 1.0).abs() < 1e-13);
    }
}
