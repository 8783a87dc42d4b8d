#!/usr/bin/env bash
# Resident memory of `privfed serve` (embedded store) with its models at the --max-model-bytes cap:
# CAP_MIB of weights in models of DIM weights × K instances, each model then drawn and updated
# UPDATES times (so every instance has been overwritten and re-encoded, and the journal
# checkpointed), and the server's VmRSS read from /proc. Prints one JSON line with the ratio
# RSS / cap, the figure `privfed serve --help` states for --max-model-bytes.
#   cargo build --release -p privfed
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${PRIVFED_BIN:-target/release/privfed}
CAP_MIB=${CAP_MIB:-512}
DIM=${DIM:-1048576}
K=${K:-8}
UPDATES=${UPDATES:-16}
WORK=$(mktemp -d)
SPID=
trap '[ -n "$SPID" ] && kill "$SPID" 2>/dev/null; rm -rf "$WORK"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$B" serve --addr 127.0.0.1:$port --data-dir "$WORK/d" --init-store --admin-token bench \
  --max-model-bytes $((CAP_MIB << 20)) 2>"$WORK/serve.log" &
SPID=$!
URL=http://127.0.0.1:$port
for _ in $(seq 100); do curl -sf "$URL/healthz" >/dev/null && break; sleep 0.1; done
rss_mib() { awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' /proc/$SPID/status; }
idle=$(rss_mib)
models=$(( (CAP_MIB << 20) / (4 * DIM * K) ))
python3 - "$URL" "$models" "$DIM" "$K" "$UPDATES" <<'EOF'
import json, struct, sys, urllib.request
url, models, dim, k, updates = sys.argv[1], *map(int, sys.argv[2:])
def req(method, path, body=None, headers=None):
    r = urllib.request.Request(url + path, data=body, method=method, headers=headers or {})
    with urllib.request.urlopen(r, timeout=120) as resp:
        return resp.status, dict(resp.headers), resp.read()
for m in range(models):
    spec = {"name": f"m{m}", "dim": dim, "k": k, "init_std": 0.01, "update_guard": "off"}
    req("POST", "/v1/models", json.dumps(spec).encode(),
        {"Authorization": "Bearer bench", "Content-Type": "application/json"})
    for _ in range(updates):
        _, _, w = req("GET", f"/v1/models/m{m}/draw", headers={"Accept": "application/octet-stream"})
        req("POST", f"/v1/models/m{m}/updates", w, {"Content-Type": "application/octet-stream"})
EOF
sleep 2
full=$(rss_mib)
python3 -c "import json,sys; cap=$CAP_MIB; weights=$models*4*$DIM*$K/2**20; print(json.dumps({'cap_mib': cap, 'weights_mib': weights, 'models': $models, 'dim': $DIM, 'k': $K, 'updates_per_model': $UPDATES, 'rss_idle_mib': $idle, 'rss_full_mib': $full, 'ratio_rss_to_weights': round(($full)/weights, 2), 'ratio_added_rss_to_weights': round(($full-$idle)/weights, 2)}))"
