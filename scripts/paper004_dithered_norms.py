#!/usr/bin/env python3
"""Dithered l1 norms of the paper-004 l1 data (EXPERIMENTS.md, "Paper 004", vector DME).

Data: uniform on [0,1]^128, normalized to l1 norm 1. Each coordinate is dithered to the
B = 2^b-level grid on [-1, 1] (spacing h = 2/(B-1); no grid point at 0 since B is even).
Prints, per b: the floor d/(B-1) (every coordinate in the cell around 0 dithers to +-h/2), the
exact mean and standard deviation of ||Dither(x)||_1 over a sample of vectors (from each
coordinate's two-point law), our data-independent bound R = 1 + d*h/2, and the paper's input
scaling gamma (App. B.1, as in its experiment: the largest gamma in [0, 1] such that fewer than
10% of the sample's dithered vectors Dither(gamma*x) have l1 norm > 1, by bisection with one
Monte Carlo dither per vector; 0 when no gamma works). Dithering gamma*x with bound 1 is our
conditional dithering with radius and bound 1/gamma, so 1/gamma is the paper's effective R.

Usage: python3 scripts/paper004_dithered_norms.py
"""
import numpy as np

D, N, SEED = 128, 2000, 7


def cells(x, h):
    t = (x + 1.0) / h
    i = np.floor(t)
    lam = t - i
    lo = -1.0 + i * h
    return lo, lo + h, lam


def main():
    rng = np.random.default_rng(SEED)
    x = rng.random((N, D))
    x /= x.sum(1, keepdims=True)
    print(f"d = {D}, {N} vectors, largest coordinate {x.max():.4f}")
    print("| b_in | d/(B-1) | mean ||Dither(x)||_1 (min..max over vectors) | mean sd | R = 1 + d h/2 | paper gamma | 1/gamma |")
    print("|---|---|---|---|---|---|---|")
    for b in range(5, 11):
        h = 2.0 / (2**b - 1)
        lo, hi, lam = cells(x, h)
        mean = ((1 - lam) * np.abs(lo) + lam * np.abs(hi)).sum(1)
        sd = np.sqrt(((1 - lam) * lam * (np.abs(hi) - np.abs(lo)) ** 2).sum(1))

        def over(g):
            lo, hi, lam = cells(g * x, h)
            v = np.where(rng.random(lam.shape) < lam, hi, lo)
            return (np.abs(v).sum(1) > 1.0).mean()

        if over(1.0) < 0.1:
            g = 1.0
        else:
            a, c = 0.0, 1.0
            for _ in range(30):
                m = 0.5 * (a + c)
                a, c = (m, c) if over(m) < 0.1 else (a, m)
            g = a
        inv = f"{1 / g:.4f}" if g > 1e-6 else "none"
        print(
            f"| {b} | {D / (2**b - 1):.4f} | {mean.mean():.4f} ({mean.min():.4f}..{mean.max():.4f}) "
            f"| {sd.mean():.4f} | {1 + D * h / 2:.4f} | {g:.4f} | {inv} |"
        )


if __name__ == "__main__":
    main()
