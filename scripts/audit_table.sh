#!/usr/bin/env bash
# The table of docs/AUDIT.md: every mechanism `privfed audit` covers, audited at its own ε on its
# worst-case neighbours with N samples per input (default 10^6), seed 1, the default α = 0.01.
# Usage: scripts/audit_table.sh [N] [privfed binary] [CSV]
# With CSV (e.g. experiments/audit_tightness.csv), the rows are also written there, one per
# command with its index, for the figure of scripts/figures.sh.
set -euo pipefail
N="${1:-1000000}"
BIN="${2:-target/release/privfed}"
CSV="${3:-}"
cases=(
  "grr --epsilon 1"
  "grr --epsilon 4"
  "scalar-dp --epsilon 1"
  "scalar-rel-dp --epsilon 1 --a 0.1 --kappa 2"
  "bitwise-rr --epsilon 1"
  "mvu --epsilon 1 --bits 2"
  "laplace --epsilon 1 --dim 1 --norm l1"
  "laplace --epsilon 1 --dim 4 --norm l1"
  "gaussian --epsilon 2 --delta 1e-5 --dim 1"
  "gaussian --epsilon 1 --delta 1e-5 --dim 1"
  "privunit2 --epsilon 2 --dim 16"
  "privunit2 --epsilon 4 --dim 1000"
  "privunitg --epsilon 2 --dim 16"
  "privunitg --epsilon 4 --dim 1000"
  "privunit-inf --epsilon 2 --dim 8"
  "separated --epsilon 2 --dim 8"
  "skellam --epsilon 2 --delta 1e-5"
  "ddg --epsilon 2 --delta 1e-5 --clients 5"
)
if [ -n "$CSV" ]; then
  echo "index,command,kind,claimed_epsilon,claimed_delta,epsilon_lower_bound,ratio,samples,seconds" > "$CSV"
fi
i=0
echo "| command (\`privfed audit … --samples $N --seed 1\`) | claimed ε (δ) | ε_lb (99%) | ε_lb / ε | violation | seconds |"
echo "|---|---|---|---|---|---|"
for c in "${cases[@]}"; do
  i=$((i + 1))
  # shellcheck disable=SC2086
  out=$("$BIN" audit $c --samples "$N" --seed 1 --json --quiet || true)
  python3 - "$c" "$out" "$CSV" "$i" <<'PY'
import json, sys
c, out = sys.argv[1], json.loads(sys.argv[2])
csv_path, index = sys.argv[3], sys.argv[4]
e, lb = out["claimed_epsilon"], out["epsilon_lower_bound"]
d = out["claimed_delta"]
claim = f"{e:.4g}" + (f" ({d:g})" if d else "")
print(f"| `{c}` | {claim} | {lb:.4f} | {lb / e:.3f} | {str(out['violation']).lower()} | {out['seconds']:.2f} |")
if csv_path:
    kind = "delta > 0" if d else "pure"
    with open(csv_path, "a") as f:
        f.write(f"{index},{c},{kind},{e},{d},{lb},{lb / e},{out['samples']},{out['seconds']}\n")
PY
done
