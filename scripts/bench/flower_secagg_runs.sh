#!/usr/bin/env bash
# Runs the Flower SecAgg+ baseline matrix and appends one JSON line per run to
# experiments/flower_secagg_baseline.jsonl (each line: the script's JSON plus a label and the
# `uptime` output before the run). Usage: scripts/bench/flower_secagg_runs.sh [PY] [LABEL N D DROPOUT SEED EXTRA...]
# With no run arguments it runs the default matrix (see FLOWER_SECAGG.md).
set -u
cd "$(dirname "$0")/../.."
PY=${PY:-/work/venvs/flwr/bin/python}
OUT=${OUT:-experiments/flower_secagg_baseline.jsonl}

run() {  # label n d dropout seed extra-args...
  local label=$1 n=$2 d=$3 f=$4 s=$5; shift 5
  local up; up=$(uptime)
  local js
  js=$(nice -n 10 "$PY" scripts/bench/flower_secagg.py --clients "$n" --dim "$d" --dropout "$f" --seed "$s" "$@")
  local rc=$?
  if [ -z "$js" ]; then js='{"error":"no output"}'; fi
  printf '%s\n' "$js" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); r["label"]=sys.argv[1]; r["uptime_before"]=sys.argv[2].strip(); r["exit_code"]=int(sys.argv[3]); r["args"]=sys.argv[4]; print(json.dumps(r))' "$label" "$up" "$rc" "$*" >> "$OUT"
  tail -n 1 "$OUT" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(r["label"], r.get("clients"), r.get("dim"), "correct=%s" % r.get("correct"), "total=%.1fs" % (r.get("total_seconds") or -1), "client_cpu=%.3fs" % (r.get("client_cpu_seconds_mean") or -1), "server_cpu=%.1fs" % (r.get("server_cpu_seconds") or -1), r["uptime_before"].split("load")[-1])'
}

if [ $# -gt 0 ]; then run "$@"; exit; fi

# SecAgg+ sparse graph: neighbourhood k = 4*ceil(log2 n)+1, threshold floor(k/2)+1 (script default).
k() { python3 -c "import math,sys; print(4*math.ceil(math.log2(int(sys.argv[1])))+1)" "$1"; }
for s in 1 2 3; do run headline-sparse 100 100000 0.2 $s --shares "$(k 100)"; done
run dgrowth-sparse 100 10000 0.2 1 --shares "$(k 100)"
run dgrowth-sparse 100 1000000 0.2 1 --shares "$(k 100)"
for n in 200 500 1000; do run ngrowth-sparse $n 10000 0.2 1 --shares "$(k $n)"; done
