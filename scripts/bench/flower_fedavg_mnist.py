#!/usr/bin/env python3
"""FedAvg on MNIST with Flower's Simulation Runtime (Ray backend): speed baseline.

What runs is Flower's code, used as a library (flwr 1.41, Message API):
* `flwr.simulation.run_simulation(server_app, client_app, num_supernodes=clients,
  backend_name="ray", backend_config=...)`: Flower's in-process Simulation Runtime -- the
  ServerApp in a thread talking to an in-memory LinkState through `InMemoryGrid`, and the
  ClientApp executed by a pool of Ray actors (`ClientAppActor`), one virtual SuperNode per
  client (partition-id = client index in fl_common.iid_split);
* server strategy `flwr.serverapp.strategy.FedAvg(fraction_train=cohort/clients,
  fraction_evaluate=0)` driven by its own `Strategy.start(...)` loop; Flower samples the
  cohort with `random.sample` over the node ids (uniform without replacement; Python's
  `random` is seeded, but the cohorts are not the pfl script's -- same distribution, different
  draws) and averages the returned *models* weighted by `num-examples` (all 60, so a plain
  mean; with server lr 1.0 this equals global + mean of the updates);
* DP (`--dp central`): `flwr.serverapp.strategy.DifferentialPrivacyServerSideFixedClipping(
  FedAvg, noise_multiplier=1.0, clipping_norm=1.0, num_sampled_clients=cohort)`: the server
  clips each client's update (local - global) to l2 norm 1, FedAvg averages, and Gaussian
  noise of std noise_multiplier * clipping_norm / num_sampled_clients = 1/50 is added to the
  average -- the same as N(0, 1) on the sum divided by 50;
* the ClientApp's train function is this script's (Flower ships no training loop): load the
  global arrays into the model, 1 epoch of SGD(lr 0.05) over the client's 60 rows in order,
  batch 10, cross-entropy, reply with the local model and `num-examples`.

Timing: `Strategy.start` calls `evaluate_fn(round, arrays)` before round 1 and after every
round; here that function only takes time.perf_counter() (and, after the last round, computes
the test accuracy *after* taking the time). Rounds 1..warmup are untimed; the rest are timed.
No federated evaluation (fraction_evaluate = 0). Ray start-up and actor creation happen before
round 1; each Ray actor loads MNIST once (module-level cache) during the warm-up rounds.

Split (summed over the timed rounds): `configure` = strategy.configure_train (sampling and
message construction), `aggregate` = strategy.aggregate_train (FedAvg; with DP also clipping
and noise, of which `dp_clip` and `dp_noise` are broken out), `client_train_sum` = the
ClientApps' own train-function time summed over clients (what ran inside the actors; divide
by the number of concurrent actors for its share of the wall time), `transport_and_wait` =
round time - configure - aggregate (Ray dispatch, (de)serialisation of the messages, Flower's
0.1 s polling loops in InMemoryGrid and the VCE, and the client training itself).

CPU: `driver_cpu_seconds` = process_time() of this process over the timed rounds;
`client_cpu_sum` = process_time() of the actor process around each train call, summed;
`cpu_seconds` = their sum.

Parallelism: `--ray-cpus N` (Ray's num_cpus) and `--client-cpus c` (client_resources num_cpus)
give N / c concurrent ClientApp actors; `--threads T` = torch.set_num_threads(T) inside every
ClientApp call and in the server process.

The script imports itself as a module (see the bottom) so that Ray pickles the ClientApp by
reference and each actor keeps its data cache between messages.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fl_common as C  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp import Grid, ServerApp  # noqa: E402
from flwr.serverapp.strategy import (  # noqa: E402
    DifferentialPrivacyServerSideFixedClipping,
    FedAvg,
)


# ====================================================================== client side (Ray actors)
_CACHE: dict = {}


def _client_rows(data_dir: str, clients: int, seed: int, pid: int):
    key = (data_dir, clients, seed)
    if key not in _CACHE:
        data = C.load_mnist(data_dir)
        parts = C.iid_split(len(data["x_train"]), clients, seed)
        xs, ys = torch.from_numpy(data["x_train"]), torch.from_numpy(data["y_train"])
        _CACHE.clear()
        _CACHE[key] = [(xs[idx].contiguous(), ys[idx].contiguous()) for idx in parts]
    return _CACHE[key][pid]


def _local_model(name: str, seed: int):
    key = ("model", name)
    if key not in _CACHE:
        _CACHE[key] = C.make_model(name, seed)
    return _CACHE[key]


client_app = ClientApp()


@client_app.train()
def client_train(msg: Message, context: Context) -> Message:
    t0 = time.perf_counter()
    c0 = time.process_time()
    cfg = msg.content["config"]
    torch.set_num_threads(int(cfg["threads"]))
    pid = int(context.node_config["partition-id"])
    x, y = _client_rows(str(cfg["data-dir"]), int(cfg["clients"]), int(cfg["seed"]), pid)
    model = _local_model(str(cfg["model"]), int(cfg["seed"]))
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=float(cfg["lr"]))
    bs = int(cfg["batch-size"])
    t1 = time.perf_counter()
    for i in range(0, len(x), bs):
        opt.zero_grad()
        F.cross_entropy(model(x[i:i + bs]), y[i:i + bs]).backward()
        opt.step()
    t2 = time.perf_counter()
    content = RecordDict({
        "arrays": ArrayRecord(model.state_dict()),
        "metrics": MetricRecord({"num-examples": len(x),
                                 "client-seconds": t2 - t0,
                                 "sgd-seconds": t2 - t1,
                                 "client-cpu-seconds": time.process_time() - c0}),
    })
    return Message(content=content, reply_to=msg)


# ====================================================================== server side
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    C.add_common_args(p)
    p.add_argument("--threads", type=int, default=1, help="torch threads per ClientApp call")
    p.add_argument("--ray-cpus", type=float, default=2, help="Ray init num_cpus")
    p.add_argument("--client-cpus", type=float, default=1, help="client_resources num_cpus")
    p.add_argument("--flwr-log", default="WARNING", help="Flower logger level")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    import flwr
    from flwr.simulation import run_simulation

    logging.getLogger("flwr").setLevel(getattr(logging, args.flwr_log))
    load_before = C.uptime()
    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    np.random.seed(args.seed)  # Flower's Gaussian noise uses numpy's global generator

    data = C.load_mnist(args.data_dir)  # server side: only the test set is used
    net = C.make_model(args.model, args.seed)
    total_rounds = args.warmup + args.rounds

    split = {k: 0.0 for k in ("configure", "aggregate", "dp_clip", "dp_noise",
                              "client_train_sum", "client_sgd_sum", "client_cpu_sum")}
    state = {"round": 0, "timing": False, "acc": None}
    stamps: list[float] = []
    cpu_marks: list[float] = []

    def timed(key):
        def deco(fn):
            def wrapper(*a, **kw):
                t0 = time.perf_counter()
                r = fn(*a, **kw)
                if state["timing"]:
                    split[key] += time.perf_counter() - t0
                return r
            return wrapper
        return deco

    class TimedFedAvg(FedAvg):
        def configure_train(self, server_round, arrays, config, grid):
            state["round"] = server_round
            state["timing"] = server_round > args.warmup
            return timed("configure")(super().configure_train)(server_round, arrays, config,
                                                              grid)

        def aggregate_train(self, server_round, replies):
            replies = list(replies)
            if state["timing"]:
                for m in replies:
                    if not m.has_error():
                        mr = m.content["metrics"]
                        split["client_train_sum"] += float(mr["client-seconds"])
                        split["client_sgd_sum"] += float(mr["sgd-seconds"])
                        split["client_cpu_sum"] += float(mr["client-cpu-seconds"])
            return timed("aggregate")(super().aggregate_train)(server_round, replies)

    class TimedDP(DifferentialPrivacyServerSideFixedClipping):
        def aggregate_train(self, server_round, replies):
            t0 = time.perf_counter()
            inner0 = split["aggregate"]
            noise0 = split["dp_noise"]
            r = super().aggregate_train(server_round, replies)
            if state["timing"]:
                total = time.perf_counter() - t0
                inner = split["aggregate"] - inner0
                noise = split["dp_noise"] - noise0
                split["dp_clip"] += total - inner - noise
                split["aggregate"] += total - inner  # aggregate = whole DP aggregate_train
            return r

        def _add_noise_to_aggregated_arrays(self, aggregated_arrays):
            return timed("dp_noise")(super()._add_noise_to_aggregated_arrays)(aggregated_arrays)

    n_clients, cohort = args.clients, args.cohort
    fedavg = TimedFedAvg(fraction_train=cohort / n_clients, fraction_evaluate=0.0,
                         min_train_nodes=cohort, min_available_nodes=n_clients)
    # FedAvg samples int(len(nodes) * fraction_train) nodes: make sure that is `cohort`
    assert max(int(n_clients * (cohort / n_clients)), cohort) == cohort
    if args.dp == "central":
        strategy = TimedDP(fedavg, noise_multiplier=1.0, clipping_norm=1.0,
                           num_sampled_clients=cohort)
        mechanism = ("flwr.serverapp.strategy.DifferentialPrivacyServerSideFixedClipping("
                     "FedAvg, noise_multiplier=1.0, clipping_norm=1.0, num_sampled_clients="
                     f"{cohort})")
    else:
        strategy = fedavg
        mechanism = None

    def evaluate_fn(server_round: int, arrays: ArrayRecord):
        stamps.append(time.perf_counter())
        cpu_marks.append(time.process_time())
        if server_round == total_rounds:
            net.load_state_dict(arrays.to_torch_state_dict())
            state["acc"] = C.test_accuracy(net, data["x_test"], data["y_test"])
        return None

    server_app = ServerApp()

    @server_app.main()
    def server_main(grid: Grid, context: Context) -> None:
        strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord(net.state_dict()),
            num_rounds=total_rounds,
            train_config=ConfigRecord({
                "data-dir": args.data_dir, "clients": n_clients, "seed": args.seed,
                "model": args.model, "threads": args.threads, "lr": 0.05, "batch-size": 10}),
            evaluate_fn=evaluate_fn,
        )

    backend_config = {
        "client_resources": {"num_cpus": args.client_cpus, "num_gpus": 0.0},
        "init_args": {"num_cpus": args.ray_cpus, "include_dashboard": False,
                      "logging_level": logging.WARNING, "log_to_driver": False},
    }
    t_start = time.perf_counter()
    run_simulation(server_app=server_app, client_app=client_app, num_supernodes=n_clients,
                   backend_name="ray", backend_config=backend_config)
    t_end = time.perf_counter()
    load_after = C.uptime()

    if len(stamps) != total_rounds + 1:
        raise RuntimeError(f"{len(stamps)} time stamps, expected {total_rounds + 1} "
                           "(did a round fail?)")
    # stamps[0] = before round 1, stamps[k] = after round k
    seconds = stamps[total_rounds] - stamps[args.warmup]
    driver_cpu = cpu_marks[total_rounds] - cpu_marks[args.warmup]
    per_round = np.diff(stamps)
    split["transport_and_wait"] = max(0.0, seconds - split["configure"] - split["aggregate"])
    concurrency = int(args.ray_cpus // args.client_cpus)
    rec = C.base_record("flower", flwr.__version__, args)
    rec.update({
        "seconds": round(seconds, 4),
        "rounds_per_sec": round(args.rounds / seconds, 4),
        "seconds_per_round_median": round(float(np.median(per_round[args.warmup:])), 4),
        "warmup_seconds": [round(float(s), 3) for s in per_round[:args.warmup]],
        "round_seconds": [round(float(s), 3) for s in per_round[args.warmup:]],
        "total_run_seconds": round(t_end - t_start, 3),
        "driver_cpu_seconds": round(driver_cpu, 3),
        "cpu_seconds": round(driver_cpu + split["client_cpu_sum"], 3),
        "cpu_note": "driver process CPU (ServerApp thread, Simulation Runtime threads, Ray "
                    "client side) + the actor processes' CPU during the ClientApp train "
                    "calls, summed over clients; Ray's own daemons (raylet, GCS) and the "
                    "actors' message handling outside the train function are not counted",
        "split_seconds": {k: round(v, 4) for k, v in split.items()},
        "split_note": "summed over the timed rounds; client_*_sum are summed over clients "
                      "(run concurrently on the actors); aggregate includes dp_clip and dp_noise",
        "test_accuracy": state["acc"],
        "dp_mechanism": mechanism,
        "threads": args.threads,
        "ray_num_cpus": args.ray_cpus,
        "client_num_cpus": args.client_cpus,
        "concurrent_clients": concurrency,
        "ray_version": _version("ray"),
        "driver": "flwr.simulation.run_simulation (Ray backend)",
        "load_before": load_before,
        "load_after": load_after,
    })
    C.append_jsonl(args.out, rec)
    return 0


def _version(pkg: str) -> str:
    from importlib.metadata import version
    return version(pkg)


if __name__ == "__main__":
    # Run as the importable module `flower_fedavg_mnist`, not as __main__, so that the
    # ClientApp pickled to the Ray actors refers to this module by name.
    import flower_fedavg_mnist as _self  # noqa: E402
    sys.exit(_self.main())
