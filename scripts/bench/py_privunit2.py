#!/usr/bin/env python3
"""PrivUnit2 from Python, side by side in one run: privfed vs the Rust CLI vs the public
numpy implementations (google-research rcc_dp, pfl-research before it removed PrivUnit2).

Usage (from the repository root; see scripts/bench/PY_BENCH.md):

    PYTHONPATH=python python3 scripts/bench/py_privunit2.py --peers /work/scratch/peers \\
        [--dims 1000,100000,1000000] [--epsilon 4] [--min-seconds 2] [--repeats 5] \\
        [--cli-bin target/release/privfed | --no-cli] [--cli-seconds 1] \\
        [--sanity-dims 1000] [--sanity-n 20000] [--json-out FILE]

What is timed (per d-dimensional vector, one fixed unit input, float64, ε the same for all):

* ``privfed t=1``   -- ``privfed.PrivUnit2(epsilon, d).privatize(x, threads=1)`` (allocates the
  output array; the object is built once, untimed).
* ``privfed t=def`` -- the same call with ``threads=None`` (privfed's default).
* ``Rust CLI t=1``  -- ``privfed bench --dims ... --epsilon E --threads 1 --json``, run from this
  script (before and after the Python cases): its ``privunit2_ms``, i.e. ``privatize_into_threads``
  into a preallocated buffer, median of batch means over ``--seconds``.
* ``rcc_dp``        -- google-research/federated ``rcc_dp/mean_estimation/privunit.py``:
  ``apply_privunit(x[:, None], epsilon, budget)`` with ``budget = get_optimized_budget(epsilon, d)``
  computed once (untimed; its time is reported). Each call recomputes gamma and m (part of its API).
* ``pfl-research``  -- apple/pfl-research ``pfl.internal.priv_unit_functions.privatize(epsilon, x)``
  at the last commit before PrivUnit2 was removed; the first call (the lru-cached search for the cap
  offset) is untimed and reported. The PrivUnitMechanism wrapper (clipping, metrics) is not timed.

Both peers draw with numpy's legacy global generator (``np.random.seed`` is set once).

Timing: implementations are interleaved round-robin (one timed run of each per round) so that load
changes hit all of them; a run repeats the call until it lasts ``--min-run`` seconds; rounds go on
until every implementation has ``--repeats`` runs and ``--min-seconds`` of measured time (or
``--max-rounds``). Reported: median per-call time over runs (and the mean over all calls: the peers
use rejection sampling, so single calls vary).

Parameters and ε: each implementation's cap threshold gamma, cap probability p and output norm 1/m
are read from it, and the exact ε of (gamma, p) is recomputed here for all of them:
``ε = ln(p/(1-p)) + ln((1-q)/q)``, q = P(<V, u> >= gamma) = I_{1-gamma^2}((d-1)/2, 1/2)/2 for V
uniform on the sphere. privfed's ``epsilon`` is this exact ε; rcc_dp and pfl-research take ε as the
sum of the bound (16a)/(16b) of Bhowmick et al. 2018 on the cap part and ln(p/(1-p)), so their exact
ε is at most the nominal one.

Sanity check (same run): N privatized vectors of the fixed input per implementation: the mean must
be close to the input (z-score of <mean, x> - 1, and N*||mean - x||^2 / (||z||^2 - 1), about 1), and
every output norm equals the implementation's 1/m.

Output: Markdown tables on stdout, progress on stderr, a JSON document in ``--json-out``.
"""

import argparse
import importlib.util
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
from scipy import special

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PEERS = {
    "rcc_dp": {
        "subdir": "federated",
        "file": "rcc_dp/mean_estimation/privunit.py",
        "repository": "github.com/google-research/federated",
        "commit": "a5af8c4433c9ee2d2b1565f1bcc68c89e2000a6b (file last changed in 682023a2)",
        "licence": "Apache-2.0",
    },
    "pfl-research": {
        "subdir": "pfl-research",
        "file": "pfl/internal/priv_unit_functions.py",
        "repository": "github.com/apple/pfl-research",
        "commit": "e84f8f9dc820d42caa42ed424b2cde8fa66af468 (parent of 291a968 'Remove privunit')",
        "licence": "Apache-2.0",
    },
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def load1():
    return os.getloadavg()[0]


def unit_vector(d, seed=12345):
    x = np.random.default_rng(seed).standard_normal(d)
    return x / np.linalg.norm(x)


def cap_probability(d, gamma):
    """P(<V, u> >= gamma) for V uniform on the unit sphere of R^d, 0 <= gamma < 1."""
    return 0.5 * special.betainc((d - 1) / 2.0, 0.5, 1.0 - gamma * gamma)


def exact_epsilon(d, gamma, p):
    q = cap_probability(d, gamma)
    return math.log(p / (1.0 - p)) + math.log((1.0 - q) / q), q


# ---------------------------------------------------------------------------------------------
# Implementations: each gives make(d, eps) -> (call(x) -> z, info dict) or raises.


class Privfed:
    def __init__(self, threads, label):
        import privfed  # PYTHONPATH=python (the editable build's .so lives there)

        self.privfed = privfed
        self.threads = threads
        self.name = label

    def make(self, d, eps):
        t0 = time.perf_counter()
        m = self.privfed.PrivUnit2(epsilon=eps, dim=d)
        setup = time.perf_counter() - t0
        prm = m.parameters
        threads = self.threads

        def call(x):
            return m.privatize(x, threads=threads)

        def batch(x, n):  # rows of one batch (for the sanity check)
            return m.privatize(np.tile(x, (n, 1)), threads=threads)

        return call, batch, {
            "setup_ms": setup * 1e3,
            "nominal_epsilon": m.epsilon,
            "gamma": prm["gamma"],
            "p": prm["p"],
            "q_reported": prm.get("q"),
            "norm": 1.0 / prm["m"],
            "variance_reported": m.variance,
            "parameterization": prm.get("parameterization"),
        }


class RccDp:
    name = "rcc_dp"

    def __init__(self, peers_dir):
        path = os.path.join(peers_dir, PEERS["rcc_dp"]["subdir"], PEERS["rcc_dp"]["file"])
        if not os.path.exists(path):
            raise FileNotFoundError(path)
        spec = importlib.util.spec_from_file_location("rcc_dp_privunit", path)
        self.mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.mod)
        self.path = path

    def make(self, d, eps):
        pu = self.mod
        t0 = time.perf_counter()
        budget = float(pu.get_optimized_budget(eps, d))
        setup = time.perf_counter() - t0
        gamma, _ = pu.find_best_gamma(d, budget * eps)
        e0 = (1 - budget) * eps
        p = math.exp(e0) / (1 + math.exp(e0))
        m = float(pu.getm(d, gamma, p))

        def call(x):
            return pu.apply_privunit(x.reshape(-1, 1), eps, budget)[0][:, 0]

        def batch(x, n):
            return pu.apply_privunit(np.repeat(x.reshape(-1, 1), n, axis=1), eps, budget)[0].T

        return call, batch, {
            "setup_ms": setup * 1e3,
            "setup_what": "get_optimized_budget(epsilon, d)",
            "budget": budget,
            "nominal_epsilon": eps,
            "cap_epsilon_bound_16ab": budget * eps,
            "epsilon0": e0,
            "gamma": float(gamma),
            "p": p,
            "norm": 1.0 / m,
        }


class Pfl:
    name = "pfl-research"

    def __init__(self, peers_dir):
        root = os.path.join(peers_dir, PEERS["pfl-research"]["subdir"])
        path = os.path.join(root, PEERS["pfl-research"]["file"])
        if not os.path.exists(path):
            raise FileNotFoundError(path)
        sys.path.insert(0, root)
        from pfl.internal import priv_unit_functions

        self.f = priv_unit_functions
        self.path = path

    def make(self, d, eps):
        f = self.f
        t0 = time.perf_counter()
        scaling, gamma = f.compute_optimal_cap_offset(eps, d)
        setup = time.perf_counter() - t0
        cap_eps, pole_eps, p = f._compute_pole_probability(eps, gamma, d)

        def call(x):
            return f.privatize(eps, x)

        def batch(x, n):
            return np.stack([f.privatize(eps, x) for _ in range(n)])

        return call, batch, {
            "setup_ms": setup * 1e3,
            "setup_what": "compute_optimal_cap_offset(epsilon, d) (lru-cached; first call)",
            "nominal_epsilon": eps,
            "cap_epsilon_bound_16ab": cap_eps,
            "epsilon0": pole_eps,
            "gamma": float(gamma),
            "p": float(p.value),
            "norm": float(scaling.value),
        }


# ---------------------------------------------------------------------------------------------


def run_cli(args, dims):
    if args.no_cli:
        return None
    tail = ["bench", "--dims", ",".join(map(str, dims)), "--epsilon", repr(args.epsilon),
            "--threads", "1", "--json", "--seconds", repr(args.cli_seconds)]
    if args.cli_bin:
        cmd = [args.cli_bin] + tail
    else:
        cmd = ["cargo", "run", "--release", "-q", "-p", "privfed", "--"] + tail
    log("running: " + " ".join(cmd))
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if r.returncode != 0:
        log(r.stderr[-3000:])
        raise SystemExit(f"CLI failed ({r.returncode}): {' '.join(cmd)}")
    report = json.loads(r.stdout)
    by_dim = {row["dim"]: row for row in report["results"] if row["threads"] == 1}
    return {"command": " ".join(cmd), "wall_s": time.perf_counter() - t0,
            "privunit2_ms": {d: by_dim[d]["privunit2_ms"] for d in dims},
            "normals_floor_ms": {d: by_dim[d]["normals_floor_ms"] for d in dims},
            "report": report}


def time_interleaved(cases, x, args):
    """cases: list of (name, call). Returns {name: stats}."""
    state = {}
    for name, call in cases:
        t0 = time.perf_counter()
        call(x)  # warm-up (not counted)
        first = time.perf_counter() - t0
        inner = 1  # calls per run: doubled until a run lasts --min-run (untimed calibration)
        while True:
            t1 = time.perf_counter()
            for _ in range(inner):
                call(x)
            if time.perf_counter() - t1 >= args.min_run:
                break
            inner *= 2
        state[name] = {"call": call, "inner": inner, "per_call": [], "calls": 0, "total": 0.0,
                       "warmup_ms": first * 1e3}
    rounds = 0
    while rounds < args.max_rounds:
        done = all(len(s["per_call"]) >= args.repeats and s["total"] >= args.min_seconds
                   for s in state.values())
        if done:
            break
        rounds += 1
        for name, s in state.items():
            call, inner = s["call"], s["inner"]
            t0 = time.perf_counter()
            for _ in range(inner):
                call(x)
            dt = time.perf_counter() - t0
            s["per_call"].append(dt / inner)
            s["calls"] += inner
            s["total"] += dt
    out = {}
    for name, s in state.items():
        pc = s["per_call"]
        out[name] = {"median_ms": statistics.median(pc) * 1e3,
                     "mean_ms": s["total"] / s["calls"] * 1e3,
                     "min_ms": min(pc) * 1e3, "max_ms": max(pc) * 1e3,
                     "runs": len(pc), "calls_per_run": s["inner"],
                     "rounds_capped": len(pc) >= args.max_rounds,
                     "measured_s": s["total"], "warmup_ms": s["warmup_ms"]}
    return out


def sanity(batch, info, x, n, chunk=500):
    d = x.size
    total = np.zeros(d)
    proj = []
    nmin, nmax = math.inf, 0.0
    done = 0
    t0 = time.perf_counter()
    while done < n:
        k = min(chunk, n - done)
        z = np.asarray(batch(x, k), dtype=np.float64).reshape(k, d)
        total += z.sum(axis=0)
        proj.append(z @ x)
        norms = np.linalg.norm(z, axis=1)
        nmin, nmax = min(nmin, norms.min()), max(nmax, norms.max())
        done += k
    mean = total / n
    proj = np.concatenate(proj)
    se = proj.std(ddof=1) / math.sqrt(n)
    var = info["norm"] ** 2 - 1.0  # E||z - x||^2 when ||z|| = 1/m and E z = x, ||x|| = 1
    err2 = float(np.sum((mean - x) ** 2))
    return {"n": n, "d": d, "seconds": time.perf_counter() - t0,
            "mean_dot_x": float(mean @ x), "z_score": (float(mean @ x) - 1.0) / se,
            "n_err2_over_var": n * err2 / var, "expected_n_err2_over_var": 1.0,
            "sd_of_that_ratio_approx": math.sqrt(2.0 / d),
            "norm_min": float(nmin), "norm_max": float(nmax), "norm_expected": info["norm"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peers", default="/work/scratch/peers",
                    help="scratch folder with federated/rcc_dp/... and pfl-research/pfl/...")
    ap.add_argument("--dims", default="1000,100000,1000000")
    ap.add_argument("--epsilon", type=float, default=4.0)
    ap.add_argument("--min-seconds", type=float, default=2.0,
                    help="minimum measured time per implementation and d")
    ap.add_argument("--repeats", type=int, default=7, help="minimum timed runs per case")
    ap.add_argument("--max-rounds", type=int, default=200)
    ap.add_argument("--min-run", type=float, default=0.02, help="minimum length of one run (s)")
    ap.add_argument("--cli-bin", default=None,
                    help="privfed binary (default: cargo run --release -p privfed --)")
    ap.add_argument("--cli-seconds", type=float, default=1.0, help="privfed bench --seconds")
    ap.add_argument("--no-cli", action="store_true")
    ap.add_argument("--sanity-dims", default="1000", help="'' to skip the sanity check")
    ap.add_argument("--sanity-n", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1, help="np.random.seed for the peers")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()
    dims = [int(v) for v in args.dims.split(",") if v]
    sanity_dims = [int(v) for v in args.sanity_dims.split(",") if v]
    eps = args.epsilon

    load_start = load1()
    log(f"load average (1 min) at start: {load_start:.2f}")
    import privfed

    impls = [Privfed(1, "privfed t=1"), Privfed(None, "privfed t=def")]
    peers_status = {}
    for cls, key in ((RccDp, "rcc_dp"), (Pfl, "pfl-research")):
        where = os.path.join(args.peers, PEERS[key]["subdir"])
        try:
            impls.append(cls(args.peers))
            peers_status[key] = {"found": True, "path": where, **PEERS[key]}
        except FileNotFoundError:
            msg = f"skipped: peer not found at {os.path.join(where, PEERS[key]['file'])}"
            log(f"{key}: {msg}")
            peers_status[key] = {"found": False, "note": msg, **PEERS[key]}

    cli_before = run_cli(args, dims)
    np.random.seed(args.seed)
    timing, params = {}, {}
    for d in dims:
        x = unit_vector(d)
        cases = []
        for im in impls:
            call, _batch, info = im.make(d, eps)
            info["exact_epsilon"], info["q"] = exact_epsilon(d, info["gamma"], info["p"])
            info["variance"] = info["norm"] ** 2 - 1.0
            params[(im.name, d)] = info
            cases.append((im.name, call))
        log(f"timing d={d}: " + ", ".join(n for n, _ in cases))
        timing[d] = time_interleaved(cases, x, args)
    cli_after = run_cli(args, dims)
    load_after_timing = load1()

    checks = {}
    for d in sanity_dims:
        x = unit_vector(d, seed=777)
        for im in impls:
            if im.name == "privfed t=def":
                continue  # same outputs as t=1 (privfed's outputs do not depend on threads)
            _call, batch, info = im.make(d, eps)
            log(f"sanity {im.name} d={d} n={args.sanity_n}")
            checks[(im.name, d)] = sanity(batch, info, x, args.sanity_n)
    load_end = load1()

    # ---- report
    cli_ms = {}
    for d in dims:
        vals = [c["privunit2_ms"][d] for c in (cli_before, cli_after) if c]
        cli_ms[d] = statistics.mean(vals) if vals else None
    names = [im.name for im in impls]
    lines = []
    lines.append(f"PrivUnit2, epsilon = {eps:g}, one fixed unit input, float64; "
                 f"load average (1 min): {load_start:.2f} at start, {load_after_timing:.2f} "
                 f"after timing, {load_end:.2f} at end; {os.cpu_count()} CPUs.")
    lines.append("")
    lines.append("| d | implementation | ms / vector (median) | mean | runs x calls | "
                 "/ Rust CLI t=1 | / privfed t=1 |")
    lines.append("|---:|---|---:|---:|---:|---:|---:|")
    for d in dims:
        if cli_ms[d] is not None:
            both = " / ".join(f"{c['privunit2_ms'][d]:.4g}" for c in (cli_before, cli_after) if c)
            lines.append(f"| {d} | Rust CLI t=1 (before / after) | {cli_ms[d]:.4g} ({both}) | "
                         f"| | 1 | {cli_ms[d] / timing[d]['privfed t=1']['median_ms']:.3g} |")
        for n in names:
            t = timing[d][n]
            ratio_cli = f"{t['median_ms'] / cli_ms[d]:.3g}" if cli_ms[d] else "n/a"
            ratio_pf = t["median_ms"] / timing[d]["privfed t=1"]["median_ms"]
            lines.append(f"| {d} | {n} | {t['median_ms']:.4g} | {t['mean_ms']:.4g} | "
                         f"{t['runs']} x {t['calls_per_run']} | {ratio_cli} | {ratio_pf:.3g} |")
    for key, st in peers_status.items():
        if not st["found"]:
            lines.append(f"| all | {key} | {st['note']} | | | | |")
    lines.append("")
    lines.append("| d | implementation | nominal ε | gamma | p | exact ε of (gamma, p) | "
                 "norm 1/m | variance 1/m²−1 | setup ms |")
    lines.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for d in dims:
        for n in names:
            if n == "privfed t=def":
                continue
            i = params[(n, d)]
            lines.append(f"| {d} | {n.replace(' t=1', '')} | {i['nominal_epsilon']:g} | "
                         f"{i['gamma']:.6g} | {i['p']:.6g} | {i['exact_epsilon']:.6g} | "
                         f"{i['norm']:.6g} | {i['variance']:.6g} | {i['setup_ms']:.3g} |")
    if checks:
        lines.append("")
        lines.append("| d | implementation | N | <mean, x> | z-score | N·‖mean−x‖²/(1/m²−1) "
                     "(≈1 ± sd) | output norms min / max vs 1/m |")
        lines.append("|---:|---|---:|---:|---:|---:|---|")
        for (n, d), c in checks.items():
            lines.append(f"| {d} | {n.replace(' t=1', '')} | {c['n']} | {c['mean_dot_x']:.5f} | "
                         f"{c['z_score']:+.2f} | {c['n_err2_over_var']:.3f} "
                         f"(± {c['sd_of_that_ratio_approx']:.3f}) | {c['norm_min']:.6g} / "
                         f"{c['norm_max']:.6g} vs {c['norm_expected']:.6g} |")
    print("\n".join(lines))

    if args.json_out:
        doc = {
            "script": "scripts/bench/py_privunit2.py",
            "argv": sys.argv,
            "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
            "versions": {"python": platform.python_version(), "numpy": np.__version__,
                         "scipy": __import__("scipy").__version__,
                         "privfed": privfed.__version__},
            "epsilon": eps,
            "load_average_1min": {"start": load_start, "after_timing": load_after_timing,
                                  "end": load_end},
            "peers": peers_status,
            "cli": {"before": cli_before, "after": cli_after},
            "timing": {str(d): timing[d] for d in dims},
            "parameters": [{"impl": n, "d": d, **i} for (n, d), i in params.items()],
            "sanity": [{"impl": n, **c} for (n, d), c in checks.items()],
        }
        with open(args.json_out, "w") as f:
            json.dump(doc, f, indent=2, default=str)
        log(f"JSON written to {args.json_out}")


if __name__ == "__main__":
    main()
