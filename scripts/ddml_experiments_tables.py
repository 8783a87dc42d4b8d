#!/usr/bin/env python3
"""Prints the markdown tables of EXPERIMENTS.md (paper 003 section) from the CSV files written by
`privfed ddml experiments`. Usage: scripts/ddml_experiments_tables.py [experiments]

With `--repeats R` the CSV files hold the mean and standard error over R runs of every
configuration; the tables then show `mean ± s.e.` and the number of runs. CSV files written by
earlier versions (one run per configuration, columns without `_mean`/`_se`) are shown as single
runs."""
import csv
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


def stat(r, name):
    """(mean, s.e. or None) of column `name`, from `name_mean`/`name_se` or a single-run `name`."""
    if name + "_mean" in r:
        se = r[name + "_se"]
        return float(r[name + "_mean"]), (float(se) if se != "" else None)
    return float(r[name]), None


def fmt(m, se, spec):
    return f"{m:{spec}}" if se is None else f"{m:{spec}} ± {se:{spec}}"


def runs_of(r):
    return int(r.get("runs", 1))


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
    runs = sorted({runs_of(r) for r in f})
    note = f"mean ± s.e. over {runs[0]} runs" if runs == [runs[0]] and runs[0] > 1 else \
        ("single runs" if runs == [1] else f"runs per configuration: {runs}")
    print(f"### {title}: {note}\n")
    passes = sorted({int(r["pass"]) for r in c})
    show = [p for p in passes if p in (1, 2, 5, 10, passes[-1])]
    body = []
    for r in f:
        acc = {int(x["pass"]): stat(x, "accuracy") for x in c if x["config"] == r["config"]}
        ow, ow_se = stat(r, "overwrites")
        body.append([r["config"], fmt(ow, ow_se if ow_se else None, ".0f")] +
                    [fmt(*acc[p], ".4f") for p in show] +
                    [fmt(*stat(r, "loss"), ".4f"), fmt(*stat(r, "train_loss"), ".4f"),
                     f'{stat(r, "intra_model_variance")[0]:.3g}',
                     f'{float(r["predicted_intra_model_variance"]):.3g}'])
    table(["config", "overwrites"] + [f"acc. pass {p}" for p in show] +
          ["test loss", "train loss", "intra-model var." + (" (mean)" if runs != [1] else ""), "(k/2)σ²"],
          body)

s = rows("ddml_synthetic.csv")
w = rows("ddml_synthetic_weights.csv")
if s:
    runs = sorted({runs_of(r) for r in s})
    note = f"mean ± s.e. over {runs[0]} runs" if runs == [runs[0]] and runs[0] > 1 else "single runs"
    print(f"### Known-weights model (§V-C): {note}\n")
    table(["config", "updates", "accuracy", "max abs error", "mean abs error"],
          [[r["config"], r["updates"], fmt(*stat(r, "accuracy"), ".4f"),
            fmt(*stat(r, "weights_max_abs_error"), ".3f"), fmt(*stat(r, "weights_mean_abs_error"), ".3f")]
           for r in s])
    cols = [k for k in w[0].keys() if k not in ("feature", "true") and not k.endswith(" se")]

    def weight(r, col):
        se = r.get(col + " se", "")
        return fmt(float(r[col]), float(se) if se != "" else None, ".2f")

    table(["feature", "true"] + cols, [[r["feature"], r["true"]] + [weight(r, c) for c in cols] for r in w])
