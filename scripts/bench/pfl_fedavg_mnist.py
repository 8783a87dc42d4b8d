#!/usr/bin/env python3
"""FedAvg on MNIST with pfl-research (the `pfl` package, PyTorch backend): speed baseline.

Everything that trains, aggregates and privatises is pfl's own code, used as a library:
* `pfl.data.federated_dataset.FederatedDataset` over `pfl.data.dataset.Dataset` per client
  (60 rows each; the client split and the per-round cohorts come from fl_common.py, so they are
  the same as in the Flower script); the cohort is sampled by a user sampler that hands out
  `CohortSchedule.next_cohort()` one id at a time (pfl's own 'random' sampler draws with
  replacement, its 'minimize_reuse' cycles in a fixed order; neither is the workload);
* `pfl.model.pytorch.PyTorchModel` with local optimizer torch.optim.SGD (lr 0.05) and central
  optimizer torch.optim.SGD(lr 1.0) -- pfl applies the averaged update as a gradient of -1x;
* `pfl.algorithm.FederatedAveraging` with `NNAlgorithmParams` / `NNTrainHyperParams`
  (1 local epoch, batch 10), run by `algorithm.run(...)` on a `pfl.aggregate.SimulatedBackend`;
* DP (`--dp central`): `pfl.privacy.CentrallyAppliedPrivacyMechanism(GaussianMechanism(
  clipping_bound=1.0, relative_noise_stddev=1.0))`: each client's update is clipped to l2 norm 1
  (GaussianMechanism.constrain_sensitivity), the server adds N(0, 1.0^2) to the *sum*
  (GaussianMechanism.add_noise), then FedAvg divides by the total weight (50 clients of weight 1).

Timing: `central_num_iterations = warmup + rounds`; a callback takes time.perf_counter() after
every central iteration, and the timed span is from the end of warm-up round `warmup` to the end
of the last round. Evaluation: pfl evaluates every client before/after local training on
iterations where `iteration % evaluation_frequency == 0`; evaluation_frequency is set past the
run so this happens only on iteration 0 (a warm-up round), and there is no validation cohort.
The test accuracy is computed once at the end, outside the timed span.

Split of a round (summed over the timed rounds, on worker rank 0): `client_train` = pfl's
simulate_one_user (local SGD + model difference + restoring the global model), `clip` = the
privacy mechanism's per-user postprocessing, `accumulate` = SumAggregator.accumulate,
`worker_reduce` = all-reduce across worker processes (only with --workers > 1), `noise` = the
mechanism's server-side add_noise, `server_update` = FederatedAveraging's
process_aggregated_statistics (average + central optimizer step), `other` = the rest of the
round (cohort sampling, dataset construction, pfl bookkeeping).

Parallelism: `--threads T` = torch.set_num_threads(T) in every process; `--workers W > 1`
re-launches this script under torchrun (torch.distributed.run, gloo backend on CPU) with W
processes; pfl splits each cohort across them and all-reduces the summed statistics.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fl_common as C  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    C.add_common_args(p)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads per process")
    p.add_argument("--workers", type=int, default=1, help="pfl worker processes (torchrun)")
    return p.parse_args()


def relaunch_under_torchrun(args) -> int:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={args.workers}", os.path.abspath(__file__)] + sys.argv[1:]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    import subprocess
    return subprocess.call(cmd, env=env)


def main() -> int:
    args = parse_args()
    if args.workers > 1 and "TORCHELASTIC_RUN_ID" not in os.environ:
        return relaunch_under_torchrun(args)

    load_before = C.uptime()
    import torch
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    import torch.nn.functional as F

    # Importing pytorch_ops initialises pfl's distributed context (torchrun env -> gloo group).
    from pfl.internal.ops import pytorch_ops
    from pfl.internal.ops.selector import set_framework_module
    set_framework_module(pytorch_ops)

    import pfl
    from pfl.aggregate.base import SumAggregator
    from pfl.aggregate.simulate import SimulatedBackend
    from pfl.algorithm import FederatedAveraging, NNAlgorithmParams
    from pfl.callback.base import TrainingProcessCallback
    from pfl.data.dataset import Dataset
    from pfl.data.federated_dataset import FederatedDataset
    from pfl.hyperparam import NNTrainHyperParams, NNEvalHyperParams
    from pfl.metrics import Metrics, Weighted
    from pfl.model.pytorch import PyTorchModel
    from pfl.privacy import CentrallyAppliedPrivacyMechanism, GaussianMechanism

    dist = pytorch_ops.distributed
    rank, world = dist.global_rank, dist.world_size

    # ---------------------------------------------------------------- data (not timed)
    data = C.load_mnist(args.data_dir)
    parts = C.iid_split(len(data["x_train"]), args.clients, args.seed)
    xs = torch.from_numpy(data["x_train"])
    ys = torch.from_numpy(data["y_train"])
    client_data = {i: (xs[idx].contiguous(), ys[idx].contiguous()) for i, idx in enumerate(parts)}

    schedule = C.CohortSchedule(args.clients, args.cohort, args.seed)

    class ScheduleSampler:
        """pfl user sampler (callable -> user id) handing out the shared cohorts in order.

        Every worker process builds the same schedule; pfl's distributed sampler draws
        world_size ids per step and gives each worker its own, so together the workers
        cover each cohort exactly once."""

        def __init__(self):
            self._queue: list[int] = []

        def __call__(self):
            if not self._queue:
                self._queue = schedule.next_cohort()
            return self._queue.pop(0)

    def make_dataset(uid):
        return Dataset(client_data[uid], user_id=str(uid))

    train_fd = FederatedDataset(make_dataset, ScheduleSampler())
    val_fd = FederatedDataset(make_dataset, ScheduleSampler())  # never used (no val cohort)

    # ---------------------------------------------------------------- model
    net = C.make_model(args.model, args.seed)

    class PflNet(torch.nn.Module):
        """pfl's PyTorchModel wants `loss` and `metrics` on the module."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x)

        def loss(self, x, y, eval=False):  # noqa: A002 (pfl's keyword)
            self.eval() if eval else self.train()
            return F.cross_entropy(self(x), y)

        @torch.no_grad()
        def metrics(self, x, y, eval=True):  # noqa: A002
            self.eval()
            out = self(x)
            n = len(y)
            return {"loss": Weighted(float(F.cross_entropy(out, y, reduction="sum")), n),
                    "accuracy": Weighted(float((out.argmax(1) == y).sum()), n)}

    pnet = PflNet(net)
    model = PyTorchModel(model=pnet, local_optimizer_create=torch.optim.SGD,
                         central_optimizer=torch.optim.SGD(pnet.parameters(), lr=1.0))

    # ---------------------------------------------------------------- timing hooks
    split = {k: 0.0 for k in ("client_train", "clip", "accumulate", "worker_reduce", "noise",
                              "server_update")}
    timing_on = [False]

    def add(key, t0):
        if timing_on[0]:
            split[key] += time.perf_counter() - t0

    class TimedFedAvg(FederatedAveraging):
        def simulate_one_user(self, model, user_dataset, central_context):
            t0 = time.perf_counter()
            r = super().simulate_one_user(model, user_dataset, central_context)
            add("client_train", t0)
            return r

        def process_aggregated_statistics(self, central_context, aggregate_metrics, model,
                                          statistics):
            t0 = time.perf_counter()
            r = super().process_aggregated_statistics(central_context, aggregate_metrics,
                                                      model, statistics)
            add("server_update", t0)
            return r

    class TimedSum(SumAggregator):
        def accumulate(self, *, accumulated, user_stats):
            t0 = time.perf_counter()
            r = super().accumulate(accumulated=accumulated, user_stats=user_stats)
            add("accumulate", t0)
            return r

        def worker_reduce(self, *, aggregated_worker_stats, central_context,
                          aggregated_worker_metrics):
            t0 = time.perf_counter()
            r = super().worker_reduce(aggregated_worker_stats=aggregated_worker_stats,
                                      central_context=central_context,
                                      aggregated_worker_metrics=aggregated_worker_metrics)
            add("worker_reduce", t0)
            return r

    class TimedCentralDP(CentrallyAppliedPrivacyMechanism):
        def postprocess_one_user(self, *, stats, user_context):
            t0 = time.perf_counter()
            r = super().postprocess_one_user(stats=stats, user_context=user_context)
            add("clip", t0)
            return r

        def postprocess_server(self, *, stats, central_context, aggregate_metrics):
            t0 = time.perf_counter()
            r = super().postprocess_server(stats=stats, central_context=central_context,
                                           aggregate_metrics=aggregate_metrics)
            add("noise", t0)
            return r

    stamps: list[float] = []
    cpu_marks: list[float] = []

    class RoundClock(TrainingProcessCallback):
        def after_central_iteration(self, aggregate_metrics, model, *, central_iteration):
            stamps.append(time.perf_counter())
            cpu_marks.append(time.process_time())
            # warm-up rounds 0..warmup-1 done -> start the split accumulators
            if central_iteration + 1 == args.warmup:
                timing_on[0] = True
            return False, Metrics()

    postprocessors = []
    mechanism_name = None
    if args.dp == "central":
        postprocessors.append(TimedCentralDP(GaussianMechanism(clipping_bound=1.0,
                                                               relative_noise_stddev=1.0)))
        mechanism_name = ("pfl.privacy.CentrallyAppliedPrivacyMechanism(GaussianMechanism("
                          "clipping_bound=1.0, relative_noise_stddev=1.0))")

    backend = SimulatedBackend(training_data=train_fd, val_data=val_fd,
                               postprocessors=postprocessors, aggregator=TimedSum())
    total_iters = args.warmup + args.rounds
    algo_params = NNAlgorithmParams(central_num_iterations=total_iters,
                                    evaluation_frequency=10 * total_iters + 1,
                                    train_cohort_size=args.cohort, val_cohort_size=None)
    train_params = NNTrainHyperParams(local_num_epochs=1, local_learning_rate=0.05,
                                      local_batch_size=10)
    eval_params = NNEvalHyperParams(local_batch_size=None)
    algorithm = TimedFedAvg()

    # ---------------------------------------------------------------- run
    t_start = time.perf_counter()
    algorithm.run(algorithm_params=algo_params, backend=backend, model=model,
                  model_train_params=train_params, model_eval_params=eval_params,
                  callbacks=[RoundClock()], send_metrics_to_platform=False)
    t_end = time.perf_counter()
    load_after = C.uptime()

    if len(stamps) != total_iters:
        raise RuntimeError(f"{len(stamps)} rounds recorded, expected {total_iters}")
    seconds = stamps[-1] - stamps[args.warmup - 1] if args.warmup > 0 else stamps[-1] - t_start
    cpu_seconds = cpu_marks[-1] - cpu_marks[args.warmup - 1] if args.warmup > 0 else None
    acc = C.test_accuracy(net, data["x_test"], data["y_test"])

    if rank != 0:
        return 0
    per_round = np.diff([t_start] + stamps)
    rec = C.base_record("pfl-research", pfl.__version__ if hasattr(pfl, "__version__")
                        else _pfl_version(), args)
    split_total = sum(split.values())
    split["other"] = max(0.0, seconds - split_total)
    rec.update({
        "seconds": round(seconds, 4),
        "rounds_per_sec": round(args.rounds / seconds, 4),
        "seconds_per_round_median": round(float(np.median(per_round[args.warmup:])), 4),
        "warmup_seconds": [round(float(s), 3) for s in per_round[:args.warmup]],
        "round_seconds": [round(float(s), 3) for s in per_round[args.warmup:]],
        "total_run_seconds": round(t_end - t_start, 3),
        "cpu_seconds": None if cpu_seconds is None else round(cpu_seconds, 3),
        "cpu_note": "time.process_time() of worker rank 0 over the timed rounds (all its "
                    "threads); with W workers the job's CPU is about W times this",
        "split_seconds": {k: round(v, 4) for k, v in split.items()},
        "split_note": "rank 0 only, summed over the timed rounds; client_train includes pfl's "
                      "per-user get/set of the global parameters",
        "test_accuracy": acc,
        "dp_mechanism": mechanism_name,
        "threads": args.threads,
        "interop_threads": 1,
        "workers": world,
        "load_before": load_before,
        "load_after": load_after,
    })
    C.append_jsonl(args.out, rec)
    return 0


def _pfl_version() -> str:
    from importlib.metadata import version
    return version("pfl")


if __name__ == "__main__":
    sys.exit(main())
