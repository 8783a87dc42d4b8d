#!/usr/bin/env bash
# Federated-training speed, side by side: pfl-research, Flower (Simulation Runtime, Ray) and
# privfed, on the same MNIST FedAvg workload (see scripts/bench/FL_BASELINES.md).
#
#   scripts/bench/fl_side_by_side.sh OUT.jsonl [--sweep | --sweep-only] [--only pfl|flower|privfed]
#
# Appends one JSON line per run to OUT.jsonl (e.g. experiments/fl_side_by_side.jsonl), for
# models lenet5 and mlp and dp none and central. Each tool runs with its best configuration on
# this 2-core machine (the defaults below, chosen by the preliminary sweep in FL_BASELINES.md,
# taken on a loaded machine: re-check with --sweep when it is idle); --sweep also runs the
# other configurations that were tried, --sweep-only runs only those. Run it on an idle
# machine: each record carries `uptime` before and after its run, and this script prints
# `uptime` before each run.
#
# Environment (all optional):
#   PFL_PY      python of the pfl venv            (default /work/venvs/pfl/bin/python)
#   FLWR_PY     python of the Flower+torch venv   (default /work/venvs/flwr-torch/bin/python)
#   PRIVFED     privfed binary                    (default target/release/privfed)
#   DATA_DIR    folder holding mnist/             (default /work/shared/data)
#   ROUNDS, WARMUP, CLIENTS, COHORT               (defaults 20, 2, 1000, 50)
#   MODELS, DPS                                   (defaults "lenet5 mlp", "none central")
#   PFL_BEST     pfl flags    (default "--workers 2 --threads 1")
#   FLOWER_BEST  Flower flags (default "--ray-cpus 4 --client-cpus 1 --threads 1")
#   PFL_SWEEP, FLOWER_SWEEP   the other configurations for --sweep, separated by ';'
#   RUN_TIMEOUT  seconds after which one run is killed (default 1200)
set -euo pipefail

if [[ $# -lt 1 ]]; then
    sed -n '2,/^set /{/^#/p}' "$0"
    exit 2
fi
OUT=$1
shift
SWEEP=0
BEST=1
ONLY=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --sweep) SWEEP=1 ;;
        --sweep-only) SWEEP=1; BEST=0 ;;
        --only) ONLY=$2; shift ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
    shift
done

ROOT=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
cd "$ROOT"
mkdir -p "$(dirname "$OUT")"
OUT=$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")

PFL_PY=${PFL_PY:-/work/venvs/pfl/bin/python}
FLWR_PY=${FLWR_PY:-/work/venvs/flwr-torch/bin/python}
PRIVFED=${PRIVFED:-target/release/privfed}
DATA_DIR=${DATA_DIR:-/work/shared/data}
ROUNDS=${ROUNDS:-20}
WARMUP=${WARMUP:-2}
CLIENTS=${CLIENTS:-1000}
COHORT=${COHORT:-50}
MODELS=${MODELS:-"lenet5 mlp"}
DPS=${DPS:-"none central"}
PFL_BEST=${PFL_BEST:-"--workers 2 --threads 1"}
FLOWER_BEST=${FLOWER_BEST:-"--ray-cpus 4 --client-cpus 1 --threads 1"}

RUN_TIMEOUT=${RUN_TIMEOUT:-1200}
# Configurations tried besides the best one (kept so the sweep can be re-run).
PFL_SWEEP=${PFL_SWEEP:-"--workers 1 --threads 1;--workers 1 --threads 2"}
FLOWER_SWEEP=${FLOWER_SWEEP:-"--ray-cpus 2 --client-cpus 1 --threads 1;--ray-cpus 1 --client-cpus 1 --threads 1;--ray-cpus 1 --client-cpus 1 --threads 2"}
IFS=';' read -r -a PFL_OTHERS <<< "$PFL_SWEEP"
IFS=';' read -r -a FLOWER_OTHERS <<< "$FLOWER_SWEEP"

COMMON=(--rounds "$ROUNDS" --warmup "$WARMUP" --clients "$CLIENTS" --cohort "$COHORT"
        --data-dir "$DATA_DIR" --out "$OUT")

want() { [[ -z $ONLY || $ONLY == "$1" ]]; }

# Before each run: wait (up to 60 s) until the previous tool's processes are gone (Ray's raylet,
# GCS and actors, torch.distributed workers outlive their driver by seconds), then 5 s more, so
# no run shares the two cores with the one before it.
settle() {
    for _ in $(seq 60); do
        pgrep -f 'raylet|gcs_server|ray::|default_worker.py|torch.distributed.run|pfl_fedavg_mnist|flower_fedavg_mnist' > /dev/null || break
        sleep 1
    done
    sleep 5
}

run_py() {  # tool python script label flags... -- model dp
    local tool=$1 py=$2 script=$3 label=$4 flags=$5 model=$6 dp=$7
    settle
    echo "== $tool $model/$dp [$label: $flags]  $(uptime)"
    if [[ ! -x $py ]]; then
        echo "$tool: skipped ($py not found; see FL_BASELINES.md for the venv)"
        return 0
    fi
    # shellcheck disable=SC2086
    if ! timeout "$RUN_TIMEOUT" "$py" "scripts/bench/$script" --model "$model" --dp "$dp" --label "$label" \
            $flags "${COMMON[@]}" > >(tail -n 1) 2> "/tmp/fl_side_by_side.$tool.$model.$dp.err"; then
        echo "$tool $model/$dp [$flags] failed or timed out after ${RUN_TIMEOUT}s; stderr in /tmp/fl_side_by_side.$tool.$model.$dp.err" >&2
    fi
}

privfed_supports_fl_train() {
    [[ -x $PRIVFED ]] && "$PRIVFED" fl train --help > /dev/null 2>&1
}

run_privfed() {  # model dp
    local model=$1 dp=$2 cfg=scripts/bench/fl_bench_${1}_${2}.toml
    settle
    echo "== privfed $model/$dp  $(uptime)"
    if ! privfed_supports_fl_train; then
        echo "privfed: skipped (no 'fl train' subcommand in this build)"
        return 0
    fi
    if [[ ! -f $cfg ]]; then
        echo "privfed: skipped ($cfg not written yet)"
        return 0
    fi
    local before after out
    before=$(uptime)
    out=$(mktemp)
    if PRIVFED_DATA_DIR="$DATA_DIR" "$PRIVFED" fl train --config "$cfg" --json --quiet > "$out"; then
        after=$(uptime)
        # privfed prints one JSON document with every round's timings; the timed rounds are those
        # after the warm-up (WARMUP, as for the Python tools), without the evaluation time.
        python3 - "$out" "$model" "$dp" "$before" "$after" "$cfg" "${WARMUP:-2}" >> "$OUT" <<'EOF'
import json, sys
path, model, dp, before, after, cfg, warmup = sys.argv[1:]
v = json.load(open(path))
timed = v["rounds"][int(warmup):]
secs = sum(r["seconds"]["total"] - r["seconds"]["eval"] for r in timed)
split = {k: sum(r["seconds"][k] for r in timed) / len(timed)
         for k in ("clients", "privatize_cpu", "aggregate", "account")}
rec = {
    "tool": "privfed", "model": model, "dp": dp, "rounds": len(timed),
    "warmup": int(warmup), "seconds": secs, "rounds_per_sec": len(timed) / secs,
    "split": split, "final_test_accuracy": v.get("final_accuracy"),
    "final_epsilon": v.get("final_epsilon"), "threads": v.get("threads"),
    "config_file": cfg, "load_before": before, "load_after": after,
}
print(json.dumps(rec))
EOF
        tail -n 1 "$OUT"
    else
        echo "privfed $model/$dp failed" >&2
    fi
    rm -f "$out"
}

for model in $MODELS; do
    for dp in $DPS; do
        if want pfl; then
            [[ $BEST == 1 ]] && run_py pfl "$PFL_PY" pfl_fedavg_mnist.py best "$PFL_BEST" "$model" "$dp"
            if [[ $SWEEP == 1 ]]; then
                for f in "${PFL_OTHERS[@]}"; do
                    run_py pfl "$PFL_PY" pfl_fedavg_mnist.py sweep "$f" "$model" "$dp"
                done
            fi
        fi
        if want flower; then
            [[ $BEST == 1 ]] && run_py flower "$FLWR_PY" flower_fedavg_mnist.py best "$FLOWER_BEST" "$model" "$dp"
            if [[ $SWEEP == 1 ]]; then
                for f in "${FLOWER_OTHERS[@]}"; do
                    run_py flower "$FLWR_PY" flower_fedavg_mnist.py sweep "$f" "$model" "$dp"
                done
            fi
        fi
        if want privfed && [[ $BEST == 1 ]]; then
            run_privfed "$model" "$dp"
        fi
    done
done
echo "done: $OUT  $(uptime)"
