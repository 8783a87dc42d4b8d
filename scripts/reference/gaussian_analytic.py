#!/usr/bin/env python3
"""Reference values for ln Phi and the analytic Gaussian mechanism (Balle & Wang 2018, docs/ALGORITHMS.md §2.5).

delta(eps; sigma, Delta) = Phi(Delta/(2 sigma) - eps sigma/Delta)
                           - e^eps Phi(-Delta/(2 sigma) - eps sigma/Delta),
evaluated with mpmath at 60 significant digits (mp.dps = 60). Inverses (the smallest sigma with
delta <= target, and the eps with delta(eps) = target) are found with mpmath's bisection-safe
root finder (anderson) on a sign-changing bracket, at the same precision.

Writes crates/privfed-mechanisms/tests/data/gaussian_analytic.json (run from the repository root).
"""
import json
import mpmath as mp

mp.mp.dps = 60


def phi(z):
    return mp.ncdf(z)


def delta(sigma, sens, eps):
    sigma, sens, eps = mp.mpf(sigma), mp.mpf(sens), mp.mpf(eps)
    a = sens / (2 * sigma) - eps * sigma / sens
    b = -sens / (2 * sigma) - eps * sigma / sens
    return phi(a) - mp.exp(eps) * phi(b)


def bracket_root(f, lo, hi):
    """f(lo) and f(hi) have opposite signs; bisection to 1e-40 relative."""
    flo = f(lo)
    for _ in range(400):
        mid = (lo + hi) / 2
        fm = f(mid)
        if (fm > 0) == (flo > 0):
            lo, flo = mid, fm
        else:
            hi = mid
        if hi - lo < mp.mpf(10) ** -45 * abs(hi):
            break
    return (lo + hi) / 2


def sigma_for(eps, target, sens):
    f = lambda s: delta(s, sens, eps) - mp.mpf(target)
    lo, hi = mp.mpf(sens) * mp.mpf("1e-6"), mp.mpf(sens)
    while f(hi) > 0:
        hi *= 2
    return bracket_root(f, lo, hi)


def eps_for(sigma, sens, target):
    f = lambda e: delta(sigma, sens, e) - mp.mpf(target)
    if f(0) <= 0:
        return mp.mpf(0)
    hi = mp.mpf(1)
    while f(hi) > 0:
        hi *= 2
    return bracket_root(f, mp.mpf(0), hi)


def s(x):
    return mp.nstr(x, 25)


out = {
    "source": "scripts/reference/gaussian_analytic.py, mpmath %s, mp.dps = 60" % mp.__version__,
    "delta": [],
    "sigma": [],
    "epsilon": [],
}
for sigma, sens, eps in [
    (1.0, 1.0, 0.5),
    (1.0, 1.0, 1.0),
    (2.0, 1.0, 1.0),
    (0.5, 1.0, 3.0),
    (5.0, 2.0, 0.1),
    (10.0, 1.0, 0.5),
    (0.1, 1.0, 20.0),
    (0.5, 1.0, 10.0),
    (0.2, 1.0, 40.0),
    (0.05, 1.0, 800.0),
    (0.02, 1.0, 1500.0),
    (1.0, 1.0, 30.0),
    (0.9, 1.0, 36.0),
    (100.0, 1.0, 0.05),
    (1000.0, 1.0, 0.006),
    (3.0, 1.0, 4.0),
    (1.0, 10.0, 0.01),
]:
    out["delta"].append({"sigma": sigma, "sensitivity": sens, "epsilon": eps, "delta": s(delta(sigma, sens, eps))})
for eps, target, sens in [
    (0.1, 1e-5, 1.0),
    (0.5, 1e-5, 1.0),
    (1.0, 1e-5, 1.0),
    (1.0, 1e-10, 1.0),
    (2.0, 1e-6, 2.0),
    (4.0, 1e-5, 1.0),
    (8.0, 1e-8, 1.0),
    (0.01, 1e-3, 1.0),
    (16.0, 1e-12, 3.0),
    (1.0, 1e-100, 1.0),
]:
    out["sigma"].append({"epsilon": eps, "delta": target, "sensitivity": sens, "sigma": s(sigma_for(eps, target, sens))})
for sigma, sens, target in [
    (1.0, 1.0, 1e-5),
    (5.0, 1.0, 1e-5),
    (0.5, 1.0, 1e-6),
    (2.0, 2.0, 1e-3),
    (0.2, 1.0, 1e-9),
    (100.0, 1.0, 1e-5),
]:
    out["epsilon"].append({"sigma": sigma, "sensitivity": sens, "delta": target, "epsilon": s(eps_for(sigma, sens, target))})

out["ln_phi"] = [
    {"z": z, "ln_phi": s(mp.log(phi(mp.mpf(z))))}
    for z in [8.0, 2.0, 0.0, -1.0, -10.0, -29.9, -30.0, -30.1, -37.0, -40.0, -100.0, -1000.0, -1e6]
]

with open("crates/privfed-mechanisms/tests/data/gaussian_analytic.json", "w") as fh:
    json.dump(out, fh, indent=1)
    fh.write("\n")
