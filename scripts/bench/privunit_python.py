#!/usr/bin/env python3
"""Time the public Python PrivUnit2 implementations next to privfed's.

Usage:  python3 scripts/bench/privunit_python.py

Prints one JSON document on stdout; progress and notes go to stderr.

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
* Google's ``rcc_dp`` PrivUnit -- not on PyPI (it lives in the
  google-research GitHub repository), so it is reported as unavailable; the
  issue's own measurement is quoted in the output for reference.

Each case reports the median over at least 5 timed runs (up to 15 for cheap
cases; 3 if one run takes more than 2 s). Fast calls are repeated inside a run so that a run lasts at
least ~20 ms; the reported figure is always per call. For pfl the first call at
each d is timed separately (``first_call_ms``): it includes pfl's one-off,
lru-cached search for the optimal cap offset gamma; ``warmup_call_ms`` is the
untimed-for-the-median calibration call made before the timed runs.
"""

import importlib.metadata
import json
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
    versions = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pfl": pkg_version("pfl"),
        "scipy": pkg_version("scipy"),
    }
    results = []

    for d in DIMS:
        log(f"numpy standard_normal d={d} ...")
        r = bench_numpy(d)
        results.append({"impl": "numpy.standard_normal", "d": d,
                        "epsilon": None, **r})

    mech_cls, stats_cls, pfl_status = load_pfl()
    for d in DIMS:
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

    for d in DIMS:
        results.append({"impl": "rcc_dp.privunit", "d": d,
                        "epsilon": EPSILON, "available": False,
                        "median_ms": None})

    report = {
        "script": "scripts/bench/privunit_python.py",
        "machine": {"platform": platform.platform(),
                    "cpu_count": os.cpu_count()},
        "versions": versions,
        "timing": {"statistic": "median per call over runs",
                   "min_runs": MIN_RUNS,
                   "runs_if_one_run_exceeds_2s": SLOW_RUNS},
        "pfl": pfl_status,
        "rcc_dp": {"available": False,
                   "reason": "not available on PyPI (google-research GitHub "
                             "repository only); not fetched"},
        "issue_quote": ISSUE_QUOTE,
        "results": results,
    }

    log("")
    log(f"{'impl':<24}{'d':>10}{'median ms':>12}{'runs':>6}{'calls/run':>11}")
    for r in results:
        med = "n/a" if r.get("median_ms") is None else f"{r['median_ms']:.3f}"
        log(f"{r['impl']:<24}{r['d']:>10}{med:>12}"
            f"{r.get('runs', '-'):>6}{r.get('calls_per_run', '-'):>11}")

    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
