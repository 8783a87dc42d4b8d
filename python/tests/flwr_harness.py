"""An in-process Flower Grid for the privfed.flwr tests: every message goes through Flower's
object serialisation (deflate, inflate) to a ClientApp with one persistent Context per node,
and nodes can be made to vanish at a chosen secure-aggregation stage (no reply, as a crashed or
timed-out node gives)."""

from __future__ import annotations

import uuid
from typing import Callable, Dict, Iterable, List, Optional

from flwr.app import Context, Message, RecordDict
from flwr.serverapp import Grid
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects
from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents

from privfed.flwr.distributed import SECAGG_RECORD


def wire_copy(msg: Message) -> Message:
    contents = {oid: obj.deflate() for oid, obj in get_all_nested_objects(msg).items()}
    return inflate_object_from_contents(msg.object_id, contents)


class InProcessGrid(Grid):
    """``node_ids`` served by ``client_app``; ``drop_at[node] = stage`` makes a node vanish
    from that secure-aggregation stage on (it gets the message, never answers)."""

    def __init__(self, client_app, node_ids: Iterable[int],
                 drop_at: Optional[Dict[int, str]] = None,
                 partition: Optional[Callable[[int], int]] = None) -> None:
        self.client_app = client_app
        self.nodes = list(node_ids)
        self.drop_at = dict(drop_at or {})
        self.gone: set = set()
        self.contexts = {
            nid: Context(run_id=1, node_id=nid,
                         node_config={"partition-id": (partition(nid) if partition else i),
                                      "num-partitions": len(self.nodes)},
                         state=RecordDict(), run_config={})
            for i, nid in enumerate(self.nodes)
        }
        self.log: List[tuple] = []  # (node, stage or type, replied)

    def set_run(self, run) -> None:  # noqa: D102
        self._run = run

    @property
    def run(self):  # noqa: D102
        return getattr(self, "_run", None)

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None):  # noqa
        return Message(content, dst_node_id, message_type, group_id=group_id, ttl=ttl)

    def get_node_ids(self):  # noqa: D102
        return list(self.nodes)

    def get_nodes(self):  # noqa: D102
        raise NotImplementedError

    def push_messages(self, messages):  # noqa: D102
        raise NotImplementedError

    def pull_messages(self, message_ids):  # noqa: D102
        raise NotImplementedError

    def send_and_receive(self, messages, *, timeout=None):  # noqa: D102
        replies = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = str(uuid.uuid4())
            nid = msg.metadata.dst_node_id
            rec = msg.content.config_records.get(SECAGG_RECORD)
            stage = str(rec["stage"]) if rec is not None else msg.metadata.message_type
            if nid in self.gone or self.drop_at.get(nid) == stage:
                self.gone.add(nid)
                self.log.append((nid, stage, False))
                continue
            delivered = wire_copy(msg)
            try:
                reply = self.client_app(delivered, self.contexts[nid])
            except Exception as exc:  # what the SuperNode does: an error reply
                reply = Message(error=_error(exc), reply_to=delivered)
            self.log.append((nid, stage, True))
            replies.append(wire_copy(reply))
        return replies


def _error(exc: Exception):
    from flwr.app import Error

    return Error(code=0, reason=f"{type(exc).__name__}: {exc}")
