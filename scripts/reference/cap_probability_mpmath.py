#!/usr/bin/env python3
"""Reference values for the reconstruction-protection calculator (docs/ALGORITHMS.md §1.6): the
spherical-cap probability P0 = 1/2 * I_{1-t^2}((k-1)/2, 1/2) of <h, Y> >= t for Y uniform on
S^{k-1}, as ln P0, with mpmath at 50 significant digits.
Computed independently of any continued fraction, from the cap integral
P0 = int_t^1 (1-s^2)^((k-3)/2) ds / B((k-1)/2, 1/2), with the value at s = t factored out so
that astronomically small caps stay representable (mpmath's betainc fails to converge there).
Writes crates/privfed-special/tests/data/cap_probability_reference.json (read by
crates/privfed-special/tests/special_reference.rs).
"""
import json
import os

import mpmath as m

m.mp.dps = 50
cases = []
for k in [2, 3, 5, 10, 100, 1000, 10_000, 100_000, 1_000_000]:
    for t in [0.001, 0.01, 0.1, 0.3, 0.5, 0.9, 0.99]:
        tt = m.mpf(t)
        c = m.mpf(k - 3) / 2
        lnb = m.log(m.beta(m.mpf(k - 1) / 2, m.mpf(1) / 2))
        if k == 3:
            ln_int = m.log(1 - tt)
        else:
            base = (1 - tt**2)
            f = lambda s: ((1 - s**2) / base) ** c
            # Breakpoints where the scaled integrand has fallen by e^-1, e^-4, ... (width ~ base/(2ct)).
            w = base / (2 * c * tt) if c > 0 else m.mpf(1)
            pts = [tt] + [tt + j * w for j in (1, 4, 16, 64, 256) if tt + j * w < 1] + [m.mpf(1)]
            ln_int = c * m.log(base) + m.log(m.quad(f, pts))
        cases.append({"k": k, "t": t, "ln_p0": float(ln_int - lnb)})
out = os.path.join(
    os.path.dirname(__file__),
    "../../crates/privfed-special/tests/data/cap_probability_reference.json",
)
with open(out, "w") as fh:
    json.dump({"precision_digits": 50, "cases": cases}, fh, indent=1)
print(len(cases), "cases written")
