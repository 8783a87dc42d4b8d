#!/usr/bin/env python3
"""Markdown table of experiments/flower_secagg_baseline.jsonl (one row per run)."""
import json
import statistics
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "experiments/flower_secagg_baseline.jsonl"
rows = [json.loads(line) for line in open(path) if line.strip()]
print("| label | n | d | k / t | survivors | correct | total s (wall) | setup | share keys | "
      "masked input | unmask | client CPU s (mean) | server CPU s | bytes/client | load before→after (1 min) |")
print("|---|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for r in rows:
    if "total_seconds" not in r:
        print(f"| {r.get('label')} | failed: {r.get('error')} |")
        continue
    p = r["params"]
    st = r["per_stage_seconds"]
    b = r.get("bytes_per_client")
    print(f"| {r['label']} (seed {r['seed']}) | {r['clients']} | {r['dim']:,} | "
          f"{p['neighbourhood_size']} / {p['threshold_resolved']} | {r['survivors']} | "
          f"{r['correct']} | {r['total_seconds']:.1f} | {st.get('setup', 0):.2f} | "
          f"{st.get('share_keys', 0):.1f} | {st.get('collect_masked_vectors', 0):.1f} | "
          f"{st.get('unmask', 0):.1f} | {r['client_cpu_seconds_mean']:.3f} | "
          f"{r['server_cpu_seconds']:.1f} | {'' if b is None else f'{b/1e6:.2f} MB'} | "
          f"{r['loadavg_before'][0]:.2f}→{r['loadavg_after'][0]:.2f} |")

# Summary per (label, n, d): min and median over repetitions.
groups: dict = {}
for r in rows:
    if "total_seconds" in r:
        groups.setdefault((r["label"], r["clients"], r["dim"]), []).append(r)
print()
print("| label | n | d | reps | total s min / median | client CPU s min / median | "
      "server CPU s min / median | all correct |")
print("|---|---:|---:|---:|---|---|---|---|")
for (label, n, d), rs in groups.items():
    def mm(key):
        v = sorted(x[key] for x in rs)
        return f"{v[0]:.1f} / {statistics.median(v):.1f}" if key != "client_cpu_seconds_mean" \
            else f"{v[0]:.3f} / {statistics.median(v):.3f}"
    print(f"| {label} | {n} | {d:,} | {len(rs)} | {mm('total_seconds')} | "
          f"{mm('client_cpu_seconds_mean')} | {mm('server_cpu_seconds')} | "
          f"{all(x['correct'] for x in rs)} |")
