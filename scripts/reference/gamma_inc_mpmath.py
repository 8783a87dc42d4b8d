#!/usr/bin/env python3
"""Reference values of the regularized incomplete gamma functions P(a, x), Q(a, x) and ln Q(a, x)
for privfed-special's `gamma_inc`, `gamma_inc_complement`, `ln_gamma_inc_complement`, from mpmath
at 50 significant digits. Output: JSON on stdout, read by the unit test `matches_mpmath` in
`crates/privfed-special/src/gamma_inc.rs`.

    python3 scripts/reference/gamma_inc_mpmath.py > crates/privfed-special/tests/data/gamma_inc_mpmath.json

Inputs are IEEE doubles (half-integers a = k/2 are the chi-square cases, x = chi2/2); values are
printed with 17 significant digits (repr of the nearest double), ln Q with 17 digits too.
"""

import json

import mpmath as mp

mp.mp.dps = 50

A = [0.5, 1.0, 1.5, 2.0, 3.5, 7.5, 10.0, 24.5, 50.0, 99.5, 250.0, 499.5, 1000.0, 0.01, 0.3]
REL_X = [1e-6, 0.01, 0.2, 0.5, 0.8, 0.95, 1.0, 1.05, 1.3, 2.0, 4.0, 10.0]


def row(a, x):
    a_m, x_m = mp.mpf(a), mp.mpf(x)
    p = mp.gammainc(a_m, 0, x_m, regularized=True)
    q = mp.gammainc(a_m, x_m, mp.inf, regularized=True)
    return {
        "a": a,
        "x": x,
        "p": repr(float(p)),
        "q": repr(float(q)),
        "ln_q": repr(float(mp.log(q))),
    }


def main():
    rows = []
    for a in A:
        for r in REL_X:
            x = float(a * r)
            rows.append(row(a, x))
        # around the branch switch x = a + 1 and in the far upper tail
        for x in [a + 1.0 - 1e-9, a + 1.0, a + 30.0, a + 10.0 * a**0.5 + 50.0]:
            rows.append(row(a, float(x)))
    json.dump({"generator": "scripts/reference/gamma_inc_mpmath.py", "dps": 50,
               "gamma_inc": rows}, __import__("sys").stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
