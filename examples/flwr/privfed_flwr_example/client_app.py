"""The ClientApp: local SGD on the node's MNIST shard, behind privfed's privacy mod.

Which mod runs is chosen by the server's train config (``privacy`` = none | local |
distributed) so that one ClientApp serves every mode of the example. In a deployment the client
would fix its own mechanism and ε; the privatized reply declares its ε and the server refuses
replies that do not match what it accounts.
"""

from __future__ import annotations

from typing import Dict

import numpy as np
from flwr.app import Array, ArrayRecord, Context, Message, MessageType, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

import privfed
from privfed.flwr import distributed_dp_mod, privatize_mod
from privfed.flwr.distributed import SECAGG_RECORD

from . import task

_MODS: Dict[tuple, object] = {}


def _local_mod(mechanism: str, epsilon: float, clip: float):
    key = ("local", mechanism, epsilon, clip)
    if key not in _MODS:
        if mechanism == "privunitg":
            factory = lambda d: privfed.PrivUnitG(epsilon=epsilon, dim=d)  # noqa: E731
        elif mechanism == "privunit2":
            factory = lambda d: privfed.PrivUnit2(epsilon=epsilon, dim=d)  # noqa: E731
        elif mechanism == "laplace":
            factory = lambda d: privfed.Laplace(epsilon, d, norm="l1")  # noqa: E731
        else:
            raise ValueError(f"unknown local mechanism {mechanism!r}")
        _MODS[key] = privatize_mod(factory, clip)
    return _MODS[key]


def _distributed_mod():
    if "distributed" not in _MODS:
        _MODS["distributed"] = distributed_dp_mod()
    return _MODS["distributed"]


def privacy_mod(msg: Message, ctxt: Context, call_next):
    """Dispatches to the mod the server's config names (the example's one ClientApp)."""
    if msg.metadata.message_type != MessageType.TRAIN:
        return call_next(msg, ctxt)
    # Secure-aggregation stage messages carry only privfed's record (the model and config come
    # with the masked-input stage alone): they belong to the distributed mod.
    if SECAGG_RECORD in msg.content.config_records:
        return _distributed_mod()(msg, ctxt, call_next)
    cfg = msg.content.config_records.get("config")
    mode = str(cfg["privacy"]) if cfg is not None and "privacy" in cfg else "none"
    if mode == "none":
        return call_next(msg, ctxt)
    if mode == "local":
        mod = _local_mod(str(cfg["local-mechanism"]), float(cfg["local-epsilon"]),
                         float(cfg["clip"]))
        return mod(msg, ctxt, call_next)
    if mode == "distributed":
        return _distributed_mod()(msg, ctxt, call_next)
    raise ValueError(f"unknown privacy mode {mode!r}")


app = ClientApp(mods=[privacy_mod])


@app.train()
def train(msg: Message, context: Context) -> Message:
    cfg = msg.content["config"]
    pid = int(context.node_config["partition-id"])
    x, y = task.client_data(str(cfg["data-dir"]), int(cfg["num-clients"]), int(cfg["seed"]), pid)
    arrays = msg.content["arrays"]
    params = {k: np.asarray(v.numpy()) for k, v in arrays.items()}
    server_round = int(cfg.get("server-round", 0)) if hasattr(cfg, "get") else 0
    new, loss = task.local_sgd(
        params, x, y,
        epochs=int(cfg["local-epochs"]), batch_size=int(cfg["batch-size"]),
        learning_rate=float(cfg["learning-rate"]),
        seed=int(cfg["seed"]) * 1_000_003 + server_round * 1009 + pid,
    )
    content = RecordDict({
        "arrays": ArrayRecord(array_dict={k: Array(np.ascontiguousarray(v)) for k, v in new.items()}),
        "metrics": MetricRecord({"num-examples": len(y), "train-loss": loss}),
    })
    return Message(content=content, reply_to=msg)
