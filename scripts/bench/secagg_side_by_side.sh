#!/usr/bin/env bash
# Secure aggregation side by side: privfed (`privfed secagg simulate`, in process) and Flower's
# SecAgg+ (scripts/bench/flower_secagg.py, in process, flwr from PyPI) in one run on this
# machine, plus privfed's growth with n (complete graph vs SecAgg+) and with d.
# Appends one JSON line per run (the tool's JSON, a label and /proc/loadavg before the run) to
# experiments/secagg_side_by_side.jsonl.
#   Usage: scripts/bench/secagg_side_by_side.sh            (needs /work/venvs/flwr, see
#          scripts/bench/requirements-flower.txt; FLOWER=0 skips Flower)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-/work/venvs/flwr/bin/python}
OUT=${OUT:-experiments/secagg_side_by_side.jsonl}
FLOWER=${FLOWER:-1}
cargo build --release -q -p privfed
PF=target/release/privfed

record() {  # label json
  python3 -c 'import json,sys; r=json.loads(sys.argv[2]); r["label"]=sys.argv[1]; r["loadavg_before"]=sys.argv[3]; print(json.dumps(r))' \
    "$1" "$2" "$3" >> "$OUT"
  tail -n 1 "$OUT" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(r["label"], "n=%s d=%s" % (r.get("clients"), r.get("dim")), "exact/correct=%s" % r.get("exact", r.get("correct")), "wall=%.2fs" % r.get("seconds", r.get("total_seconds", -1)), "load", r["loadavg_before"])'
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

# Headline: n = 100, d = 10^5, 20% dropout (dropped clients go silent after sharing keys, so
# their pairwise masks must be recovered), Flower's default ring Z_{2^32}.
for s in 1 2 3; do
  pf headline-privfed-complete --clients 100 --dim 100000 --bits 32 --dropout 0.2 --seed "$s" --graph complete
  # The same sparse graph as Flower's run below: Flower's 29 shares are the client and 28
  # neighbours; threshold 15.
  pf headline-privfed-harary28 --clients 100 --dim 100000 --bits 32 --dropout 0.2 --seed "$s" --degree 28 --threshold 15
  if [ "$FLOWER" = 1 ]; then
    fl headline-flower-secaggplus29 --clients 100 --dim 100000 --dropout 0.2 --seed "$s" --shares 29
  fi
done
# Growth with d at n = 100 (complete graph and planned SecAgg+).
for d in 10000 100000 1000000; do
  pf dgrowth-privfed-complete --clients 100 --dim "$d" --bits 32 --dropout 0.2 --seed 1 --graph complete
  pf dgrowth-privfed-plus --clients 100 --dim "$d" --bits 32 --dropout 0.2 --seed 1 --graph plus
done
# Growth with n at d = 10^4: complete graph (O(n²) per round) against planned SecAgg+.
for n in 100 200 500 1000; do
  pf ngrowth-privfed-plus --clients "$n" --dim 10000 --bits 32 --dropout 0.2 --seed 1 --graph plus
  if [ "$n" -le 500 ]; then
    pf ngrowth-privfed-complete --clients "$n" --dim 10000 --bits 32 --dropout 0.2 --seed 1 --graph complete
  fi
done
