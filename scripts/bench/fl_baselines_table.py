#!/usr/bin/env python3
"""Markdown tables from the JSONL written by pfl_fedavg_mnist.py / flower_fedavg_mnist.py /
fl_side_by_side.sh (stdlib only).

    python3 scripts/bench/fl_baselines_table.py scripts/bench/fl_baselines_prelim.jsonl
"""

import json
import re
import sys


def load1(s):
    m = re.search(r"load average: ([\d.]+)", s or "")
    return m.group(1) if m else "?"


def config(r):
    if r.get("tool") == "pfl-research":
        return f"workers={r['workers']} threads={r['threads']}"
    if r.get("tool") == "flower":
        return (f"actors={r['concurrent_clients']} (ray cpus {r['ray_num_cpus']:g} / client "
                f"{r['client_num_cpus']:g}) threads={r['threads']}")
    return r.get("config_file", "")


def split(r):
    s = r.get("split_seconds") or {}
    n = r.get("rounds") or 1
    if r.get("tool") == "pfl-research":
        keys = ["client_train", "clip", "accumulate", "worker_reduce", "noise", "server_update",
                "other"]
    elif r.get("tool") == "flower":
        keys = ["client_train_sum", "client_cpu_sum", "configure", "aggregate", "dp_clip",
                "dp_noise", "transport_and_wait"]
    else:
        keys = list(s)
    return ", ".join(f"{k} {1000 * s[k] / n:.0f}" for k in keys if k in s and s[k] > 0)


def cpu(r):
    c = r.get("cpu_seconds")
    return "" if c is None else f"{c / (r.get('rounds') or 1):.3f}"


def main(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    print("| tool | model | dp | configuration | rounds/s | s/round (median) | CPU s/round | "
          "test acc | per-round split, ms | load 1-min before→after | label |")
    print("|---|---|---|---|---:|---:|---:|---:|---|---|---|")
    for r in rows:
        print(f"| {r.get('tool')} | {r.get('model')} | {r.get('dp')} | {config(r)} | "
              f"{r.get('rounds_per_sec', float('nan')):.3f} | "
              f"{r.get('seconds_per_round_median', float('nan')):.3f} | {cpu(r)} | "
              f"{r.get('test_accuracy', float('nan')):.4f} | {split(r)} | "
              f"{load1(r.get('load_before'))}→{load1(r.get('load_after'))} | {r.get('label', '')} |")

    best = {}
    for r in rows:
        k = (r.get("tool"), r.get("model"), r.get("dp"))
        if k not in best or r.get("rounds_per_sec", 0) > best[k].get("rounds_per_sec", 0):
            best[k] = r
    print()
    print("| tool | model | dp | best configuration | rounds/s | load 1-min before→after |")
    print("|---|---|---|---|---:|---|")
    for k in sorted(best, key=lambda k: (k[1], k[2], k[0])):
        r = best[k]
        print(f"| {k[0]} | {k[1]} | {k[2]} | {config(r)} | {r['rounds_per_sec']:.3f} | "
              f"{load1(r.get('load_before'))}→{load1(r.get('load_after'))} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "scripts/bench/fl_baselines_prelim.jsonl")
