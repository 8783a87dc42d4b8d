#!/usr/bin/env python3
"""Session 1's independent re-implementation of paper 004's approach to the MVU design problem:
scipy's trust-region interior-point solver (`trust-constr`) on the joint problem in (P, a)

    min (1/B_in) sum_ij P_ij (x_i - a_j)^2  s.t. (1a) row sums, (1b) P >= 0,
    (1c) P_ij <= e^eps P_i'j for all i != i', (1d) sum_j a_j P_ij = x_i,

started from unbiased generalized RR, written from the description in 004 §3.4 before the paper's
own code was available. It is NOT the paper's code: that one (facebookresearch/dp_compression,
`optimize_mvu.py --method tr`) starts from a uniform P with the alphabet j/(B_out-1), scales its
objective by 1/B_in but not its gradient, and is what `paper004_mvu_compare.py` runs; its results
are the comparison points of EXPERIMENTS.md and `experiments/paper004_reference_designs.csv`.
This script is kept because its 2-bit results are pinned by a test in privfed-compression
(`beats_the_trust_region_reference_at_two_bits`, data in crates/privfed-compression/tests/data/).
Prints JSON lines: bits, epsilon, seconds, the achieved objective, the objective of gRR, and the
largest constraint violation of the returned point (trust-constr returns points that are only
approximately feasible).

Usage: python3 scripts/reference/mvu_trust_constr.py [BITS] [EPS ...]
"""
import json
import sys
import time

import numpy as np
from scipy.optimize import LinearConstraint, NonlinearConstraint, minimize


def grr(eps, b):
    B = 2 ** b
    e = np.exp(eps)
    P = np.full((B, B), 1.0 / (B + e - 1.0))
    np.fill_diagonal(P, e / (B + e - 1.0))
    x = np.arange(B) / (B - 1)
    a = np.linalg.solve(P, x)
    return P, a


def design(b, eps):
    n = m = 2 ** b
    x = np.arange(n) / (n - 1)
    P0, a0 = grr(eps, b)
    z0 = np.concatenate([P0.ravel(), a0])
    npv = n * m

    def obj(z):
        P = z[:npv].reshape(n, m)
        a = z[npv:]
        return np.sum(P * (x[:, None] - a[None, :]) ** 2) / n

    def grad(z):
        P = z[:npv].reshape(n, m)
        a = z[npv:]
        gP = (x[:, None] - a[None, :]) ** 2 / n
        ga = -2.0 * np.sum(P * (x[:, None] - a[None, :]), axis=0) / n
        return np.concatenate([gP.ravel(), ga])

    # (1a)
    A_row = np.zeros((n, npv + m))
    for i in range(n):
        A_row[i, i * m:(i + 1) * m] = 1.0
    # (1c): P_ij - e^eps P_i'j <= 0
    rows = []
    e = np.exp(eps)
    for j in range(m):
        for i in range(n):
            for i2 in range(n):
                if i != i2:
                    r = np.zeros(npv + m)
                    r[i * m + j] = 1.0
                    r[i2 * m + j] = -e
                    rows.append(r)
    A_dp = np.array(rows)
    # (1d)
    def unb(z):
        P = z[:npv].reshape(n, m)
        return P @ z[npv:] - x

    def unb_jac(z):
        P = z[:npv].reshape(n, m)
        a = z[npv:]
        J = np.zeros((n, npv + m))
        for i in range(n):
            J[i, i * m:(i + 1) * m] = a
        J[:, npv:] = P
        return J

    bounds = [(0.0, 1.0)] * npv + [(-np.inf, np.inf)] * m
    from scipy.optimize import Bounds
    lb = np.array([b_[0] for b_ in bounds])
    ub = np.array([b_[1] for b_ in bounds])
    cons = [
        LinearConstraint(A_row, np.ones(n), np.ones(n)),
        LinearConstraint(A_dp, -np.inf, 0.0),
        NonlinearConstraint(unb, 0.0, 0.0, jac=unb_jac),
    ]
    t = time.time()
    res = minimize(obj, z0, jac=grad, method="trust-constr", constraints=cons,
                   bounds=Bounds(lb, ub), options={"maxiter": 1000, "verbose": 0})
    secs = time.time() - t
    z = res.x
    P = z[:npv].reshape(n, m)
    a = z[npv:]
    viol = max(
        np.max(np.abs(P.sum(axis=1) - 1.0)),
        max(0.0, -P.min()),
        np.max(np.abs(P @ a - x)),
        max(0.0, np.max(A_dp[:, :npv] @ P.ravel())),
    )
    return {
        "bits": b, "epsilon": eps, "seconds": secs, "variance": float(obj(z)),
        "grr_variance": float(obj(z0)), "max_violation": float(viol),
        "status": int(res.status), "iterations": int(res.niter),
    }


if __name__ == "__main__":
    b = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    epss = [float(v) for v in sys.argv[2:]] or [1.0, 3.0, 5.0, 10.0]
    for eps in epss:
        print(json.dumps(design(b, eps)), flush=True)
