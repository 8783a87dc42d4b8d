//! One-dimensional solvers: the boundary of a monotone predicate, the minimum of a function on
//! an interval.

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
