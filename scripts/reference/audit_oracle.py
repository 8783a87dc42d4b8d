#!/usr/bin/env python3
"""Independent reference values for privfed-audit (crates/privfed-audit/tests/it/reference.rs).

Reads one JSON object on stdin and writes one on stdout:

  {"clopper_pearson": [[k, n, alpha], ...],       one-sided bounds at significance alpha
   "one_run": [[m, r, v, delta, alpha], ...],     Steinke-Nasr-Jagielski 2023
   "one_run_p": [[m, r, v, eps, delta], ...]}

  -> {"cp_lower": [...], "cp_upper": [...], "one_run_eps": [...], "one_run_p": [...]}

Clopper-Pearson: scipy.stats.beta.ppf for the lower bound B^-1(alpha; k, n-k+1) and beta.isf
(the same quantile without rounding 1 - alpha) for the upper bound B^-1(1-alpha; k+1, n-k).
One-run: the p-value of the paper's appendix algorithm written from the paper with
scipy.stats.binom (sf and pmf), and the largest eps with p <= alpha by scipy.optimize.brentq.
"""
import json
import math
import sys

from scipy import optimize, stats


def cp_lower(k, n, alpha):
    return 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))


def cp_upper(k, n, alpha):
    # beta.isf(alpha) = beta.ppf(1 - alpha) without rounding 1 - alpha: at alpha = 1e-10 the
    # ppf form is off by ~3e-9 relative (mpmath: 2.6333948248328e-6 for k=1, n=1e7; ppf gives
    # 2.63339481628e-6, isf 2.63339482480e-6).
    return 1.0 if k == n else float(stats.beta.isf(alpha, k + 1, n - k))


def one_run_p(m, r, v, eps, delta):
    q = 1.0 / (1.0 + math.exp(-eps))
    beta = float(stats.binom.sf(v - 1, r, q))  # P[Bin(r, q) >= v]
    if delta == 0 or v == 0:
        return min(beta, 1.0)
    alpha = 0.0
    total = 0.0  # P[v > Bin(r, q) >= v - i]
    for i in range(1, v + 1):
        total += float(stats.binom.pmf(v - i, r, q))
        alpha = max(alpha, total / i)
    return min(beta + alpha * delta * 2 * m, 1.0)


def one_run_eps(m, r, v, delta, alpha):
    f = lambda e: one_run_p(m, r, v, e, delta) - alpha
    if f(0.0) > 0:
        return 0.0
    hi = 1.0
    while f(hi) <= 0:
        hi *= 2
    return optimize.brentq(f, 0.0, hi, xtol=1e-13, rtol=1e-14)


def main():
    q = json.load(sys.stdin)
    out = {
        "cp_lower": [cp_lower(k, n, a) for k, n, a in q.get("clopper_pearson", [])],
        "cp_upper": [cp_upper(k, n, a) for k, n, a in q.get("clopper_pearson", [])],
        "one_run_eps": [one_run_eps(*row) for row in q.get("one_run", [])],
        "one_run_p": [one_run_p(*row) for row in q.get("one_run_p", [])],
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
