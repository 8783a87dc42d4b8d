#!/usr/bin/env bash
# Draw-and-Discard server benchmark (BENCHMARKS.md, "Draw-and-Discard server"): release build,
# loopback only (127.0.0.1), k = 20; embedded (redb) store, Redis store, and the ceiling
# (/bench/{dim}: a handler that reads and answers the same payload, no store) in the same run.
# Two load generators per row: `privfed loadgen` (devices: draw, noisy local step, post; latency
# per update) and, if installed, wrk with scripts/bench/ddml_wrk.lua (HTTP only: draw and post a
# fixed update, no local step; latency per request). Prints one JSON report per line, prefixed by
# its label, plus CPU seconds used by the server and the load generator and the 1-minute load
# average. Environment: DUR (s), CONC, ST (server worker threads), LG_THREADS (loadgen threads).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${PRIVFED_BIN:-target/release/privfed}
DUR=${DUR:-5}
CONC=${CONC:-32}
ST=${ST:-1}
LG_THREADS=${LG_THREADS:-1}
HAVE_WRK=$(command -v wrk >/dev/null && echo 1 || echo 0)
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start_server() { # $1 = extra args; sets SPID and URL
  local port; port=$(free_port)
  $B serve --addr 127.0.0.1:$port --admin-token bench --bench-routes --threads "$ST" \
    --max-connections-per-address 4096 $1 \
    2>"$WORK/serve-$port.log" &
  SPID=$!
  URL=http://127.0.0.1:$port
  for _ in $(seq 100); do curl -sf "$URL/healthz" >/dev/null && return; sleep 0.1; done
  echo "server did not start" >&2; exit 1
}
# The hardened default: the update guard declares loadgen's client step (gamma = 0.005, Laplace,
# epsilon = ln 32, per weight), so every update is checked against the instance its ticket drew.
GUARD='{"learning_rate":0.005,"noise":{"kind":"laplace","epsilon":3.4657359027997265}}'
create() { # name dim
  curl -sf -X POST -H 'Authorization: Bearer bench' -H 'content-type: application/json' \
    -d "{\"name\":\"$1\",\"dim\":$2,\"k\":20,\"init_std\":0.01,\"update_guard\":$GUARD}" "$URL/v1/models" >/dev/null
}
cpu() { awk '{print ($14+$15)/100}' /proc/$1/stat; }
measure() { # label, loadgen args...
  local label=$1; shift
  local s0; s0=$(cpu $SPID)
  local out
  out=$( { /usr/bin/time -f '%U %S' $B loadgen --server "$URL" --duration "$DUR" --threads "$LG_THREADS" --json "$@" | tr -d '\n '; } 2>"$WORK/time" )
  local s1; s1=$(cpu $SPID)
  local lg; lg=$(tail -1 "$WORK/time" | awk '{print $1+$2}')
  echo "$label $out server_cpu_s=$(echo "$s1 - $s0" | bc) loadgen_cpu_s=$lg load=$(cut -d' ' -f1 /proc/loadavg)"
}

wrk_measure() { # label, dim, draw path, post path, connections
  [ "$HAVE_WRK" = 1 ] || return 0
  local s0; s0=$(cpu $SPID)
  local out
  out=$( { DIM=$2 DRAW=$3 POST=$4 /usr/bin/time -f '%U %S' wrk -t1 -c"$5" -d"${DUR}s" \
    -s scripts/bench/ddml_wrk.lua "$URL" | tail -1; } 2>"$WORK/time" )
  local s1; s1=$(cpu $SPID)
  echo "$1 $out server_cpu_s=$(echo "$s1 - $s0" | bc) loadgen_cpu_s=$(tail -1 "$WORK/time" | awk '{print $1+$2}') load=$(cut -d' ' -f1 /proc/loadavg)"
}

echo "# $(date -u +%FT%TZ) $(nproc) cores, DUR=$DUR s, C=$CONC, server threads=$ST, loadgen threads=$LG_THREADS, wrk=$HAVE_WRK"
[ "$HAVE_WRK" = 1 ] || echo "# wrk not installed (apt-get install wrk): wrk rows skipped"
start_server "--data-dir $WORK/data --init-store"
create p387 387
create p50k 50000
measure embedded-387 --model p387 --concurrency "$CONC"
measure ceiling-387 --ceiling 387 --concurrency "$CONC"
wrk_measure wrk-embedded-387 387 /v1/models/p387/draw /v1/models/p387/updates "$CONC"
wrk_measure wrk-ceiling-387 387 /bench/387 /bench/387 "$CONC"
measure embedded-387-json --model p387 --concurrency "$CONC" --json-wire
measure ceiling-387-json --ceiling 387 --concurrency "$CONC" --json-wire
measure embedded-50k --model p50k --concurrency 8
measure ceiling-50k --ceiling 50000 --concurrency 8
wrk_measure wrk-embedded-50k 50000 /v1/models/p50k/draw /v1/models/p50k/updates 8
wrk_measure wrk-ceiling-50k 50000 /bench/50000 /bench/50000 8
kill $SPID; wait $SPID 2>/dev/null || true

# The reference: the same router and ceiling handler under plain axum::serve (no timeouts, no
# connection cap), crates/privfed-server/examples/axum_ceiling.rs.
AX=${PRIVFED_AXUM_BIN:-target/release/examples/axum_ceiling}
if [ -x "$AX" ]; then
  port=$(free_port)
  "$AX" 127.0.0.1:$port 2>"$WORK/axum.log" &
  SPID=$!
  URL=http://127.0.0.1:$port
  for _ in $(seq 100); do curl -sf "$URL/healthz" >/dev/null && break; sleep 0.1; done
  measure axum-ceiling-387 --ceiling 387 --concurrency "$CONC"
  wrk_measure wrk-axum-ceiling-387 387 /bench/387 /bench/387 "$CONC"
  measure axum-ceiling-50k --ceiling 50000 --concurrency 8
  wrk_measure wrk-axum-ceiling-50k 50000 /bench/50000 /bench/50000 8
  kill $SPID; wait $SPID 2>/dev/null || true
else
  echo "# $AX not built (cargo build --release -p privfed-server --example axum_ceiling): axum rows skipped"
fi

if command -v redis-server >/dev/null; then
  # Strict (the default): AOF with appendfsync always, checked by the server. Then best-effort on
  # a Redis without persistence (what earlier sessions measured), for comparison.
  for mode in strict best-effort; do
    RPORT=$(free_port)
    if [ $mode = strict ]; then persist="--appendonly yes --appendfsync always"; else persist="--appendonly no"; fi
    mkdir -p "$WORK/redis-$mode"
    redis-server --bind 127.0.0.1 --port "$RPORT" --save '' $persist --dir "$WORK/redis-$mode" >/dev/null &
    RPID=$!
    sleep 0.5
    start_server "--store redis://127.0.0.1:$RPORT/ --redis-durability $mode"
    create p387 387
    create p50k 50000
    measure redis-$mode-387 --model p387 --concurrency "$CONC"
    measure ceiling-387 --ceiling 387 --concurrency "$CONC"
    wrk_measure wrk-redis-$mode-387 387 /v1/models/p387/draw /v1/models/p387/updates "$CONC"
    measure redis-$mode-50k --model p50k --concurrency 8
    wrk_measure wrk-redis-$mode-50k 50000 /v1/models/p50k/draw /v1/models/p50k/updates 8
    kill $SPID; wait $SPID 2>/dev/null || true
    kill $RPID; wait $RPID 2>/dev/null || true
  done
else
  echo "# redis-server not installed: Redis rows skipped"
fi
