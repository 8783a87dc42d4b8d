"""The baseline: the same task under Flower's own SecAgg+ (``SecAggPlusWorkflow`` on the
server, ``secaggplus_mod`` on the clients), as Flower ships it.

SecAgg+ lives in Flower's legacy (Ins/Res) world: the server runs ``DefaultWorkflow`` with
``SecAggPlusWorkflow`` as its fit workflow inside a ``LegacyContext`` around the legacy FedAvg,
and the ClientApp is a ``NumPyClient`` (``secaggplus_mod`` reads its ``FitRes``). Each client
sends its *model* weighted by ``num_examples``, quantized to ``2^22`` levels on
``[-clipping_range, clipping_range]`` and masked mod ``2^32`` (Flower's defaults). No DP noise.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

from flwr.app import Context
from flwr.client import ClientApp as LegacyClientApp
from flwr.client import NumPyClient
from flwr.client.mod import secaggplus_mod
from flwr.common import ndarrays_to_parameters
from flwr.server import LegacyContext, ServerApp, ServerConfig
from flwr.server.strategy import FedAvg as LegacyFedAvg
from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow

from . import task

KEYS = ("w", "b")


class MnistClient(NumPyClient):
    def __init__(self, partition: int) -> None:
        self.partition = partition

    def fit(self, parameters, config):
        x, y = task.client_data(str(config["data-dir"]), int(config["num-clients"]),
                                int(config["seed"]), self.partition)
        params = dict(zip(KEYS, parameters))
        rnd = int(config.get("server-round", 0))
        new, loss = task.local_sgd(
            params, x, y, epochs=int(config["local-epochs"]),
            batch_size=int(config["batch-size"]), learning_rate=float(config["learning-rate"]),
            seed=int(config["seed"]) * 1_000_003 + rnd * 1009 + self.partition)
        return [new[k] for k in KEYS], len(y), {"train-loss": loss}


def _client_fn(context: Context):
    return MnistClient(int(context.node_config["partition-id"])).to_client()


client_app = LegacyClientApp(client_fn=_client_fn, mods=[secaggplus_mod])


def make_server_app(s=None, sink: Optional[Dict[str, Any]] = None, num_shares: Any = 1.0,
                    reconstruction_threshold: Any = 0.5) -> ServerApp:
    """FedAvg under SecAgg+ with the example's settings ``s`` (server_app.Settings; None: from
    the run config of ``flwr run``, as on the Deployment Engine).

    ``num_shares = 1.0`` is the complete graph (plain SecAgg), the default threshold half the
    neighbourhood; ``clipping_range = 8`` (Flower's default) bounds the model's weights. With a
    ``result-file`` in the settings the rounds are written there as the privfed ServerApp
    writes them (``server_app.write_result``)."""
    from .server_app import Settings, write_result

    app = ServerApp()

    @app.main()
    def main(grid, context: Context) -> None:
        settings = s if s is not None else Settings.from_run_config(dict(context.run_config))
        rows: List[Dict[str, Any]] = []
        info: Dict[str, Any] = {"rounds": rows}
        try:
            _run(grid, context, settings, rows, num_shares, reconstruction_threshold)
        except Exception as exc:
            write_result(settings, info, "failed", f"{type(exc).__name__}: {exc}")
            raise
        write_result(settings, info, "completed")
        if sink is not None:
            sink["rounds"] = rows

    return app


def _run(grid, context: Context, s, rows: List[Dict[str, Any]], num_shares: Any,
         reconstruction_threshold: Any) -> None:
    test = task.test_data(s.data_dir)
    t_last = [time.perf_counter()]

    def evaluate_fn(server_round, parameters, config):
        p = dict(zip(KEYS, parameters))
        acc, loss = task.evaluate(p, test["x_test"], test["y_test"])
        now = time.perf_counter()
        row = {"round": server_round, "accuracy": acc, "test_loss": loss,
               "epsilon": float("inf") if server_round else 0.0, "delta": s.delta,
               "contributors": None, "seconds": round(now - t_last[0], 3)}
        t_last[0] = now
        rows.append(row)
        if not s.quiet:
            print(f"round {server_round:3d}  accuracy {acc:.4f}  test loss {loss:.4f}  "
                  f"(Flower SecAgg+, no DP)  [{row['seconds']:.1f} s]", flush=True)
        return loss, {"accuracy": acc}

    def fit_config(server_round: int) -> Dict[str, Any]:
        return {"data-dir": s.data_dir, "num-clients": s.num_clients, "seed": s.seed,
                "local-epochs": s.local_epochs, "batch-size": s.batch_size,
                "learning-rate": s.learning_rate, "server-round": server_round}

    init = task.init_params()
    strategy = LegacyFedAvg(
        fraction_fit=s.cohort / s.num_clients, fraction_evaluate=0.0,
        min_fit_clients=s.cohort, min_available_clients=s.num_clients,
        initial_parameters=ndarrays_to_parameters([init[k] for k in KEYS]),
        evaluate_fn=evaluate_fn, on_fit_config_fn=fit_config)
    ctx = LegacyContext(context=context, config=ServerConfig(num_rounds=s.num_rounds,
                                                             round_timeout=s.timeout),
                        strategy=strategy)
    workflow = DefaultWorkflow(fit_workflow=SecAggPlusWorkflow(
        num_shares=num_shares, reconstruction_threshold=reconstruction_threshold,
        max_weight=float(60_000 // s.num_clients), timeout=s.timeout))
    workflow(grid, ctx)


#: The ServerApp ``flwr run`` starts when a copy of the app names it in its pyproject
#: (``serverapp = "privfed_flwr_example.flower_secaggplus:server_app"``, ``clientapp =
#: "privfed_flwr_example.flower_secaggplus:client_app"``); settings from the run config.
server_app = make_server_app()
