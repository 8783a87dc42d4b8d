#!/usr/bin/env python3
"""Reference RDP of the Poisson-subsampled Gaussian at fractional orders, by mpmath quadrature
at 40 significant digits:
    eps(alpha) = ln E_{x~N(0,z^2)}[((1-q) + q exp((2x-1)/(2z^2)))^alpha] / (alpha - 1).
Writes crates/privfed-accounting/tests/data/rdp_fractional_reference.json.
"""
import json
import os

import mpmath as m

m.mp.dps = 40


def eps(q, z, a):
    q, z, a = m.mpf(q), m.mpf(z), m.mpf(a)
    f = lambda x: m.npdf(x, 0, z) * ((1 - q) + q * m.exp((2 * x - 1) / (2 * z**2))) ** a
    pts = sorted({-m.inf, -10 * z, m.mpf(0), m.mpf(1), a, a + 10 * z, m.inf})
    return m.log(m.quad(f, pts)) / (a - 1)


cases = []
for q in [0.001, 0.01, 0.1, 0.5]:
    for z in [0.5, 0.8, 1.1, 2.0, 5.0]:
        for a in [1.1, 1.5, 2.5, 3.7, 7.3, 10.9]:
            cases.append({"q": q, "z": z, "alpha": a, "rdp": float(eps(q, z, a))})

out = os.path.join(os.path.dirname(__file__), "../../crates/privfed-accounting/tests/data/rdp_fractional_reference.json")
with open(out, "w") as fh:
    json.dump({"precision_digits": 40, "cases": cases}, fh, indent=1)
print(len(cases), "cases written")
