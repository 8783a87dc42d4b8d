#!/usr/bin/env bash
# privfed's Flower app on Flower's Deployment Engine, end to end: a flower-superlink and four
# flower-supernode processes on 127.0.0.1 (free ports, each stopped by its pid), the example
# app (examples/flwr) submitted with `flwr run` for local, central and distributed DP, and a
# SuperNode killed mid-round; and the same app through `flwr run` on the simulation engine. The
# tests read each run's status and the ServerApp's result file
# (python/tests/test_flwr_deployment.py).
#
#   scripts/flwr_deployment_e2e.sh [PYTHON]
#
# PYTHON (default: .venv/bin/python, else python3) must have privfed and flwr installed, with
# flower-superlink, flower-supernode and flwr beside it (pip install ".[flwr]" into a venv).
# The shared MNIST files are read from $PRIVFED_DATA_DIR, else ../shared/data. A missing Flower,
# Ray or data set fails the run (CI=1: python/tests/conftest.py's policy); extra arguments go to
# pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${1:-}"
[ $# -gt 0 ] && shift
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
BIN="$(dirname "$PY")"
for exe in flower-superlink flower-supernode flwr; do
  if [ ! -x "$BIN/$exe" ]; then
    echo "error: $BIN/$exe not found: install privfed[flwr] into the environment of $PY" >&2
    exit 1
  fi
done
export CI="${CI:-1}"
exec "$PY" -m pytest -q -s -rs -m deployment python/tests/test_flwr_deployment.py "$@"
