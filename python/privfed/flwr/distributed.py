"""Distributed DP with secure aggregation on Flower (paper 001's Skellam pipeline).

Client: :func:`distributed_dp_mod` encodes the update (clip, scale, rotate, round, Skellam share,
mod 2^bits; :mod:`privfed.distributed`) and runs privfed's secure-aggregation client
(:mod:`privfed.secagg`) over four TRAIN messages (five in the active mode). Server:
:class:`DistributedDpStrategy` runs the stages over Flower's Grid, decodes the mean of the
survivors' updates from the modular sum, hands ``global + mean`` to the inner strategy and
accounts one event per round with the clients whose inputs are in the sum.

Threat model: by default privfed's **honest-but-curious** secure aggregation. The server (the
SuperLink's operator) sees only the modular sum as long as it relays keys and reports dropouts
truthfully; one that lies about dropouts or substitutes keys recovers a single client's
encoding, which carries only that client's share of the noise. With
``DistributedDpStrategy(threat_model="active", roster=...)`` the round runs the actively secure
mode (device-signed keys, a consistency check before unmasking), which withstands that server
(``docs/SECURE_AGGREGATION.md``, "Threat models"; docs/FLOWER.md, "Threat model").

Wire: every stage message carries a ConfigRecord ``"privfed-secagg"`` with ``stage`` and
``message`` (privfed's postcard bytes); the first one also the round configuration
(``config``), the client's id (1..n), the server round and the plan's parameters (JSON). The
masked-input request also carries the strategy's usual train content (the model and config):
the client trains then. Its reply holds the masked vector only (no model, no metrics).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Union

import numpy as np
from flwr.app import (
    ArrayRecord,
    ConfigRecord,
    Context,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from .. import accounting, errors
from .. import distributed as dist
from .. import secagg as sa
from .ledger import PrivacyLedger, uncalled_mod_error, warn
from .records import (
    CANARY_KEYS,
    CANARY_RECORD,
    check_same_layout,
    keep_dtypes,
    single_array_record,
)
from .selection import (
    ArraySelection,
    Patterns,
    check_records,
    flatten_selected,
    log_skipped,
    replace_selected,
    selection_from_run_config,
)
from .strategy_base import WrappedStrategy
from .vault import NodeVault, aad, resolve_dir, vault_for

#: The ConfigRecord of every secure-aggregation message (both ways) and of the client's state.
SECAGG_RECORD = "privfed-secagg"
STATE_RECORD = "privfed-secagg-state"
STAGES = ("advertise_keys", "share_keys", "masked_input", "unmasking")
#: The stages of an active-mode round (a consistency check before the unmasking).
ACTIVE_STAGES = ("advertise_keys", "share_keys", "masked_input", "consistency_check", "unmasking")
#: The layout of the client's ``ctxt.state`` record (see :class:`DistributedDpMod`).
STATE_VERSION = 2
#: The keys a server's "privfed-secagg" record may carry (any other is refused by the mod).
_SECAGG_KEYS = ("stage", "config", "client-id", "round", "plan", "message", "arrays", "roster")
#: Node-config keys (set by the SuperNode's operator, never by the server) of the active mode.
AUTHORITY_KEY = "privfed-secagg-authority"
DEVICE_KEY = "privfed-device-key"
# Why a node refuses a round that names a roster it cannot check.
_NO_AUTHORITY = (f"the round names a roster and this node has no enrollment authority to check "
                 f"it against ({AUTHORITY_KEY} in the node config, or authority=)")
#: Node-config keys of the client's policy (docs/FLOWER.md, "The client's policy"): each
#: overrides the one rule it names; ``privfed-secagg-policy`` (``"default"``, ``"permissive"``
#: or a JSON object of rules) replaces the base the others apply to.
POLICY_KEY = "privfed-secagg-policy"
_POLICY_KEYS = {
    "privfed-min-clients": ("min_clients", int),
    "privfed-min-threshold": ("min_threshold", int),
    "privfed-min-threshold-fraction": ("min_threshold_fraction", float),
    "privfed-min-degree": ("min_degree", int),
}
_PLAN_POLICY_KEYS = {
    "privfed-min-local-noise-stddev": ("min_local_noise_stddev", float),
    "privfed-max-clip": ("max_clip", float),
    "privfed-allow-no-noise": ("allow_no_noise", bool),
}
_PERMISSIVE = {"min_clients": 0, "min_threshold": 0, "min_threshold_fraction": 0.0,
               "min_degree": 0}


def _node_value(conf: Any, key: str, ty: type) -> Any:
    v = conf.get(key)
    if ty is bool and isinstance(v, str):
        if v.lower() not in ("true", "false", "1", "0"):
            raise errors.ConfigError(f"{key} = {v!r}: expected true or false")
        return v.lower() in ("true", "1")
    try:
        return ty(v)
    except (TypeError, ValueError) as e:
        raise errors.ConfigError(f"{key} = {v!r}: {e}") from None


def _config_from_bytes(data: bytes):
    return sa.RoundConfig.from_bytes(bytes(data))


def _session_id(cfg) -> bytes:
    s = cfg.session_id
    return bytes(s) if not isinstance(s, str) else bytes.fromhex(s)


# =============================================================================== client side
class DistributedDpMod:
    """ClientApp mod: privfed's secure-aggregation client around the TRAIN message.

    * ``advertise_keys``: builds the round's client from the configuration the server sent
      (keys from a fresh 32-byte seed drawn from the OS CSPRNG in Rust) and answers with its
      public keys;
    * ``share_keys``: answers with its encrypted shares;
    * ``masked_input``: lets the ClientApp train (``call_next``; on a canary node of
      :class:`~privfed.flwr.AuditStrategy` the next mod, :func:`~privfed.flwr.canary_mod`,
      answers the canary record instead), encodes
      ``update = returned − received`` with the server's Skellam plan and this round's rotation
      (:func:`privfed.distributed.rotation_seed` of the round's session id and server round),
      and answers with the masked encoding only;
    * ``unmasking``: answers with the shares the server may have (privfed's consistency checks
      refuse contradictory requests: ``ProtocolAbort``).

    The client's state between stages lives in the node's Context (``ctxt.state``, record
    ``"privfed-secagg-state"``; Flower's Deployment Engine may start a fresh ClientApp process
    per message and keeps only the Context): the round's session id, server round, client id,
    configuration and plan, the stages answered so far, the server messages handled so far and
    the round's 32-byte master seed, drawn, **sealed** with ChaCha20-Poly1305 and opened in Rust
    (:meth:`privfed.secagg.SecAggClient.new_sealed`) under a key in a node-local directory
    (:mod:`privfed.flwr.vault`; ``state_dir=``, else the node config's ``privfed-state-dir``,
    else ``$PRIVFED_STATE_DIR``, else ``~/.local/state/privfed``). The client is rebuilt from
    them at each stage. Every stage is claimed in that directory's journal before it is
    answered, so it is answered **once**; any refusal (a contradictory or
    malformed request, a stage re-sent or out of order, a failing ClientApp) is **sticky**: the
    round is recorded as aborted in the journal and its state replaced by an ``aborted`` marker
    without seed or messages, and every later message of that round is refused — after a
    process restart, on a rolled-back Context copy and for concurrent deliveries too. After the
    unmasking answer only a ``finished`` marker stays. A new round (another session id)
    replaces an unfinished one, whose seed is dropped. What this does not cover:
    docs/FLOWER.md, "What ctxt.state holds".

    Only the selected arrays are encoded: float arrays matching ``include`` and no ``exclude``
    pattern (``privfed-include`` / ``privfed-exclude`` in ``Context.run_config``, read on every
    call, replace them); the masked-input request names the arrays the server's plan covers and
    a different selection is refused. Skipped arrays (integer ones such as
    ``num_batches_tracked`` always; an INFO line names them) are not sent at all.

    A TRAIN message without the ``"privfed-secagg"`` record is refused (an error reply): the
    mod never sends an update in the clear; so is one with another ``privfed…`` record or
    unknown keys in its own.

    **The client's policy** (privfed's Rust ``ClientPolicy`` and ``PlanPolicy``, checked before
    the node answers anything): by default a round of fewer than 3 clients, a threshold below 2
    or not above half of each client's neighbours, or a plan without local noise is refused
    (``ProtocolAbort``, and the round stays aborted on this node). ``policy=`` (``"default"``,
    ``"permissive"`` or a dict of rules, see :func:`privfed.secagg.check_policy`) and the node
    config's ``privfed-secagg-policy`` / ``privfed-min-clients`` / ``privfed-min-threshold`` /
    ``privfed-min-threshold-fraction`` / ``privfed-min-degree`` relax or tighten the round
    rules; ``min_local_noise_stddev``, ``max_clip``, ``allow_no_noise`` (or
    ``privfed-min-local-noise-stddev`` / ``privfed-max-clip`` / ``privfed-allow-no-noise``) the
    plan rules (:func:`privfed.distributed.check_plan`): a plan that would give this client less
    noise, or a larger sensitivity, than it accepts is refused. ``encoder_seed(context,
    server_round)`` (experiments only) fixes the encoder's
    randomness; never use it for a real release.

    Active rounds (``DistributedDpStrategy(threat_model="active")``): the client signs its round
    keys with its device key (``device_key=``, else the node config's ``privfed-device-key``, else
    ``secagg-device-<node id>.key`` in the state directory; made from the OS CSPRNG if missing)
    and answers the ``consistency_check`` stage. With an enrollment authority (``authority=``, 32
    bytes or 64 hex digits, else the node config's ``privfed-secagg-authority``) it verifies the
    roster the server relays and joins only active rounds naming a roster that authority
    signed; ``require_active=True`` refuses honest-but-curious rounds without one (default: only
    when an authority is set).
    """

    def __init__(
        self,
        *args: Any,
        arrays_key: Optional[str] = None,
        min_local_noise_stddev: Optional[float] = None,
        max_clip: Optional[float] = None,
        encoder_seed: Optional[Callable[[Context, int], Any]] = None,
        threads: Optional[int] = 1,
        include: Patterns = None,
        exclude: Patterns = None,
        state_dir: Union[str, "os.PathLike[str]", None] = None,
        authority: Union[bytes, str, None] = None,
        device_key: Union[str, "os.PathLike[str]", None] = None,
        require_active: Optional[bool] = None,
        policy: Union[None, str, Dict[str, Any]] = None,
        allow_no_noise: Optional[bool] = None,
    ) -> None:
        if args:
            raise uncalled_mod_error("DistributedDpMod", "DistributedDpMod()", args)
        self.state_dir = state_dir
        self.authority = _authority(authority) if authority is not None else None
        self.device_key = device_key
        self.require_active = require_active
        ArraySelection.of(include, exclude)  # refuse malformed patterns now
        self.include, self.exclude = include, exclude
        self._logged: set = set()
        self.arrays_key = arrays_key
        self.min_local_noise_stddev = min_local_noise_stddev
        self.max_clip = max_clip
        self.allow_no_noise = allow_no_noise
        self.policy = policy
        # a malformed policy fails here (InvalidParameter), not at the first round; a refusal
        # of this sample round only shows that the policy parsed
        try:
            sa.check_policy(sa.round_config(3, 16, 1), self._policy_base(policy))
        except errors.ProtocolAbort:
            pass
        self.encoder_seed = encoder_seed
        self.threads = threads

    # -- state: the sealed seed and the server messages so far; the client is replayed --
    def _vault(self, ctxt: Context) -> NodeVault:
        return vault_for(resolve_dir(self.state_dir, ctxt.node_config))

    @staticmethod
    def _node(ctxt: Context) -> str:
        return str(ctxt.node_id)

    def _restore(self, st: ConfigRecord, ctxt: Context, vault: NodeVault):
        cfg = _config_from_bytes(st["config"])
        cid = int(st["client-id"])
        created = int(st["created"])
        vault.check_age(created)
        roster = bytes(st["roster"]) if "roster" in st else None
        client, _ = self._client(cfg, cid, roster, ctxt, vault,
                                 aad(bytes(st["session"]), self._node(ctxt), cid, created),
                                 sealed=bytes(st["sealed-seed"]))
        for m in list(st["messages"]):
            inp = None
            if client.next_stage == "masked_input":
                # the state after the masked input does not depend on the input
                inp = np.zeros(cfg.dim, dtype=np.uint64)
            client.handle(bytes(m), inp)
        return client

    # -- the active mode: the device key, the authority, and which rounds this node joins --
    def _authority_of(self, ctxt: Context) -> Optional[bytes]:
        if self.authority is not None:
            return self.authority
        a = ctxt.node_config.get(AUTHORITY_KEY) if ctxt.node_config is not None else None
        return _authority(str(a)) if a else None

    def _device(self, ctxt: Context):
        path = self.device_key
        if path is None and ctxt.node_config is not None:
            path = ctxt.node_config.get(DEVICE_KEY) or None
        if path is None:
            vault = resolve_dir(self.state_dir, ctxt.node_config)
            vault.mkdir(mode=0o700, parents=True, exist_ok=True)
            path = vault / f"secagg-device-{ctxt.node_id}.key"
        return sa.DeviceKey.load(str(path), create=True)

    def _check_threat_model(self, cfg, roster: Optional[bytes], ctxt: Context) -> None:
        """Refuses a round weaker than this node accepts: a node that trusts an enrollment
        authority (or ``require_active=True``) joins active rounds only, and with an authority
        only rounds that name a roster it signed."""
        authority = self._authority_of(ctxt)
        require = self.require_active if self.require_active is not None else (
            authority is not None)
        if cfg.threat_model != "active":
            if require:
                raise errors.ProtocolAbort(
                    "the round is honest-but-curious; this node joins active rounds only (a "
                    "server that lies about dropouts would recover its update otherwise)")
            return
        if cfg.roster is None:
            if authority is not None:
                raise errors.ProtocolAbort(
                    "the round names no roster, so the server could join it as any number of "
                    "clients; this node trusts an enrollment authority and refuses it")
            return
        if authority is None:
            raise errors.ProtocolAbort(_NO_AUTHORITY)
        if roster is None:
            raise errors.ProtocolError("the round names a roster the server did not send")

    def _client(self, cfg, cid: int, roster: Optional[bytes], ctxt: Context, vault: NodeVault,
                binding: bytes, sealed: Optional[bytes] = None):
        """The round's client and its sealed seed: a fresh seed drawn and sealed in Rust when
        ``sealed`` is None, else the one ``sealed`` holds, opened in Rust (neither the seed nor
        the vault's key becomes a Python object)."""
        kw: Dict[str, Any] = {"policy": self._secagg_policy(cfg, ctxt)}
        authority = signed = None
        if cfg.threat_model == "active":
            kw["device"] = self._device(ctxt)
            if roster is not None:
                # The roster must be at least as new as the newest this node accepted from the
                # same authority (kept in the node's journal), and unexpired by the node's
                # clock; the client checks both with the signature.
                authority = self._authority_of(ctxt)
                if authority is None:
                    raise errors.ProtocolAbort(_NO_AUTHORITY)
                signed = sa.Roster.from_bytes(roster)
                kw.update(roster=signed, authority=authority,
                          min_roster_version=vault.roster_version(authority))
        key_file = str(vault.key_file())
        if sealed is None:
            client, sealed = sa.SecAggClient.new_sealed(cfg, cid, key_file=key_file,
                                                        aad=binding, **kw)
        else:
            client = sa.SecAggClient.open_sealed(cfg, cid, sealed, key_file=key_file,
                                                 aad=binding, **kw)
        if signed is not None:
            vault.accept_roster_version(authority, signed.version)
        return client, bytes(sealed)

    @staticmethod
    def _policy_base(p: Union[None, str, Dict[str, Any]]) -> Dict[str, Any]:
        if p is None or p == "default":
            return {}
        if p == "permissive":
            return dict(_PERMISSIVE)
        if isinstance(p, str):
            p = json.loads(p) if p.lstrip().startswith("{") else p
        if not isinstance(p, dict):
            raise errors.ConfigError(
                f"policy {p!r}: expected 'default', 'permissive' or a dict of rules")
        return dict(p)

    def _secagg_policy(self, cfg, ctxt: Context) -> Dict[str, Any]:
        """The round rules this node applies: ``policy=``, else the node config's
        ``privfed-secagg-policy``, with each ``privfed-min-…`` node-config key over it, and
        ``require_active`` (or a trusted authority) refusing honest-but-curious rounds."""
        conf = ctxt.node_config if ctxt.node_config is not None else {}
        base = self.policy if self.policy is not None else conf.get(POLICY_KEY)
        out = self._policy_base(base)
        for key, (name, ty) in _POLICY_KEYS.items():
            if key in conf:
                out[name] = _node_value(conf, key, ty)
        require = self.require_active if self.require_active is not None else (
            self._authority_of(ctxt) is not None)
        if require:
            out["accept_honest_but_curious"] = False
        return out

    def _plan_policy(self, ctxt: Context) -> Dict[str, Any]:
        """The plan rules: the node config's ``privfed-…`` keys, overridden by the mod's
        ``min_local_noise_stddev`` / ``max_clip`` / ``allow_no_noise``."""
        conf = ctxt.node_config if ctxt.node_config is not None else {}
        out: Dict[str, Any] = {}
        for key, (name, ty) in _PLAN_POLICY_KEYS.items():
            if key in conf:
                out[name] = _node_value(conf, key, ty)
        for name in ("min_local_noise_stddev", "max_clip", "allow_no_noise"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    def _check_plan(self, params: Dict[str, Any], ctxt: Context) -> None:
        # one home for the rules: privfed_distributed::PlanPolicy (ProtocolAbort when refused)
        dist.check_plan(params, self._plan_policy(ctxt))

    @staticmethod
    def _marker(st: ConfigRecord, status: str, reason: str = "") -> ConfigRecord:
        """What a round leaves in ``ctxt.state`` once it is over on this node: its session,
        server round, client id and progress, never its seed or messages."""
        out = ConfigRecord({
            "version": STATE_VERSION, "status": status, "session": bytes(st["session"]),
            "round": int(st["round"]), "client-id": int(st["client-id"]),
            "answered": [str(a) for a in st["answered"]],
        })
        if reason:
            out["reason"] = reason[:500]
        return out

    def _abort_running(self, ctxt: Context, reason: str) -> None:
        """Makes a refusal stick: the round in progress (if any) is recorded as aborted in the
        node's journal and its state replaced by an ``aborted`` marker (seed and messages
        gone)."""
        states = ctxt.state.config_records
        st = states.get(STATE_RECORD)
        if st is None or st.get("status") != "running":
            return
        try:
            self._vault(ctxt).abort(bytes(st["session"]), self._node(ctxt), reason)
        finally:
            states[STATE_RECORD] = self._marker(st, "aborted", reason)

    def __call__(self, msg: Message, ctxt: Context, call_next: Callable) -> Message:
        if msg.metadata.message_type != MessageType.TRAIN:
            return call_next(msg, ctxt)
        try:
            out = self._handle(msg, ctxt, call_next)
        except Exception as exc:
            # Any refusal ends the round on this node for good: a server that re-sends the
            # refused stage (or any other) finds it aborted, whatever process answers.
            self._abort_running(ctxt, f"{type(exc).__name__}: {exc}")
            raise
        if out.has_error():  # the ClientApp failed at the masked input: the round is over too
            self._abort_running(ctxt, f"the ClientApp failed: {out.error.reason}")
        return out

    def _handle(self, msg: Message, ctxt: Context, call_next: Callable) -> Message:
        check_records(msg.content, {SECAGG_RECORD: _SECAGG_KEYS, CANARY_RECORD: CANARY_KEYS},
                      "distributed_dp_mod")
        # the run config is read on every call (a misspelt privfed- key fails every stage)
        sel = selection_from_run_config(ctxt.run_config, include=self.include,
                                        exclude=self.exclude, who="distributed_dp_mod")
        rec = msg.content.config_records.get(SECAGG_RECORD)
        if rec is None:
            raise errors.ProtocolError(
                "distributed_dp_mod: a TRAIN message without a secure-aggregation stage; "
                "the update is never sent in the clear (is the server a DistributedDpStrategy?)"
            )
        stage = str(rec["stage"])
        if stage not in ACTIVE_STAGES:
            raise errors.ProtocolError(f"unknown secure-aggregation stage {stage!r}")
        states = ctxt.state.config_records
        st = states.get(STATE_RECORD)
        if st is not None and st.get("version") != STATE_VERSION:
            # another layout (an older privfed kept the seed in the clear): drop it
            del states[STATE_RECORD]
            st = None
        node = self._node(ctxt)
        if stage == "advertise_keys":
            cfg = _config_from_bytes(rec["config"])
            session, cid = _session_id(cfg), int(rec["client-id"])
            roster = bytes(rec["roster"]) if "roster" in rec else None
            vault = self._vault(ctxt)
            try:
                params = json.loads(str(rec["plan"]))
                self._check_plan(params, ctxt)
                if int(params.get("padded_dim", cfg.dim)) != cfg.dim:
                    raise errors.ProtocolError("the plan's padded dimension is not the round's")
                self._check_threat_model(cfg, roster, ctxt)
                sa.check_policy(cfg, self._secagg_policy(cfg, ctxt))
            except Exception as e:
                # A refused round stays refused on this node: the same session re-sent with
                # another plan or roster is refused at the claim below.
                vault.abort(session, node, f"advertise_keys refused: {e}")
                raise
            if st is not None and st.get("status") == "running" and bytes(
                    st["session"]) != session:
                # the server moved on (the old round aborted on its side): the old seed goes
                self._abort_running(ctxt, "superseded by a new round before it finished")
            vault.prune()
            vault.claim(session, node, stage)  # a round is started once per node
            created = int(time.time())
            client, sealed = self._client(cfg, cid, roster, ctxt, vault,
                                          aad(session, node, cid, created))
            states[STATE_RECORD] = ConfigRecord({
                "version": STATE_VERSION, "status": "running", "session": session,
                "round": int(rec["round"]), "client-id": cid, "answered": [stage],
                "config": bytes(rec["config"]), "plan": str(rec["plan"]),
                "created": created, "sealed-seed": sealed, "messages": [],
            })
            if roster is not None:
                states[STATE_RECORD]["roster"] = roster
            answer = bytes(client.advertise_message)
        else:
            if st is None:
                raise errors.ProtocolError(f"stage {stage} without a round in progress")
            status = str(st.get("status", ""))
            if status == "aborted":
                raise errors.ProtocolAbort(
                    f"stage {stage}: this node aborted the round ({st.get('reason', '')}); "
                    f"every later message of the round is refused")
            if status != "running":
                raise errors.ProtocolError(
                    f"stage {stage}: the round is over on this node ({status or 'unknown state'})")
            vault = self._vault(ctxt)
            # claimed before it is computed: a stage is answered at most once, whatever
            # process or Context copy handles a re-sent or concurrent message
            vault.claim(bytes(st["session"]), node, stage)
            client = self._restore(st, ctxt, vault)
            if client.next_stage != stage:
                raise errors.ProtocolError(
                    f"the server sent stage {stage}, the client expects {client.next_stage}")
            server_msg = bytes(rec["message"])
            if stage == "masked_input":
                x = self._encode_update(msg, ctxt, call_next, st, sel, rec)
                if isinstance(x, Message):  # the ClientApp failed: pass its error on
                    return x
                answer = bytes(client.handle(server_msg, x))
            else:
                answer = bytes(client.handle(server_msg))
            st["answered"] = [str(a) for a in st["answered"]] + [stage]
            if stage == "unmasking":
                states[STATE_RECORD] = self._marker(st, "finished")
            else:
                st["messages"] = list(st["messages"]) + [server_msg]
        out = RecordDict({SECAGG_RECORD: ConfigRecord({"stage": stage, "message": answer})})
        return Message(out, reply_to=msg)

    def _encode_update(self, msg, ctxt, call_next, st, sel, rec):
        _, received = single_array_record(msg.content, self.arrays_key)
        names, skipped = sel.split(received)
        if "arrays" in rec and list(rec["arrays"]) != names:
            raise errors.ProtocolError(
                f"distributed_dp_mod: the server's plan covers the arrays {list(rec['arrays'])}, "
                f"this client selects {names} (same privfed-include/-exclude on both sides?)")
        log_skipped("distributed_dp_mod", skipped, "not sent (the server keeps their global "
                    "values)", self._logged)
        g = flatten_selected(received, names)
        out = call_next(msg, ctxt)
        if out.has_error():
            return out
        _, returned = single_array_record(out.content, self.arrays_key)
        check_same_layout(received, returned)
        update = flatten_selected(returned, names) - g
        params = json.loads(str(st["plan"]))
        if update.size != int(params["dim"]):
            raise errors.ProtocolError(
                f"the update has {update.size} entries, the plan {params['dim']}")
        cfg = _config_from_bytes(st["config"])
        rseed = dist.rotation_seed(_session_id(cfg), int(st["round"]))
        seed = self.encoder_seed(ctxt, int(st["round"])) if self.encoder_seed else None
        enc = dist.SkellamEncoder(params, rseed, seed=seed)
        return enc.encode(update, threads=self.threads)


def _authority(a: Union[bytes, str]) -> bytes:
    """An enrollment authority's Ed25519 verifying key: 32 bytes or 64 hex digits."""
    b = bytes.fromhex(a) if isinstance(a, str) else bytes(a)
    if len(b) != 32:
        raise errors.ConfigError(
            f"an enrollment authority's verifying key is 32 bytes (64 hex digits), got {len(b)}")
    return b


def distributed_dp_mod(*args: Any, **kw: Any) -> DistributedDpMod:
    """A :class:`DistributedDpMod` (``ClientApp(mods=[distributed_dp_mod()])``).

    Passing the factory itself (``mods=[distributed_dp_mod]``) makes Flower call it with a
    message: that is refused with a TypeError that names the fix."""
    if args:
        raise uncalled_mod_error("distributed_dp_mod", "distributed_dp_mod()", args)
    return DistributedDpMod(**kw)


# ============================================================================ planning
def dropouts_covered(clients: int, dropout_tolerance: float) -> int:
    """How many of ``clients`` may drop out of a round planned with ``dropout_tolerance``:
    ``⌊clients·dropout_tolerance⌋`` (so ``clients − covered = ⌈clients·(1 − tolerance)⌉``
    must contribute). A positive tolerance that covers no client is refused with a
    ValueError naming the smallest tolerance that covers one: 4 clients at 0.2 would need all
    4 to contribute."""
    if clients < 1:
        raise ValueError(f"clients must be at least 1, got {clients}")
    if not 0.0 <= dropout_tolerance < 1.0:
        raise ValueError(f"dropout_tolerance must be in [0, 1), got {dropout_tolerance}")
    # the tolerance is a decimal the user typed: 5·0.2 is one dropout despite binary rounding
    covered = int(math.floor(clients * dropout_tolerance + 1e-9))
    if dropout_tolerance > 0 and covered == 0:
        raise ValueError(
            f"dropout_tolerance={dropout_tolerance} of {clients} clients covers no dropout "
            f"(⌈{clients}·{1 - dropout_tolerance:g}⌉ = {clients} must contribute); use "
            f"dropout_tolerance ≥ {1 / clients:g} to cover one, or 0 to cover none")
    return covered


def plan_for_dropouts(*, dim: int, clip: float, bits: int, clients: int, min_contributors: int,
                      epsilon: float, delta: float, rounds: int, k: float = 4.0,
                      colluding_fraction: float = 0.0) -> Any:
    """A Skellam plan for a cohort of ``clients`` of which at least ``min_contributors``
    contribute to every round: privfed's planner with ``clients=min_contributors`` and
    ``max_contributors=clients``.

    The noise is split so that ``min_contributors`` shares alone give ε(δ) ≤ ``epsilon`` after
    ``rounds`` rounds — with ``colluding_fraction`` γ > 0, the honest ``min_contributors −
    ⌈γ·clients⌉`` shares alone (the colluders may all survive and subtract their own); the scale and modular range hold ``k`` standard deviations of the largest
    possible sum (the whole cohort), so a round without dropouts does not wrap more often than
    planned. Raises :class:`privfed.errors.InfeasibleParameters` when no noise reaches the target
    at ``bits``.
    """
    if not 1 <= min_contributors <= clients:
        raise ValueError(f"min_contributors must be in 1..={clients}, got {min_contributors}")
    return dist.plan(dim, clip, bits, min_contributors, epsilon=epsilon, delta=delta,
                     rounds=rounds, k=k, max_contributors=clients,
                     colluding_fraction=colluding_fraction)


# =============================================================================== server side
class SecAggRoundAborted(errors.ProtocolAbort):
    """A secure-aggregation round aborted (too few survivors): nothing was revealed."""


@dataclass
class RoundOutcome:
    """What the server learned in one round (``DistributedDpStrategy.rounds``)."""

    server_round: int
    session_id: bytes
    node_to_client: Dict[int, int]
    sampled: int
    survivors: List[int] = field(default_factory=list)  # secagg ids whose inputs are summed
    dropped: List[int] = field(default_factory=list)  # shared keys, no masked input
    aborted: bool = False
    abort_reason: Optional[str] = None
    wrap_suspected: bool = False
    mean: Optional[np.ndarray] = None  # the decoded mean update (float64, length dim)
    epsilon: float = 0.0  # ε(δ) after this round
    colluding_fraction: float = 0.0  # γ of the cohort the ε assumes colludes with the server
    honest_contributors: int = 0  # survivors − ⌈γ·sampled⌉: the noise the ε counts
    stage_seconds: Dict[str, float] = field(default_factory=dict)
    errors: Dict[int, str] = field(default_factory=dict)  # node id -> "stage: error text"
    template: Optional[Message] = None
    arrays: Optional[ArrayRecord] = None
    arrays_key: str = "arrays"
    names: List[str] = field(default_factory=list)  # the arrays the sum covers
    # canary participants (AuditStrategy): node ids, and the secagg ids of those in the sum
    canary_nodes: List[int] = field(default_factory=list)
    canary_survivors: List[int] = field(default_factory=list)

    @property
    def contributors(self) -> int:
        """The real clients whose inputs are in the sum (canaries are not contributors)."""
        return len(self.survivors) - len(self.canary_survivors)

    @property
    def survivor_nodes(self) -> List[int]:
        inv = {c: n for n, c in self.node_to_client.items()}
        return [inv[c] for c in self.survivors]


class DistributedDpStrategy(WrappedStrategy):
    """Secure aggregation + distributed DP around a Flower strategy (FedAvg, FedAdam, ...).

    Each round: the inner strategy samples its cohort (``configure_train``); the cohort's node
    ids, sorted, become secure-aggregation clients 1..n; the four stages (five with
    ``threat_model="active"``: a consistency check before the unmasking) run over the Grid
    (each waits at most ``stage_timeout`` seconds; a node that does not answer, or answers with
    an error, has dropped, and its error text is logged as a WARNING and kept in the round's
    :class:`RoundOutcome`). The server decodes the mean of the survivors' clipped updates from
    the modular sum, and the inner strategy's ``aggregate_train`` receives a single reply
    carrying ``global + mean`` (``num-examples`` = contributors): FedAvg then applies the mean,
    FedOpt-style strategies take it as their pseudo-gradient. The clients' own metrics are not
    sent (they are not protected by the sum).

    Fails loudly:

    * the plan's ``dim`` must be the model's length (checked by :meth:`start` before round 1,
      and by every ``configure_train``): ValueError;
    * ``budget`` (ε at ``delta``; by default the plan's target ε when the plan has one, so the
      planned ε is a budget; ``budget=None`` turns it off): a round whose best case (every
      sampled client contributes) would take ε(δ) past it raises
      :class:`privfed.errors.PrivacyBudgetExceeded` (``on_budget="stop"``: a WARNING and no
      more rounds); a round whose survivors of the masked-input stage would take ε(δ) past it
      is aborted before unmasking (nothing revealed, nothing accounted);
    * ``max_consecutive_aborts`` (default 2) aborted rounds in a row raise
      :class:`SecAggRoundAborted` with the last abort's cause and the clients' error texts
      (``on_abort="raise"``: the first abort raises; ``None``: never).

    Accounting: after a round whose sum was unmasked, ``round_event(plan, honest)`` is composed
    and ε(δ) logged, with ``honest = survivors − ⌈γ·sampled⌉``
    (:func:`privfed.distributed.honest_contributors`): the noise of the clients actually in the
    sum, less that of the ``colluding_fraction`` γ of the cohort that may collude with the
    server (a colluder subtracts its own noise). γ defaults to the plan's
    (``plan.colluding_fraction``; 0 for a plan without one); a round whose survivors could all
    be colluders is aborted before unmasking. Each :class:`RoundOutcome` and the round's metrics
    (``privfed-colluding-fraction``, ``privfed-honest-contributors``) say which γ and count the
    ε is for. An aborted round
    (survivors below the threshold) reveals nothing and composes nothing. ``sample_rate``:
    as for :class:`~privfed.flwr.LocalDpStrategy` (Flower samples fixed-size cohorts: none).
    A suspected modular wrap (``wrap_suspected``) is accounted but not applied unless
    ``apply_on_wrap``.

    ``threat_model="active"`` runs the actively secure mode (docs/FLOWER.md, "Threat model"):
    ``roster`` (a :class:`privfed.secagg.Roster` signed by the enrollment authority, relayed to
    the nodes, named by its digest in the round configuration) admits enrolled devices only;
    without one, any device key is accepted (the Sybil case). The default stays
    ``"honest-but-curious"``: the active complete graph's threshold leaves small cohorts no
    room for dropouts. The round's thresholds are sized for the same γ the accounting assumes
    (:meth:`round_config`: on the active complete graph ``t = ⌊(n + ⌈γn⌉)/2⌋ + 1``); a γ a
    cohort cannot be sized for raises :class:`privfed.errors.InvalidParameter` when its round
    is configured.
    """

    def __init__(
        self,
        inner: Strategy,
        *,
        plan: Any,
        delta: float,
        accountant: Optional[Any] = None,
        budget: Any = "plan",
        on_budget: str = "raise",
        dropout: float = 0.2,
        graph: str = "auto",
        stage_timeout: Optional[float] = 600.0,
        on_abort: str = "skip",
        max_consecutive_aborts: Optional[int] = 2,
        sample_rate: Optional[float] = None,
        apply_on_wrap: bool = False,
        include: Patterns = None,
        exclude: Patterns = None,
        threat_model: str = "honest-but-curious",
        roster: Optional[Any] = None,
        colluding_fraction: Optional[float] = None,
    ) -> None:
        super().__init__(inner)
        if threat_model not in ("honest-but-curious", "active"):
            raise ValueError(
                f"threat_model must be 'honest-but-curious' or 'active', got {threat_model!r}")
        if roster is not None and threat_model != "active":
            raise ValueError("a roster applies to threat_model='active' only")
        self.threat_model = threat_model
        self.roster = roster
        self.selection = ArraySelection.of(include, exclude)
        self._logged: set = set()
        if on_abort not in ("skip", "raise"):
            raise ValueError(f"on_abort must be 'skip' or 'raise', got {on_abort!r}")
        if on_budget not in ("raise", "stop"):
            raise ValueError(f"on_budget must be 'raise' or 'stop', got {on_budget!r}")
        if max_consecutive_aborts is not None and max_consecutive_aborts < 1:
            raise ValueError(
                f"max_consecutive_aborts must be at least 1 (or None), got {max_consecutive_aborts}")
        self.plan = plan
        planned_gamma = float(getattr(plan, "colluding_fraction", 0.0))
        if colluding_fraction is None:
            colluding_fraction = planned_gamma
        elif float(colluding_fraction) != planned_gamma and hasattr(plan, "colluding_fraction"):
            raise ValueError(
                f"colluding_fraction={colluding_fraction} but the plan was made for "
                f"{planned_gamma}: plan with the same colluding fraction (one γ for the noise "
                f"and the accounting)")
        if not 0.0 <= float(colluding_fraction) < 1.0:
            raise ValueError(f"colluding_fraction must be in [0, 1), got {colluding_fraction}")
        self.colluding_fraction = float(colluding_fraction)
        self.params = dict(plan.params) if hasattr(plan, "params") else dict(plan)
        self._plan_json = json.dumps(self.params)
        if isinstance(budget, str):
            if budget != "plan":
                raise ValueError(f"budget must be an ε, None or 'plan', got {budget!r}")
            budget = self._plan_budget(plan, delta)
        self.ledger = PrivacyLedger(delta, accountant, budget)
        self.on_budget = on_budget
        self.dropout = float(dropout)
        self.graph = graph
        self.stage_timeout = stage_timeout
        self.on_abort = on_abort
        self.max_consecutive_aborts = max_consecutive_aborts
        self.consecutive_aborts = 0
        self.sample_rate = sample_rate
        self.apply_on_wrap = apply_on_wrap
        self.rounds: List[RoundOutcome] = []
        self._pending: Optional[RoundOutcome] = None
        self._canaries: List[Message] = []
        self.stopped = False

    def add_canaries(self, messages: Sequence[Message]) -> None:
        """Canary participants of the next round (:class:`~privfed.flwr.AuditStrategy`): each
        message goes to its own node (one secure-aggregation client per node and round, a node
        the inner strategy does not sample) and is that participant's masked-input content.
        A canary joins every stage like a client — keys, shares, a masked Skellam encoding of
        its update with its own noise share — so its update reaches the model only through the
        sum. It is not a contributor: the round's ``contributors``, the budget checks and the
        accounted event count the real clients' inputs and noise only (the canaries' noise
        shares are in the sum but not counted, so the accounted ε stays an upper bound)."""
        self._canaries = list(messages)

    @staticmethod
    def _plan_budget(plan: Any, delta: float) -> Optional[float]:
        """The plan's target ε (a budget at ``delta``), or None for a plan made from a noise
        level. A target at another δ than the strategy's is refused: it would not be the ε
        the strategy reports."""
        eps = getattr(plan, "epsilon", None)
        if eps is None:
            return None
        pdelta = getattr(plan, "delta", None)
        if pdelta is not None and not math.isclose(float(pdelta), float(delta), rel_tol=1e-12):
            raise ValueError(
                f"the plan targets ε = {eps} at δ = {pdelta}, the strategy reports at δ = "
                f"{delta}: give the same δ, or budget= explicitly")
        return float(eps)

    @property
    def dim(self) -> int:
        """The model length the plan is for."""
        return int(self.params["dim"])

    @classmethod
    def planned(cls, inner: Strategy, *, dim: int, clip: float, bits: int, clients: int,
                epsilon: float, delta: float, rounds: int, dropout_tolerance: float = 0.2,
                k: float = 4.0, colluding_fraction: float = 0.0,
                **kw: Any) -> "DistributedDpStrategy":
        """Plans the noise so that ε(δ) after ``rounds`` rounds is at most ``epsilon`` as long
        as at least ``clients − dropouts_covered`` clients contribute to every round (more
        contributors only add noise), and the modular range for the sum of all ``clients``
        (:func:`plan_for_dropouts`). ``dropouts_covered = ⌊clients·dropout_tolerance⌋``
        (:func:`dropouts_covered`); a positive tolerance that covers no dropout (4 clients at
        0.2) is refused. ``epsilon`` is the run's budget unless ``budget=`` says otherwise.
        ``colluding_fraction`` γ: the target holds for the honest survivors alone (see the
        class's "Accounting")."""
        covered = dropouts_covered(clients, dropout_tolerance)
        plan = plan_for_dropouts(dim=dim, clip=clip, bits=bits, clients=clients,
                                 min_contributors=clients - covered, epsilon=epsilon,
                                 delta=delta, rounds=rounds, k=k,
                                 colluding_fraction=colluding_fraction)
        return cls(inner, plan=plan, delta=delta, dropout=dropout_tolerance, **kw)

    @property
    def history(self):
        return self.ledger.history

    def _honest(self, cohort: int, contributors: int) -> Optional[int]:
        """The honest lower bound of ``contributors`` of ``cohort`` (None: the colluders could
        be all of them)."""
        try:
            return int(dist.honest_contributors(cohort, contributors, self.colluding_fraction))
        except errors.InvalidParameter:
            return None

    def _event(self, cohort: int, contributors: int):
        honest = self._honest(cohort, contributors)
        if honest is None:
            raise errors.InvalidParameter(
                f"colluding_fraction={self.colluding_fraction} of {cohort} clients leaves no "
                f"honest contributor among {contributors}")
        ev = dist.round_event(self.plan, honest)
        if self.sample_rate is not None and self.sample_rate < 1.0:
            ev = accounting.PoissonSampledDpEvent(float(self.sample_rate), ev)
        return ev

    def check_arrays(self, arrays: ArrayRecord) -> List[str]:
        """The selected arrays' names (``include``/``exclude``, float arrays only); ValueError
        unless their length is the plan's ``dim``."""
        names, skipped = self.selection.split(arrays)
        n = int(sum(arrays[k].numpy().size for k in names))
        if n != self.dim:
            shapes = {k: tuple(arrays[k].shape) for k in names}
            left = f"; not privatized: {sorted(skipped)}" if skipped else ""
            raise ValueError(
                f"the plan is for a model of {self.dim} parameters, the model has {n} "
                f"({shapes}{left}); plan with dim={n}")
        log_skipped("DistributedDpStrategy", skipped, "kept at their global values",
                    self._logged)
        return names

    def start(self, grid: Grid, initial_arrays: ArrayRecord, *args: Any, **kw: Any):
        """Checks the plan against ``initial_arrays``, then runs the inner loop."""
        self.check_arrays(initial_arrays)
        return super().start(grid, initial_arrays, *args, **kw)

    # ------------------------------------------------------------------ the round
    def round_config(self, clients: int, session_id: Any = None) -> Any:
        """The secure-aggregation round for a cohort of ``clients``
        (:func:`privfed.secagg.round_config`), its thresholds sized for the strategy's
        ``colluding_fraction`` γ — the γ the accounting assumes — so the round and the ε count
        the same colluders. γ = 0 (a plan without colluders) keeps the round sized for 0.1. A
        γ the cohort cannot be sized for raises :class:`privfed.errors.InvalidParameter`
        naming ``colluding_fraction`` (for the active complete graph,
        ``⌊(n + ⌈γn⌉)/2⌋ + 1 ≤ n − 1``)."""
        return sa.round_config(clients, int(self.params["bits"]), int(self.params["padded_dim"]),
                               dropout=self.dropout, graph=self.graph,
                               threat_model=self.threat_model, roster=self.roster,
                               session_id=session_id,
                               colluding_fraction=self.colluding_fraction or None)

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        self._pending = None
        if self.stopped:
            return []
        names = self.check_arrays(arrays)
        canaries, self._canaries = self._canaries, []
        msgs = list(self.inner.configure_train(server_round, arrays, config, grid))
        if not msgs:
            return []
        n = len({m.metadata.dst_node_id for m in msgs})
        taken = {m.metadata.dst_node_id for m in msgs}
        canary_nodes = [m.metadata.dst_node_id for m in canaries]
        if len(set(canary_nodes)) != len(canary_nodes) or taken & set(canary_nodes):
            raise errors.ConfigError(
                "DistributedDpStrategy: every canary needs a node of its own, outside the "
                "sampled cohort (one secure-aggregation client per node and round)")
        if self._honest(n, n) is None:
            # a cohort this small could be all colluders: nothing would protect anyone
            self._event(n, n)
        if self.ledger.would_exceed(self._event(n, n)):
            what = f"even with all {n} sampled clients contributing, the round"
            if self.on_budget == "raise":
                self.ledger.check(server_round, self._event(n, n), what)
            self.stopped = True
            warn("privfed: round %d and later not started: %s would exceed the budget %g",
                 server_round, what, self.ledger.budget)
            self.ledger.record(server_round, None, 0, "budget reached: round not started")
            return []
        cfg = self.round_config(n + len(canaries))
        self._pending = self._secure_round(server_round, msgs + canaries, cfg, grid, names,
                                           canary_nodes)
        # The round ran over the grid already; Strategy.start sends nothing more.
        return []

    def _exchange(self, grid: Grid, contents: Dict[int, RecordDict], stage: str,
                  res: "RoundOutcome") -> Dict[int, bytes]:
        """Sends each node its content; returns the stage answers of those that replied.
        A node's error reply is logged as a WARNING with its text and kept in ``res.errors``;
        a node that did not answer in time is logged too."""
        out = [Message(content=c, dst_node_id=nid, message_type=MessageType.TRAIN)
               for nid, c in contents.items()]
        replies = grid.send_and_receive(out, timeout=self.stage_timeout)
        got: Dict[int, bytes] = {}
        for r in replies:
            nid = r.metadata.src_node_id
            if nid not in contents:
                continue
            if r.has_error():
                reason = f"{stage}: {r.error.reason}"
                res.errors[nid] = reason
                warn("privfed secagg: round %d: node %s failed at %s", res.server_round, nid,
                     reason)
                continue
            rec = r.content.config_records.get(SECAGG_RECORD)
            if rec is None or str(rec["stage"]) != stage:
                res.errors[nid] = f"{stage}: answered with something else"
                warn("privfed secagg: round %d: node %s answered %s with something else",
                     res.server_round, nid, stage)
                continue
            got[nid] = bytes(rec["message"])
        silent = [nid for nid in contents if nid not in got and nid not in res.errors]
        if silent:
            warn("privfed secagg: round %d: %d node(s) did not answer %s within %s s: %s",
                 res.server_round, len(silent), stage, self.stage_timeout, silent)
        return got

    def _abort(self, res: "RoundOutcome", reason: str) -> "RoundOutcome":
        """Ends ``res`` as aborted: nothing revealed, nothing accounted; raises when
        ``on_abort="raise"`` or the streak of aborts reached ``max_consecutive_aborts``."""
        res.aborted = True
        res.abort_reason = reason
        note = f"secure aggregation aborted {reason}; nothing revealed"
        rec = self.ledger.record(res.server_round, None, 0, note)
        res.epsilon = rec.epsilon
        self.rounds.append(res)
        self.consecutive_aborts += 1
        causes = "; ".join(f"node {n}: {e}" for n, e in sorted(res.errors.items()))
        full = note + (f" (clients' errors: {causes})" if causes else "")
        warn("privfed: round %d: %s", res.server_round, full)
        if self.on_abort == "raise":
            raise SecAggRoundAborted(full)
        if (self.max_consecutive_aborts is not None
                and self.consecutive_aborts >= self.max_consecutive_aborts):
            raise SecAggRoundAborted(
                f"{self.consecutive_aborts} rounds in a row aborted (max_consecutive_aborts="
                f"{self.max_consecutive_aborts}); the last: round {res.server_round}: {full}")
        return res

    def _secure_round(self, server_round: int, msgs: List[Message], cfg: Any,
                      grid: Grid, names: List[str],
                      canary_nodes: Sequence[int] = ()) -> RoundOutcome:
        by_node = {m.metadata.dst_node_id: m for m in msgs}
        nodes = sorted(by_node)
        ids = {nid: i + 1 for i, nid in enumerate(nodes)}
        canary_set = set(canary_nodes)
        key, arrays = single_array_record(msgs[0].content)
        res = RoundOutcome(server_round, _session_id(cfg), ids, len(nodes) - len(canary_set),
                           arrays=arrays, arrays_key=key, names=list(names),
                           canary_nodes=sorted(canary_set))
        server = sa.SecAggServer(cfg)
        cfg_bytes = bytes(cfg.to_bytes())
        alive = list(nodes)
        masked = 0  # how many masked inputs the sum will hold (U3)
        stages = ACTIVE_STAGES if cfg.threat_model == "active" else STAGES
        for stage in stages:
            t0 = time.perf_counter()
            contents: Dict[int, RecordDict] = {}
            for nid in alive:
                if stage == "advertise_keys":
                    rec = ConfigRecord({"stage": stage, "config": cfg_bytes,
                                        "client-id": ids[nid], "round": server_round,
                                        "plan": self._plan_json})
                    if self.roster is not None:
                        rec["roster"] = bytes(self.roster.to_bytes())
                else:
                    try:
                        m = bytes(server.message_for(ids[nid]))
                    except errors.ProtocolError:
                        continue  # pruned: no part in this stage
                    rec = ConfigRecord({"stage": stage, "message": m})
                    if stage == "masked_input":  # the arrays the plan covers
                        rec["arrays"] = list(names)
                if stage == "masked_input":
                    content = RecordDict(dict(by_node[nid].content.items()))
                    content[SECAGG_RECORD] = rec
                else:
                    content = RecordDict({SECAGG_RECORD: rec})
                contents[nid] = content
            if stages[stages.index(stage) - 1] == "masked_input":
                # The survivors are known now, before anything is unmasked: refuse a round
                # whose sum would take ε past the budget (fewer contributors than planned).
                m = masked
                if m > 0 and self._honest(res.sampled, m) is None:
                    res.stage_seconds[stage] = time.perf_counter() - t0
                    return self._abort(res, (
                        f"before unmasking: the {m} survivors could all be colluders "
                        f"(colluding_fraction={self.colluding_fraction} of {res.sampled})"))
                if m > 0 and self.ledger.would_exceed(self._event(res.sampled, m)):
                    after = self.ledger.epsilon_after(self._event(res.sampled, m))
                    reason = (f"before unmasking: {m} survivors would take ε to "
                              f"{after if after is None else round(after, 4)} at δ = "
                              f"{self.ledger.delta:g}, past the budget {self.ledger.budget:g}")
                    res.stage_seconds[stage] = time.perf_counter() - t0
                    return self._abort(res, reason)
            answers = self._exchange(grid, contents, stage, res)
            for nid, data in answers.items():
                try:
                    server.receive(data)
                except (errors.ProtocolError, errors.ProtocolAbort) as exc:
                    # a malformed, unsigned or wrongly signed message: that node is left out
                    # (privfed's server refuses it unchanged), the round goes on without it
                    res.errors[nid] = f"{stage}: message refused by the server: {exc}"
                    warn("privfed secagg: round %d: node %s: %s message refused: %s",
                         server_round, nid, stage, exc)
                    answers = {k: v for k, v in answers.items() if k != nid}
            status = server.close_stage()
            res.stage_seconds[stage] = time.perf_counter() - t0
            alive = [nid for nid in nodes if nid in answers]
            if stage == "masked_input":
                masked = len([nid for nid in alive if nid not in canary_set])
            if status == "aborted":
                res.aborted = True
                res.abort_reason = f"at {stage}: {server.abort_reason}"
                break
        if not res.aborted:
            self.consecutive_aborts = 0
        if res.aborted:
            return self._abort(res, res.abort_reason or "")
        t0 = time.perf_counter()
        output = server.output
        res.survivors = sorted(int(c) for c in output["survivors"])
        res.dropped = sorted(int(c) for c in output["dropped"])
        canary_ids = {ids[nid] for nid in canary_set}
        res.canary_survivors = [c for c in res.survivors if c in canary_ids]
        m = res.contributors  # real clients in the sum; canaries alone release no client
        if m > 0:
            dec = dist.SkellamDecoder(self.plan, dist.rotation_seed(res.session_id, server_round))
            decoded = dec.decode(output["sum"], len(res.survivors))
            res.mean = np.asarray(decoded.mean, dtype=np.float64)
            res.wrap_suspected = bool(decoded.wrap_suspected)
            note = "wrap suspected: not applied" if (
                res.wrap_suspected and not self.apply_on_wrap) else ""
            res.honest_contributors = self._honest(res.sampled, m) or 0
            rec = self.ledger.record(server_round, self._event(res.sampled, m), m, note)
        else:
            rec = self.ledger.record(server_round, None, 0, "no contributor")
        res.epsilon = rec.epsilon
        res.colluding_fraction = self.colluding_fraction
        res.stage_seconds["decode"] = time.perf_counter() - t0
        # a reply the inner strategy can aggregate: any message sent this round serves
        res.template = msgs[0]
        self.rounds.append(res)
        return res

    def aggregate_train(self, server_round: int, replies: Iterable[Message]):
        res, self._pending = self._pending, None
        if res is None or res.aborted or res.mean is None:
            return None, None
        if res.wrap_suspected and not self.apply_on_wrap:
            return None, None
        g = flatten_selected(res.arrays, res.names)
        new = replace_selected(res.arrays, res.names, g + res.mean)
        content = RecordDict({res.arrays_key: new,
                              "metrics": MetricRecord({"num-examples": res.contributors})})
        reply = Message(content=content, reply_to=res.template)
        arrays, metrics = self.inner.aggregate_train(server_round, [reply])
        if arrays is not None:
            arrays = keep_dtypes(arrays, res.arrays)
        metrics = MetricRecord() if metrics is None else metrics
        metrics["privfed-epsilon"] = res.epsilon
        metrics["privfed-contributors"] = res.contributors
        metrics["privfed-colluding-fraction"] = res.colluding_fraction
        metrics["privfed-honest-contributors"] = res.honest_contributors
        metrics["privfed-sampled"] = res.sampled
        return arrays, metrics
