"""The secure-aggregation client's node-local vault: a sealing key and a journal of answered
stages, kept on the machine that runs the ClientApp and never sent anywhere.

Why it exists. :class:`privfed.flwr.DistributedDpMod` keeps a round's client between stages in
the node's Context (``ctxt.state``): Flower's Deployment Engine may start a fresh ClientApp
process for every message and only the Context survives between them. Two things must not
follow from that:

* a copy of ``ctxt.state`` (the SuperNode's memory, the ClientApp I/O connection between the
  SuperNode and a separate ClientApp process or container, a debugging dump) must not hold the
  round's **master seed** (from which the client's key-agreement secrets, its self-mask seed and
  so every share it received can be re-derived): the seed is drawn, **sealed**
  (ChaCha20-Poly1305) and opened inside privfed's Rust core
  (:meth:`privfed.secagg.SecAggClient.new_sealed` / ``open_sealed``) under a key that lives only
  in this directory and that Rust reads itself; neither the seed nor the key is ever a Python
  object;
* a server must not get a stage answered **twice**, or answered **after the client refused**,
  by re-sending it (the client would be rebuilt from the same seed and answer again): every
  stage is **claimed** in the journal, atomically, before it is answered, and a refusal writes an
  ``aborted`` entry; both refuse any later message for that round on this node — whatever the
  Context says, after a process restart, a rolled-back or lost Context (the simulation engine
  drops a ClientApp's Context changes when it raises) and for concurrent deliveries.

Layout (``0700`` directory): ``secagg-state.key`` (32 bytes from the OS CSPRNG, ``0600``,
created once by the Rust core; refused if group or others can access it) and ``secagg-journal.sqlite3`` (one row
per (round session, node, stage) answered or ``aborted``; rows older than the retention are
pruned, and a sealed seed older than it is refused, so pruning re-opens nothing).

The directory is, in order: the mod's ``state_dir=``, the node config's ``privfed-state-dir``
(set by the SuperNode's operator: ``--node-config 'privfed-state-dir="/var/lib/privfed"'``), the
environment's ``PRIVFED_STATE_DIR``, else ``$XDG_STATE_HOME/privfed`` (``~/.local/state/privfed``).
The server can set none of them.

What it does not protect against: anyone who can read this directory **and** a copy of the
Context (the node's own OS account, root) can open the seed; deleting the journal while a sealed
seed is still in a Context re-enables a replay of that round's remaining stages. The seed and
the key are zeroized by Rust after each use; the process's memory while a stage is handled is
as exposed as any process's to its own account.

The sealed format is ``nonce (12 bytes) ‖ ChaCha20-Poly1305 ciphertext and tag`` with the
associated data of :func:`aad` — the same as privfed's earlier pure-Python vault, so a round
sealed by it still opens.
"""

from __future__ import annotations

import os
import sqlite3
import struct
import threading
import time
from pathlib import Path
from typing import Any, Dict, Optional, Union

from .. import errors

#: The node-config key and the environment variable that name the vault's directory.
NODE_CONFIG_KEY = "privfed-state-dir"
ENV_VAR = "PRIVFED_STATE_DIR"
KEY_FILE = "secagg-state.key"
JOURNAL_FILE = "secagg-journal.sqlite3"
#: How long a round's journal rows are kept, and how old a sealed seed may be (seconds).
RETENTION_SECONDS = 7 * 24 * 3600
_SEAL_LABEL = b"privfed/flwr/secagg-seed/v1"
_ABORTED = "aborted"

_lock = threading.Lock()
_vaults: Dict[str, "NodeVault"] = {}


def default_dir() -> Path:
    """``$XDG_STATE_HOME/privfed``, else ``~/.local/state/privfed``."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "privfed"


def resolve_dir(explicit: Union[str, os.PathLike, None], node_config: Any) -> Path:
    """The vault directory for a ClientApp call (see the module docstring for the order)."""
    if explicit is not None:
        return Path(explicit)
    cfg = node_config.get(NODE_CONFIG_KEY) if node_config is not None else None
    if cfg:
        return Path(str(cfg))
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    return default_dir()


def vault_for(directory: Path) -> "NodeVault":
    """The process's vault for ``directory`` (one per path)."""
    key = str(Path(directory).absolute())
    with _lock:
        v = _vaults.get(key)
        if v is None:
            v = _vaults[key] = NodeVault(Path(key))
        return v


def aad(session: bytes, node: str, client_id: int, created: int) -> bytes:
    """The associated data a round's sealed seed is bound to: ``label ‖ len ‖ session ‖ len ‖
    node ‖ client id (4 bytes) ‖ creation time (8 bytes, signed)``, big-endian lengths of 2
    bytes."""
    n = node.encode()
    return (_SEAL_LABEL + struct.pack(">H", len(session)) + session
            + struct.pack(">H", len(n)) + n + struct.pack(">Iq", client_id, created))


class NodeVault:
    """A node-local directory holding the sealing key and the stage journal."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    # ------------------------------------------------------------------ the key
    def _ensure_dir(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)

    def key_file(self) -> Path:
        """The sealing key's path (the directory is made if missing; the key itself is created
        and read by :meth:`privfed.secagg.SecAggClient.new_sealed` / ``open_sealed``)."""
        self._ensure_dir()
        return self.directory / KEY_FILE

    @staticmethod
    def check_age(created: int, now: Optional[float] = None) -> None:
        """Raises ``ProtocolAbort`` if a seed sealed at ``created`` (Unix seconds) is older
        than the retention (or from the future): its journal rows may be pruned, so it must not
        open."""
        now = time.time() if now is None else now
        if not 0 <= now - created <= RETENTION_SECONDS:
            raise errors.ProtocolAbort(
                f"the round's sealed state dates from {int(now - created)} s ago, outside the "
                f"{RETENTION_SECONDS} s it is kept for")

    # ------------------------------------------------------------------ the journal
    def _connect(self) -> sqlite3.Connection:
        self._ensure_dir()
        conn = sqlite3.connect(str(self.directory / JOURNAL_FILE), timeout=30.0,
                               isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE IF NOT EXISTS stages (session TEXT NOT NULL, node TEXT NOT "
                     "NULL, stage TEXT NOT NULL, at REAL NOT NULL, reason TEXT, "
                     "PRIMARY KEY (session, node, stage))")
        conn.execute("CREATE TABLE IF NOT EXISTS rosters (authority TEXT PRIMARY KEY, "
                     "version INTEGER NOT NULL, at REAL NOT NULL)")
        return conn

    def roster_version(self, authority: bytes) -> int:
        """The highest roster version this node has accepted from ``authority`` (0 if none): a
        roster the server relays must be at least this new, so that a server cannot bring back
        a device the authority removed by relaying an older roster."""
        conn = self._connect()
        try:
            row = conn.execute("SELECT version FROM rosters WHERE authority = ?",
                               (authority.hex(),)).fetchone()
            return int(row[0]) if row else 0
        finally:
            conn.close()

    def accept_roster_version(self, authority: bytes, version: int) -> None:
        """Records that this node accepted roster ``version`` of ``authority`` (the highest one
        stays; never pruned: forgetting it would let an older roster back in)."""
        conn = self._connect()
        try:
            conn.execute("INSERT INTO rosters VALUES (?, ?, ?) ON CONFLICT(authority) DO UPDATE "
                         "SET version = MAX(version, excluded.version), at = excluded.at",
                         (authority.hex(), int(version), time.time()))
        finally:
            conn.close()

    def claim(self, session: bytes, node: str, stage: str) -> None:
        """Records that this node answers ``stage`` of the round ``session`` now. Raises
        ``ProtocolAbort`` (and records nothing) if the round was aborted on this node or the
        stage was claimed before — by this process or any other, whatever the Context says."""
        sid = session.hex()
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                rows = dict(conn.execute(
                    "SELECT stage, reason FROM stages WHERE session = ? AND node = ?",
                    (sid, node)).fetchall())
                if _ABORTED in rows:
                    raise errors.ProtocolAbort(
                        f"this node aborted round {sid[:16]}… ({rows[_ABORTED]}); every later "
                        f"message of the round is refused")
                if stage in rows:
                    raise errors.ProtocolAbort(
                        f"stage {stage} of round {sid[:16]}… was already answered on this node; "
                        f"a stage is answered once")
                conn.execute("INSERT INTO stages VALUES (?, ?, ?, ?, NULL)",
                             (sid, node, stage, time.time()))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        finally:
            conn.close()

    def abort(self, session: bytes, node: str, reason: str) -> None:
        """Records that this node aborted the round ``session`` (idempotent: the first reason
        stays)."""
        conn = self._connect()
        try:
            conn.execute("INSERT OR IGNORE INTO stages VALUES (?, ?, ?, ?, ?)",
                         (session.hex(), node, _ABORTED, time.time(), reason[:500]))
        finally:
            conn.close()

    def stages(self, session: bytes, node: str) -> Dict[str, Optional[str]]:
        """The journal's entries for one round on one node: stage (or ``aborted``) → reason."""
        conn = self._connect()
        try:
            return dict(conn.execute(
                "SELECT stage, reason FROM stages WHERE session = ? AND node = ?",
                (session.hex(), node)).fetchall())
        finally:
            conn.close()

    def prune(self, now: Optional[float] = None) -> None:
        """Drops the rows older than the retention (their sealed seeds are refused anyway)."""
        now = time.time() if now is None else now
        conn = self._connect()
        try:
            conn.execute("DELETE FROM stages WHERE at < ?", (now - RETENTION_SECONDS,))
        finally:
            conn.close()
