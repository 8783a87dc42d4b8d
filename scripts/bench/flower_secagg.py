#!/usr/bin/env python3
"""One round of Flower's SecAgg+ (the `flwr` package), driven in a single process.

Comparison baseline for privfed's secure aggregation. What runs is Flower's own
protocol code, unmodified:

* server side: the four stage methods of `flwr.server.workflow.SecAggPlusWorkflow`
  (setup, share keys, collect masked vectors, unmask), called in the same order and with
  the same early exit as `SecAggPlusWorkflow.__call__` does, so that each stage can be timed;
* client side: `flwr.client.mod.secaggplus_mod`, one `Context` per client kept across the
  four stages (as a SuperNode keeps it), wrapping a trivial ClientApp "train" function that
  returns the client's precomputed input vector.

In between sits `InProcessGrid`, this script's own implementation of Flower's `Grid`
interface (the ServerApp's view of the network). It replaces the SuperLink/SuperNode
transport: every message goes through Flower's own object serialisation (deflate every
nested object, inflate on the other side), which gives the bytes each client sends and
receives and makes sure no Python object is shared between server and clients. No Ray, no
gRPC, no simulation engine. The serialisation time is measured and kept out of the
protocol timings (reported separately as `transport_seconds`).

Dropout: a client chosen to drop at stage X receives the stage-X request and never answers
(as a client that crashed or timed out does; the real Grid returns only the replies it got).
`--drop-stage masked-input` (default): the client has shared its keys but never delivers its
masked vector, so the server must reconstruct its key share and remove its pairwise masks --
the expensive recovery path. `unmask`: the client delivered its masked vector (its input is
in the sum) and then disappears. `setup` / `share-keys`: earlier drops.

Correctness: every client input is a float vector placed exactly on Flower's quantisation grid
(x = q * 2c/T - c with integer q in [0, T)), so Flower's stochastic quantiser returns exactly
q (no randomness), and the expected result is the plain integer sum of the survivors' q mod m.
The unmasked, dequantised vector that the workflow hands to the strategy is captured by the
strategy (a FedAvg whose aggregate_fit records its input), turned back into integers and
compared coordinate by coordinate (plus the weight coordinate Flower prepends).

Prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import resource
import sys
import time
from typing import Any

import numpy as np

import flwr
from flwr.app import ArrayRecord, ConfigRecord, Context, Error, Message, RecordDict
from flwr.client.mod import secaggplus_mod
from flwr.common import (
    Code,
    FitRes,
    Parameters,
    Status,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS, Key, Stage
from flwr.compat.common import recorddict_compat as compat
from flwr.server.client_manager import SimpleClientManager
from flwr.server.compat.grid_client_proxy import GridClientProxy
from flwr.server.compat.legacy_context import LegacyContext
from flwr.server.server_config import ServerConfig
from flwr.server.strategy import FedAvg
from flwr.server.workflow import SecAggPlusWorkflow
from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD
from flwr.server.workflow.constant import Key as WorkflowKey
from flwr.server.workflow.secure_aggregation.secaggplus_workflow import WorkflowState
from flwr.serverapp.grid import Grid
from flwr.supercore.task_identity import TaskIdentity
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects
from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents

STAGES = [Stage.SETUP, Stage.SHARE_KEYS, Stage.COLLECT_MASKED_VECTORS, Stage.UNMASK]
DROP_STAGE_NAMES = {
    "setup": Stage.SETUP,
    "share-keys": Stage.SHARE_KEYS,
    "masked-input": Stage.COLLECT_MASKED_VECTORS,
    "unmask": Stage.UNMASK,
}
# Error code a Flower ClientApp runtime uses when the app raised (flwr.common.constant).
CLIENT_APP_RAISED_EXCEPTION = 300


def wire_copy(msg: Message) -> tuple[Message, int, float]:
    """Serialise a message with Flower's object format and inflate a fresh copy.

    Returns the copy, the number of bytes of all serialised objects, and the seconds spent.
    """
    t0 = time.perf_counter()
    contents = {oid: obj.deflate() for oid, obj in get_all_nested_objects(msg).items()}
    size = sum(len(c) for c in contents.values())
    copy = inflate_object_from_contents(msg.object_id, contents)
    assert isinstance(copy, Message)
    return copy, size, time.perf_counter() - t0


class Meter:
    """Per-stage, per-client accounting."""

    def __init__(self, node_ids: list[int]) -> None:
        self.client_cpu = {nid: {s: 0.0 for s in STAGES} for nid in node_ids}
        self.bytes_up = {nid: 0 for nid in node_ids}
        self.bytes_down = {nid: 0 for nid in node_ids}
        self.transport_wall = {s: 0.0 for s in STAGES}
        self.transport_cpu = {s: 0.0 for s in STAGES}
        self.client_errors: list[str] = []


class InProcessGrid(Grid):
    """Flower's Grid interface, delivering each message to an in-process client."""

    def __init__(self, clients: dict[int, "SimClient"], drop_at: dict[int, str],
                 meter: Meter, count_bytes: bool) -> None:
        self.clients = clients
        self.drop_at = drop_at
        self.meter = meter
        self.count_bytes = count_bytes

    # The workflow only calls send_and_receive; the rest of the interface is minimal.
    def set_run(self, run: Any) -> None:  # noqa: D102
        self._run = run

    @property
    def run(self) -> Any:  # noqa: D102
        return getattr(self, "_run", None)

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None):  # noqa
        return Message(content, dst_node_id, message_type, group_id=group_id, ttl=ttl)

    def get_node_ids(self):  # noqa: D102
        return list(self.clients)

    def get_nodes(self):  # noqa: D102
        raise NotImplementedError

    def push_messages(self, messages):  # noqa: D102
        raise NotImplementedError

    def pull_messages(self, message_ids):  # noqa: D102
        raise NotImplementedError

    def _transport(self, msg: Message, stage: str) -> tuple[Message, int]:
        c0 = time.process_time()
        if self.count_bytes:
            copy, size, wall = wire_copy(msg)
        else:
            t0 = time.perf_counter()
            contents = {o: x.deflate() for o, x in get_all_nested_objects(msg).items()}
            copy = inflate_object_from_contents(msg.object_id, contents)
            size, wall = 0, time.perf_counter() - t0
        self.meter.transport_wall[stage] += wall
        self.meter.transport_cpu[stage] += time.process_time() - c0
        return copy, size

    def send_and_receive(self, messages, *, timeout=None):  # noqa: D102
        replies = []
        for msg in messages:
            stage = msg.content.config_records[RECORD_KEY_CONFIGS][Key.STAGE]
            nid = msg.metadata.dst_node_id
            delivered, size = self._transport(msg, stage)
            self.meter.bytes_down[nid] += size
            if self.drop_at.get(nid) == stage:
                continue  # the client vanishes: the server never gets a reply
            c0 = time.process_time()
            reply = self.clients[nid].handle(delivered)
            self.meter.client_cpu[nid][stage] += time.process_time() - c0
            back, size = self._transport(reply, stage)
            self.meter.bytes_up[nid] += size
            replies.append(back)
        return replies


class SimClient:
    """One Flower client: its persistent Context and the secaggplus_mod in front of its app."""

    def __init__(self, node_id: int, x: np.ndarray, num_examples: int, meter: Meter) -> None:
        self.node_id = node_id
        self.x = x
        self.num_examples = num_examples
        self.meter = meter
        self.ctx = Context(run_id=1, node_id=node_id, node_config={}, state=RecordDict(),
                           run_config={})

    def _train(self, msg: Message, ctx: Context) -> Message:
        """The ClientApp's train function: return the precomputed update."""
        fitres = FitRes(status=Status(code=Code.OK, message="ok"),
                        parameters=ndarrays_to_parameters([self.x]),
                        num_examples=self.num_examples, metrics={})
        return Message(compat.fitres_to_recorddict(fitres, keep_input=False), reply_to=msg)

    def handle(self, msg: Message) -> Message:
        try:
            return secaggplus_mod(msg, self.ctx, self._train)
        except Exception as exc:  # pylint: disable=broad-except
            # What a Flower ClientApp runtime does when the app raises: reply with an error.
            self.meter.client_errors.append(f"node {self.node_id}: {type(exc).__name__}: {exc}")
            return Message(Error(code=CLIENT_APP_RAISED_EXCEPTION, reason=repr(exc)),
                           reply_to=msg)


class CaptureFedAvg(FedAvg):
    """FedAvg that records what the SecAgg+ workflow hands it (the unmasked aggregate)."""

    captured: Parameters | None = None
    n_results: int = 0

    def aggregate_fit(self, server_round, results, failures):  # noqa: D102
        self.n_results = len(results)
        if results:
            self.captured = results[0][1].parameters
        return super().aggregate_fit(server_round, results, failures)


def parse_fraction_or_int(text: str) -> int | float:
    return float(text) if "." in text else int(text)


def load_avg() -> list[float]:
    return list(os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, required=True, help="n, clients sampled")
    ap.add_argument("--dim", type=int, required=True, help="d, vector length")
    ap.add_argument("--dropout", type=float, default=0.0, help="fraction of clients that drop")
    ap.add_argument("--drop-stage", choices=list(DROP_STAGE_NAMES), default="masked-input",
                    help="stage at which dropping clients vanish (default masked-input: after "
                         "sharing keys, before sending the masked vector)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shares", default="1.0",
                    help="Flower num_shares: int = neighbourhood size incl. the client itself "
                         "(odd), float = fraction of n; default 1.0 = complete graph (SecAgg)")
    ap.add_argument("--threshold", default=None,
                    help="Flower reconstruction_threshold: int, or float = fraction of shares; "
                         "default: majority, floor(shares/2)+1 as an int")
    ap.add_argument("--bits", type=int, default=32,
                    help="modulus_range = 2^bits (Flower default 32; <= 62 here)")
    ap.add_argument("--quant-bits", type=int, default=22,
                    help="quantization_range = 2^quant_bits (Flower default 22; must be < bits "
                         "and <= 30 since Flower's quantiser casts to int32)")
    ap.add_argument("--clip", type=float, default=8.0, help="clipping_range (Flower default 8)")
    ap.add_argument("--max-weight", type=float, default=1000.0,
                    help="max_weight (Flower default 1000); every client reports "
                         "num_examples = max_weight so Flower's weight factor is exactly 1")
    ap.add_argument("--no-bytes", action="store_true",
                    help="do not count bytes (still serialises, for a fair transport copy)")
    ap.add_argument("--verbose", action="store_true", help="show Flower's log")
    args = ap.parse_args()

    if not args.verbose:
        logging.getLogger("flwr").setLevel(logging.ERROR)

    n, d = args.clients, args.dim
    m = 1 << args.bits
    T = 1 << args.quant_bits
    c = float(args.clip)
    if not (args.quant_bits < args.bits <= 62 and args.quant_bits <= 30):
        ap.error("need quant_bits < bits <= 62 and quant_bits <= 30")

    # Resolve the neighbourhood size the way the workflow will (setup_stage), so the default
    # threshold can be a majority of it.
    shares = parse_fraction_or_int(args.shares)
    if isinstance(shares, float):
        k = round(shares * n)
        if k < n and k % 2 == 0:
            k += 1
        if k <= 2:
            k = n
    else:
        k = shares
    if args.threshold is None:
        threshold: int | float = k // 2 + 1
    else:
        threshold = parse_fraction_or_int(args.threshold)

    # Seeds: inputs, node ids, who drops (numpy Generator); the workflow's neighbour shuffle
    # (Python's random); numpy's global RNG used by Flower's stochastic rounding (unused here:
    # the inputs sit on the grid). Keys and mask seeds come from os.urandom in Flower.
    # The identity a ServerApp process would have (Message() stamps it on instructions).
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 0

    rng = np.random.default_rng(args.seed)
    random.seed(args.seed)
    np.random.seed(args.seed % (1 << 32))

    node_ids = sorted({int(v) for v in rng.integers(1, 1 << 62, size=2 * n)})[:n]
    rng.shuffle(node_ids)
    node_ids = [int(v) for v in node_ids[:n]]
    assert len(node_ids) == n
    n_drop = int(round(args.dropout * n))
    dropped = [int(v) for v in rng.choice(node_ids, size=n_drop, replace=False)]
    drop_stage = DROP_STAGE_NAMES[args.drop_stage]
    drop_at = {nid: drop_stage for nid in dropped}

    scale = 2.0 * c / T
    q_inputs = {nid: rng.integers(0, T, size=d, dtype=np.int64) for nid in node_ids}
    x_inputs = {nid: q.astype(np.float64) * scale - c for nid, q in q_inputs.items()}

    meter = Meter(node_ids)
    clients = {nid: SimClient(nid, x_inputs[nid], int(args.max_weight), meter)
               for nid in node_ids}
    grid = InProcessGrid(clients, drop_at, meter, count_bytes=not args.no_bytes)

    strategy = CaptureFedAvg(fraction_fit=1.0, fraction_evaluate=0.0, min_fit_clients=n,
                             min_available_clients=n)
    manager = SimpleClientManager()
    for nid in node_ids:
        manager.register(GridClientProxy(nid, grid, run_id=1))
    base = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={})
    ctx = LegacyContext(base, config=ServerConfig(num_rounds=1), strategy=strategy,
                        client_manager=manager)
    ctx.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord({WorkflowKey.CURRENT_ROUND: 1})
    # The "global model" sent with the fit instruction: one float, so that downlink bytes are
    # SecAgg+ traffic, not a model broadcast.
    ctx.state.array_records[MAIN_PARAMS_RECORD] = compat.parameters_to_arrayrecord(
        ndarrays_to_parameters([np.zeros(1)]), keep_input=True)

    workflow = SecAggPlusWorkflow(num_shares=shares, reconstruction_threshold=threshold,
                                  max_weight=args.max_weight, clipping_range=c,
                                  quantization_range=T, modulus_range=m)
    state = WorkflowState()
    steps = [(Stage.SETUP, workflow.setup_stage), (Stage.SHARE_KEYS, workflow.share_keys_stage),
             (Stage.COLLECT_MASKED_VECTORS, workflow.collect_masked_vectors_stage),
             (Stage.UNMASK, workflow.unmask_stage)]

    load_before = load_avg()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    wall = {s: 0.0 for s in STAGES}
    proc_cpu = {s: 0.0 for s in STAGES}
    completed = True
    halted_at = None
    ran: list[str] = []
    t_round = time.perf_counter()
    for stage, step in steps:
        ran.append(stage)
        t0, c0 = time.perf_counter(), time.process_time()
        ok = step(grid, ctx, state)
        wall[stage] = time.perf_counter() - t0
        proc_cpu[stage] = time.process_time() - c0
        if not ok:
            completed, halted_at = False, stage
            break
    round_wall = time.perf_counter() - t_round
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    load_after = load_avg()

    # Survivors: clients whose masked vector entered the sum.
    survivors = [nid for nid in node_ids
                 if drop_at.get(nid) not in (Stage.SETUP, Stage.SHARE_KEYS,
                                             Stage.COLLECT_MASKED_VECTORS)]
    correct = False
    detail: dict[str, Any] = {}
    if completed and strategy.captured is not None:
        out = parameters_to_ndarrays(strategy.captured)
        agg = out[0].astype(np.float64)
        n_a = len(survivors)
        # Flower's unmask stage: agg = ((S * 2c/T - c) - (n_a - 1) c) * T / (n_a T)
        #                             = (S * 2c/T - n_a c) / n_a, with S the modular sum.
        s_float = (agg * n_a + n_a * c) / scale
        s_int = np.rint(s_float)
        residual = float(np.max(np.abs(s_float - s_int))) if d else 0.0
        expected = np.zeros(d, dtype=np.int64)
        for nid in survivors:
            expected += q_inputs[nid]
        expected %= m
        got = s_int.astype(np.int64) % m
        mismatches = int(np.count_nonzero(got != expected))
        correct = mismatches == 0 and residual < 0.25
        detail = {"mismatched_coordinates": mismatches, "max_rounding_residual": residual,
                  "strategy_results": strategy.n_results}

    stage_keys = {Stage.SETUP: "setup", Stage.SHARE_KEYS: "share_keys",
                  Stage.COLLECT_MASKED_VECTORS: "collect_masked_vectors",
                  Stage.UNMASK: "unmask"}
    per_stage = {stage_keys[s]: wall[s] - meter.transport_wall[s] for s in ran}
    client_cpu_total = {nid: sum(v.values()) for nid, v in meter.client_cpu.items()}
    per_stage_client_cpu_sum = {stage_keys[s]: sum(meter.client_cpu[nid][s] for nid in node_ids)
                                for s in ran}
    per_stage_server_cpu = {
        stage_keys[s]: proc_cpu[s] - sum(meter.client_cpu[nid][s] for nid in node_ids)
        - meter.transport_cpu[s] for s in ran}
    surv_cpu = [client_cpu_total[nid] for nid in survivors]
    result = {
        "tool": "flwr",
        "version": flwr.__version__,
        "clients": n,
        "dim": d,
        "dropout": args.dropout,
        "drop_stage": args.drop_stage,
        "seed": args.seed,
        "survivors": len(survivors),
        "completed": completed,
        "halted_at": halted_at,
        "correct": correct,
        "total_seconds": sum(per_stage.values()),
        "per_stage_seconds": per_stage,
        "client_cpu_seconds_mean": float(np.mean(surv_cpu)) if surv_cpu else None,
        "client_cpu_seconds_max": float(np.max(surv_cpu)) if surv_cpu else None,
        "per_stage_client_cpu_seconds_mean": {k2: v / n for k2, v in
                                              per_stage_client_cpu_sum.items()},
        "server_cpu_seconds": sum(per_stage_server_cpu.values()),
        "per_stage_server_cpu_seconds": per_stage_server_cpu,
        "bytes_per_client": (None if args.no_bytes else
                             float(np.mean([meter.bytes_up[i] + meter.bytes_down[i]
                                            for i in survivors])) if survivors else None),
        "bytes_up_per_client": (None if args.no_bytes else
                                float(np.mean([meter.bytes_up[i] for i in survivors]))
                                if survivors else None),
        "bytes_down_per_client": (None if args.no_bytes else
                                  float(np.mean([meter.bytes_down[i] for i in survivors]))
                                  if survivors else None),
        "transport_seconds": sum(meter.transport_wall.values()),
        "wall_seconds_including_transport": round_wall,
        "process_cpu_seconds": (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime),
        "params": {"num_shares": shares, "neighbourhood_size": k, "threshold": threshold,
                   "threshold_resolved": state.threshold, "modulus_range_bits": args.bits,
                   "quantization_range_bits": args.quant_bits, "clipping_range": c,
                   "max_weight": args.max_weight},
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "client_errors": meter.client_errors[:5],
        "client_error_count": len(meter.client_errors),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        **detail,
    }
    print(json.dumps(result))
    return 0 if (completed and correct) else 1


if __name__ == "__main__":
    sys.exit(main())
