#!/usr/bin/env python3
"""Reference values for privfed-special's functions (crates/privfed-special/src), from mpmath.

Precision: mp.dps = 60 (60 significant decimal digits) for every value, with extra working
precision where a difference is taken (see `beta_log_tails`). Output: JSON on stdout; the test
`crates/privfed-special/tests/it/special_reference.rs` reads it from
`crates/privfed-special/tests/data/special_mpmath.json`.

    python3 scripts/reference/special_mpmath.py > crates/privfed-special/tests/data/special_mpmath.json

Every input is an IEEE double and the reference is the exact function at that double, rounded
to the nearest double at the end (values below the double range become 0 or subnormals; the
log-space values stay finite).

mpmath's own `betainc` fails for parameters in the thousands ("hypergeometric series converges
too slowly"), so the incomplete beta is computed here from the positive-term series

    I_x(a,b) = x^a (1-x)^b / (a B(a,b)) * sum_n (a+b)_n / (a+1)_n x^n      (A&S 26.5.4 / 26.5.7)

applied to whichever tail makes it converge fast (I_x(a,b) or 1 - I_x(a,b) = I_{1-x}(b,a)),
in log space. The other tail is 1 minus it, computed with enough extra digits to absorb the
cancellation. The script checks that series against mpmath's `betainc` (small parameters),
against exact binomial sums, against the closed form for a = b = 1/2, and checks both tails
against each other (lower + upper = 1) wherever both series are cheap.
"""

import json
import math
import sys

import mpmath as mp

DPS = 60
mp.mp.dps = DPS
MAX_TERMS = 400_000


def series_cost(a, b, x):
    """Number of terms the series for I_x(a,b) needs (float simulation in log space), or None
    if more than MAX_TERMS."""
    if x <= 0.0:
        return 1
    lx = math.log(x)
    lt, best = 0.0, 0.0
    n = 0
    while n < MAX_TERMS:
        r = math.log((a + b + n) / (a + 1 + n)) + lx
        lt += r
        best = max(best, lt)
        n += 1
        if r < 0 and lt < best - (DPS + 30) * math.log(10) - 10:
            return n
    return None


def ln_series(a, b, x, y):
    """ln I_x(a,b) by the positive series, at the current precision (a, b, x, y = 1 - x mpf)."""
    eps = mp.mpf(10) ** (-(mp.mp.dps + 5))
    term = mp.mpf(1)
    s = mp.mpf(1)
    n = 0
    while True:
        r = (a + b + n) * x / (a + 1 + n)
        term *= r
        s += term
        n += 1
        rr = max(r, x)
        if rr < 1 and term * rr / (1 - rr) < eps * s:
            break
        if n > MAX_TERMS + 10:
            raise RuntimeError("series did not converge")
    ln_b = mp.loggamma(a) + mp.loggamma(b) - mp.loggamma(a + b)
    return a * mp.log(x) + b * mp.log(y) - mp.log(a) - ln_b + mp.log(s)


def ln_one_minus_exp(l):
    return mp.log(-mp.expm1(l))


def beta_log_tails(a, b, x, check=True, y=None):
    """(ln I_x(a,b), ln(1 - I_x(a,b))) as mpf, for 0 < x < 1 (a, b doubles; x a double, or x and
    y = 1 - x as mpf, used exactly)."""
    X = +x if isinstance(x, mp.mpf) else mp.mpf(x)
    Y = y if y is not None else 1 - X
    with mp.workdps(DPS + 10):
        A, B = mp.mpf(a), mp.mpf(b)
        cost_lo = series_cost(a, b, float(X))
        cost_hi = series_cost(b, a, float(Y))
        small_lower = X <= A / (A + B)
        direct = cost_lo if small_lower else cost_hi
        lo = hi = None
        if direct is not None:
            if small_lower:
                lo = ln_series(A, B, X, Y)
                hi = ln_one_minus_exp(lo)
            else:
                hi = ln_series(B, A, Y, X)
                lo = ln_one_minus_exp(hi)
            other = cost_hi if small_lower else cost_lo
            small = lo if small_lower else hi
            if check and other is not None and other <= 60_000 and small > -300:
                # Independent check: the other tail's own series, with digits to spare.
                extra = int(-small / math.log(10)) + 40
                with mp.workdps(DPS + extra):
                    if small_lower:
                        big = ln_series(mp.mpf(b), mp.mpf(a), Y, X)
                        tot = mp.exp(lo) + mp.exp(big)
                    else:
                        big = ln_series(mp.mpf(a), mp.mpf(b), X, Y)
                        tot = mp.exp(hi) + mp.exp(big)
                    # Relative to the small tail: 1e-55 (it was computed at DPS + 10 digits).
                    assert abs(tot - 1) < mp.mpf(10) ** -55 * mp.exp(small), (a, b, x, tot - 1)
        else:
            # The small tail's series is too long (x near 1 with b small, or the mirror image):
            # use the other tail's series and subtract with enough extra digits.
            other = cost_hi if small_lower else cost_lo
            if other is None:
                raise RuntimeError(f"no cheap series for {(a, b, x)}")
            # Estimate how small the small tail is from its prefactor.
            with mp.workdps(30):
                est = (a * mp.log(X) + b * mp.log(Y) - (mp.loggamma(A) + mp.loggamma(B) - mp.loggamma(A + B)))
            extra = int(max(0, -est) / math.log(10)) + 40
            if extra > 20000:
                raise RuntimeError(f"cancellation too large for {(a, b, x)}")
            with mp.workdps(DPS + extra):
                if small_lower:
                    hi = ln_series(mp.mpf(b), mp.mpf(a), Y, X)
                    lo = ln_one_minus_exp(hi)
                else:
                    lo = ln_series(mp.mpf(a), mp.mpf(b), X, Y)
                    hi = ln_one_minus_exp(lo)
        return +lo, +hi


def f(v):
    """mpf or float -> the nearest double, written as its shortest round-trip decimal string
    (strings, because the Rust side parses them with the correctly rounded `str::parse`)."""
    return repr(float(v))


def self_checks():
    # 1. Against mpmath's betainc where it works (small parameters).
    for a, b, x in [(0.5, 0.5, 0.3), (2.0, 3.0, 0.4), (10.0, 2.5, 0.77), (0.1, 4.0, 0.01),
                    (24.5, 24.5, 0.6), (30.0, 0.5, 0.97), (0.3, 0.7, 0.999)]:
        lo, hi = beta_log_tails(a, b, x)
        want = mp.betainc(a, b, 0, x, regularized=True)
        assert abs(mp.exp(lo) / want - 1) < mp.mpf(10) ** -50, (a, b, x)
        want = mp.betainc(a, b, x, 1, regularized=True)
        assert abs(mp.exp(hi) / want - 1) < mp.mpf(10) ** -50, (a, b, x)
    # 2. Binomial tails: I_{1/2}(k, n-k+1) = P(Bin(n, 1/2) >= k), exactly.
    for n, k in [(1000, 400), (1000, 500), (1000, 560), (1000, 900), (4000, 2200)]:
        tail = sum(math.comb(n, j) for j in range(k, n + 1))
        want = mp.mpf(tail) / mp.mpf(2) ** n
        lo, _ = beta_log_tails(float(k), float(n - k + 1), 0.5)
        assert abs(mp.exp(lo) / want - 1) < mp.mpf(10) ** -50, (n, k)
    # 3. I_x(1/2, 1/2) = (2/pi) asin(sqrt x).
    for x in [1e-10, 0.2, 0.9]:
        lo, _ = beta_log_tails(0.5, 0.5, x)
        want = 2 / mp.pi * mp.asin(mp.sqrt(mp.mpf(x)))
        assert abs(mp.exp(lo) / want - 1) < mp.mpf(10) ** -50, x


def beta_points():
    pts = []
    sym = [0.5, 1.0, 1.5, 2.5, 10.0, 24.5, 499.5, 4999.5, 49999.5, 499999.5]
    tails = [1e-300, 1e-100, 1e-20, 1e-8, 0.01, 0.1, 0.25, 0.4]
    for a in sym:
        sd = 0.5 / math.sqrt(2 * a + 1)
        xs = set(tails + [1.0 - t for t in tails if 1.0 - t < 1.0] + [0.5])
        for k in [0.1, 0.5, 1, 2, 3, 5, 8, 12, 20, 40]:
            for sgn in (-1, 1):
                x = 0.5 + sgn * k * sd
                if 0 < x < 1:
                    xs.add(x)
        for x in sorted(xs):
            pts.append(("symmetric", a, a, x))
    # Binomial tails: (k, n-k+1) at x = 1/2.
    for n in [10, 100, 1000, 10**4, 10**5, 10**6]:
        ks = set()
        for j in [-40, -20, -10, -6, -3, -1, 0, 1, 3, 6, 10, 20, 40]:
            k = int(round(n / 2 + j * math.sqrt(n) / 2))
            if 1 <= k <= n:
                ks.add(k)
        ks.update(k for k in [1, 2, n // 10, n - 1, n] if 1 <= k <= n)
        for k in sorted(ks):
            pts.append(("binomial", float(k), float(n - k + 1), 0.5))
    # Reconstruction: I_{1-t^2}((k-1)/2, 1/2).
    for k in [3, 10, 100, 1000, 10**4, 10**5, 10**6]:
        a = (k - 1) / 2
        for t in [1e-3, 0.01, 0.03, 0.1, 0.3, 0.5, 0.9]:
            x = 1.0 - t * t
            pts.append(("reconstruction", a, 0.5, x))
    # Large a, b = 1/2 just below the continued fraction's switch point (a+1)/(a+b+2), where it
    # loses accuracy to cancellation (x = 1 - f * (1 - switch)).
    for a in [100.0, 49999.5, 499999.5]:
        y0 = 1.0 - (a + 1.0) / (a + 2.5)
        for fac in [0.5, 0.99, 1.01, 1.1, 1.5, 3.0, 10.0, 40.0]:
            pts.append(("reconstruction", a, 0.5, 1.0 - fac * y0))
    # Small and asymmetric parameters.
    others = [(0.1, 0.1), (0.5, 3.0), (0.05, 2.0), (3.0, 0.2), (0.7, 1e4), (1e4, 0.3),
              (2.0, 5.5), (0.01, 0.5), (1e5, 3e5), (2000.0, 50.0), (50.0, 2000.0), (12.0, 9.5)]
    for a, b in others:
        for x in [1e-200, 1e-30, 1e-6, 1e-3, 0.05, 0.2, 0.5, 0.8, 0.95, 0.999, 1 - 1e-9,
                  a / (a + b), 0.25, 0.75]:
            pts.append(("asymmetric", a, b, x))
    return pts


def main():
    self_checks()
    out = {"mp_dps": DPS, "generator": "scripts/reference/special_mpmath.py"}

    out["ln_gamma"] = []
    for x in [1e-300, 1e-10, 0.1, 0.5, 0.9, 0.99, 1.01, 1.5, 1.99, 2.01, 2.5, 3.0, 5.5, 9.99,
              10.0, 10.01, 24.5, 100.5, 1000.0, 10000.5, 1e5, 499999.5, 1e6, 1e7, 1e8]:
        out["ln_gamma"].append([f(x), f(mp.loggamma(x))])

    out["ln_beta"] = []
    for a, b in [(0.5, 0.5), (2.0, 3.0), (10.0, 10.0), (9.5, 10.5), (1e-3, 1e6), (5.0, 1e6),
                 (0.5, 499999.5), (1e4, 3e5), (0.1, 15.0), (24.5, 24.5), (499999.5, 499999.5),
                 (1e6, 1e6), (3.0, 30.0), (7.0, 12.0), (1e8, 1e8), (0.2, 9.9)]:
        out["ln_beta"].append([f(a), f(b), f(mp.loggamma(a) + mp.loggamma(b) - mp.loggamma(mp.mpf(a) + b))])

    rows = []
    pts = beta_points()
    for i, (group, a, b, x) in enumerate(pts):
        if i % 50 == 0:
            print(f"beta_inc {i}/{len(pts)}", file=sys.stderr, flush=True)
        lo, hi = beta_log_tails(a, b, x)
        A, B, X = mp.mpf(a), mp.mpf(b), mp.mpf(x)
        ln_pdf = (A - 1) * mp.log(X) + (B - 1) * mp.log(1 - X) - (mp.loggamma(A) + mp.loggamma(B) - mp.loggamma(A + B))
        rows.append({"group": group, "a": f(a), "b": f(b), "x": f(x),
                     "lower": f(mp.exp(lo)), "upper": f(mp.exp(hi)),
                     "ln_lower": f(lo), "ln_upper": f(hi), "ln_pdf": f(ln_pdf)})
    out["beta_inc"] = rows

    # Quantiles of Beta(a,b) in log space: solve ln(1 - I_x) = ln_q (resp. ln I_x = ln_p) in mp.
    def solve(a, b, target, upper):
        # Newton in w = logit(x) on the series tails (x used exactly, not rounded to a double),
        # bisection-guarded; returns (x, 1 - x) as mpf.
        lo_w, hi_w = mp.mpf(-745), mp.mpf(745)
        w = mp.log(mp.mpf(a) / b)
        ln_b = mp.loggamma(a) + mp.loggamma(b) - mp.loggamma(mp.mpf(a) + b)
        for _ in range(200):
            x = 1 / (1 + mp.exp(-w))
            y = 1 / (1 + mp.exp(w))
            lo, hi = beta_log_tails(a, b, x, check=False, y=y)
            F = hi if upper else lo
            dens = a * mp.log(x) + b * mp.log(y) - ln_b  # density of w
            dF = -mp.exp(dens - F) if upper else mp.exp(dens - F)
            if (F < target) != upper:
                lo_w = w
            else:
                hi_w = w
            step = -(F - target) / dF
            nw = w + step
            if not (lo_w < nw < hi_w):
                nw = (lo_w + hi_w) / 2
            if abs(nw - w) < mp.mpf(10) ** -30:
                w = nw
                break
            w = nw
        return 1 / (1 + mp.exp(-w)), 1 / (1 + mp.exp(w))

    qrows = []
    for a, b, lqs in [(24.5, 24.5, [-0.1, -1.0, -10.0, -100.0, -700.0]),
                      (499.5, 499.5, [-0.1, -1.0, -10.0, -100.0, -700.0, -5000.0]),
                      (49999.5, 49999.5, [-1.0, -30.0, -700.0, -5000.0]),
                      (499999.5, 499999.5, [-0.01, -1.0, -28.0, -700.0, -5000.0]),
                      (499999.5, 0.5, [-1.0, -20.0, -300.0]),
                      (0.5, 0.5, [-0.1, -3.0, -300.0]),
                      (2.0, 7.5, [-0.5, -5.0, -200.0])]:
        for lq in lqs:
            for upper in (True, False):
                x, y = solve(a, b, mp.mpf(lq), upper)
                qrows.append({"a": f(a), "b": f(b), "ln_target": f(lq), "upper": upper,
                              "x": f(x), "one_minus_x": f(y)})
    out["beta_inv"] = qrows

    zs = [-1e5, -1e4, -1000.0, -100.0, -40.0, -38.0, -30.0, -20.0, -10.0, -5.0, -3.0, -2.0,
          -1.5, -1.0, -0.5, -0.1, -1e-5, 0.0, 1e-5, 0.1, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0,
          10.0, 20.0, 30.0, 38.0, 40.0]
    nrows = []
    for z in zs:
        Z = mp.mpf(z)
        cdf = mp.ncdf(Z)
        sf = mp.ncdf(-Z)
        pdf = mp.npdf(Z)
        # ln of a value near 1 via log1p of the other (tiny) tail, which mp holds exactly.
        ln_cdf = mp.log1p(-sf) if z > 0 else mp.log(cdf)
        ln_sf = mp.log1p(-cdf) if z < 0 else mp.log(sf)
        nrows.append({"z": f(z), "pdf": f(pdf), "cdf": f(cdf), "sf": f(sf),
                      "ln_cdf": f(ln_cdf), "ln_sf": f(ln_sf), "hazard": f(pdf / sf)})
    out["normal"] = nrows

    out["erfcx"] = []
    for x in [-26.0, -10.0, -3.0, -1.0, -0.3, 0.0, 0.2, 0.5, 0.7, 1.0, 2.0, 5.0, 11.9, 12.0,
              12.1, 20.0, 30.0, 100.0, 1e3, 1e5, 1e8]:
        X = mp.mpf(x)
        out["erfcx"].append([f(x), f(mp.exp(X * X) * mp.erfc(X))])
    # Dense over [0.45, 12.05], where erfcx is piecewise polynomial (pieces of width 0.5 from
    # 0.5), including both sides of every piece boundary.
    dense = [0.45 + 11.6 * k / 857 for k in range(858)]
    for j in range(24):
        edge = 0.5 + 0.5 * j
        dense += [edge - 1e-12, edge, edge + 1e-12]
    out["erfcx_dense"] = []
    for x in dense:
        X = mp.mpf(x)
        out["erfcx_dense"].append([f(x), f(mp.exp(X * X) * mp.erfc(X))])
    # The upper normal tail over z ∈ [0.9, 17.1] (where it goes through erfcx(z/√2)).
    out["norm_sf_dense"] = []
    for k in range(401):
        z = 0.9 + 16.2 * k / 400
        out["norm_sf_dense"].append([f(z), f(mp.ncdf(-mp.mpf(z)))])

    def norm_root(target_ln, upper):
        # z with ln Q(z) = target (upper) or ln Phi(z) = target, by Newton at 60 digits.
        t = mp.sqrt(-2 * target_ln) if target_ln < -1 else mp.mpf(0)
        z = t if upper else -t
        for _ in range(200):
            if upper:
                F = mp.log(mp.ncdf(-z))
                dF = -mp.npdf(z) / mp.ncdf(-z)
            else:
                F = mp.log(mp.ncdf(z))
                dF = mp.npdf(z) / mp.ncdf(z)
            step = -(F - target_ln) / dF
            z += step
            if abs(step) < mp.mpf(10) ** -50 * max(1, abs(z)):
                break
        return z

    out["norm_quantile"] = []
    ps = [1e-300, 1e-200, 1e-100, 1e-50, 1e-20, 1e-10, 1e-5, 1e-3, 0.01, 0.05, 0.074, 0.075,
          0.076, 0.1, 0.25, 0.4, 0.49, 0.5 - 1e-12, 0.5 + 1e-12, 0.51, 0.6, 0.75, 0.9, 0.924,
          0.926, 0.99, 0.999, 1 - 1e-6, 1 - 1e-10, 1 - 1e-16]
    for p in ps:
        P = mp.mpf(p)
        if p < 0.5:
            z = norm_root(mp.log(P), upper=False)
        else:
            z = norm_root(mp.log(1 - P), upper=True)
        out["norm_quantile"].append([f(p), f(z)])

    out["norm_sf_inv_ln"] = []
    for lq in [-1e5, -1e4, -5000.0, -700.0, -100.0, -10.0, -2.6, -2.5, -1.0, -0.7, -0.1,
               -0.01, -1e-5, -1e-10, -1e-20]:
        z = norm_root(mp.mpf(lq), upper=True)
        out["norm_sf_inv_ln"].append([f(lq), f(z)])

    json.dump(out, sys.stdout, indent=0)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
