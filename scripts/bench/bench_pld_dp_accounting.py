#!/usr/bin/env python3
"""Times Google's dp_accounting 0.6.0 PLD accountant on the issue-3 benchmark case:
Poisson-subsampled Gaussian, q = 0.01, z = 1.1, 10^4 steps, delta = 1e-5.
Run side by side with `cargo run --release -p privfed-accounting --example bench_pld`.
"""
import time

from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant as pld

Q, Z, STEPS, DELTA = 0.01, 1.1, 10_000, 1e-5
event = dp_event.SelfComposedDpEvent(
    dp_event.PoissonSampledDpEvent(Q, dp_event.GaussianDpEvent(Z)), STEPS
)
for h in [1e-4, 5e-4]:
    times = []
    for _ in range(3):
        t = time.perf_counter()
        acc = pld.PLDAccountant(value_discretization_interval=h)
        acc.compose(event)
        eps = acc.get_epsilon(DELTA)
        times.append(time.perf_counter() - t)
    print(
        f"dp_accounting PLD (h={h:g}): epsilon = {eps:.6f}  first run {times[0]:.4f} s  "
        f"median {sorted(times)[1]:.4f} s  min {min(times):.4f} s  (3 runs)"
    )
