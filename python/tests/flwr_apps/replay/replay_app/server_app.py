"""A malicious ServerApp: it runs privfed's secure aggregation by hand up to the unmasking,
sends one node a contradictory unmasking request (both kinds of share of one client), then the
genuine request the node would have answered, and writes what came back to ``result-file``."""

import json
import time

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.serverapp import Grid, ServerApp

from privfed import distributed as dist
from privfed import secagg as sa

app = ServerApp()
DIM = 10


def _send(grid, nid, rec, with_model=False):
    content = {"privfed-secagg": rec}
    if with_model:
        rec["arrays"] = ["w"]
        content["arrays"] = ArrayRecord(array_dict={"w": Array(np.zeros(DIM, np.float32))})
    msg = Message(content=RecordDict(content), dst_node_id=nid, message_type=MessageType.TRAIN)
    (reply,) = list(grid.send_and_receive([msg], timeout=120))
    if reply.has_error():
        return None, reply.error.reason
    return bytes(reply.content.config_records["privfed-secagg"]["message"]), None


@app.main()
def main(grid: Grid, context: Context) -> None:
    want = int(context.run_config["nodes"])
    out = {"status": "failed"}
    try:
        for _ in range(120):
            nodes = sorted(grid.get_node_ids())
            if len(nodes) >= want:
                break
            time.sleep(1)
        nodes = nodes[:want]
        plan = dist.plan(DIM, 1.0, 16, want, noise_stddev=0.5)
        cfg = sa.round_config(want, int(plan.params["bits"]), int(plan.params["padded_dim"]))
        server = sa.SecAggServer(cfg)
        ids = {nid: i + 1 for i, nid in enumerate(nodes)}
        for nid in nodes:
            ans, err = _send(grid, nid, ConfigRecord({
                "stage": "advertise_keys", "config": bytes(cfg.to_bytes()),
                "client-id": ids[nid], "round": 1, "plan": json.dumps(dict(plan.params))}))
            assert err is None, err
            server.receive(ans)
        server.close_stage()
        for stage in ("share_keys", "masked_input"):
            for nid in nodes:
                ans, err = _send(grid, nid, ConfigRecord({
                    "stage": stage, "message": bytes(server.message_for(ids[nid]))}),
                    with_model=stage == "masked_input")
                assert err is None, err
                server.receive(ans)
            server.close_stage()
        target = nodes[0]
        genuine = bytes(server.message_for(ids[target]))
        m = sa.decode_message(genuine, sender="server")
        body = m["payload"]["Unmask"]
        other = next(c for c in body["survivors"] if c != ids[target])
        body["dropped"] = sorted(set(body["dropped"]) | {other})
        _, out["contradictory"] = _send(grid, target, ConfigRecord({
            "stage": "unmasking", "message": bytes(sa.encode_message(m, sender="server"))}))
        ans, out["resent"] = _send(grid, target, ConfigRecord({
            "stage": "unmasking", "message": genuine}))
        out["resent_answered"] = ans is not None
        for nid in nodes[1:]:
            ans, err = _send(grid, nid, ConfigRecord({
                "stage": "unmasking", "message": bytes(server.message_for(ids[nid]))}))
            assert err is None, err
            server.receive(ans)
        out["round"] = server.close_stage()
        out["survivors"] = sorted(server.output["survivors"])
        out["status"] = "completed"
    except Exception as exc:  # the test reads the cause from the result file
        out["error"] = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        path = str(context.run_config.get("result-file", ""))
        if path:
            with open(path, "w") as f:
                json.dump(out, f)
