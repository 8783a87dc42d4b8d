#!/usr/bin/env python3
"""Time the public Python PrivUnit2 implementations next to privfed's, in one run.

Usage:
  python3 scripts/bench/privunit_python.py \
      [--rcc-dp-dir DIR] [--privfed target/release/privfed] [--dims 1000,100000,1000000] \
      [--seconds 2]

Prints one JSON document on stdout; progress, notes and the side-by-side table go to stderr.

* ``--rcc-dp-dir DIR``: a directory holding Google's ``rcc_dp`` package
  (``DIR/rcc_dp/privunit.py`` from the google-research repository, Apache-2.0; it is not on
  PyPI and is not part of privfed: fetch it yourself). Without it the rcc_dp rows say
  "unavailable".
* ``--privfed BIN``: after the Python cases, runs ``BIN bench --dims ... --json`` in the same
  process tree and reports privfed's rows next to the Python ones (ratios included).
* The 1-minute load average is recorded before and after (``os.getloadavg``).

Cases, each at d in {1000, 100000, 1000000} and epsilon = 4:

* ``numpy.standard_normal`` -- ``numpy.random.default_rng(1).standard_normal(d)``,
  the floor for any sampler that draws a d-dimensional Gaussian.
* ``pfl.PrivUnitMechanism`` -- Apple pfl-research's PrivUnit2
  (``pfl.privacy.priv_unit_mechanism.PrivUnitMechanism``), called through its
  public ``privatize`` method on one unit vector held in a
  ``pfl.stats.MappedVectorStatistics``, with ``clipping_bound=1.0`` (so the
  unit input is neither clipped nor flipped) and ``epsilon=4.0``.
  NOTE: no PyPI release of ``pfl`` (0.1.0 .. 0.6.0) ships this module; it is
  only in the apple/pfl-research GitHub source tree. With the PyPI package the
  case is reported as unavailable.
* Google's ``rcc_dp`` PrivUnit -- ``rcc_dp.privunit.apply_privunit(u[:, None], 4.0,
  budget)`` with ``budget = get_optimized_budget(4.0, d)`` computed once beforehand (not
  timed), ``np.random.seed(1)``. Its cap branch redraws a whole Gaussian vector until it lands
  in the cap, so single calls vary widely: min, median and max are reported.

Each case reports the median over at least 5 timed runs (up to 15 for cheap
cases; 3 if one run takes more than 2 s). Fast calls are repeated inside a run so that a run lasts at
least ~20 ms; the reported figure is always per call. For pfl the first call at
each d is timed separately (``first_call_ms``): it includes pfl's one-off,
lru-cached search for the optimal cap offset gamma; ``warmup_call_ms`` is the
untimed-for-the-median calibration call made before the timed runs.
"""

import argparse
import importlib.metadata
import json
import subprocess
import os
import platform
import statistics
import sys
import time

import numpy as np

DIMS = (1000, 100000, 1000000)
EPSILON = 4.0
MIN_RUNS = 5
SLOW_RUNS = 3            # used only when a single run takes > SLOW_RUN_S
SLOW_RUN_S = 2.0
MIN_RUN_S = 0.02         # repeat fast calls so each timed run is >= 20 ms
MAX_RUNS = 15
TARGET_TOTAL_S = 0.5     # cheap cases get more runs, up to MAX_RUNS

ISSUE_QUOTE = {
    "source": "issue text (not measured by this script)",
    "rcc_dp_privunit_ms_at_d_1e6": 160,
    "pfl_research_privunit2_ms_at_d_1e6": 314,
    "numpy_1e6_normal_draws_ms": 22,
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def pkg_version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def time_case(fn):
    """Median per-call seconds of fn() over >= MIN_RUNS runs."""
    # Calibration / warm-up call (not counted).
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    inner = 1
    if first < MIN_RUN_S:
        inner = max(1, int(MIN_RUN_S / max(first, 1e-9)))
    if first > SLOW_RUN_S:
        n_runs = SLOW_RUNS
    else:  # >= 5 runs; more (up to 15) when a run is cheap, for stability
        n_runs = max(MIN_RUNS, min(MAX_RUNS, int(TARGET_TOTAL_S / (first * inner))))
    per_call = []
    for _ in range(n_runs):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        per_call.append((time.perf_counter() - t0) / inner)
    return {
        "median_ms": statistics.median(per_call) * 1e3,
        "min_ms": min(per_call) * 1e3,
        "max_ms": max(per_call) * 1e3,
        "runs": n_runs,
        "calls_per_run": inner,
        "warmup_call_ms": first * 1e3,
    }


def unit_vector(d, seed=0):
    x = np.random.default_rng(seed).standard_normal(d)
    return x / np.linalg.norm(x)


def load_rcc_dp(directory):
    """Return (privunit module, status dict)."""
    if not directory:
        return None, {"available": False,
                      "reason": "not on PyPI (google-research GitHub repository only); "
                                "pass --rcc-dp-dir DIR with DIR/rcc_dp/privunit.py"}
    sys.path.insert(0, os.path.abspath(directory))
    try:
        from rcc_dp import privunit
    except ImportError as e:
        return None, {"available": False, "reason": f"import from {directory} failed: {e}"}
    return privunit, {"available": True, "dir": os.path.abspath(directory),
                      "api": "rcc_dp.privunit.apply_privunit(u[:, None], 4.0, budget), "
                             "budget = get_optimized_budget(4.0, d) (untimed)"}


def bench_rcc_dp(privunit, d):
    u = unit_vector(d).reshape(d, 1)
    t0 = time.perf_counter()
    budget = privunit.get_optimized_budget(EPSILON, d)
    setup = time.perf_counter() - t0
    np.random.seed(1)
    per_call = []
    runs = max(15, MIN_RUNS)
    one = lambda: privunit.apply_privunit(u, EPSILON, budget)
    one()  # warm-up
    for _ in range(runs):
        t0 = time.perf_counter()
        one()
        per_call.append(time.perf_counter() - t0)
    return {
        "median_ms": statistics.median(per_call) * 1e3,
        "min_ms": min(per_call) * 1e3,
        "max_ms": max(per_call) * 1e3,
        "runs": runs,
        "calls_per_run": 1,
        "budget": float(budget),
        "budget_setup_ms": setup * 1e3,
    }


def run_privfed(binary, dims, seconds):
    cmd = [binary, "bench", "--dims", ",".join(str(d) for d in dims),
           "--seconds", str(seconds), "--json"]
    log("running " + " ".join(cmd))
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {"command": " ".join(cmd), "report": json.loads(out)}


def bench_numpy(d):
    rng = np.random.default_rng(1)
    return time_case(lambda: rng.standard_normal(d))


def load_pfl():
    """Return (PrivUnitMechanism, MappedVectorStatistics, status dict)."""
    version = pkg_version("pfl")
    if version is None:
        log("pfl not installed: pip install pfl")
        return None, None, {
            "available": False,
            "version": None,
            "reason": "pfl not installed: pip install pfl "
                      "(note: no PyPI release up to 0.6.0 contains "
                      "PrivUnitMechanism)",
        }
    try:
        from pfl.privacy.priv_unit_mechanism import PrivUnitMechanism
        from pfl.stats import MappedVectorStatistics
    except ImportError as e:  # PyPI wheels lack the module
        reason = (f"pfl {version} is installed but has no PrivUnit2 mechanism "
                  f"({type(e).__name__}: {e}); pfl.privacy.priv_unit_mechanism"
                  " is not in any PyPI release (0.1.0 .. 0.6.0), only in the "
                  "apple/pfl-research GitHub source tree")
        log(reason)
        return None, None, {"available": False, "version": version,
                            "reason": reason}
    return PrivUnitMechanism, MappedVectorStatistics, {
        "available": True,
        "version": version,
        "api": "pfl.privacy.priv_unit_mechanism.PrivUnitMechanism("
               "clipping_bound=1.0, epsilon=4.0).privatize("
               "MappedVectorStatistics({'u': unit_vector}), seed=i)",
    }


def bench_pfl(mechanism_cls, stats_cls, d):
    mech = mechanism_cls(clipping_bound=1.0, epsilon=EPSILON)
    u = unit_vector(d)
    counter = iter(range(1, 1 << 62))

    def one():
        stats = stats_cls({"u": u})
        noised, _metrics = mech.privatize(stats, seed=next(counter))
        return noised

    # Sanity check on one output: PrivUnit2 returns V/m with |V| = 1, i.e. a
    # constant norm 1/m > 1 that does not depend on the draw.
    t0 = time.perf_counter()
    out = np.asarray(one()["u"]).ravel()
    first = time.perf_counter() - t0
    norm = float(np.linalg.norm(out))
    res = time_case(one)
    res["first_call_ms"] = first * 1e3  # includes the cached gamma search
    res["output_norm"] = norm
    res["output_size"] = int(out.size)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rcc-dp-dir", default=os.environ.get("RCC_DP_DIR"))
    ap.add_argument("--privfed", default=None, help="path of the privfed binary")
    ap.add_argument("--dims", default=",".join(str(d) for d in DIMS))
    ap.add_argument("--seconds", type=float, default=2.0,
                    help="privfed bench --seconds")
    args = ap.parse_args()
    dims = tuple(int(x) for x in args.dims.split(","))
    load_before = os.getloadavg()
    versions = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pfl": pkg_version("pfl"),
        "scipy": pkg_version("scipy"),
    }
    results = []

    for d in dims:
        log(f"numpy standard_normal d={d} ...")
        r = bench_numpy(d)
        results.append({"impl": "numpy.standard_normal", "d": d,
                        "epsilon": None, **r})

    mech_cls, stats_cls, pfl_status = load_pfl()
    for d in dims:
        row = {"impl": "pfl.PrivUnitMechanism", "d": d, "epsilon": EPSILON}
        if mech_cls is None:
            row.update({"available": False, "median_ms": None})
        else:
            log(f"pfl PrivUnit2 d={d} ...")
            try:
                row.update({"available": True, **bench_pfl(mech_cls,
                                                           stats_cls, d)})
            except Exception as e:  # keep the numpy timings on failure
                row.update({"available": False, "median_ms": None,
                            "error": f"{type(e).__name__}: {e}"})
                log(f"pfl failed at d={d}: {row['error']}")
        results.append(row)

    rcc, rcc_status = load_rcc_dp(args.rcc_dp_dir)
    for d in dims:
        row = {"impl": "rcc_dp.privunit", "d": d, "epsilon": EPSILON}
        if rcc is None:
            row.update({"available": False, "median_ms": None})
        else:
            log(f"rcc_dp PrivUnit d={d} ...")
            row.update({"available": True, **bench_rcc_dp(rcc, d)})
        results.append(row)

    privfed = run_privfed(args.privfed, dims, args.seconds) if args.privfed else None
    load_after = os.getloadavg()

    report = {
        "script": "scripts/bench/privunit_python.py",
        "machine": {"platform": platform.platform(),
                    "cpu_count": os.cpu_count()},
        "versions": versions,
        "timing": {"statistic": "median per call over runs",
                   "min_runs": MIN_RUNS,
                   "runs_if_one_run_exceeds_2s": SLOW_RUNS},
        "pfl": pfl_status,
        "rcc_dp": rcc_status,
        "issue_quote": ISSUE_QUOTE,
        "load_average_1min": {"before": load_before[0], "after": load_after[0]},
        "results": results,
        "privfed": privfed,
    }

    log("")
    log(f"{'impl':<24}{'d':>10}{'median ms':>12}{'runs':>6}{'calls/run':>11}")
    for r in results:
        med = "n/a" if r.get("median_ms") is None else f"{r['median_ms']:.3f}"
        log(f"{r['impl']:<24}{r['d']:>10}{med:>12}"
            f"{r.get('runs', '-'):>6}{r.get('calls_per_run', '-'):>11}")

    if privfed is not None:
        side_by_side(results, privfed["report"])
    log(f"load average (1 min): {load_before[0]:.2f} before, {load_after[0]:.2f} after")

    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")


def side_by_side(results, pf):
    """Log privfed next to rcc_dp and numpy, per d."""
    log("")
    log("side by side (ms per d-dimensional vector; ratios = Python / privfed):")
    by = {(r["impl"], r["d"]): r for r in results}
    for row in pf["results"]:
        d, t = row["dim"], row["threads"]
        rcc = by.get(("rcc_dp.privunit", d), {})
        npy = by.get(("numpy.standard_normal", d), {})
        line = (f"d={d:>8} threads={t}: privfed PrivUnit2 {row['privunit2_ms']:.3f}"
                f" (floor {row['normals_floor_ms']:.3f}, x{row['privunit2_over_floor']:.2f}),"
                f" PrivUnitG {row['privunitg_ms']:.3f}, Gaussian {row['gaussian_ms']:.3f}")
        if rcc.get("median_ms"):
            line += (f"; rcc_dp median {rcc['median_ms']:.3f} (min {rcc['min_ms']:.3f})"
                     f" -> {rcc['median_ms'] / row['privunit2_ms']:.1f}x")
        if npy.get("median_ms"):
            line += (f"; numpy normals {npy['median_ms']:.3f}"
                     f" -> {npy['median_ms'] / row['normals_floor_ms']:.1f}x")
        log(line)


if __name__ == "__main__":
    main()
