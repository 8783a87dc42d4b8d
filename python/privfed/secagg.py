"""Secure aggregation against an **honest-but-curious** server: the server learns the sum of the
clients' vectors in ``Z_{2^bits}^dim`` and nothing else, even when clients drop out, as long as
it relays public keys and reports dropouts truthfully (Bonawitz et al. 2017, "Practical Secure
Aggregation for Privacy-Preserving Machine Learning"; SecAgg+ of Bell et al. 2020, "Secure
Single-Server Aggregation with (Poly)Logarithmic Overhead"). A server that lies about dropouts or
substitutes keys recovers a client's input. The actively secure mode withstands it: here
:func:`round_config` ``(..., threat_model="active", roster=roster)`` and
``SecAggClient(config, id, device=DeviceKey, roster=roster, authority=authority_key)`` (device
keys sign the round keys, an enrollment authority signs the :class:`Roster`; a fifth stage,
``consistency_check``, precedes the unmasking), and :func:`simulate` (whose default it is).
Threat models: ``docs/SECURE_AGGREGATION.md``.

The protocol is sans-I/O: messages are ``bytes`` in privfed's wire encoding, carried by whatever
transport the caller has (HTTP, Flower, a queue)::

    from privfed import secagg
    config = secagg.round_config(clients=10, bits=32, dim=1000)   # fresh session id from the OS
    server = secagg.SecAggServer(config)
    clients = {i: secagg.SecAggClient(config, i) for i in range(1, 11)}
    for i, c in clients.items():
        server.receive(c.advertise_message)
    server.close_stage()                                         # advertise_keys -> share_keys
    for stage in ("share_keys", "masked_input", "unmasking"):
        for i in server.pending:
            server.receive(clients[i].handle(server.message_for(i), inputs[i]))
        server.close_stage()
    server.output["sum"], server.output["survivors"]

**Client ids are 1..clients** (0 is Shamir's secret point and never an id). An integration with
its own node ids (Flower's ``node_id``) maps them onto ``1..clients`` for the round and back.
Clients that do not answer before a stage is closed are dropped; their masks are recovered as
long as enough neighbours survive, otherwise the round aborts and reveals nothing.

Errors: a server request that contradicts what the client saw (e.g. asking for both kinds of
shares of one client) raises :class:`privfed.errors.ProtocolAbort` and the client drops its
secrets; malformed, forged, misaddressed or replayed bytes raise
:class:`privfed.errors.ProtocolError`; bad parameters :class:`privfed.errors.InvalidParameter`.
"""

from . import _privfed as _native

RoundConfig = _native.RoundConfig
DeviceKey = _native.DeviceKey
Roster = _native.Roster
SecAggClient = _native.SecAggClient
SecAggServer = _native.SecAggServer
round_config = _native.round_config
plan_secagg_plus = _native.plan_secagg_plus
simulate = _native.simulate
decode_message = _native.decode_message
encode_message = _native.encode_message
check_policy = _native.check_policy

# The native functions carry their public names; this module is where users find them.
for _f in (round_config, plan_secagg_plus, simulate, decode_message, encode_message,
           check_policy):
    _f.__module__ = __name__
del _f

__all__ = [
    "RoundConfig",
    "DeviceKey",
    "Roster",
    "SecAggClient",
    "SecAggServer",
    "round_config",
    "plan_secagg_plus",
    "simulate",
    "decode_message",
    "encode_message",
    "check_policy",
]
