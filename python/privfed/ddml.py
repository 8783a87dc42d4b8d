"""Draw-and-Discard, the device side (paper 003: "Draw and Discard: a simple and scalable
approach to distributed machine learning with differential privacy"): a device takes the model
instance it drew from the server and posts its noised update ``B − γ·clip(G) + noise``::

    from privfed import ddml
    step = ddml.ClientStep(learning_rate=0.01, num_weights=785, epsilon=1.0)   # Laplace, ε-DP
    drawn = ddml.decode_weights(body)                # the server's little-endian float32 bytes
    update = step.apply(drawn, x, y, glm="logistic")
    post(ddml.encode_weights(update))
    step.guarantee                                   # {"kind": "pure", "epsilon": 1.0}, per weight

The server side (engine, update guard, HTTP API) is ``privfed serve``. ``simulate_in_process``
trains over simulated clients against an in-process server and returns the report of
``privfed ddml simulate --json`` (paper 003 §V).
"""

from . import _privfed as _native

ClientStep = _native.ClientStep
encode_weights = _native.encode_weights
decode_weights = _native.decode_weights
simulate_in_process = _native.simulate_in_process

# The native functions carry their public names; this module is where users find them.
for _f in (encode_weights, decode_weights, simulate_in_process):
    _f.__module__ = __name__
del _f

__all__ = ["ClientStep", "encode_weights", "decode_weights", "simulate_in_process"]
