#!/usr/bin/env python3
"""jax_privacy's own auditing estimators on privfed's test cases
(crates/privfed-audit/tests/it/reference.rs, the `*_match_jax_privacy` tests).

Reads one JSON object on stdin and writes one on stdout:

  {"one_run": [[m, r, v, delta, alpha], ...],       Steinke-Nasr-Jagielski 2023: eps bound
   "one_run_p": [[m, r, v, eps, delta], ...],       ... and its p-value
   "one_run_fdp": [[m, r, v, delta, alpha], ...],   Mahloujifar-Melis-Chaudhuri 2025, Gaussian
   "event": [[hits_x, n_x, hits_xp, n_xp, delta, alpha], ...]}
                                                    Clopper-Pearson bound of one event
  -> {"one_run_eps": [...], "one_run_p": [...], "one_run_fdp_eps": [...], "event_eps": [...]}

`--probe` exits 0 when jax_privacy's auditing module loads (the build script's check).

The values come from jax_privacy 2.0.0's `jax_privacy/auditing.py` (pip install --no-deps
jax-privacy==2.0.0; it needs only numpy, scipy and dp_accounting). The module is loaded from its
file, not as `jax_privacy.auditing`, because the package's `__init__` imports JAX, which the
auditing code does not use. What is called:

* one-run p-value and bound: `_one_run_p_value(m, r, v, eps, delta)` and
  `_epsilon_one_run(0, m, r, v, alpha, delta)` (brentq to xtol = 1e-6);
* the f-DP variant for a Gaussian claim: `_epsilon_one_run_fdp(0, m, r, v, alpha, delta)` (the
  claim's curve is the Gaussian mechanism's at (eps, delta), via dp_accounting's
  `get_sigma_gaussian`; brentq to xtol = 1e-6);
* one event: `CanaryScoreAuditor(in, out).epsilon_clopper_pearson(alpha, delta,
  threshold_strategy=Explicit(0.5))` on scores that are 1 for the samples in the event and 0
  otherwise, so that the event {score >= 0.5} has exactly the given counts: its bound is
  `max(0, ln(1 - CP_upper(misses_x, n_x, alpha/2) - delta) - ln(CP_upper(hits_xp, n_xp, alpha/2)))`.
"""
import importlib.util
import json
import pathlib
import sys


def load_auditing():
    spec = importlib.util.find_spec("jax_privacy")  # locates the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("jax_privacy is not installed (pip install --no-deps jax-privacy==2.0.0)")
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "auditing.py"
    mod_spec = importlib.util.spec_from_file_location("jax_privacy_auditing", path)
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules["jax_privacy_auditing"] = module  # dataclasses look the module up by name
    mod_spec.loader.exec_module(module)
    return module


def main():
    auditing = load_auditing()
    if "--probe" in sys.argv[1:]:
        return
    import numpy as np

    q = json.load(sys.stdin)
    out = {}
    out["one_run_eps"] = [
        float(auditing._epsilon_one_run(0.0, m, r, v, alpha, delta))
        for m, r, v, delta, alpha in q.get("one_run", [])
    ]
    out["one_run_p"] = [
        float(auditing._one_run_p_value(m, r, v, eps, delta))
        for m, r, v, eps, delta in q.get("one_run_p", [])
    ]
    out["one_run_fdp_eps"] = [
        float(auditing._epsilon_one_run_fdp(0.0, m, r, v, alpha, delta))
        for m, r, v, delta, alpha in q.get("one_run_fdp", [])
    ]
    events = []
    for hx, nx, hxp, nxp, delta, alpha in q.get("event", []):
        in_scores = np.r_[np.ones(hx), np.zeros(nx - hx)]
        out_scores = np.r_[np.ones(hxp), np.zeros(nxp - hxp)]
        auditor = auditing.CanaryScoreAuditor(in_scores, out_scores)
        events.append(float(auditor.epsilon_clopper_pearson(
            alpha, delta, threshold_strategy=auditing.Explicit(0.5))))
    out["event_eps"] = events
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
