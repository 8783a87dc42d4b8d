"""A ClientApp behind distributed_dp_mod whose training adds 0.01 to every parameter."""

import numpy as np
from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from privfed.flwr import distributed_dp_mod

app = ClientApp(mods=[distributed_dp_mod()])


@app.train()
def train(msg: Message, context: Context) -> Message:
    g = msg.content["arrays"]
    new = ArrayRecord(array_dict={k: Array(a.numpy() + np.float32(0.01)) for k, a in g.items()})
    return Message(RecordDict({"arrays": new, "metrics": MetricRecord({"num-examples": 1})}),
                   reply_to=msg)
