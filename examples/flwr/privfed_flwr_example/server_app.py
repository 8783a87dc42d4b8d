"""The ServerApp: FedAvg wrapped by privfed's strategy for the chosen privacy mode; the global
model is evaluated on the MNIST test set after every round and ε(δ) printed beside it.

``result-file`` (a run-config key) makes the ServerApp write what it learned as JSON after every
round and at the end (``status``: running, completed or failed with the error): the
deployment test reads it beside the run's status."""

from __future__ import annotations

import json
import math
import os
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
    privacy: str = "distributed"  # none | local | central | distributed
    data_dir: str = field(default_factory=task.default_data_dir)
    seed: int = 1
    local_epochs: int = 1
    batch_size: int = 32
    learning_rate: float = 0.1
    clip: float = 1.0
    delta: float = 1e-5
    # auto (local: pure-capped RDP; distributed: RDP; central: RDP under replace-one, its only
    # accountant) | rdp | pld | pure
    accountant: str = "auto"
    # local DP
    local_mechanism: str = "privunitg"
    local_epsilon: float = 8.0
    # distributed DP (paper 001's Skellam pipeline) + secure aggregation
    epsilon: float = 10.0  # target ε(δ) after num_rounds, for the planner
    bits: int = 16
    dropout_tolerance: float = 0.2  # expected fraction of the cohort that may drop
    max_consecutive_aborts: int = 2  # aborted secure-aggregation rounds in a row that stop the run
    # "honest-but-curious" or "active" (docs/FLOWER.md, "Threat model"); roster_file: the
    # enrollment authority's signed roster (privfed.secagg.Roster.to_bytes), "" = none
    threat_model: str = "honest-but-curious"
    roster_file: str = ""
    # central DP (privfed's CentralDpStrategy: the server clips each update to ``clip`` and adds
    # Gaussian noise of standard deviation noise_multiplier·clip/cohort to the mean)
    noise_multiplier: float = 1.0
    timeout: float = 600.0  # seconds a round (a secure-aggregation stage) waits for replies
    result_file: str = ""  # "" = none; else JSON of the rounds, written after every round
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
        name = "pure" if mode == "local" else "rdp"  # central, distributed: RDP
    if mode == "central":
        # A central round is a fixed-size cohort drawn without replacement, whose amplification
        # privfed accounts under replace-one neighbours only (CentralDpStrategy's docs): RDP
        # with that relation is the one accountant that composes it.
        if name != "rdp":
            raise ValueError(f"privacy = central is accounted with RDP under replace-one "
                             f"neighbours; accountant = {name!r} cannot compose its rounds "
                             "(use auto or rdp)")
        return accounting.RdpAccountant(neighboring_relation="replace_one")
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
    if s.privacy == "central":
        from privfed.flwr import CentralDpStrategy

        # the server clips each update to ``clip`` and adds the noise (no client mod); each
        # round is accounted as a cohort drawn from the num_clients SuperNodes
        return CentralDpStrategy(fedavg, noise_multiplier=s.noise_multiplier,
                                 clipping_norm=s.clip, population=s.num_clients,
                                 delta=s.delta, accountant=_accountant(s.accountant, s.privacy))
    if s.privacy == "distributed":
        from privfed.flwr import DistributedDpStrategy

        dim = sum(a.size for a in task.init_params().values())
        roster = None
        if s.roster_file:
            from privfed import secagg

            with open(s.roster_file, "rb") as f:
                roster = secagg.Roster.from_bytes(f.read())
        return DistributedDpStrategy.planned(
            fedavg, dim=dim, clip=s.clip, bits=s.bits, clients=s.cohort,
            epsilon=s.epsilon, delta=s.delta, rounds=s.num_rounds,
            dropout_tolerance=s.dropout_tolerance, stage_timeout=s.timeout,
            max_consecutive_aborts=s.max_consecutive_aborts,
            threat_model=s.threat_model, roster=roster,
            accountant=_accountant(s.accountant, s.privacy))
    raise ValueError(f"unknown privacy mode {s.privacy!r}")


def train_config(s: Settings) -> ConfigRecord:
    cfg = {"privacy": s.privacy, "data-dir": s.data_dir, "num-clients": s.num_clients,
           "seed": s.seed, "local-epochs": s.local_epochs, "batch-size": s.batch_size,
           "learning-rate": s.learning_rate, "clip": s.clip,
           "local-mechanism": s.local_mechanism, "local-epsilon": s.local_epsilon}
    return ConfigRecord(cfg)


def run(grid: Grid, s: Settings, info: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
    """Runs the strategy on ``grid``; returns one dict per round (accuracy, ε, seconds).
    ``info`` receives the strategy's plan (distributed) and per-round details: the
    secure-aggregation stages (distributed), the sample, clipping norm and noise (central)."""
    strategy = make_strategy(s)
    if info is not None and hasattr(strategy, "params"):
        info["plan"] = dict(strategy.params)
    test = task.test_data(s.data_dir)
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
        # the strategy's record of this round (central: CentralRound, distributed:
        # RoundOutcome; none for a round that sent nothing)
        outcomes = getattr(strategy, "rounds", None)
        o = outcomes[-1] if outcomes and server_round > 0 else None
        if o is not None and o.server_round != server_round:
            o = None
        if s.privacy == "central" and o is not None:
            # ε(δ) after this round as the strategy reports it (also its privfed-epsilon metric)
            eps, contributors = o.epsilon, o.contributors
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
        if o is not None and s.privacy == "central":
            _central_row(row, o, s)
        elif o is not None and s.privacy == "distributed":
            _distributed_row(row, o, s)
        if info is not None:
            info["rounds"] = rows
            write_result(s, info, "running")
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


def _distributed_row(row: Dict[str, Any], o, s: Settings) -> None:
    """A secure-aggregation round (privfed.flwr.RoundOutcome) in the round's row."""
    row.update({"sampled": o.sampled, "aborted": o.aborted,
                "abort_reason": o.abort_reason, "wrap_suspected": o.wrap_suspected,
                "stage_seconds": {k: round(v, 4) for k, v in o.stage_seconds.items()}})
    if s.result_file:  # what the deployment test checks the decoded sum with
        row.update({"session_id": o.session_id.hex(),
                    "survivor_nodes": [int(n) for n in o.survivor_nodes],
                    "node_to_client": {str(k): v for k, v in o.node_to_client.items()},
                    "errors": {str(k): v for k, v in o.errors.items()},
                    "mean": None if o.mean is None else [float(x) for x in o.mean]})


def _central_row(row: Dict[str, Any], o, s: Settings) -> None:
    """A central-DP round (privfed.flwr.CentralRound) in the round's row: the sample it was
    accounted as (k of n), the clipping norm and the noise on the mean."""
    row.update({"population": o.population, "sampled": o.sampled,
                "refused": o.refused, "failed": o.failed,
                "clipping_norm": o.clipping_norm, "noise_multiplier": o.noise_multiplier,
                "noise_stddev": o.noise_stddev})
    if s.result_file:  # the released noisy mean update, which the deployment test checks
        row["mean"] = None if o.mean is None else [float(x) for x in o.mean]


def write_result(s: Settings, info: Dict[str, Any], status: str, error: str = "") -> None:
    """``info`` (rounds, plan, settings) and ``status`` as JSON in ``s.result_file``, written
    to a temporary file and renamed, so a reader never sees half a file."""
    if not s.result_file:
        return
    doc = {"status": status, "error": error, "settings": asdict(s), **info}
    tmp = f"{s.result_file}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, default=str)
    os.replace(tmp, s.result_file)


def make_server_app(s: Optional[Settings] = None, sink: Optional[Dict[str, Any]] = None) -> ServerApp:
    """A ServerApp running :func:`run` with ``s`` (None: from the run config of ``flwr run``);
    ``sink`` (a dict) receives ``rounds`` and ``plan``."""
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        settings = s if s is not None else Settings.from_run_config(dict(context.run_config))
        info: Dict[str, Any] = {}
        try:
            rows = run(grid, settings, info)
        except Exception as exc:
            write_result(settings, info, "failed", f"{type(exc).__name__}: {exc}")
            raise  # the run ends as failed, with the error in its status details
        write_result(settings, info, "completed")
        if sink is not None:
            sink.update(info)
            sink["rounds"] = rows

    return server_app


app = make_server_app()
