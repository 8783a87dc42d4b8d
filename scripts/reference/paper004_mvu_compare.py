#!/usr/bin/env python3
"""Compare privfed's MVU designer with paper 004's own reference designer.

The reference is the paper's code, facebookresearch/dp_compression on GitHub (`optimize_mvu.py`,
`mechanisms.py`). It is NOT on PyPI and is not shipped with privfed: obtain a checkout separately
(its `mechanisms.py` imports `utils`, its `private_prediction` submodule and `opacus` at module
level; only the `MVUMechanism` class and what it uses are needed to design, so a copy of
`mechanisms.py` reduced to `CompressedMechanism`, `MultinomialSamplingMechanism`,
`MVUMechanism` and `TRLoggerCallback` also works). Its design dependencies are numpy, scipy,
cvxpy and tqdm (pip).

Run this script WITH THE REFERENCE'S INTERPRETER (it unpickles the reference's MVUMechanism):

    REF_PY scripts/reference/paper004_mvu_compare.py --ref DIR --privfed target/release/privfed \
        [--bits 3,4] [--epsilons 1,3,5,10] [--timeout 1500] [--no-run] [--csv OUT] [--designs-dir D]

For every (b, eps) it
1. runs the reference exactly as its README does for the scalar experiment
   (`optimize_mvu.py --input_bits b --budget b --epsilon eps --dp_constraint strict --method tr`,
   i.e. scipy trust-constr, `init_method="uniform"`, maxiter 5000) in DIR, one at a time, with
   OMP/OPENBLAS/MKL_NUM_THREADS=1, `nice -n 10` and `timeout`, timing the wall clock (skipped
   with --no-run: the pickles already in DIR/sweep_eps_budget_tr/ are evaluated, time unknown);
2. evaluates the returned (P, alpha) with privfed's definitions (inputs x_i = i/(B-1) on [0, 1],
   the same grid and scale as the reference, so no rescaling): variance = mean_i sum_j
   P_ij (a_j - x_i)^2 (the reference's `mse_and_bias_squared` MSE is the same quantity),
   worst case over continuous x with dithering (privfed's cell formula
   max (1-l)v_i + l v_{i+1} + l(1-l)h^2, exact for unbiased designs), exact eps = the largest
   log ratio within a column, and the violations of (1a)-(1d) as privfed measures them;
3. runs `privfed mvu design --input-bits b --output-bits b --epsilon eps --json` and takes its
   variance and the unbiased-gRR variance it reports (cross-checked against a direct computation
   of gRR here).
A run that times out is recorded with status `timeout`, together with the last objective value
and constraint violation trust-constr printed (its iterate itself is not saved by the reference).
"""
import argparse
import csv
import json
import math
import os
import pickle
import re
import subprocess
import sys
import time

import numpy as np


def grid(n):
    return np.arange(n) / (n - 1)


def grid_variances(P, a):
    x = grid(P.shape[0])
    return (P * (a[None, :] - x[:, None]) ** 2).sum(axis=1)


def variance(P, a):
    return float(grid_variances(P, a).mean())


def worst_case_variance(P, a):
    v = grid_variances(P, a)
    h = 1.0 / (P.shape[0] - 1)
    best = -math.inf
    for v0, v1 in zip(v[:-1], v[1:]):
        lam = min(1.0, max(0.0, 0.5 + (v1 - v0) / (2 * h * h)))
        best = max(best, (1 - lam) * v0 + lam * v1 + lam * (1 - lam) * h * h)
    return float(best)


def exact_epsilon(P):
    worst = 0.0
    for j in range(P.shape[1]):
        col = P[:, j]
        if np.all(col == 0):
            continue
        if np.any(col <= 0):
            return math.inf
        worst = max(worst, math.log(col.max()) - math.log(col.min()))
    return worst


def violations(P, a, eps):
    x = grid(P.shape[0])
    row_sum = float(np.abs(P.sum(axis=1) - 1).max())
    negativity = float(max(0.0, -P.min()))
    unbiased = float(np.abs(P @ a - x).max())
    dp = math.inf if negativity > 0 else max(0.0, exact_epsilon(P) - eps)
    return {"row_sum": row_sum, "negativity": negativity, "dp": dp, "unbiasedness": unbiased}


def grr(b, eps):
    n = 2**b
    e = math.exp(eps)
    P = np.full((n, n), 1.0 / (n - 1 + e))
    np.fill_diagonal(P, e / (n - 1 + e))
    return P, np.linalg.solve(P, grid(n))


def last_trust_constr_row(log):
    """(objective, constraint violation) of the last iteration row trust-constr printed."""
    last = None
    for line in log.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 10 and cells[0].isdigit():
            last = (float(cells[3]), float(cells[6]))
    return last


# Runs optimize_mvu.py unchanged, with an observation hook: every 20 trust-constr iterations the
# current iterate (P flattened, then alpha) is saved to SNAPSHOT.npy, so that a run cut off by the
# timeout can still be evaluated. The hook wraps the reference's logging callback and returns what
# it returns (False: never stops the solver), so the optimization path is the reference's own.
HOOK = """
import os, sys, runpy
import numpy as np
sys.path.insert(0, os.getcwd())
import mechanisms
snap = sys.argv[1]
orig = mechanisms.TRLoggerCallback.__call__
def call(self, x, result):
    r = orig(self, x, result)
    if result.nit % 20 == 0:
        np.save(snap + ".tmp.npy", result.x)
        os.replace(snap + ".tmp.npy", snap + ".npy")
    return r
mechanisms.TRLoggerCallback.__call__ = call
sys.argv = ["optimize_mvu.py"] + sys.argv[2:]
runpy.run_path("optimize_mvu.py", run_name="__main__")
"""


def snapshot_path(ref, b, eps):
    return os.path.join(ref, "snapshots", f"b{b}_eps{eps:g}")


def run_reference(ref, b, eps, timeout):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    os.makedirs(os.path.join(ref, "snapshots"), exist_ok=True)
    cmd = ["timeout", str(timeout), "nice", "-n", "10", sys.executable, "-c", HOOK,
           snapshot_path(ref, b, eps), "--input_bits", str(b), "--budget", str(b),
           "--epsilon", str(eps), "--dp_constraint", "strict", "--method", "tr"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ref, env=env, capture_output=True, text=True)
    return p.returncode, time.monotonic() - t0, p.stdout + p.stderr


def pickle_path(ref, b, eps):
    return os.path.join(ref, "sweep_eps_budget_tr",
                        f"mechanism_bin{b}_bout{b}_strict_eps{eps:0.2f}.pkl")


def privfed_design(privfed, b, eps):
    out = subprocess.run([privfed, "mvu", "design", "--input-bits", str(b), "--output-bits",
                          str(b), "--epsilon", str(eps), "--json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def iterations(log):
    """The last iteration number trust-constr printed (None if none)."""
    last = None
    for line in log.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 10 and cells[0].isdigit():
            last = int(cells[0])
    return last


def privfed_check(privfed, P, a, b, eps):
    """Loads the reference design into privfed (`privfed describe mvu --design`), which validates
    it like its own designs ((1a)-(1d) to 1e-9, exact eps <= budget) and reports its exact eps and
    worst-case variance on [-1, 1] (4x the [0, 1] value). Returns (accepted, eps, worst case on
    [0, 1]) or (False, message, None)."""
    import tempfile
    d = {"input_bits": b, "output_bits": b, "epsilon": eps, "constraint": {"kind": "ldp"},
         "p": P.tolist(), "alphabet": a.tolist()}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(d, f)
    try:
        r = subprocess.run([privfed, "describe", "mvu", "--epsilon", str(eps), "--design", f.name,
                            "--json"], capture_output=True, text=True)
    finally:
        os.remove(f.name)
    if r.returncode != 0:
        msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "rejected"
        msg = re.sub(r"^error: invalid MVU design in \S+: ", "", msg).replace(",", ";")
        return False, msg, None
    out = json.loads(r.stdout)
    return True, out["epsilon"], out["variance"] / 4.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ref", required=True, help="directory with the reference's optimize_mvu.py")
    ap.add_argument("--privfed", required=True, help="the privfed binary")
    ap.add_argument("--bits", default="3,4")
    ap.add_argument("--epsilons", default="1,3,5,10")
    ap.add_argument("--timeout", type=int, default=1500)
    ap.add_argument("--no-run", action="store_true",
                    help="do not run the reference: evaluate the results of earlier runs in REF "
                    "(pickles, snapshots, REF/logs/, REF/timings.csv)")
    ap.add_argument("--csv", help="write the table here (default: stdout)")
    ap.add_argument("--designs-dir", help="also write each reference (P, alpha) as JSON here")
    args = ap.parse_args()
    ref = os.path.abspath(args.ref)
    sys.path.insert(0, ref)  # for unpickling MVUMechanism
    logs = os.path.join(ref, "logs")
    timings = os.path.join(ref, "timings.csv")
    os.makedirs(logs, exist_ok=True)

    fields = ["bits", "epsilon", "ref_status", "ref_iterations", "ref_seconds", "ref_design",
              "ref_variance", "ref_worst_case_variance", "ref_exact_epsilon", "ref_max_violation",
              "ref_unbiasedness_violation", "ref_dp_excess", "ref_accepted_by_privfed",
              "privfed_variance",
              "privfed_worst_case_variance", "privfed_exact_epsilon", "privfed_max_violation",
              "privfed_seconds", "grr_variance", "privfed_over_ref", "privfed_over_grr",
              "ref_over_grr"]
    rows = []
    for b in [int(s) for s in args.bits.split(",")]:
        for eps in [float(s) for s in args.epsilons.split(",")]:
            row = {"bits": b, "epsilon": eps}
            path = pickle_path(ref, b, eps)
            snap = snapshot_path(ref, b, eps) + ".npy"
            logfile = os.path.join(logs, f"b{b}_eps{eps:g}.log")
            if not args.no_run:
                for f in (path, snap):
                    if os.path.exists(f):
                        os.remove(f)  # optimize_mvu.py skips existing results
                rc, secs, log = run_reference(ref, b, eps, args.timeout)
                with open(logfile, "w") as f:
                    f.write(log)
                new = not os.path.exists(timings)
                with open(timings, "a") as f:
                    if new:
                        f.write("bits,epsilon,exit_code,wall_seconds\n")
                    f.write(f"{b},{eps:g},{rc},{secs:.1f}\n")
            rc, secs, log = None, None, ""
            if os.path.exists(timings):
                with open(timings) as f:
                    for r in csv.DictReader(f):  # the last run of (b, eps) counts
                        if int(r["bits"]) == b and float(r["epsilon"]) == eps:
                            rc, secs = int(r["exit_code"]), float(r["wall_seconds"])
            if os.path.exists(logfile):
                with open(logfile) as f:
                    log = f.read()
            m = re.search(r"Number of iterations: (\d+)", log)
            if rc is None:
                status = "not run"
            else:
                status = ("timeout" if rc == 124 else f"exit{rc}" if rc != 0
                          else "maxiter" if m and int(m.group(1)) >= 5000 else "converged")
            row.update(ref_status=status, ref_iterations=iterations(log) or "",
                       ref_seconds="" if secs is None else f"{secs:.1f}")
            gP, ga = grr(b, eps)
            gv = variance(gP, ga)
            d = privfed_design(args.privfed, b, eps)
            assert abs(d["grr_variance"] - gv) <= 1e-9 * gv, (d["grr_variance"], gv)
            row.update(privfed_variance=d["variance"],
                       privfed_worst_case_variance=d["worst_case_variance"],
                       privfed_exact_epsilon=d["epsilon"], privfed_max_violation=d["max_violation"],
                       privfed_seconds=f"{d['seconds']:.2f}", grr_variance=gv,
                       privfed_over_grr=d["variance"] / gv)
            P = None
            if os.path.exists(path) and status != "timeout":
                with open(path, "rb") as f:
                    mech = pickle.load(f)
                P, a = np.asarray(mech.P, float), np.asarray(mech.alpha, float)
                row["ref_design"] = "final"
            elif os.path.exists(snap):
                x = np.load(snap)
                n = 2**b
                P, a = x[: n * n].reshape(n, n), x[n * n:]
                row["ref_design"] = "last snapshot (every 20 iterations)"
            else:
                row["ref_design"] = "none"
                last = last_trust_constr_row(log)
                if last:
                    row["ref_variance"] = f"last logged objective {last[0]:.5g} (violation {last[1]:.1e})"
            if P is not None:
                viol = violations(P, a, eps)
                rv = variance(P, a)
                row.update(ref_variance=rv, ref_worst_case_variance=worst_case_variance(P, a),
                           ref_exact_epsilon=exact_epsilon(P), ref_max_violation=max(viol.values()),
                           ref_unbiasedness_violation=viol["unbiasedness"], ref_dp_excess=viol["dp"],
                           privfed_over_ref=d["variance"] / rv, ref_over_grr=rv / gv)
                ok, e2, w2 = privfed_check(args.privfed, P, a, b, eps)
                row["ref_accepted_by_privfed"] = "yes" if ok else f"no: {e2}"
                if ok:  # privfed's own numbers agree with the ones computed here
                    assert abs(e2 - row["ref_exact_epsilon"]) <= 1e-9, (e2, row["ref_exact_epsilon"])
                    wc = row["ref_worst_case_variance"]
                    assert abs(w2 - wc) <= 1e-9 * wc, (w2, wc)
                if args.designs_dir:
                    os.makedirs(args.designs_dir, exist_ok=True)
                    with open(os.path.join(args.designs_dir, f"ref_b{b}_eps{eps:g}.json"), "w") as f:
                        json.dump({"bits": b, "epsilon": eps, "P": P.tolist(), "alphabet": a.tolist()}, f)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    out = open(args.csv, "w", newline="") if args.csv else sys.stdout
    w = csv.DictWriter(out, fieldnames=fields)
    w.writeheader()
    for r in rows:
        w.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})
    if args.csv:
        out.close()


if __name__ == "__main__":
    main()
