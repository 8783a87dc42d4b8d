#!/usr/bin/env python3
"""Prints the markdown tables of EXPERIMENTS.md (paper 003 section) from the CSV files written by
`privfed ddml experiments`. Usage: scripts/ddml_experiments_tables.py [experiments]"""
import csv
import math
import os
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "experiments"


def rows(name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return list(csv.DictReader(f))


def table(header, body):
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for r in body:
        print("| " + " | ".join(str(c) for c in r) + " |")
    print()


v = rows("ddml_variance_stabilization.csv")
if v:
    print("### Variance stabilization (Thm. 1)\n")
    body = []
    for k in sorted({int(r["k"]) for r in v}):
        rk = [r for r in v if int(r["k"]) == k]
        later = [float(r["measured_mean"]) for r in rk[1:]]
        z = [(float(r["measured_mean"]) - float(r["predicted"])) / float(r["std_error"]) for r in rk]
        last = rk[-1]
        body.append([k, last["predicted"], f'{float(rk[0]["measured_mean"]):.3f}',
                     f'{float(last["measured_mean"]):.3f} ± {float(last["std_error"]):.3f}',
                     f"{min(later):.3f} … {max(later):.3f}", f"{max(abs(x) for x in z):.2f}"])
    table(["k", "(k/2)σ²", "at start", "after 100·k updates", "range over the 10 later points", "max abs z"], body)

for exp, title in [("k", "MNIST: accuracy against k (no noise)"),
                   ("epsilon", "MNIST: accuracy against ε (k = 10)"),
                   ("batching", "MNIST: server-side batching N_s (k = 1) against D&D k"),
                   ("strategies", "MNIST: strategies (k = 20, no noise)")]:
    f = rows(f"ddml_mnist_{exp}.csv")
    c = rows(f"ddml_mnist_{exp}_curves.csv")
    if not f:
        continue
    print(f"### {title}\n")
    passes = sorted({int(r["pass"]) for r in c})
    show = [p for p in passes if p in (1, 2, 5, 10, passes[-1])]
    body = []
    for r in f:
        acc = {int(x["pass"]): float(x["accuracy"]) for x in c if x["config"] == r["config"]}
        body.append([r["config"], r["overwrites"]] + [f"{acc[p]:.4f}" for p in show] +
                    [f'{float(r["loss"]):.4f}', f'{float(r["train_loss"]):.4f}',
                     f'{float(r["intra_model_variance"]):.3g}', f'{float(r["predicted_intra_model_variance"]):.3g}'])
    table(["config", "overwrites"] + [f"acc. pass {p}" for p in show] +
          ["test loss", "train loss", "intra-model var.", "(k/2)σ²"], body)

s = rows("ddml_synthetic.csv")
w = rows("ddml_synthetic_weights.csv")
if s:
    print("### Known-weights model (§V-C)\n")
    table(["config", "updates", "accuracy", "max abs error", "mean abs error"],
          [[r["config"], r["updates"], f'{float(r["accuracy"]):.4f}', f'{float(r["weights_max_abs_error"]):.3f}',
            f'{float(r["weights_mean_abs_error"]):.3f}'] for r in s])
    cols = [k for k in w[0].keys() if k not in ("feature", "true")]
    table(["feature", "true"] + cols, [[r["feature"], r["true"]] + [f"{float(r[c]):.2f}" for c in cols] for r in w])
