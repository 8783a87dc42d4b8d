#!/usr/bin/env python3
"""The accountant's step(), query and reload from Python, side by side with Opacus's RDP
accountant in one run.

Usage (from the repository root, with privfed built into the venv: `maturin develop --release`
or `pip install .`; `pip install 'dp-accounting==0.6.0' scipy` and `pip install --no-deps
opacus==1.5.4` for the side-by-side):

    python3 scripts/bench/py_accountant_steps.py [--steps 10000] [--repeats 5] \\
        [--pld-steps 10000] [--reload-steps 20000] [--json-out FILE]

Cases (δ = 1e-5, noise multiplier 1.1, sample rate 0.01):

* **RDP step**: `--steps` calls of `step(noise_multiplier=1.1, sample_rate=0.01)` on a fresh
  accountant, privfed's `RdpAccountant` and Opacus's `RDPAccountant`, then one
  `get_privacy_spent(delta=)` each (privfed also on Opacus's alphas, so the ε is the same
  computation). Median over `--repeats` runs of the whole loop.
* **RDP step, changing event**: the same loop with the noise multiplier changing every step
  (1.1 + 1e-9·i), so nothing coalesces: one RDP curve per step (what every step cost before the
  ledger coalesced runs).
* **PLD step**: `--pld-steps` steps on privfed's `PLDAccountant` (h = 1e-4), then the first
  `get_epsilon` (builds the PLD by one self-composition), one more step and a query (the cached
  prefix + the last run), a query with nothing new (cached), then `--query-rounds` rounds of
  step + query (as a training loop that logs ε every round), with the same event and with an
  event that changes every round (nothing coalesces).
* **Reload**: `state_dict()` → JSON → `load_state_dict()` into a fresh accountant after
  `--reload-steps` steps (RDP and PLD: size of the JSON, seconds to reload, seconds to the first
  ε after reload), and the older one-entry-per-step state of the same ledger (still accepted).

`--legacy` runs only the RDP and PLD step / query / reload cases with the names an older build
has (`--legacy-rdp-steps`, `--legacy-pld-steps`), for a before/after comparison with that build's
interpreter.

Opacus 1.5.4's accountant classes are imported with a stand-in for `opacus.optimizers` when torch
is missing (their accounting code does not use torch; only `opacus.accountants.accountant`
imports the optimizer class, for hooks this benchmark does not call). The 1-minute load average is
printed at the start and the end. Output: Markdown on stdout, JSON with `--json-out`.
"""

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
import types

import privfed
from privfed import accounting as P

DELTA = 1e-5
Z, Q = 1.1, 0.01


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def load_opacus():
    """Opacus's RDPAccountant (and its version), or (None, reason)."""
    try:
        from opacus.accountants import RDPAccountant  # noqa: F401

        return RDPAccountant, importlib.metadata.version("opacus"), "imported normally"
    except ImportError:
        pass
    spec = importlib.util.find_spec("opacus")
    if spec is None:
        return None, None, "opacus is not installed"
    for name in [m for m in sys.modules if m == "opacus" or m.startswith("opacus.")]:
        del sys.modules[name]
    pkg = types.ModuleType("opacus")
    pkg.__path__ = list(spec.submodule_search_locations)
    sys.modules["opacus"] = pkg
    stub = types.ModuleType("opacus.optimizers")
    stub.DPOptimizer = type("DPOptimizer", (), {})
    sys.modules["opacus.optimizers"] = stub
    from opacus.accountants.rdp import RDPAccountant

    return (RDPAccountant, importlib.metadata.version("opacus"),
            "imported without torch (a stand-in for opacus.optimizers)")


def median_time(fn, repeats):
    times, value = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return value, statistics.median(times), min(times)


def legacy(args):
    """The same cases with only the names an older privfed build has (`--legacy`, for a
    before/after comparison: run this script with that build's interpreter)."""
    rows = []
    for name, make, steps in [("RDP", P.RdpAccountant, args.legacy_rdp_steps),
                              ("PLD", P.PldAccountant, args.legacy_pld_steps)]:
        a = make()
        t0 = time.perf_counter()
        for _ in range(steps):
            a.step(noise_multiplier=Z, sample_rate=Q)
        t_steps = time.perf_counter() - t0
        t0 = time.perf_counter()
        eps = a.get_epsilon(DELTA)
        t_eps = time.perf_counter() - t0
        text = json.dumps(a.state_dict())
        t0 = time.perf_counter()
        b = make()
        b.load_state_dict(json.loads(text))
        t_reload = time.perf_counter() - t0
        rows.append({"accountant": name, "steps": steps, "step_s": t_steps / steps,
                     "epsilon": eps, "epsilon_s": t_eps, "state_bytes": len(text),
                     "reload_s": t_reload})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--legacy", action="store_true",
                    help="only the names an older build has (before/after comparisons)")
    ap.add_argument("--legacy-rdp-steps", type=int, default=1000)
    ap.add_argument("--legacy-pld-steps", type=int, default=200)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--changing-steps", type=int, default=1000)
    ap.add_argument("--pld-steps", type=int, default=10_000)
    ap.add_argument("--reload-steps", type=int, default=20_000)
    ap.add_argument("--query-rounds", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()
    load_start = os.getloadavg()[0]
    log(f"load average (1 min) at start: {load_start:.2f}")
    if args.legacy:
        rows = legacy(args)
        load_end = os.getloadavg()[0]
        print(f"privfed {privfed.__version__} (legacy names only); load average (1 min) "
              f"{load_start:.2f} at start, {load_end:.2f} at end\n")
        print("| accountant | steps | per step | ε after | ε query | state | reload |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r['accountant']} | {r['steps']} | {r['step_s'] * 1e3:.4g} ms | "
                  f"{r['epsilon']:.6f} | {r['epsilon_s'] * 1e3:.4g} ms | {r['state_bytes']:,} B | "
                  f"{r['reload_s']:.4g} s |")
        if args.json_out:
            with open(args.json_out, "w") as f:
                json.dump({"script": "scripts/bench/py_accountant_steps.py", "argv": sys.argv,
                           "load_average_1min": {"start": load_start, "end": load_end},
                           "rows": rows}, f, indent=2)
        return
    Opacus, opacus_version, how = load_opacus()
    log(f"opacus: {opacus_version} ({how})")
    rows = []

    def row(case, impl, seconds, calls, extra=""):
        rows.append({"case": case, "impl": impl, "seconds": seconds, "calls": calls,
                     "us_per_call": 1e6 * seconds / calls if calls else None, "note": extra})

    # ---- RDP step: privfed and Opacus, same loop ----
    n = args.steps

    def pf_steps():
        a = P.RdpAccountant()
        for _ in range(n):
            a.step(noise_multiplier=Z, sample_rate=Q)
        return a

    acc, med, _ = median_time(pf_steps, args.repeats)
    row("RDP: step() x %d" % n, "privfed", med, n)
    t0 = time.perf_counter()
    eps_pf, alpha_pf = acc.get_privacy_spent(delta=DELTA)
    row("RDP: ε after the steps", "privfed", time.perf_counter() - t0, 1,
        f"ε = {eps_pf:.6f} (α = {alpha_pf:g}, privfed's 456 orders)")
    results = {"privfed_eps_default_orders": eps_pf}
    if Opacus is not None:
        def op_steps():
            a = Opacus()
            for _ in range(n):
                a.step(noise_multiplier=Z, sample_rate=Q)
            return a

        oacc, med, _ = median_time(op_steps, args.repeats)
        row("RDP: step() x %d" % n, "Opacus", med, n)
        t0 = time.perf_counter()
        eps_op, alpha_op = oacc.get_privacy_spent(delta=DELTA)
        row("RDP: ε after the steps", "Opacus", time.perf_counter() - t0, 1,
            f"ε = {eps_op:.6f} (α = {alpha_op:g}, Opacus's {len(oacc.DEFAULT_ALPHAS)} alphas)")
        alphas = list(oacc.DEFAULT_ALPHAS)
        t0 = time.perf_counter()
        eps_same, alpha_same = acc.get_privacy_spent(delta=DELTA, alphas=alphas)
        row("RDP: ε after the steps, on Opacus's alphas", "privfed", time.perf_counter() - t0, 1,
            f"ε = {eps_same:.6f} (α = {alpha_same:g}; rel. diff to Opacus "
            f"{eps_same / eps_op - 1:+.1e})")
        results.update({"opacus_eps": eps_op, "privfed_eps_opacus_alphas": eps_same})

    m = args.changing_steps

    def pf_changing():
        a = P.RdpAccountant()
        for i in range(m):
            a.step(noise_multiplier=Z + 1e-9 * i, sample_rate=Q)
        return a

    _, med, _ = median_time(pf_changing, max(1, args.repeats // 2))
    row("RDP: step() x %d, a different event each step" % m, "privfed", med, m,
        "one RDP curve per step (nothing coalesces)")

    # ---- PLD ----
    k = args.pld_steps
    pld = P.PLDAccountant()
    t0 = time.perf_counter()
    for _ in range(k):
        pld.step(noise_multiplier=Z, sample_rate=Q)
    row("PLD (h = 1e-4): step() x %d" % k, "privfed", time.perf_counter() - t0, k)
    t0 = time.perf_counter()
    eps_pld = pld.get_epsilon(delta=DELTA)
    row("PLD: first ε after the steps", "privfed", time.perf_counter() - t0, 1,
        f"ε = {eps_pld:.6f}")
    t0 = time.perf_counter()
    pld.step(noise_multiplier=Z, sample_rate=Q)
    pld.get_epsilon(delta=DELTA)
    row("PLD: one more step, then ε", "privfed", time.perf_counter() - t0, 1)
    t0 = time.perf_counter()
    pld.get_epsilon(delta=DELTA)
    row("PLD: ε again, nothing new", "privfed", time.perf_counter() - t0, 1)
    rounds = args.query_rounds
    t0 = time.perf_counter()
    for _ in range(rounds):
        pld.step(noise_multiplier=Z, sample_rate=Q)
        pld.get_epsilon(delta=DELTA)
    row(f"PLD: step() and ε every step, {rounds} more steps", "privfed",
        time.perf_counter() - t0, rounds, "one self-composition of the last run per query")
    t0 = time.perf_counter()
    for i in range(rounds):
        pld.step(noise_multiplier=Z + 1e-9 * (i + 1), sample_rate=Q)
        pld.get_epsilon(delta=DELTA)
    row(f"PLD: step() and ε every step, a different event each step, {rounds} steps", "privfed",
        time.perf_counter() - t0, rounds,
        "one composition into the cached prefix per step (what every step cost before)")

    # ---- reload ----
    r = args.reload_steps
    for name, make in [("RDP", P.RdpAccountant), ("PLD", P.PLDAccountant)]:
        a = make()
        for _ in range(r):
            a.step(noise_multiplier=Z, sample_rate=Q)
        text = json.dumps(a.state_dict())
        t0 = time.perf_counter()
        b = make()
        b.load_state_dict(json.loads(text))
        reload_s = time.perf_counter() - t0
        row(f"{name}: reload after {r} steps", "privfed", reload_s, 1,
            f"state {len(text):,} bytes")
        t0 = time.perf_counter()
        e_b = b.get_epsilon(delta=DELTA)
        row(f"{name}: first ε after the reload", "privfed", time.perf_counter() - t0, 1,
            f"ε = {e_b:.6f} (= before: {e_b == a.get_epsilon(delta=DELTA)})")
        old = a.state_dict()
        runs = old.pop("runs")
        old["events"] = [run["event"] for run in runs for _ in range(run["count"])]
        text_old = json.dumps(old)
        t0 = time.perf_counter()
        c = make()
        c.load_state_dict(json.loads(text_old))
        row(f"{name}: reload of the one-entry-per-step state ({r} entries)", "privfed",
            time.perf_counter() - t0, 1, f"state {len(text_old):,} bytes; "
            f"runs after reload: {len(c.ledger_runs)}")

    load_end = os.getloadavg()[0]
    out = [f"privfed {privfed.__version__}, Opacus {opacus_version} ({how}); "
           f"noise multiplier {Z}, sample rate {Q}, δ = {DELTA:g}; load average (1 min) "
           f"{load_start:.2f} at start, {load_end:.2f} at end; {os.cpu_count()} CPUs; "
           f"median of {args.repeats} runs for the RDP step loops.", "",
           "| case | implementation | total | per call | note |", "|---|---|---:|---:|---|"]
    for x in rows:
        per = f"{x['us_per_call']:.3g} µs" if x["calls"] > 1 else ""
        out.append(f"| {x['case']} | {x['impl']} | {x['seconds'] * 1e3:.4g} ms | {per} | "
                   f"{x['note']} |")
    print("\n".join(out))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"script": "scripts/bench/py_accountant_steps.py", "argv": sys.argv,
                       "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
                       "versions": {"python": platform.python_version(),
                                    "privfed": privfed.__version__, "opacus": opacus_version,
                                    "opacus_import": how},
                       "load_average_1min": {"start": load_start, "end": load_end},
                       "rows": rows, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
