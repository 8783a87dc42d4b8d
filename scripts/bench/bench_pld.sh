#!/bin/sh
# Side-by-side PLD benchmark: privfed vs dp_accounting 0.6.0 on the same machine, one run.
# Usage: scripts/bench/bench_pld.sh   (from the repository root)
set -e
cargo build --release -q -p privfed-accounting --example bench_pld
uptime
"${CARGO_TARGET_DIR:-target}/release/examples/bench_pld"
python3 "$(dirname "$0")/bench_pld_dp_accounting.py"
