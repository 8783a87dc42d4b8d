#!/usr/bin/env python3
"""Paper 001's DME comparison run through the authors' own code (google-research/federated
`distributed_dp/dme_run.experiment_repeated`, unmodified), for the side-by-side with
`scripts/paper001_dme.py` (EXPERIMENTS.md). Needs TensorFlow 2.15 + tensorflow_privacy 0.9 (a
venv outside the project) and a checkout of their repository.

Their noise is seeded from `tf.timestamp()` (not reproducible); the client data from NumPy's
global seed (`--seed`). Writes per-coordinate MSE with the 95% t-interval over repeats (their
`mean_confidence_interval`), columns named like experiments/paper001_dme.csv.

    /work/venvs/tf/bin/python scripts/reference/paper001_dme_theirs.py --federated DIR \\
        [--repeat 10] [--clients 100] [--out experiments/paper001_dme_theirs.csv]
"""
import argparse, csv, os, sys, time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
p = argparse.ArgumentParser()
p.add_argument("--federated", help="checkout of google-research/federated (to run)")
p.add_argument("--repeat", type=int, default=10)
p.add_argument("--clients", type=int, nargs="+", default=[100])
p.add_argument("--dim", type=int, default=250)
p.add_argument("--bits", type=int, nargs="+", default=[10, 12, 14, 16])
p.add_argument("--epsilons", type=float, nargs="+", default=[0.75, 1, 1.5, 2, 3, 4, 5, 6])
p.add_argument("--mechanism", default="dskellam", choices=["dskellam", "ddgauss"])
p.add_argument("--seed", type=int, default=2021)
p.add_argument("--out", default="experiments/paper001_dme_theirs.csv")
p.add_argument("--ours", default="experiments/paper001_dme.csv",
               help="privfed's run, merged with theirs into --merged for plotting")
p.add_argument("--merged", default="experiments/paper001_dme_side_by_side.csv")
p.add_argument("--merge-only", action="store_true",
               help="do not run: merge the existing --out with --ours")
a = p.parse_args()
name = {"dskellam": "skellam", "ddgauss": "ddg"}[a.mechanism]


def run_theirs():
    sys.path.insert(0, a.federated)
    from unittest import mock

    # Their modular_clipping_factory imports tensorflow_federated for its aggregator classes only;
    # TFF does not install beside TensorFlow 2.15 here, so a stand-in module satisfies the import.
    sys.modules.setdefault("tensorflow_federated", mock.MagicMock())
    import numpy as np
    from distributed_dp import dme_run, dme_utils

    np.random.seed(a.seed)
    rows = []
    t0 = time.time()
    for n in a.clients:
        data = [dme_utils.generate_client_data(a.dim, n, l2_norm=10.0) for _ in range(a.repeat)]
        gauss, ddp = dme_run.experiment_repeated(a.bits, 10.0, float(np.exp(-0.5)), data, a.repeat,
                                                 a.epsilons, 1e-5, a.mechanism, k_stddevs=2)
        series = [("gaussian", "", gauss)] + [(name, b, ddp[:, i]) for i, b in enumerate(a.bits)]
        for mech, bits, mses in series:
            m, lo, hi = dme_run.mean_confidence_interval(mses)
            for j, eps in enumerate(a.epsilons):
                rows.append(dict(source="theirs", mechanism=mech, clients=n, dim=a.dim, bits=bits,
                                 epsilon_target=eps, trials=a.repeat, mse_per_coord=m[j],
                                 mse_per_coord_lo=lo[j], mse_per_coord_hi=hi[j]))
    keys = list(rows[0].keys())
    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {a.out} ({len(rows)} rows, {time.time() - t0:.0f} s)", file=sys.stderr)
    return rows


if a.merge_only:
    rows = list(csv.DictReader(open(a.out)))
else:
    rows = run_theirs()
keys = list(rows[0].keys())
if os.path.exists(a.ours):
    merged = [dict(r, source="theirs") for r in rows]
    a.clients = sorted({int(r["clients"]) for r in rows})
    for r in csv.DictReader(open(a.ours)):
        if r["mse_per_coord"] and int(r["clients"]) in a.clients and r["mechanism"] in ("gaussian", name):
            merged.append(dict(source="privfed", mechanism=r["mechanism"], clients=r["clients"],
                               dim=r["dim"], bits=r["bits"], epsilon_target=r["epsilon_target"],
                               trials=r["trials"], mse_per_coord=r["mse_per_coord"],
                               mse_per_coord_lo=r["mse_per_coord_lo"],
                               mse_per_coord_hi=r["mse_per_coord_hi"]))
    with open(a.merged, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(merged)
    print(f"wrote {a.merged} ({len(merged)} rows)", file=sys.stderr)
