#!/usr/bin/env python3
"""A lying server against Flower's SecAgg+ client code: recovers one client's input.

Runs stages 0-2 of a Flower SecAgg+ round honestly (SecAggPlusWorkflow's own stage methods,
clients are flwr's secaggplus_mod, same in-process Grid as flower_secagg.py), keeping each
client's masked vector as any server sees it. Then, instead of the workflow's unmask request,
the server sends every neighbour of a victim that is ACTIVE (it delivered its masked vector) an
unmask request that lists the victim in the active list AND in the dead list. Flower's client
(secaggplus_mod._unmask) checks neither that the lists are disjoint nor that a "dead" node
really sent nothing, so each neighbour returns both its share of the victim's self-mask seed and
its share of the victim's pairwise-mask key. With >= threshold of each, the server rebuilds
both secrets, regenerates the victim's masks, strips them from the victim's masked vector and
compares the result with the victim's quantised input.

Prints one JSON object; exit 0 when the input was recovered exactly.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import flwr  # noqa: E402
from flwr.app import ConfigRecord, Context, Message, MessageType, RecordDict  # noqa: E402
from flwr.common import bytes_to_ndarray, ndarrays_to_parameters  # noqa: E402
from flwr.common.secure_aggregation.crypto.shamir import combine_shares  # noqa: E402
from flwr.common.secure_aggregation.crypto.symmetric_encryption import (  # noqa: E402
    generate_shared_key,
)
from flwr.common.secure_aggregation.secaggplus_constants import (  # noqa: E402
    RECORD_KEY_CONFIGS,
    Key,
    Stage,
)
from flwr.common.secure_aggregation.secaggplus_utils import pseudo_rand_gen  # noqa: E402
from flwr.compat.common import recorddict_compat as compat  # noqa: E402
from flwr.server.client_manager import SimpleClientManager  # noqa: E402
from flwr.server.compat.grid_client_proxy import GridClientProxy  # noqa: E402
from flwr.server.compat.legacy_context import LegacyContext  # noqa: E402
from flwr.server.server_config import ServerConfig  # noqa: E402
from flwr.server.workflow import SecAggPlusWorkflow  # noqa: E402
from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD  # noqa: E402
from flwr.server.workflow.constant import Key as WorkflowKey  # noqa: E402
from flwr.server.workflow.secure_aggregation.secaggplus_workflow import (  # noqa: E402
    WorkflowState,
)
from flwr.supercore.primitives.asymmetric import (  # noqa: E402
    bytes_to_private_key,
    bytes_to_public_key,
)
from flwr.supercore.task_identity import TaskIdentity  # noqa: E402

from flower_secagg import CaptureFedAvg, InProcessGrid, Meter, SimClient  # noqa: E402


class RecordingGrid(InProcessGrid):
    """The in-process grid, also keeping every masked vector a client uploads."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.masked: dict[int, list[np.ndarray]] = {}
        self.sources: dict[int, list[int]] = {}

    def send_and_receive(self, messages, *, timeout=None):  # noqa: D102
        messages = list(messages)
        for msg in messages:
            cfg = msg.content.config_records[RECORD_KEY_CONFIGS]
            if cfg[Key.STAGE] == Stage.COLLECT_MASKED_VECTORS:
                self.sources[msg.metadata.dst_node_id] = list(cfg[Key.SOURCE_LIST])
        replies = super().send_and_receive(messages, timeout=timeout)
        for r in replies:
            if r.has_error():
                continue
            cfg = r.content.config_records[RECORD_KEY_CONFIGS]
            if Key.MASKED_PARAMETERS in cfg:
                self.masked[r.metadata.src_node_id] = [
                    bytes_to_ndarray(b) for b in cfg[Key.MASKED_PARAMETERS]]
        return replies


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--dim", type=int, default=1000)
    ap.add_argument("--shares", type=int, default=5, help="neighbourhood size (odd)")
    ap.add_argument("--threshold", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    logging.getLogger("flwr").setLevel(logging.CRITICAL)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 0

    n, d = args.clients, args.dim
    m, T, c = 1 << 32, 1 << 22, 8.0
    rng = np.random.default_rng(args.seed)
    random.seed(args.seed)
    node_ids = sorted({int(v) for v in rng.integers(1, 1 << 40, size=2 * n)})[:n]
    q = {nid: rng.integers(0, T, size=d, dtype=np.int64) for nid in node_ids}
    meter = Meter(node_ids)
    clients = {nid: SimClient(nid, q[nid].astype(np.float64) * (2 * c / T) - c, 1000, meter)
               for nid in node_ids}
    grid = RecordingGrid(clients, {}, meter, count_bytes=False)
    manager = SimpleClientManager()
    for nid in node_ids:
        manager.register(GridClientProxy(nid, grid, run_id=1))
    strategy = CaptureFedAvg(fraction_fit=1.0, min_fit_clients=n, min_available_clients=n)
    base = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={})
    ctx = LegacyContext(base, config=ServerConfig(num_rounds=1), strategy=strategy,
                        client_manager=manager)
    ctx.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord({WorkflowKey.CURRENT_ROUND: 1})
    ctx.state.array_records[MAIN_PARAMS_RECORD] = compat.parameters_to_arrayrecord(
        ndarrays_to_parameters([np.zeros(1)]), keep_input=True)
    wf = SecAggPlusWorkflow(num_shares=args.shares, reconstruction_threshold=args.threshold,
                            max_weight=1000.0, clipping_range=c, quantization_range=T,
                            modulus_range=m)
    st = WorkflowState()
    # Honest stages 0-2.
    for step in (wf.setup_stage, wf.share_keys_stage, wf.collect_masked_vectors_stage):
        if not step(grid, ctx, st):
            print(json.dumps({"error": "honest stages failed"}))
            return 2

    victim = sorted(st.active_node_ids)[0]
    helpers = sorted((st.nid_to_neighbours[victim] & st.active_node_ids) - {victim})
    # Lying unmask request: the victim is both active and dead.
    msgs = []
    for j in helpers:
        active = list(st.nid_to_neighbours[j] & st.active_node_ids)
        cfg = ConfigRecord({Key.STAGE: Stage.UNMASK, Key.ACTIVE_NODE_ID_LIST: active,
                            Key.DEAD_NODE_ID_LIST: [victim]})
        msgs.append(Message(RecordDict({RECORD_KEY_CONFIGS: cfg}), j, MessageType.TRAIN,
                            group_id="1"))
    replies = grid.send_and_receive(msgs)
    seed_shares, key_shares, refused = [], [], 0
    for r in replies:
        if r.has_error():
            refused += 1
            continue
        cfg = r.content.config_records[RECORD_KEY_CONFIGS]
        owners, shares = list(cfg[Key.NODE_ID_LIST]), list(cfg[Key.SHARE_LIST])
        # The client answers active ids first (seed shares), then dead ids (key shares).
        n_active = len(owners) - 1
        for idx, (owner, share) in enumerate(zip(owners, shares)):
            if owner != victim:
                continue
            (seed_shares if idx < n_active else key_shares).append(share)

    out = {"tool": "flwr", "version": flwr.__version__, "clients": n, "dim": d,
           "num_shares": args.shares, "threshold": st.threshold, "victim": victim,
           "helpers_asked": len(helpers), "helpers_refused": refused,
           "self_mask_seed_shares": len(seed_shares), "key_shares": len(key_shares)}
    recovered = False
    if len(seed_shares) >= st.threshold and len(key_shares) >= st.threshold:
        b_v = combine_shares(seed_shares)
        sk1_v = combine_shares(key_shares)
        y = [a.astype(np.int64) for a in grid.masked[victim]]
        shapes = [a.shape for a in y]
        y = [a - p for a, p in zip(y, pseudo_rand_gen(b_v, m, shapes))]
        for j in grid.sources[victim]:
            seed = generate_shared_key(bytes_to_private_key(sk1_v),
                                       bytes_to_public_key(st.nid_to_publickeys[j][0]))
            pm = pseudo_rand_gen(seed, m, shapes)
            # The victim added the mask when its id was larger, else subtracted it.
            y = [a - p if victim > j else a + p for a, p in zip(y, pm)]
        y = [a % m for a in y]
        recovered = bool(np.array_equal(y[1], q[victim]))
        out.update({"weight_coordinate": int(y[0][0]), "recovered_input_exactly": recovered})
    else:
        out["recovered_input_exactly"] = False
    print(json.dumps(out))
    return 0 if recovered else 1


if __name__ == "__main__":
    sys.exit(main())
