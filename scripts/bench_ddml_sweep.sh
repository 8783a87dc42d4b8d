#!/usr/bin/env bash
# Draw-and-Discard server, the headline row repeated (BENCHMARKS.md, "Draw-and-Discard server"):
# release build, loopback, embedded store, k = 20, 387 weights, wrk with scripts/bench/ddml_wrk.lua
# as the devices (draw + post per update). Every (server threads, connections, repeat) gets a fresh
# server and data directory, so runs do not share a database. One line per run: wrk's JSON, the CPU
# seconds of the server and of wrk, the 1-minute load average and the "some" I/O pressure (avg10)
# of /proc/pressure/io — this VM's disk and scheduler vary from minute to minute, so read the spread.
# Environment: DUR (s, default 10), STS (server thread counts, default "1 2"), CS (connections,
# default "32 64 128"), REPEATS (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${PRIVFED_BIN:-target/release/privfed}
DUR=${DUR:-10}
REPEATS=${REPEATS:-3}
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu() { awk '{print ($14+$15)/100}' /proc/$1/stat; }
iop() { [ -r /proc/pressure/io ] && sed -n 's/^some avg10=\([0-9.]*\).*/\1/p' /proc/pressure/io || echo na; }
echo "# $(date -u +%FT%TZ) $(nproc) cores, DUR=$DUR s, REPEATS=$REPEATS"
for ST in ${STS:-1 2}; do
  for C in ${CS:-32 64 128}; do
    for r in $(seq "$REPEATS"); do
      port=$(free_port)
      $B serve --addr 127.0.0.1:$port --data-dir "$WORK/d$port" --init-store --admin-token bench --threads "$ST" \
        --max-connections-per-address 4096 \
        2>"$WORK/serve-$port.log" &
      SPID=$!
      URL=http://127.0.0.1:$port
      for _ in $(seq 100); do curl -sf "$URL/healthz" >/dev/null && break; sleep 0.1; done
      curl -sf -X POST -H 'Authorization: Bearer bench' -H 'content-type: application/json' \
        -d '{"name":"p387","dim":387,"k":20,"init_std":0.01,"update_guard":{"learning_rate":0.005,"noise":{"kind":"laplace","epsilon":3.4657359027997265}}}' \
        "$URL/v1/models" >/dev/null
      s0=$(cpu $SPID)
      out=$( { DIM=387 DRAW=/v1/models/p387/draw POST=/v1/models/p387/updates /usr/bin/time -f '%U %S' \
        wrk -t1 -c"$C" -d"${DUR}s" -s scripts/bench/ddml_wrk.lua "$URL" | tail -1; } 2>"$WORK/time" )
      s1=$(cpu $SPID)
      echo "ST=$ST C=$C run=$r $out server_cpu_s=$(echo "$s1 - $s0" | bc)" \
        "wrk_cpu_s=$(tail -1 "$WORK/time" | awk '{print $1+$2}') load=$(cut -d' ' -f1 /proc/loadavg) io_some10=$(iop)"
      kill $SPID; wait $SPID 2>/dev/null || true
    done
  done
done
