#!/usr/bin/env python3
"""Reference values for sampling without replacement (privfed's `SampledWithoutReplacement`):
Google's dp_accounting 0.6.0 (PyPI), RDP accountant under REPLACE_ONE, writes
crates/privfed-accounting/tests/data/rdp_wor_reference.json.

    pip install 'dp-accounting==0.6.0'
    python3 scripts/reference/dp_accounting_wor.py > crates/privfed-accounting/tests/data/rdp_wor_reference.json

Per case (n records, samples of m, Gaussian noise multiplier z): dp_accounting's RDP at each of
its default orders for one step, and ε with its optimal order at (steps, δ) pairs.
"""
import importlib.metadata
import json
import math
import sys

import dp_accounting
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant as rdp

CASES = [
    # (n, m, z): FL cohorts (clients, cohort) and DP-SGD-like batches.
    (1000, 10, 1.0),
    (1000, 50, 0.8),
    (100, 10, 1.1),
    (60000, 256, 1.1),
    (500, 100, 2.0),
    (10, 10, 1.5),
    (20, 5, 0.5),
]
PAIRS = [(1, 1e-5), (100, 1e-5), (1000, 1e-6)]


def main():
    out = {
        "producer": "scripts/reference/dp_accounting_wor.py",
        "dp_accounting": importlib.metadata.version("dp-accounting"),
        "orders": list(map(float, rdp.DEFAULT_RDP_ORDERS)),
        "cases": [],
    }
    for n, m, z in CASES:
        ev = dp_event.SampledWithoutReplacementDpEvent(n, m, dp_event.GaussianDpEvent(z))
        acc = rdp.RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
        acc.compose(ev)
        curve = [float(v) if math.isfinite(v) else None for v in acc._rdp]
        eps = []
        for steps, delta in PAIRS:
            e, a = rdp.compute_epsilon(acc._orders, acc._rdp * steps, delta)
            eps.append({"steps": steps, "delta": delta, "epsilon": float(e), "order": float(a)})
        out["cases"].append({"n": n, "m": m, "z": z, "rdp": curve, "epsilons": eps})
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
