#!/usr/bin/env bash
# The active mode's cost side by side with the honest-but-curious mode and with Flower's SecAgg+,
# in one run on this machine: n = 100, d = 10^5, Z_{2^32}, 20% dropout (after sharing keys),
# three interleaved repeats; each privfed mode on the complete graph and on Flower's sparse graph
# (k = 28, t = 15). Appends one JSON line per run (the tool's JSON, a label and /proc/loadavg
# before the run) to experiments/secagg_threat_models.jsonl.
#   Usage: scripts/bench/secagg_threat_models.sh   (Flower needs /work/venvs/flwr, see
#          scripts/bench/requirements-flower.txt; FLOWER=0 skips it; REPEATS=N, default 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-/work/venvs/flwr/bin/python}
OUT=${OUT:-experiments/secagg_threat_models.jsonl}
FLOWER=${FLOWER:-1}
REPEATS=${REPEATS:-3}
cargo build --release -q -p privfed
PF=target/release/privfed

record() {  # label json load
  python3 -c 'import json,sys; r=json.loads(sys.argv[2]); r["label"]=sys.argv[1]; r["loadavg_before"]=sys.argv[3]; print(json.dumps(r))' \
    "$1" "$2" "$3" >> "$OUT"
  tail -n 1 "$OUT" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(r["label"], "exact/correct=%s" % r.get("exact", r.get("correct")), "wall=%.2fs" % r.get("seconds", r.get("total_seconds", -1)), "client=%.4fs" % r.get("client_seconds_mean", r.get("client_seconds", -1)), "load", r["loadavg_before"])'
}
pf() {  # label args...
  local label=$1; shift
  local l; l=$(cut -d' ' -f1-3 /proc/loadavg)
  record "$label" "$($PF secagg simulate --json --quiet "$@")" "$l"
}
fl() {  # label args...
  local label=$1; shift
  local l; l=$(cut -d' ' -f1-3 /proc/loadavg)
  record "$label" "$("$PY" scripts/bench/flower_secagg.py "$@")" "$l"
}

common=(--clients 100 --dim 100000 --bits 32 --dropout 0.2)
for s in $(seq 1 "$REPEATS"); do
  for tm in honest-but-curious active; do
    pf "$tm-complete" "${common[@]}" --seed "$s" --graph complete --threat-model "$tm"
    pf "$tm-harary28" "${common[@]}" --seed "$s" --degree 28 --threshold 15 --threat-model "$tm"
  done
  if [ "$FLOWER" = 1 ]; then
    fl flower-secaggplus29 --clients 100 --dim 100000 --dropout 0.2 --seed "$s" --shares 29
  fi
done
