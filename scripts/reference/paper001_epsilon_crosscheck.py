#!/usr/bin/env python3
"""Cross-check of experiments/paper001_epsilon_vs_noise.csv (`privfed analyze epsilon-vs-noise`)
against independent code at a few noise levels:

* Google's dp_accounting (PyPI): the Gaussian under its RDP and PLD accountants;
* the authors' own accounting (google-research/federated `distributed_dp/accounting_utils`,
  unmodified): `skellam_epsilon` (their RDP bound for Skellam) and `ddgauss_epsilon` (DDG), with
  rounding off and the scaled sensitivity-1 query of the CSV. dp_accounting has no Skellam or
  distributed discrete Gaussian event.

    /work/venvs/tf/bin/python scripts/reference/paper001_epsilon_crosscheck.py --federated DIR
"""
import argparse, csv, math, os, sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
p = argparse.ArgumentParser()
p.add_argument("--csv", default="experiments/paper001_epsilon_vs_noise.csv")
p.add_argument("--federated", default=None)
p.add_argument("--every", type=int, default=6, help="check every k-th noise level")
a = p.parse_args()

import dp_accounting
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

their = None
if a.federated:
    sys.path.insert(0, a.federated)
    from distributed_dp import accounting_utils as their

rows = list(csv.DictReader(open(a.csv)))
ours = {(r["scale"], r["clients"], float(r["sigma"]), r["method"]): r["epsilon"] for r in rows}
settings = sorted({(r["scale"], r["clients"], r["delta"]) for r in rows})
print("| s | n | σ | method | privfed ε | reference ε | reference | rel. diff |")
print("|---|---|---|---|---|---|---|---|")
for scale, clients, delta in settings:
    sigmas = sorted({float(r["sigma"]) for r in rows if r["scale"] == scale})
    for sigma in sigmas[:: a.every]:
        delta_f, s, n = float(delta), int(scale), int(clients)
        checks = []
        acc = rdp_privacy_accountant.RdpAccountant()
        acc.compose(dp_accounting.GaussianDpEvent(sigma))
        checks.append(("gaussian_rdp", acc.get_epsilon(delta_f), "dp_accounting RDP"))
        acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
        acc.compose(dp_accounting.GaussianDpEvent(sigma))
        checks.append(("gaussian_pld", acc.get_epsilon(delta_f), "dp_accounting PLD"))
        if their is not None:
            e, _ = their.skellam_epsilon(scale=s, central_stddev=sigma, l2_sens=1, beta=0, dim=1,
                                         q=1, steps=1, delta=delta_f, l1_sens=1, rounding=False)
            checks.append(("skellam_rdp_bound", e, "authors' skellam_epsilon"))
            e, _ = their.ddgauss_epsilon(gamma=1.0 / s, local_stddev=sigma / math.sqrt(n),
                                         num_clients=n, l2_sens=1, beta=0, dim=1, q=1, steps=1,
                                         delta=delta_f, l1_sens=1, rounding=False)
            checks.append(("ddg_rdp", e, "authors' ddgauss_epsilon"))
        for method, ref, src in checks:
            mine = float(ours[(scale, clients, sigma, method)])
            print(f"| {s} | {n} | {sigma:.4g} | {method} | {mine:.5g} | {ref:.5g} | {src} | "
                  f"{mine / ref - 1:+.2%} |")
