"""The ClientApp: local SGD on the node's MNIST shard, behind privfed's privacy mod.

Which mod runs is chosen by the server's train config (``privacy`` = none | local | central |
distributed) so that one ClientApp serves every mode of the example (central: no client mod,
the server clips and adds the noise). In a deployment the client would fix its own mechanism
and ε; the privatized reply declares its ε and the server refuses replies that do not match
what it accounts.

Test hooks, set by the SuperNode's operator in its ``--node-config`` (never by the server), for
the deployment test only:

* ``encoder-seed = s``: the distributed encoder draws from seed ``s·1009 + round`` instead of
  the OS (so the test can encode the same update again);
* ``audit-dir = "DIR"``: the update the privacy mod receives (``returned − received``, float64)
  is written in the clear to ``DIR/update-<node id>-r<round>.npy``, and the node's config to
  ``DIR/node-<node id>.json`` — it defeats the privacy and exists to check the decoded sum;
* ``hold-at = "masked_input"`` (a secure-aggregation stage): on that stage the ClientApp
  writes ``DIR/hold-<node id>-r<round>`` and waits 600 s without answering, so the test can
  kill the SuperNode mid-round.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Dict

import numpy as np
from flwr.app import Array, ArrayRecord, Context, Message, MessageType, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

import privfed
from privfed.flwr import distributed_dp_mod, privatize_mod
from privfed.flwr.distributed import SECAGG_RECORD
from privfed.flwr.records import flatten_arrays

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


def _encoder_seed(ctxt: Context, server_round: int):
    """The node's fixed encoder seed for the round (``encoder-seed`` in its node config), or
    None: fresh randomness from the OS, as a real deployment must use."""
    seed = ctxt.node_config.get("encoder-seed")
    return None if seed is None else int(seed) * 1009 + server_round


def _distributed_mod():
    if "distributed" not in _MODS:
        _MODS["distributed"] = distributed_dp_mod(encoder_seed=_encoder_seed)
    return _MODS["distributed"]


def _audited(call_next, ctxt: Context, server_round: int):
    """``call_next`` that also writes the update it produced to the node's ``audit-dir``
    (computed as the privacy mods compute it), when the node config names one."""
    audit = ctxt.node_config.get("audit-dir")
    if not audit:
        return call_next

    def wrapped(msg: Message, c: Context) -> Message:
        received = flatten_arrays(msg.content["arrays"])
        out = call_next(msg, c)
        if not out.has_error():
            update = flatten_arrays(out.content["arrays"]) - received
            np.save(Path(str(audit)) / f"update-{c.node_id}-r{server_round}.npy", update)
            (Path(str(audit)) / f"node-{c.node_id}.json").write_text(
                json.dumps(dict(c.node_config)))
        return out

    return wrapped


def _hold(msg: Message, ctxt: Context) -> None:
    """Waits without answering when the node config says ``hold-at`` this stage."""
    rec = msg.content.config_records.get(SECAGG_RECORD)
    hold = ctxt.node_config.get("hold-at")
    if not hold or rec is None or str(rec["stage"]) != str(hold):
        return
    marker = Path(str(ctxt.node_config["audit-dir"])) / f"hold-{ctxt.node_id}-{hold}"
    marker.write_text(str(time.time()))
    time.sleep(600)  # the test kills this SuperNode now


def privacy_mod(msg: Message, ctxt: Context, call_next):
    """Dispatches to the mod the server's config names (the example's one ClientApp)."""
    if msg.metadata.message_type != MessageType.TRAIN:
        return call_next(msg, ctxt)
    # Secure-aggregation stage messages carry only privfed's record (the model and config come
    # with the masked-input stage alone): they belong to the distributed mod.
    cfg = msg.content.config_records.get("config")
    rnd = int(cfg["server-round"]) if cfg is not None and "server-round" in cfg else 0
    if SECAGG_RECORD in msg.content.config_records:
        _hold(msg, ctxt)
        return _distributed_mod()(msg, ctxt, _audited(call_next, ctxt, rnd))
    mode = str(cfg["privacy"]) if cfg is not None and "privacy" in cfg else "none"
    call_next = _audited(call_next, ctxt, rnd)
    if mode in ("none", "central"):
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
