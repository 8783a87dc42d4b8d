//! One-dimensional solvers: the boundary of a monotone predicate, the root of a decreasing
//! function, the minimum of a function on an interval.

/// The boundary of a monotone predicate by bisection: given `lo < hi` with `ok(hi)` true and
/// `ok` false below some boundary and true above it, returns the smallest `x ∈ [lo, hi]` with
/// `ok(x)` true, to relative width `rel_tol` (`hi − lo ≤ rel_tol·hi`, at most 200 halvings).
///
/// The midpoint is geometric, `√(lo·hi)`, when `lo > 0` (so a bracket spanning many orders of
/// magnitude is searched in as many steps as a narrow one) and arithmetic otherwise. The value
/// returned is always one at which `ok` was true (or `hi` itself). Errors of `ok` are passed on.
pub fn bisect_smallest<E>(
    mut lo: f64,
    mut hi: f64,
    rel_tol: f64,
    mut ok: impl FnMut(f64) -> Result<bool, E>,
) -> Result<f64, E> {
    for _ in 0..200 {
        if hi - lo <= rel_tol * hi {
            break;
        }
        let mid = if lo > 0.0 {
            (lo * hi).sqrt()
        } else {
            0.5 * (lo + hi)
        };
        if ok(mid)? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}

/// The smallest `x ∈ [lo, hi]` with `f(x) ≤ 0` for a non-increasing `f` with `f(lo) > 0 ≥
/// f(hi)`, `0 < lo < hi`, to relative width `rel_tol` — the contract of [`bisect_smallest`] with
/// `ok = f ≤ 0`, in fewer evaluations when `f` is smooth.
///
/// False position on `(ln x, f)` with the Illinois rule (an endpoint kept twice has its value
/// halved, so both ends converge, superlinearly at a simple root), keeping the bracket
/// `f(lo) > 0 ≥ f(hi)`. Safeguards: a candidate closer than `rel_tol·hi/4` to an end is moved
/// that far inside, so that a candidate on the expected side closes the bracket; and when three
/// steps in a row have not halved the bracket's log-width (or the secant is undefined, as on a
/// plateau of zeros), a geometric bisection step is taken,
/// so kinks and plateaus cost at most bisection's count plus a constant factor. At most 200
/// evaluations after `f(lo)`, `f(hi)`. Returns a point where `f ≤ 0` was observed (or `hi`).
/// Errors of `f` are passed on. [`falsi_smallest_from`] is the same search when `f(lo)` and
/// `f(hi)` are already known.
pub fn falsi_smallest<E>(
    lo: f64,
    hi: f64,
    rel_tol: f64,
    mut f: impl FnMut(f64) -> Result<f64, E>,
) -> Result<f64, E> {
    let f_lo = f(lo)?;
    let f_hi = f(hi)?;
    Ok(falsi_smallest_from((lo, f_lo), (hi, f_hi), rel_tol, f)?.0)
}

/// [`falsi_smallest`] from a bracket whose values are known, `(lo, f(lo))` and `(hi, f(hi))`
/// (so an expensive `f` is not evaluated twice at the ends); returns the point and `f` there
/// (`(hi, f(hi))` if `hi` itself is the answer).
pub fn falsi_smallest_from<E>(
    (mut lo, mut f_lo): (f64, f64),
    (mut hi, mut f_hi): (f64, f64),
    rel_tol: f64,
    mut f: impl FnMut(f64) -> Result<f64, E>,
) -> Result<(f64, f64), E> {
    // Illinois weights: the value used for an end that has been kept repeatedly.
    let (mut w_lo, mut w_hi) = (f_lo, f_hi);
    let mut kept: i8 = 0; // > 0: lo kept that many times in a row; < 0: hi kept.
    let mut slow_steps = 0;
    for _ in 0..200 {
        if hi - lo <= rel_tol * hi || f_lo.is_nan() || f_hi.is_nan() {
            break;
        }
        let width = (hi / lo).ln();
        let margin = 0.25 * rel_tol * hi;
        // Bisect after three slow steps, or when the secant is undefined or lands on an end
        // (`f(hi) = 0` exactly: a plateau of zeros says nothing about where it starts).
        let x = if slow_steps >= 3 || w_hi == 0.0 || w_lo - w_hi <= 0.0 {
            slow_steps = 0;
            (lo * hi).sqrt()
        } else {
            let (a, b) = (lo.ln(), hi.ln());
            let t = (w_lo / (w_lo - w_hi)).clamp(0.0, 1.0);
            (a + t * (b - a)).exp().clamp(lo + margin, hi - margin)
        };
        let fx = f(x)?;
        if fx <= 0.0 {
            hi = x;
            f_hi = fx;
            w_hi = fx;
            kept = if kept > 0 { kept + 1 } else { 1 };
            if kept >= 2 {
                w_lo *= 0.5;
            } else {
                w_lo = f_lo;
            }
        } else {
            lo = x;
            f_lo = fx;
            w_lo = fx;
            kept = if kept < 0 { kept - 1 } else { -1 };
            if kept <= -2 {
                w_hi *= 0.5;
            } else {
                w_hi = f_hi;
            }
        }
        if (hi / lo).ln() > 0.5 * width {
            slow_steps += 1;
        } else {
            slow_steps = 0;
        }
    }
    Ok((hi, f_hi))
}

/// Minimizes `f` on `(lo, hi)`: evaluates `n` equally spaced interior points
/// `lo + i·(hi − lo)/(n + 1)`, then runs golden-section search (ratio `(√5 − 1)/2`) in the
/// bracket of the two grid neighbours of the best point until its width is below `tol`.
///
/// Returns the golden-section midpoint if `f` there is no worse than at the best grid point, and
/// that grid point otherwise, so the result is never worse than the grid. Finds the global
/// minimum when `f` is unimodal on the bracket around the best grid point (the grid guards
/// against a second, shallower local minimum elsewhere). NaN values of `f` never win.
pub fn minimize_on_interval(f: impl Fn(f64) -> f64, lo: f64, hi: f64, n: usize, tol: f64) -> f64 {
    let h = (hi - lo) / (n + 1) as f64;
    let (mut best_i, mut best_v) = (1, f64::INFINITY);
    for i in 1..=n {
        let v = f(lo + h * i as f64);
        if v < best_v {
            best_v = v;
            best_i = i;
        }
    }
    let (mut a, mut b) = (lo + h * (best_i - 1) as f64, lo + h * (best_i + 1) as f64);
    let r = (5f64.sqrt() - 1.0) / 2.0;
    let mut c = b - r * (b - a);
    let mut d = a + r * (b - a);
    let (mut fc, mut fd) = (f(c), f(d));
    while (b - a) > tol {
        if fc < fd {
            b = d;
            d = c;
            fd = fc;
            c = b - r * (b - a);
            fc = f(c);
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + r * (b - a);
            fd = f(d);
        }
    }
    let x = 0.5 * (a + b);
    if f(x) <= best_v {
        x
    } else {
        lo + h * best_i as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs both solvers on a decreasing `f`, checks they meet the same contract, and returns
    /// (falsi evaluations, bisection evaluations).
    fn both(lo: f64, hi: f64, tol: f64, f: impl Fn(f64) -> f64) -> (usize, usize) {
        let (mut nf, mut nb) = (0, 0);
        let xf = falsi_smallest::<()>(lo, hi, tol, |x| {
            nf += 1;
            Ok(f(x))
        })
        .unwrap();
        let xb = bisect_smallest::<()>(lo, hi, tol, |x| {
            nb += 1;
            Ok(f(x) <= 0.0)
        })
        .unwrap();
        assert!(f(xf) <= 0.0, "falsi returned an infeasible point {xf}");
        // Minimal to the tolerance: a point rel_tol below is infeasible (both solvers).
        assert!(
            f(xf * (1.0 - 2.0 * tol)) > 0.0,
            "falsi's {xf} is not minimal"
        );
        assert!(
            (xf - xb).abs() <= 2.0 * tol * xb,
            "falsi {xf} vs bisection {xb}"
        );
        (nf, nb)
    }

    #[test]
    fn false_position_meets_the_bisection_contract_in_fewer_steps() {
        // Smooth: ε-like 1/x² decay, a steep exponential, a nearly flat tail.
        let (nf, nb) = both(1.0, 2.0, 1e-6, |x| 1.0 / (x * x) - 0.37);
        assert!(nf < nb, "{nf} vs {nb}");
        let (nf, nb) = both(0.1, 100.0, 1e-9, |x| (-x).exp() - 1e-3);
        assert!(nf < nb, "{nf} vs {nb}");
        let (nf, nb) = both(1.0, 1e6, 1e-6, |x| 1e-3 / x - 1e-8);
        assert!(nf < nb, "{nf} vs {nb}");
        // A minimum of smooth curves (a kink, as an RDP ε(z) over orders has).
        both(0.5, 4.0, 1e-8, |x| (2.0 / x).min(3.0 - x) - 1.2);
        // A step (a plateau then a jump): no faster than bisection, but the same answer and
        // a bounded count.
        let (nf, nb) = both(0.0 + 1e-3, 10.0, 1e-6, |x| {
            if x < std::f64::consts::E { 1.0 } else { -1.0 }
        });
        assert!(nf <= 3 * nb + 5, "{nf} vs {nb}");
        // The root exactly at a value where f = 0 on a plateau: smallest x with f ≤ 0.
        both(0.1, 10.0, 1e-7, |x| (1.5 - x).max(0.0));
    }

    #[test]
    fn bisection_finds_boundary() {
        let x = bisect_smallest::<()>(0.0, 10.0, 1e-12, |x| Ok(x * x >= 2.0)).unwrap();
        assert!((x - 2f64.sqrt()).abs() < 1e-10 && x * x >= 2.0);
        // Geometric steps over a wide bracket.
        let x = bisect_smallest::<()>(1e-300, 1e300, 1e-12, |x| Ok(x >= 3e-7)).unwrap();
        assert!((x / 3e-7 - 1.0).abs() < 1e-11 && x >= 3e-7);
        // Errors of the predicate are passed on.
        assert_eq!(bisect_smallest(0.0, 1.0, 1e-12, |_| Err("no")), Err("no"));
    }

    #[test]
    fn minimizer_finds_interior_minimum() {
        let x = minimize_on_interval(|x| (x - 0.3).powi(2), 0.0, 1.0, 40, 1e-10);
        assert!((x - 0.3).abs() < 1e-9, "{x}");
        // Two local minima: the grid picks the deeper one (at 0.8), golden section refines it.
        let f = |x: f64| (x - 0.2).powi(2).min((x - 0.8).powi(2) - 0.01);
        let x = minimize_on_interval(f, 0.0, 1.0, 40, 1e-10);
        assert!((x - 0.8).abs() < 1e-9, "{x}");
        // Minimum at the edge of the interval: the result stays inside (lo, hi).
        let x = minimize_on_interval(|x| x, 0.0, 1.0, 9, 1e-12);
        assert!(x > 0.0 && x < 0.1 + 1e-12, "{x}");
    }
}
