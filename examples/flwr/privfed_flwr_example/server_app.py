"""The ServerApp: FedAvg wrapped by privfed's strategy for the chosen privacy mode; the global
model is evaluated on the MNIST test set after every round and ε(δ) printed beside it."""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from . import task


@dataclass
class Settings:
    """Everything the example can be told (``flwr run`` config keys: the names with ``-``)."""

    num_rounds: int = 5
    num_clients: int = 100
    cohort: int = 20
    privacy: str = "distributed"  # none | local | distributed
    data_dir: str = field(default_factory=task.default_data_dir)
    seed: int = 1
    local_epochs: int = 1
    batch_size: int = 32
    learning_rate: float = 0.1
    clip: float = 1.0
    delta: float = 1e-5
    accountant: str = "auto"  # auto (local: pure-capped RDP, distributed: RDP) | rdp | pld | pure
    # local DP
    local_mechanism: str = "privunitg"
    local_epsilon: float = 8.0
    # distributed DP (paper 001's Skellam pipeline) + secure aggregation
    epsilon: float = 10.0  # target ε(δ) after num_rounds, for the planner
    bits: int = 16
    dropout_tolerance: float = 0.2  # expected fraction of the cohort that may drop
    timeout: float = 600.0
    quiet: bool = False

    @staticmethod
    def from_run_config(rc: Dict[str, Any]) -> "Settings":
        s = Settings()
        for k, v in rc.items():
            name = k.replace("-", "_")
            if hasattr(s, name) and v != "":
                typ = type(getattr(s, name))
                setattr(s, name, typ(v) if typ is not bool else bool(v))
        return s


def _accountant(name: str, mode: str):
    from privfed import accounting

    if name == "auto":
        name = "pure" if mode == "local" else "rdp"
    return {"rdp": accounting.RdpAccountant, "pld": accounting.PldAccountant,
            "pure": accounting.PureCappedRdpAccountant}[name]()


def make_strategy(s: Settings):
    """FedAvg over ``cohort`` of ``num_clients`` per round, wrapped for ``s.privacy``."""
    fedavg = FedAvg(fraction_train=s.cohort / s.num_clients, fraction_evaluate=0.0,
                    min_train_nodes=s.cohort, min_available_nodes=s.num_clients)
    if s.privacy == "none":
        return fedavg
    if s.privacy == "local":
        import privfed
        from privfed.flwr import LocalDpStrategy

        # the ε each report carries (the clients' mechanism at the example's dimension)
        dim = sum(a.size for a in task.init_params().values())
        probe = {"privunitg": lambda: privfed.PrivUnitG(epsilon=s.local_epsilon, dim=dim),
                 "privunit2": lambda: privfed.PrivUnit2(epsilon=s.local_epsilon, dim=dim),
                 "laplace": lambda: privfed.Laplace(s.local_epsilon, dim, norm="l1")}
        eps = float(probe[s.local_mechanism]().epsilon)
        return LocalDpStrategy(fedavg, epsilon=eps, delta=s.delta,
                               accountant=_accountant(s.accountant, s.privacy))
    if s.privacy == "distributed":
        from privfed.flwr import DistributedDpStrategy

        dim = sum(a.size for a in task.init_params().values())
        return DistributedDpStrategy.planned(
            fedavg, dim=dim, clip=s.clip, bits=s.bits, clients=s.cohort,
            epsilon=s.epsilon, delta=s.delta, rounds=s.num_rounds,
            dropout_tolerance=s.dropout_tolerance, accountant=_accountant(s.accountant, s.privacy))
    raise ValueError(f"unknown privacy mode {s.privacy!r}")


def train_config(s: Settings) -> ConfigRecord:
    cfg = {"privacy": s.privacy, "data-dir": s.data_dir, "num-clients": s.num_clients,
           "seed": s.seed, "local-epochs": s.local_epochs, "batch-size": s.batch_size,
           "learning-rate": s.learning_rate, "clip": s.clip,
           "local-mechanism": s.local_mechanism, "local-epsilon": s.local_epsilon}
    return ConfigRecord(cfg)


def run(grid: Grid, s: Settings, info: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
    """Runs the strategy on ``grid``; returns one dict per round (accuracy, ε, seconds).
    ``info`` receives the strategy's plan (distributed) and per-round secure-aggregation
    timings."""
    strategy = make_strategy(s)
    if info is not None and hasattr(strategy, "params"):
        info["plan"] = dict(strategy.params)
    test = task.load_mnist(s.data_dir)
    rows: List[Dict[str, Any]] = []
    t_last = [time.perf_counter()]

    def evaluate_fn(server_round: int, arrays: ArrayRecord) -> Optional[MetricRecord]:
        p = {k: v.numpy() for k, v in arrays.items()}
        acc, loss = task.evaluate(p, test["x_test"], test["y_test"])
        ledger = getattr(strategy, "ledger", None)
        eps = ledger.epsilon if ledger is not None else (math.inf if server_round else 0.0)
        contributors = None
        if ledger is not None and ledger.history and server_round > 0:
            contributors = ledger.history[-1].contributors
        now = time.perf_counter()
        row = {"round": server_round, "accuracy": acc, "test_loss": loss, "epsilon": eps,
               "delta": s.delta, "contributors": contributors,
               "seconds": round(now - t_last[0], 3)}
        t_last[0] = now
        rows.append(row)
        if not s.quiet:
            c = "" if contributors is None else f"  contributors {contributors:3d}"
            print(f"round {server_round:3d}  accuracy {acc:.4f}  test loss {loss:.4f}  "
                  f"ε = {eps:.4f} (δ = {s.delta:g}){c}  [{row['seconds']:.1f} s]", flush=True)
        outcomes = getattr(strategy, "rounds", None)
        if outcomes and server_round > 0 and outcomes[-1].server_round == server_round:
            o = outcomes[-1]
            row.update({"sampled": o.sampled, "aborted": o.aborted,
                        "wrap_suspected": o.wrap_suspected,
                        "stage_seconds": {k: round(v, 4) for k, v in o.stage_seconds.items()}})
        return MetricRecord({"accuracy": acc, "test-loss": loss})

    init = task.init_params()
    strategy.start(
        grid=grid,
        initial_arrays=ArrayRecord(array_dict={k: Array(v) for k, v in init.items()}),
        num_rounds=s.num_rounds,
        timeout=s.timeout,
        train_config=train_config(s),
        evaluate_fn=evaluate_fn,
    )
    return rows


def make_server_app(s: Optional[Settings] = None, sink: Optional[Dict[str, Any]] = None) -> ServerApp:
    """A ServerApp running :func:`run` with ``s`` (None: from the run config of ``flwr run``);
    ``sink`` (a dict) receives ``rounds`` and ``plan``."""
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        settings = s if s is not None else Settings.from_run_config(dict(context.run_config))
        info: Dict[str, Any] = {}
        rows = run(grid, settings, info)
        if sink is not None:
            sink.update(info)
            sink["rounds"] = rows

    return server_app


app = make_server_app()
