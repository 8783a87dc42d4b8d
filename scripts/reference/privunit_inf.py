#!/usr/bin/env python3
"""Reference values for PrivUnitInf (paper 000 Alg. 2, docs/ALGORITHMS.md §1.3), with mpmath at 50 digits.

Output: crates/privfed-mechanisms/tests/data/privunit_inf_reference.json
  * "tails": ln P(Bin(d,1/2) = tau), ln P(Bin(d,1/2) >= tau), ln P(Bin(d,1/2) <= tau-1), and for
    p = 0.8 (when p > q) the exact epsilon = ln(p(1-q)/((1-p)q)) and the normalizer m computed from
    the conditional means E[M|cap] = (d/2) P(Bin(d-1) >= tau-1)/q, E[M|rest] = (d/2) P(Bin(d-1) <= tau-2)/(1-q)
    (not from the closed form used by the Rust code).
  * "optimized": for (d, eps), brute force over every tau in [1, d] with the budget-exhausting
    p = e^eps q / (e^eps q + 1 - q) restricted to p in [1/2, 1), keeping the largest m.
Tails are summed term by term (ratio recurrence) until terms fall below 1e-70 of the sum.
"""
import json
from mpmath import mp, mpf, log, exp, loggamma

mp.dps = 50


def log_pmf(d, k):
    return loggamma(d + 1) - loggamma(k + 1) - loggamma(d - k + 1) - d * log(2)


def upper(d, t):
    """P(Bin(d,1/2) >= t) as mpf."""
    if t <= 0:
        return mpf(1)
    if t > d:
        return mpf(0)
    term = exp(log_pmf(d, t))
    s = mpf(0)
    k = t
    while k <= d:
        s += term
        if term < s * mpf(10) ** -70:
            break
        term = term * (d - k) / (k + 1)
        k += 1
    return s


def lower(d, t):
    """P(Bin(d,1/2) <= t) as mpf."""
    if t < 0:
        return mpf(0)
    if t >= d:
        return mpf(1)
    term = exp(log_pmf(d, t))
    s = mpf(0)
    k = t
    while k >= 0:
        s += term
        if term < s * mpf(10) ** -70:
            break
        term = term * k / (d - k + 1)
        k -= 1
    return s


def eps_m(d, t, p):
    q, r = upper(d, t), lower(d, t - 1)
    eps = log(p * r / ((1 - p) * q))
    em_cap = mpf(d) / 2 * upper(d - 1, t - 1) / q
    em_rest = mpf(d) / 2 * lower(d - 1, t - 2) / r
    m = p * (2 * em_cap / d - 1) + (1 - p) * (2 * em_rest / d - 1)
    return eps, m


def optimized(d, eps):
    # cumulative pmf tables, exact in mpmath
    pmf = [exp(log_pmf(d, k)) for k in range(d + 1)]
    up = [mpf(0)] * (d + 2)
    for k in range(d, -1, -1):
        up[k] = up[k + 1] + pmf[k]
    best = None
    e = exp(mpf(eps))
    for t in range(1, d + 1):
        q = up[t]
        r = 1 - q
        p = e * q / (e * q + r)
        if p < mpf(1) / 2 or p >= 1:
            continue
        m = mpf(t) / d * pmf[t] * (p / q - (1 - p) / r)
        if best is None or m > best[1]:
            best = (t, m, p)
    t, m, p = best
    return {"d": d, "epsilon": eps, "tau": t, "p": float(p), "m": float(m),
            "worst_case_variance": float(d / m ** 2)}


tails = []
cases = [(1, [1]), (2, [1, 2]), (7, [1, 4, 5, 7]), (100, [51, 60, 75, 100]),
         (1001, [480, 501, 520, 560, 700]), (100000, [50000, 50100, 50500, 51500, 60000, 100000]),
         (1000000, [499000, 500000, 500500, 501000, 503000, 505000, 600000, 1000000])]
for d, taus in cases:
    for t in taus:
        q, r = upper(d, t), lower(d, t - 1)
        row = {"d": d, "tau": t, "log_pmf": float(log_pmf(d, t)), "log_q": float(log(q)),
               "log_1mq": float(log(r))}
        p = mpf("0.8")
        if q < p:
            eps, m = eps_m(d, t, p)
            row.update({"p": 0.8, "epsilon": float(eps), "m": float(m)})
        tails.append(row)

opt = [optimized(d, eps) for d in (1, 2, 5, 16, 100, 1000) for eps in (0.5, 1.0, 2.0, 4.0, 8.0)]

out = {"generator": "scripts/reference/privunit_inf.py", "mpmath_dps": mp.dps,
       "tails": tails, "optimized": opt}
with open("crates/privfed-mechanisms/tests/data/privunit_inf_reference.json", "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
