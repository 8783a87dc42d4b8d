#!/usr/bin/env bash
# The Flower example (examples/flwr) with privfed's distributed DP + secure aggregation against
# Flower's own SecAgg+ workflow on the same cohort: same MNIST shards, same numpy model and
# local SGD, same FedAvg sampling, same Ray resources (2 CPUs, 1 per ClientApp); plus the same
# run with no secure aggregation at all as the floor. One JSON line per run (median seconds per
# round over rounds 2..R, round 1 being Ray's and the workers' warm-up) appended to $OUT, with
# the load average before and after.
#
#   scripts/bench/flwr_secagg_side_by_side.sh                  # cohorts 20 and 50 of 100 clients
#   COHORTS="20" ROUNDS=4 scripts/bench/flwr_secagg_side_by_side.sh /tmp/x.jsonl
#
# Needs a Python with privfed (maturin develop) and flwr[simulation]==1.41.0 (PYTHON=...).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
OUT=${1:-experiments/flwr_secagg_side_by_side.jsonl}
ROUNDS=${ROUNDS:-6}
CLIENTS=${CLIENTS:-100}
COHORTS=${COHORTS:-"20 50"}
MODES=${MODES:-"none distributed flower-secaggplus"}
DATA=${PRIVFED_DATA_DIR:-$(cd .. && pwd)/shared/data}
mkdir -p "$(dirname "$OUT")"
for COHORT in $COHORTS; do
  for MODE in $MODES; do
    tmp=$(mktemp)
    load_before=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "== $MODE, $CLIENTS clients, cohort $COHORT, $ROUNDS rounds (load $load_before)" >&2
    "$PY" examples/flwr/run_simulation.py --rounds "$ROUNDS" --clients "$CLIENTS" \
      --cohort "$COHORT" --privacy "$MODE" --data-dir "$DATA" --ray-cpus 2 --client-cpus 1 \
      --json "$tmp" >&2
    load_after=$(cut -d' ' -f1-3 /proc/loadavg)
    "$PY" - "$tmp" "$MODE" "$COHORT" "$load_before" "$load_after" >> "$OUT" <<'PYEOF'
import json, statistics, sys
import flwr
path, mode, cohort, lb, la = sys.argv[1:]
r = json.load(open(path))
rounds = r["rounds"][1:]
secs = [x["seconds"] for x in rounds]
rec = {
    "mode": mode, "clients": r["settings"]["num_clients"], "cohort": int(cohort),
    "rounds": len(rounds), "median_round_seconds": round(statistics.median(secs[1:] or secs), 3),
    "round_seconds": secs, "total_seconds": round(r["seconds"], 2),
    "final_accuracy": round(rounds[-1]["accuracy"], 4), "final_epsilon": rounds[-1]["epsilon"],
    "delta": r["settings"]["delta"], "contributors": [x.get("contributors") for x in rounds],
    "bits": r["settings"]["bits"] if mode == "distributed" else 32,
    "stage_seconds": [x.get("stage_seconds") for x in rounds] if mode == "distributed" else None,
    "flwr": flwr.__version__, "load_before": lb, "load_after": la,
}
print(json.dumps(rec))
print(f"{mode:18s} cohort {cohort:>3s}: median {rec['median_round_seconds']:.2f} s/round, "
      f"accuracy {rec['final_accuracy']:.4f}, eps {rec['final_epsilon']}", file=sys.stderr)
PYEOF
    rm -f "$tmp"
  done
done
