#!/usr/bin/env python3
"""Reference oracle for privfed-accounting tests: Google's dp-accounting 0.6.0 (PyPI).

Reads a JSON list of queries on stdin, writes a JSON list of answers on stdout.
Events use privfed's serde form of `DpEvent` (tagged by "type", snake_case).
RDP queries take an optional "relation": "replace_one" (needed by sampling without replacement).
Query kinds:
  {"kind": "rdp_curve", "event": E, "orders": [..]} -> {"rdp": [..]} (inf where dropped)
  {"kind": "rdp_epsilon", "event": E, "delta": d}   -> {"epsilon": e, "order": a}
  {"kind": "rdp_epsilons", "event": E, "pairs": [[count, d], ..]} -> [{"epsilon", "order"}, ..]
  {"kind": "rdp_delta",   "event": E, "epsilon": e} -> {"delta": d, "order": a}
  {"kind": "pld_epsilon", "event": E, "delta": d [, "h": 1e-4]} -> {"epsilon": e}
  {"kind": "pld_delta",   "event": E, "epsilon": e [, "h": 1e-4]} -> {"delta": d}
  {"kind": "calibrate", "accountant": "rdp"|"pld", "rate": q, "steps": T,
   "target_epsilon": e, "delta": d} -> {"noise_multiplier": z}
Exit status 3 if dp_accounting cannot be imported.
"""
import json
import sys

try:
    import dp_accounting
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant as rdp
    from dp_accounting.pld import pld_privacy_accountant as pld
    from dp_accounting import mechanism_calibration as mc
except ImportError as err:  # pragma: no cover
    print(f"dp_accounting not importable: {err}", file=sys.stderr)
    sys.exit(3)


def to_event(e):
    t = e["type"]
    if t == "gaussian":
        return dp_event.GaussianDpEvent(e["noise_multiplier"])
    if t == "laplace":
        return dp_event.LaplaceDpEvent(e["scale"])
    if t == "poisson_sampled":
        return dp_event.PoissonSampledDpEvent(e["rate"], to_event(e["event"]))
    if t == "self_composed":
        return dp_event.SelfComposedDpEvent(to_event(e["event"]), e["count"])
    if t == "sampled_without_replacement":
        return dp_event.SampledWithoutReplacementDpEvent(
            e["source_dataset_size"], e["sample_size"], to_event(e["event"])
        )
    if t == "composed":
        return dp_event.ComposedDpEvent([to_event(x) for x in e["events"]])
    raise ValueError(f"event type {t} has no dp_accounting counterpart")


def rdp_accountant(query, **kw):
    """dp_accounting's RDP accountant under the query's relation ("add_or_remove_one" unless
    "relation": "replace_one", which sampling without replacement needs)."""
    if query.get("relation") == "replace_one":
        kw["neighboring_relation"] = dp_accounting.NeighboringRelation.REPLACE_ONE
    return rdp.RdpAccountant(**kw)


def answer(query):
    kind = query["kind"]
    if kind == "rdp_curve":
        acc = rdp_accountant(query, orders=query["orders"])
        acc.compose(to_event(query["event"]))
        # JSON has no infinity: dropped orders come back as null.
        return {"rdp": [float(v) if v < float("inf") else None for v in acc._rdp]}
    if kind == "rdp_epsilons":
        # One curve, several (count, delta) pairs: dp_accounting's own conversion on the curve
        # of `count` self-compositions (RDP composes by scaling the curve).
        acc = rdp_accountant(query)
        acc.compose(to_event(query["event"]))
        out = []
        for count, delta in query["pairs"]:
            e, a = rdp.compute_epsilon(acc._orders, acc._rdp * count, delta)
            out.append({"epsilon": float(e), "order": float(a)})
        return out
    if kind in ("rdp_epsilon", "rdp_delta"):
        acc = rdp_accountant(query)
        acc.compose(to_event(query["event"]))
        if kind == "rdp_epsilon":
            e, a = acc.get_epsilon_and_optimal_order(query["delta"])
            return {"epsilon": float(e), "order": float(a)}
        d, a = acc.get_delta_and_optimal_order(query["epsilon"])
        return {"delta": float(d), "order": float(a)}
    if kind in ("pld_epsilon", "pld_delta"):
        acc = pld.PLDAccountant(value_discretization_interval=query.get("h", 1e-4))
        acc.compose(to_event(query["event"]))
        if kind == "pld_epsilon":
            return {"epsilon": float(acc.get_epsilon(query["delta"]))}
        return {"delta": float(acc.get_delta(query["epsilon"]))}
    if kind == "calibrate":
        if query["accountant"] == "rdp":
            make = rdp.RdpAccountant
        else:
            make = pld.PLDAccountant
        q, steps = query["rate"], query["steps"]

        def event(z):
            g = dp_event.GaussianDpEvent(z)
            inner = g if q >= 1.0 else dp_event.PoissonSampledDpEvent(q, g)
            return dp_event.SelfComposedDpEvent(inner, steps)

        z = mc.calibrate_dp_mechanism(
            make, event, query["target_epsilon"], query["delta"], tol=1e-5
        )
        return {"noise_multiplier": float(z)}
    raise ValueError(f"unknown query kind {kind}")


def main():
    queries = json.load(sys.stdin)
    json.dump([answer(q) for q in queries], sys.stdout)


if __name__ == "__main__":
    main()
