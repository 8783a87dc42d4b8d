#!/usr/bin/env python3
"""privfed.accounting vs dp_accounting 0.6.0 from Python, side by side in one run.

Usage (from the repository root; see scripts/bench/PY_BENCH.md):

    PYTHONPATH=python python3 scripts/bench/py_accounting.py \\
        [--delta 1e-5] [--min-seconds 1] [--repeats 5] [--slow 2] [--slow-repeats 3] \\
        [--cases psg1k,psg10k,psg100k,laplace1,laplace100,mixed] [--no-calibration] \\
        [--pld-h 1e-4,1e-3] [--json-out FILE]

The same events are built in both libraries (privfed.accounting uses dp_accounting's names):

* psg1k / psg10k  -- PoissonSampled(q = 0.01, Gaussian(z = 1.1)) composed 1,000 / 10,000 times
* psg100k         -- PoissonSampled(q = 0.001, Gaussian(z = 1.1)) composed 100,000 times
* laplace1        -- one Laplace(scale = 1) (pure ε = 1: a check of both)
* laplace100      -- Laplace(scale = 10) composed 100 times
* mixed           -- Composed[PSG(0.01, 1.1) x 1000, Gaussian(5) x 10, Laplace(20) x 10,
                     PSG(0.02, 2.0) x 500]

and ε at ``--delta`` is asked of each accountant. One timed call = a fresh accountant, compose,
get_epsilon. Settings compared:

* ``RDP default``      -- each library on its default orders (privfed: 456 orders 1.05 ... 2048,
  a superset of dp_accounting's 156 orders 1.1 ... 1024);
* ``RDP dp-orders``    -- both on dp_accounting's DEFAULT_RDP_ORDERS;
* ``RDP pf-orders``    -- both on privfed's default orders;
* ``PLD h=...``        -- both with value_discretization_interval h (1e-4 is both defaults).
  Other PLD internals differ and are not settable from privfed's Python API: privfed composes
  Gaussians exactly (one discretization at query time) and truncates tails at 1e-15;
  dp_accounting discretizes every event (pessimistic estimate, its own truncation bounds).

Calibration: the smallest z for (ε, δ) = (2, 1e-5), q = 0.01, 1,000 steps:
``privfed.accounting.get_noise_multiplier(..., accountant="rdp"|"pld")`` vs
``dp_accounting.mechanism_calibration.calibrate_dp_mechanism`` with the matching fresh accountant
(privfed: geometric bisection to relative tolerance 1e-6; dp_accounting: Brent, absolute tolerance
1e-6 on z, bracket search from [0, 1]). ε of both z values is re-evaluated by dp_accounting.

Timing: median per call over >= ``--repeats`` calls and >= ``--min-seconds`` (``--slow-repeats``
calls when one takes more than ``--slow`` s). The 1-minute load average is printed at start and
end. Output: Markdown on stdout, progress on stderr, JSON in ``--json-out``.
"""

import argparse
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time

from dp_accounting import dp_event as D
from dp_accounting import mechanism_calibration
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

import privfed
from privfed import accounting as P


DP_VERSION = importlib.metadata.version("dp-accounting")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# A small event spec, built into either library.
CASES = {
    "psg1k": ("self", ("psg", 0.01, ("gauss", 1.1)), 1000),
    "psg10k": ("self", ("psg", 0.01, ("gauss", 1.1)), 10000),
    "psg100k": ("self", ("psg", 0.001, ("gauss", 1.1)), 100000),
    "laplace1": ("laplace", 1.0),
    "laplace100": ("self", ("laplace", 10.0), 100),
    "mixed": ("comp", [
        ("self", ("psg", 0.01, ("gauss", 1.1)), 1000),
        ("self", ("gauss", 5.0), 10),
        ("self", ("laplace", 20.0), 10),
        ("self", ("psg", 0.02, ("gauss", 2.0)), 500),
    ]),
}


def build(spec, lib):
    kind = spec[0]
    if kind == "gauss":
        return lib.GaussianDpEvent(spec[1])
    if kind == "laplace":
        return lib.LaplaceDpEvent(spec[1])
    if kind == "psg":
        return lib.PoissonSampledDpEvent(spec[1], build(spec[2], lib))
    if kind == "self":
        return lib.SelfComposedDpEvent(build(spec[1], lib), spec[2])
    if kind == "comp":
        return lib.ComposedDpEvent([build(s, lib) for s in spec[1]])
    raise ValueError(kind)


def describe(spec):
    kind = spec[0]
    if kind == "gauss":
        return f"Gaussian(z={spec[1]:g})"
    if kind == "laplace":
        return f"Laplace(b={spec[1]:g})"
    if kind == "psg":
        return f"PoissonSampled(q={spec[1]:g}, {describe(spec[2])})"
    if kind == "self":
        return f"{describe(spec[1])} x {spec[2]}"
    return "Composed[" + ", ".join(describe(s) for s in spec[1]) + "]"


def timed(fn, args):
    """(value of the last call, stats)."""
    t0 = time.perf_counter()
    value = fn()
    first = time.perf_counter() - t0
    times = [first]
    need = args.slow_repeats if first > args.slow else args.repeats
    while len(times) < need or (sum(times) < args.min_seconds and first <= args.slow):
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return value, {"median_s": statistics.median(times), "min_s": min(times),
                   "first_s": first, "calls": len(times)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--settings", default="rdp-default,rdp-dp-orders,rdp-pf-orders,pld",
                    help="subset of rdp-default,rdp-dp-orders,rdp-pf-orders,pld")
    ap.add_argument("--pld-h", default="1e-4,1e-3")
    ap.add_argument("--min-seconds", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--slow", type=float, default=2.0)
    ap.add_argument("--slow-repeats", type=int, default=3)
    ap.add_argument("--no-calibration", action="store_true")
    ap.add_argument("--calibration-pld", default="yes", choices=["yes", "no"])
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()
    delta = args.delta
    load_start = os.getloadavg()[0]
    log(f"load average (1 min) at start: {load_start:.2f}")

    pf_orders = list(P.RdpAccountant().orders)
    dp_orders = list(rdp_privacy_accountant.DEFAULT_RDP_ORDERS)
    settings = []
    wanted = args.settings.split(",")
    if "rdp-default" in wanted:
        settings.append(("RDP default", lambda: P.RdpAccountant(),
                         lambda: rdp_privacy_accountant.RdpAccountant()))
    if "rdp-dp-orders" in wanted:
        settings.append(("RDP dp-orders", lambda: P.RdpAccountant(orders=dp_orders),
                         lambda: rdp_privacy_accountant.RdpAccountant(orders=dp_orders)))
    if "rdp-pf-orders" in wanted:
        settings.append(("RDP pf-orders", lambda: P.RdpAccountant(orders=pf_orders),
                         lambda: rdp_privacy_accountant.RdpAccountant(orders=pf_orders)))
    if "pld" in wanted:
        for h in (float(v) for v in args.pld_h.split(",") if v):
            settings.append((f"PLD h={h:g}",
                             lambda h=h: P.PldAccountant(value_discretization_interval=h),
                             lambda h=h: pld_privacy_accountant.PLDAccountant(
                                 value_discretization_interval=h)))

    rows = []
    for case in args.cases.split(","):
        spec = CASES[case]
        ev_pf, ev_dp = build(spec, P), build(spec, D)
        for name, make_pf, make_dp in settings:
            log(f"{case}: {name}")
            eps_pf, t_pf = timed(lambda: make_pf().compose(ev_pf).get_epsilon(delta), args)

            def dp_call():
                a = make_dp()
                a.compose(ev_dp)
                return a.get_epsilon(delta)

            eps_dp, t_dp = timed(dp_call, args)
            rows.append({"case": case, "event": describe(spec), "setting": name,
                         "eps_privfed": eps_pf, "eps_dp_accounting": eps_dp,
                         "rel_diff": eps_pf / eps_dp - 1.0,
                         "time_privfed": t_pf, "time_dp_accounting": t_dp,
                         "speedup": t_dp["median_s"] / t_pf["median_s"]})

    calib = []
    if not args.no_calibration:
        te, q, steps = 2.0, 0.01, 1000
        kinds = [("rdp", rdp_privacy_accountant.RdpAccountant)]
        if args.calibration_pld == "yes":
            kinds.append(("pld", pld_privacy_accountant.PLDAccountant))
        for kind, fresh in kinds:
            log(f"calibration {kind}")

            def make_event(z):
                return D.SelfComposedDpEvent(D.PoissonSampledDpEvent(q, D.GaussianDpEvent(z)),
                                             steps)

            z_pf, t_pf = timed(lambda: P.get_noise_multiplier(te, delta, q, steps,
                                                              accountant=kind), args)
            z_dp, t_dp = timed(lambda: mechanism_calibration.calibrate_dp_mechanism(
                fresh, make_event, te, delta), args)

            def eps_dp_of(z):
                a = fresh()
                a.compose(make_event(z))
                return a.get_epsilon(delta)

            calib.append({"accountant": kind, "target_epsilon": te, "delta": delta,
                          "sample_rate": q, "steps": steps,
                          "z_privfed": z_pf, "z_dp_accounting": z_dp,
                          "rel_diff": z_pf / z_dp - 1.0,
                          "eps_dp_accounting_at_z_privfed": eps_dp_of(z_pf),
                          "eps_dp_accounting_at_z_dp_accounting": eps_dp_of(z_dp),
                          "time_privfed": t_pf, "time_dp_accounting": t_dp,
                          "speedup": t_dp["median_s"] / t_pf["median_s"]})
    load_end = os.getloadavg()[0]

    ms = lambda t: f"{t['median_s'] * 1e3:.4g}"  # noqa: E731
    out = [f"Accounting at δ = {delta:g}; privfed {privfed.__version__}, dp_accounting "
           f"{DP_VERSION}; load average (1 min): "
           f"{load_start:.2f} at start, {load_end:.2f} at end; {os.cpu_count()} CPUs.", "",
           f"privfed default RDP orders: {len(pf_orders)} ({pf_orders[0]:g} ... "
           f"{pf_orders[-1]:g}); dp_accounting: {len(dp_orders)} ({dp_orders[0]:g} ... "
           f"{dp_orders[-1]:g}). PLD default h: 1e-4 in both.", "",
           "| case | setting | ε privfed | ε dp_accounting | rel. diff | ms privfed | "
           "ms dp_accounting | speedup |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['case']} | {r['setting']} | {r['eps_privfed']:.6g} | "
                   f"{r['eps_dp_accounting']:.6g} | {r['rel_diff']:+.2e} | "
                   f"{ms(r['time_privfed'])} | {ms(r['time_dp_accounting'])} | "
                   f"{r['speedup']:.3g}x |")
    out.append("")
    for c in CASES:
        if c in args.cases.split(","):
            out.append(f"- {c}: {describe(CASES[c])}")
    if calib:
        out += ["", "Calibration: smallest z of PoissonSampled(q=0.01, Gaussian(z)) x 1000 "
                f"with ε ≤ 2 at δ = {delta:g}", "",
                "| accountant | z privfed | z dp_accounting | rel. diff | ε (dp_acc.) at z "
                "privfed / z dp_acc. | ms privfed | ms dp_accounting | speedup |",
                "|---|---:|---:|---:|---|---:|---:|---:|"]
        for c in calib:
            out.append(f"| {c['accountant']} | {c['z_privfed']:.7g} | {c['z_dp_accounting']:.7g}"
                       f" | {c['rel_diff']:+.2e} | {c['eps_dp_accounting_at_z_privfed']:.6g} / "
                       f"{c['eps_dp_accounting_at_z_dp_accounting']:.6g} | "
                       f"{ms(c['time_privfed'])} | {ms(c['time_dp_accounting'])} | "
                       f"{c['speedup']:.3g}x |")
    print("\n".join(out))

    if args.json_out:
        doc = {"script": "scripts/bench/py_accounting.py", "argv": sys.argv,
               "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
               "versions": {"python": platform.python_version(), "privfed": privfed.__version__,
                            "dp_accounting": DP_VERSION},
               "delta": delta, "load_average_1min": {"start": load_start, "end": load_end},
               "orders": {"privfed_default": pf_orders, "dp_accounting_default": dp_orders},
               "results": rows, "calibration": calib}
        with open(args.json_out, "w") as f:
            json.dump(doc, f, indent=2)
        log(f"JSON written to {args.json_out}")


if __name__ == "__main__":
    main()
