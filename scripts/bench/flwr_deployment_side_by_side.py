#!/usr/bin/env python3
"""privfed's distributed DP + secure aggregation against Flower's own SecAgg+ on Flower's
Deployment Engine, side by side in one run: one ``flower-superlink`` and N ``flower-supernode``
processes on 127.0.0.1 (``--isolation subprocess``), the example app (examples/flwr) submitted
with ``flwr run``, and every round timed by the ServerApp (seconds between two evaluations).

Modes, alternated run by run (ABCABC…) so that a drift in the machine's load falls on all:

* ``distributed``: privfed's ``DistributedDpStrategy`` + ``distributed_dp_mod`` (paper 001's
  Skellam pipeline under privfed's secure aggregation; DP included);
* ``flower-secaggplus``: Flower's ``SecAggPlusWorkflow`` + ``secaggplus_mod`` on the complete
  graph (no DP), as Flower ships it (``privfed_flwr_example.flower_secaggplus``);
* ``none``: FedAvg with no privacy at all, the floor.

Also measured: what a fresh ClientApp process pays to import privfed (``import privfed``,
``import privfed.flwr``) and Flower (``import flwr.clientapp``), each in a new interpreter.

    python3 scripts/bench/flwr_deployment_side_by_side.py [--nodes 4] [--rounds 4] [--reps 2] \\
        [--json-out experiments/flwr_deployment_side_by_side.json]

The Python running this must have privfed and flwr installed, with flower-superlink,
flower-supernode and flwr beside it (a venv with ``pip install ".[flwr]"``). MNIST from
$PRIVFED_DATA_DIR, else ../shared/data. Every process is stopped by its pid (its process group)
and lives at most ``--lifetime`` seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python" / "tests"))
from flwr_deployment import Deployment, flower_bin_dir  # noqa: E402

APP = ROOT / "examples" / "flwr"
MODES = ("distributed", "flower-secaggplus", "none")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def secaggplus_app(work: Path) -> Path:
    """A copy of the example whose components are Flower's SecAgg+ ServerApp and ClientApp."""
    dst = work / "app-flower-secaggplus"
    shutil.copytree(APP, dst, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", ".*"))
    py = dst / "pyproject.toml"
    text = py.read_text()
    for old, new in (('privfed_flwr_example.server_app:app',
                      'privfed_flwr_example.flower_secaggplus:server_app'),
                     ('privfed_flwr_example.client_app:app',
                      'privfed_flwr_example.flower_secaggplus:client_app')):
        if old not in text:
            raise SystemExit(f"{py}: {old!r} not found: the example's components moved")
        text = text.replace(old, new)
    py.write_text(text)
    return dst


def import_seconds(python: str, module: str, repeats: int) -> float:
    """Median wall time of ``python -c 'import module'`` minus that of ``python -c pass``."""
    def one(code: str) -> float:
        t0 = time.perf_counter()
        subprocess.run([python, "-c", code], check=True)
        return time.perf_counter() - t0

    base = statistics.median(one("pass") for _ in range(repeats))
    return statistics.median(one(f"import {module}") for _ in range(repeats)) - base


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=4, help="SuperNodes (= clients = cohort)")
    ap.add_argument("--rounds", type=int, default=4, help="rounds per run (the first is warm-up)")
    ap.add_argument("--reps", type=int, default=2, help="runs per mode, alternated")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--epsilon", type=float, default=10.0, help="distributed: target ε")
    ap.add_argument("--dropout-tolerance", type=float, default=0.25,
                    help="distributed: the fraction of the cohort that may drop (4 nodes: one)")
    ap.add_argument("--run-seconds", type=float, default=900.0, help="one run's time limit")
    ap.add_argument("--lifetime", type=float, default=3600.0, help="any process's time limit")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            ap.error(f"unknown mode {m!r}; expected some of {', '.join(MODES)}")
    if args.nodes < 2 or args.rounds < 2 or args.reps < 1:
        ap.error("--nodes >= 2, --rounds >= 2 and --reps >= 1")
    bin_dir = flower_bin_dir(sys.executable)
    if bin_dir is None:
        log(f"error: flower-superlink, flower-supernode and flwr are not beside {sys.executable}: "
            "pip install \".[flwr]\" into this environment")
        return 2
    data = Path(os.environ.get("PRIVFED_DATA_DIR", ROOT.parent / "shared" / "data"))
    if not (data / "mnist").exists() and not any(data.glob("*mnist*")):
        log(f"error: no MNIST under {data} (set PRIVFED_DATA_DIR)")
        return 2

    import flwr
    import privfed

    out = {"script": "scripts/bench/flwr_deployment_side_by_side.py", "argv": sys.argv,
           "versions": {"python": sys.version.split()[0], "flwr": flwr.__version__,
                        "privfed": privfed.__version__},
           "cpus": os.cpu_count(), "load_start": load(), "runs": [], "imports": {}}
    log(f"flwr {flwr.__version__}, privfed {privfed.__version__}; {args.nodes} SuperNodes, "
        f"{args.rounds} rounds, {args.reps} runs per mode; load {out['load_start']}")
    for module in ("privfed", "privfed.flwr", "flwr.clientapp"):
        out["imports"][module] = round(import_seconds(sys.executable, module, 5), 4)
        log(f"import {module}: {out['imports'][module]:.3f} s in a fresh interpreter")

    work = Path(tempfile.mkdtemp(prefix="privfed-flwr-bench-"))
    apps = {m: (secaggplus_app(work) if m == "flower-secaggplus" else APP) for m in modes}
    nodes = [{"partition-id": i, "num-partitions": args.nodes} for i in range(args.nodes)]
    try:
        with Deployment(bin_dir, work / "deployment", nodes, lifetime=args.lifetime) as d:
            for rep in range(args.reps):
                order = modes if rep % 2 == 0 else list(reversed(modes))
                for mode in order:
                    result = work / f"result-{mode}-{rep}.json"
                    cfg = {"num-clients": args.nodes, "cohort": args.nodes,
                           "num-rounds": args.rounds, "data-dir": str(data),
                           "result-file": str(result), "local-epochs": 1, "seed": 1 + rep,
                           "timeout": 120.0, "epsilon": args.epsilon,
                           "dropout-tolerance": args.dropout_tolerance,
                           "privacy": "none" if mode == "flower-secaggplus" else mode}
                    l0 = load()
                    t0 = time.monotonic()
                    run_id = d.submit(apps[mode], cfg)
                    res = d.wait(run_id, args.run_seconds, t0)
                    doc = json.loads(result.read_text()) if result.exists() else None
                    if res.status != "finished:completed" or not doc or \
                            doc.get("status") != "completed":
                        log(f"run {run_id} ({mode}) failed: {res.status} {res.details}\n"
                            f"{res.log[-3000:]}\n{d.logs()}")
                        return 1
                    rounds = [r for r in doc["rounds"] if r["round"] >= 1]
                    secs = [float(r["seconds"]) for r in rounds]
                    row = {"mode": mode, "rep": rep, "run_id": run_id,
                           "round_seconds": secs,
                           "median_round_seconds": statistics.median(secs[1:]),
                           "run_seconds": round(res.seconds, 2),
                           "final_accuracy": rounds[-1]["accuracy"],
                           "final_epsilon": rounds[-1].get("epsilon"),
                           "stage_seconds": [r.get("stage_seconds") for r in rounds],
                           "load_before": l0, "load_after": load()}
                    out["runs"].append(row)
                    log(f"{mode:18s} rep {rep}: rounds {secs} s (median of rounds 2.. "
                        f"{row['median_round_seconds']:.2f} s), accuracy "
                        f"{row['final_accuracy']:.4f}, ε {row['final_epsilon']}, "
                        f"load {l0:.2f}→{row['load_after']:.2f}")
    finally:
        out["load_end"] = load()
        shutil.rmtree(work, ignore_errors=True)

    print(f"\nflwr {flwr.__version__}, {args.nodes} SuperNodes on 127.0.0.1, {args.rounds} "
          f"rounds × {args.reps} runs per mode (first round of each run is warm-up); load "
          f"{out['load_start']} at the start, {out['load_end']} at the end\n")
    print("| mode | median s/round (rounds 2..) | runs' medians | final accuracy | ε |")
    print("|---|---:|---|---:|---:|")
    for mode in modes:
        rows = [r for r in out["runs"] if r["mode"] == mode]
        all_secs = [s for r in rows for s in r["round_seconds"][1:]]
        out.setdefault("summary", {})[mode] = statistics.median(all_secs)
        print(f"| {mode} | {statistics.median(all_secs):.2f} | "
              f"{', '.join('%.2f' % r['median_round_seconds'] for r in rows)} | "
              f"{rows[-1]['final_accuracy']:.4f} | {rows[-1]['final_epsilon']} |")
    stages = [r["stage_seconds"][i] for r in out["runs"] if r["mode"] == "distributed"
              for i in range(1, len(r["stage_seconds"])) if r["stage_seconds"][i]]
    if stages:
        keys = sorted({k for s in stages for k in s})
        out["distributed_stage_median_seconds"] = {
            k: statistics.median(s.get(k, 0.0) for s in stages) for k in keys}
        print("\ndistributed, median seconds per stage: " + ", ".join(
            f"{k} {v:.3f}" for k, v in out["distributed_stage_median_seconds"].items()))
    print("\nimport in a fresh interpreter: " + ", ".join(
        f"{k} {v:.3f} s" for k, v in out["imports"].items()))
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
