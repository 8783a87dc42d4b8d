"""Statistical checks with stated false-positive rates (the Python side of privfed-testkit)."""

from __future__ import annotations

import math

import numpy as np


def normal_two_sided_critical(alpha: float) -> float:
    """z with P(|N(0,1)| > z) = alpha (bisection on erfc; no scipy needed)."""
    lo, hi = 0.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if math.erfc(mid / math.sqrt(2)) > alpha:
            lo = mid
        else:
            hi = mid
    return hi


def assert_mean(samples: np.ndarray, expected: float, alpha: float, what: str) -> None:
    """Two-sided z-test (CLT, sample standard deviation) that the mean is `expected`; fails a
    correct implementation with probability about `alpha`."""
    n = samples.shape[0]
    sd = float(np.std(samples, ddof=1))
    z = (float(np.mean(samples)) - expected) / (sd / math.sqrt(n))
    crit = normal_two_sided_critical(alpha)
    assert abs(z) <= crit, f"{what}: mean {np.mean(samples)} vs {expected}, z = {z:.2f} > {crit:.2f}"
