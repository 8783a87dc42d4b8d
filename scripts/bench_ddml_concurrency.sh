#!/usr/bin/env bash
# Draw-and-Discard server against plain axum across connection counts (docs/history/BENCHMARKS-history.md,
# "Session 15: the ratio against connections" and "Session 16"): for each C, a fresh hardened server with its
# embedded store (redb, durable group commit, update guard and tickets on: the defaults) once per
# group-commit mode in MODES, and then the plain axum ceiling handler
# (crates/privfed-server/examples/axum_ceiling.rs), all one worker thread, each loaded by wrk
# with scripts/bench/ddml_wrk.lua (draw, then post the instance back with its ticket),
# alternating, REPEATS times. One line per run with updates/s, wrk's non-2xx and socket errors,
# both processes' CPU seconds, the server's commits (from /metrics) and the 1-minute load
# average; a summary line per C with each mode's ratio to axum per repeat and their median.
# Environment: DUR (s, default 8), CS (default "32 64 128 256 512"), REPEATS (default 2), MODES
# (default "idle eager": `privfed serve --group-commit`), PIN (1: servers on CPU 0 and wrk on
# CPU 1 with taskset, so the load generator does not take the server's core), COMPARE_BIN (another
# privfed binary, e.g. a build of an earlier commit: run as `compare-<mode>` after each of this
# build's runs, with its own ratios, so two builds are measured in the same minutes), THREADS
# (tokio worker threads of every server, default 1; `privfed serve`'s own default is one per core),
# TMPFS (1: also run this build as `tmpfs-<mode>` with its data directory on /dev/shm, where
# `fdatasync` returns without waiting for a device: the same code and system calls with the
# disk's flush latency taken out, side by side with the disk runs; all: every variant, COMPARE_BIN's
# too, and with STORE=redis every redis-server's append-only file, on /dev/shm and none on the disk, so
# two builds are compared without the device's latency and its noise), SERVE_ARGS (extra `privfed serve`
# flags for this build only, e.g. "--max-connections-per-address 1024": wrk's C connections all
# come from 127.0.0.1, and the default cap per address is 64), COMPARE_SERVE_ARGS (the same for
# COMPARE_BIN), ALTERNATE (1: every second repeat runs the variants in reverse order, so neither
# build always runs first after the ceiling), STORE (redis: each server on its own
# fresh redis-server with per-write fsync, `appendonly yes` + `appendfsync always`, instead of the
# embedded store; MODES is then only a label).
#   cargo build --release -p privfed && cargo build --release -p privfed-server --example axum_ceiling
set -euo pipefail
cd "$(dirname "$0")/.."
B=${PRIVFED_BIN:-target/release/privfed}
AX=${PRIVFED_AXUM_BIN:-target/release/examples/axum_ceiling}
DUR=${DUR:-8}
THREADS=${THREADS:-1}
REPEATS=${REPEATS:-2}
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 1; }
[ -x "$AX" ] || { echo "$AX not built (cargo build --release -p privfed-server --example axum_ceiling)" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK" ${SHM:+"$SHM"}' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu() { awk '{print ($14+$15)/100}' /proc/$1/stat; }
wait_up() { for _ in $(seq 100); do curl -sf "$1/healthz" >/dev/null && return; sleep 0.1; done; echo "server did not start" >&2; exit 1; }
GUARD='{"learning_rate":0.005,"noise":{"kind":"laplace","epsilon":3.4657359027997265}}'
run_wrk() { # label pid url draw post C -> prints a line, sets RATE
  local s0 s1 out
  s0=$(cpu "$2")
  out=$( { DIM=387 DRAW=$4 POST=$5 /usr/bin/time -f '%U %S' $PIN_WRK wrk -t1 -c"$6" -d"${DUR}s" \
    -s scripts/bench/ddml_wrk.lua "$3" | tail -1; } 2>"$WORK/time" )
  s1=$(cpu "$2")
  RATE=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["updates_per_second"])')
  local commits=
  # The reference's store is idle; only the hardened server's commits are reported.
  [ "$1" = axum-ceiling ] || commits=$(curl -sf "$3/metrics" | awk '$1 == "privfed_store_commits_total" {print $2}')
  echo "$1 C=$6 $out server_cpu_s=$(echo "$s1 - $s0" | bc) wrk_cpu_s=$(tail -1 "$WORK/time" | awk '{print $1+$2}')${commits:+ commits=$commits} load=$(cut -d' ' -f1 /proc/loadavg)"
}
MODES=${MODES:-idle eager}
COMPARE_BIN_OR_NONE=${COMPARE_BIN:-/nonexistent}
# label:mode:data root:binary, run in this order within each repeat.
VARIANTS=()
SHM=
case "${TMPFS:-0}" in 0 | 1 | all) ;; *) echo "TMPFS must be 0, 1 or all" >&2; exit 1 ;; esac
if [ "${TMPFS:-0}" != 0 ]; then
  [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] || { echo "TMPFS=$TMPFS needs /dev/shm to be a tmpfs" >&2; exit 1; }
  SHM=$(mktemp -d /dev/shm/privfed-bench.XXXXXX)
fi
ROOT=$WORK
[ "${TMPFS:-0}" != all ] || ROOT=$SHM
for mode in $MODES; do
  VARIANTS+=("embedded-$mode:$mode:$ROOT:$B")
  if [ -n "${COMPARE_BIN:-}" ]; then
    [ -x "$COMPARE_BIN" ] || { echo "COMPARE_BIN $COMPARE_BIN is not executable" >&2; exit 1; }
    VARIANTS+=("compare-$mode:$mode:$ROOT:$COMPARE_BIN")
  fi
  [ "${TMPFS:-0}" != 1 ] || VARIANTS+=("tmpfs-$mode:$mode:$SHM:$B")
done
PIN_SERVER=; PIN_WRK=
if [ "${PIN:-0}" = 1 ]; then PIN_SERVER="taskset -c 0"; PIN_WRK="taskset -c 1"; fi
echo "# $(date -u +%FT%TZ) $(nproc) cores, DUR=$DUR s, REPEATS=$REPEATS, MODES=$MODES, THREADS=$THREADS, PIN=${PIN:-0}, TMPFS=${TMPFS:-0}, ALTERNATE=${ALTERNATE:-0}${COMPARE_BIN:+, COMPARE_BIN=$COMPARE_BIN}${SERVE_ARGS:+, SERVE_ARGS=$SERVE_ARGS}${COMPARE_SERVE_ARGS:+, COMPARE_SERVE_ARGS=$COMPARE_SERVE_ARGS}, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for C in ${CS:-32 64 128 256 512}; do
  declare -A ratios=()
  for r in $(seq "$REPEATS"); do
    declare -A E=()
    ORDER=("${VARIANTS[@]}")
    if [ "${ALTERNATE:-0}" = 1 ] && [ $((r % 2)) -eq 0 ]; then
      ORDER=(); for ((i = ${#VARIANTS[@]} - 1; i >= 0; i--)); do ORDER+=("${VARIANTS[i]}"); done
    fi
    for v in "${ORDER[@]}"; do
      label=${v%%:*}; rest=${v#*:}; mode=${rest%%:*}; rest=${rest#*:}; root=${rest%%:*}; bin=${rest#*:}
      port=$(free_port)
      if [ "$bin" = "$COMPARE_BIN_OR_NONE" ]; then extra=${COMPARE_SERVE_ARGS:-}; else extra=${SERVE_ARGS:-}; fi
      store_args="--init-store"
      if [ "${STORE:-embedded}" = redis ]; then
        rport=$(free_port); mkdir -p "$root/r$port"
        redis-server --bind 127.0.0.1 --port "$rport" --dir "$root/r$port" --save '' \
          --appendonly yes --appendfsync always >/dev/null &
        RPID=$!
        for _ in $(seq 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
        store_args="--store redis://127.0.0.1:$rport/"
      fi
      # shellcheck disable=SC2086
      $PIN_SERVER "$bin" serve --addr 127.0.0.1:$port --data-dir "$root/d$port" $store_args --admin-token bench \
        --threads "$THREADS" --group-commit "$mode" $extra 2>"$WORK/serve-$port.log" &
      SPID=$!
      wait_up "http://127.0.0.1:$port"
      curl -sf -X POST -H 'Authorization: Bearer bench' -H 'content-type: application/json' \
        -d "{\"name\":\"p387\",\"dim\":387,\"k\":20,\"init_std\":0.01,\"update_guard\":$GUARD}" \
        "http://127.0.0.1:$port/v1/models" >/dev/null
      run_wrk "$label" "$SPID" "http://127.0.0.1:$port" /v1/models/p387/draw /v1/models/p387/updates "$C"
      E[$label]=$RATE
      kill $SPID; wait $SPID 2>/dev/null || true
      if [ "${STORE:-embedded}" = redis ]; then kill $RPID; wait $RPID 2>/dev/null || true; rm -rf "$root/r$port"; fi
      rm -rf "$root/d$port"
    done
    port=$(free_port)
    $PIN_SERVER "$AX" 127.0.0.1:$port "$THREADS" 2>"$WORK/axum.log" &
    SPID=$!
    wait_up "http://127.0.0.1:$port"
    run_wrk axum-ceiling "$SPID" "http://127.0.0.1:$port" /bench/387 /bench/387 "$C"
    A=$RATE
    kill $SPID; wait $SPID 2>/dev/null || true
    for v in "${VARIANTS[@]}"; do
      label=${v%%:*}
      ratios[$label]+="$(python3 -c "print(f'{${E[$label]}/$A:.3f}')") "
    done
  done
  for v in "${VARIANTS[@]}"; do
    label=${v%%:*}
    echo "C=$C ratio $label/axum per repeat: ${ratios[$label]}(median $(python3 -c "import statistics,sys; print(f'{statistics.median(map(float, sys.argv[1:])):.3f}')" ${ratios[$label]}))"
  done
  unset ratios
done
