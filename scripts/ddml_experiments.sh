#!/usr/bin/env bash
# Regenerates the Draw-and-Discard experiments of EXPERIMENTS.md (paper 003) and prints the
# markdown tables. Usage: scripts/ddml_experiments.sh [DATA_DIR] [PASSES] [REPEATS]
#   DATA_DIR  directory holding mnist/ (default ../shared/data)
#   PASSES    passes over MNIST per run (default 5, as recorded in EXPERIMENTS.md; the paper: 20)
#   REPEATS   runs per configuration, for means and standard errors (default 3, as recorded)
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR="${1:-../shared/data}"
PASSES="${2:-5}"
REPEATS="${3:-3}"
cargo build --release -p privfed
target="${CARGO_TARGET_DIR:-target}"
"$target/release/privfed" ddml experiments --data-dir "$DATA_DIR" --out experiments --passes "$PASSES" \
  --repeats "$REPEATS"
python3 scripts/ddml_experiments_tables.py experiments
