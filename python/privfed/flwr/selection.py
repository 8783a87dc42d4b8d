"""Which arrays of a model a mod or strategy privatizes, and the mods' run-config settings.

One home for three rules every privfed.flwr mod and strategy follows:

* **Selection.** An array is privatized when its dtype is floating point, its name matches an
  ``include`` pattern (no patterns: every name) and no ``exclude`` pattern. Patterns are
  :mod:`fnmatch` patterns on the array's key in its ArrayRecord (``"*.num_batches_tracked"``,
  ``"bn*"``, an exact name). Integer and boolean arrays (PyTorch's ``num_batches_tracked`` is
  int64) are never clipped or noised: adding real noise to a counter and casting it back is
  meaningless. What is skipped, and why, is logged (INFO, once per distinct set and mod or
  strategy).
  An ``include`` pattern that matches no array is an error (a typo would leave arrays out of
  the privatized set); so is a selection that leaves nothing to privatize.
* **Run config.** Client mods read ``privfed-include`` and ``privfed-exclude`` (comma-separated
  patterns) from ``Context.run_config`` on every call; the values replace the mod's
  constructor arguments for that call. Any other ``privfed-…`` key is refused with a
  :class:`privfed.errors.ConfigError` that lists the known keys.
* **Records.** A mod refuses a TRAIN message carrying a ``privfed…`` record it does not expect,
  or an expected record with keys it does not know (an error reply, never a silent guess).
"""

from __future__ import annotations

import fnmatch
import logging
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
from flwr.app import ArrayRecord, RecordDict
from flwr.supercore import log as flwr_log

from .. import errors
from .records import check_same_layout, single_array_record

LOG = logging.getLogger("privfed.flwr")

#: The run-config keys privfed.flwr's mods read (``Context.run_config``).
RUN_CONFIG_INCLUDE = "privfed-include"
RUN_CONFIG_EXCLUDE = "privfed-exclude"
RUN_CONFIG_KEYS = (RUN_CONFIG_INCLUDE, RUN_CONFIG_EXCLUDE)

Patterns = Union[None, str, Sequence[str]]


def _patterns(value: Patterns, what: str) -> Tuple[str, ...]:
    """A tuple of patterns from None, a comma-separated string or a sequence of strings."""
    if value is None:
        return ()
    if isinstance(value, str):
        items = [p.strip() for p in value.split(",")]
        return tuple(p for p in items if p)
    out = []
    for p in value:
        if not isinstance(p, str):
            raise TypeError(f"{what} must hold array-name patterns (str), got {type(p).__name__}")
        if p.strip():
            out.append(p.strip())
    return tuple(out)


def is_float_array(arr: Any) -> bool:
    """Whether a Flower Array (or numpy array) holds real floating-point numbers."""
    dtype = np.dtype(arr.numpy().dtype) if hasattr(arr, "numpy") else np.asarray(arr).dtype
    return bool(np.issubdtype(dtype, np.floating))


def _dtype_name(arr: Any) -> str:
    return str(arr.numpy().dtype) if hasattr(arr, "numpy") else str(np.asarray(arr).dtype)


@dataclass(frozen=True)
class ArraySelection:
    """``include`` / ``exclude`` fnmatch patterns over array names (see the module docs)."""

    include: Tuple[str, ...] = ()
    exclude: Tuple[str, ...] = ()

    @classmethod
    def of(cls, include: Patterns = None, exclude: Patterns = None) -> "ArraySelection":
        return cls(_patterns(include, "include"), _patterns(exclude, "exclude"))

    def split(self, record: ArrayRecord) -> Tuple[List[str], Dict[str, str]]:
        """(selected names in the record's order, {skipped name: why}). Raises ValueError for
        an include pattern that matches no array, or when nothing is selected."""
        names = list(record.keys())
        for pat in self.include:
            if not any(fnmatch.fnmatchcase(n, pat) for n in names):
                raise ValueError(
                    f"include pattern {pat!r} matches no array of the model (its arrays: "
                    f"{names}); a typo here would leave arrays out of the privatized set")
        selected: List[str] = []
        skipped: Dict[str, str] = {}
        for n in names:
            if self.include and not any(fnmatch.fnmatchcase(n, p) for p in self.include):
                skipped[n] = "not included"
            elif any(fnmatch.fnmatchcase(n, p) for p in self.exclude):
                skipped[n] = "excluded"
            elif not is_float_array(record[n]):
                skipped[n] = f"{_dtype_name(record[n])}, not floating point"
            else:
                selected.append(n)
        if not selected:
            raise ValueError(
                f"no array of the model is left to privatize (skipped: {skipped}); check "
                "include/exclude")
        return selected, skipped


def log_skipped(who: str, skipped: Mapping[str, str], fate: str, seen: set) -> None:
    """One INFO line naming what ``who`` skipped and what happens to it (``fate``); repeated
    only when the skipped set changes (``seen``: the calling mod's or strategy's own set, as a
    mod runs on every round)."""
    if not skipped:
        return
    key = (tuple(sorted(skipped.items())), fate)
    if key in seen:
        return
    seen.add(key)
    parts = ", ".join(f"{n} ({why})" for n, why in skipped.items())
    msg = "privfed: %s: not privatized: %s; %s"
    flwr_log(logging.INFO, msg, who, parts, fate)
    LOG.info(msg, who, parts, fate)


def selection_from_run_config(run_config: Optional[Mapping[str, Any]], *, include: Patterns = None,
                              exclude: Patterns = None, who: str = "privfed.flwr"
                              ) -> ArraySelection:
    """The selection for one call: ``privfed-include`` / ``privfed-exclude`` from
    ``run_config`` where set (they replace ``include`` / ``exclude``). Any other key starting
    with ``privfed-`` raises :class:`privfed.errors.ConfigError` (a misspelt key would
    otherwise be ignored silently)."""
    rc = dict(run_config or {})
    unknown = sorted(k for k in rc if str(k).startswith("privfed-") and k not in RUN_CONFIG_KEYS)
    if unknown:
        raise errors.ConfigError(
            f"{who}: unknown run-config key(s) {unknown}; privfed.flwr reads "
            f"{list(RUN_CONFIG_KEYS)} (comma-separated array-name patterns)")
    for k in RUN_CONFIG_KEYS:
        if k in rc and not isinstance(rc[k], str):
            raise errors.ConfigError(
                f"{who}: run-config key {k!r} must be a string of comma-separated array-name "
                f"patterns, got {type(rc[k]).__name__} {rc[k]!r}")
    inc = rc[RUN_CONFIG_INCLUDE] if RUN_CONFIG_INCLUDE in rc else include
    exc = rc[RUN_CONFIG_EXCLUDE] if RUN_CONFIG_EXCLUDE in rc else exclude
    return ArraySelection.of(inc, exc)


def check_records(content: RecordDict, expected: Mapping[str, Iterable[str]], who: str) -> None:
    """Refuses (``errors.ProtocolError``) a ``privfed…`` ConfigRecord in ``content`` that is not
    in ``expected``, or an expected one with keys outside ``expected[name]``."""
    for name, rec in content.config_records.items():
        if not name.startswith("privfed"):
            continue
        if name not in expected:
            raise errors.ProtocolError(
                f"{who}: the message carries a record {name!r} this mod does not handle "
                f"(it handles {sorted(expected) or 'none'}); is the server's strategy the one "
                "this mod belongs with?")
        known = set(expected[name])
        extra = sorted(k for k in rec.keys() if k not in known)
        if extra:
            raise errors.ProtocolError(
                f"{who}: record {name!r} has unknown key(s) {extra} (known: {sorted(known)}); "
                "the server may be a newer privfed")


@dataclass
class TrainedUpdate:
    """A ClientApp's training reply seen through a mod's array selection."""

    key: str  # the reply's ArrayRecord key
    received: ArrayRecord  # the model the server sent (a copy)
    returned: ArrayRecord  # the model the ClientApp trained
    names: List[str]  # the arrays the mod privatizes, in order
    start: np.ndarray  # the received named arrays, flattened
    update: np.ndarray  # returned − received over the named arrays


def train_selected(mod: Any, msg: Any, ctxt: Any, call_next: Any, who: str,
                   fate: str) -> Tuple[Any, Optional[TrainedUpdate]]:
    """What every client mod does around the ClientApp: select the arrays from ``run_config``
    and the mod's ``include``/``exclude``, log the skipped ones with their ``fate``, run the
    ClientApp (``call_next``) and take the update over the selected arrays. Returns the reply
    and the update, or the reply and ``None`` when the reply carries an error."""
    sel = selection_from_run_config(ctxt.run_config, include=mod.include,
                                    exclude=mod.exclude, who=who)
    _, received = single_array_record(msg.content, mod.arrays_key)
    received = received.copy() if hasattr(received, "copy") else received
    names, skipped = sel.split(received)
    log_skipped(who, skipped, fate, mod._logged)
    start = flatten_selected(received, names)
    out = call_next(msg, ctxt)
    if out.has_error():
        return out, None
    key, returned = single_array_record(out.content, mod.arrays_key)
    check_same_layout(received, returned)
    update = flatten_selected(returned, names) - start
    return out, TrainedUpdate(key, received, returned, list(names), start, update)


def flatten_selected(record: ArrayRecord, names: Sequence[str]) -> np.ndarray:
    """The named arrays, in the given order, as one float64 vector."""
    parts = [np.asarray(record[n].numpy(), dtype=np.float64).ravel() for n in names]
    return np.concatenate(parts) if parts else np.zeros(0)


def replace_selected(record: ArrayRecord, names: Sequence[str], vec: np.ndarray,
                     rest: Optional[ArrayRecord] = None) -> ArrayRecord:
    """A record with ``record``'s keys, shapes and dtypes in its order: the named arrays cut
    from ``vec`` (cast to their dtypes), every other array from ``rest`` (default:
    ``record``) unchanged."""
    from flwr.app import Array

    rest = record if rest is None else rest
    vec = np.asarray(vec)
    at, out = 0, {}
    chosen = set(names)
    sizes = {n: record[n].numpy().size for n in names}
    if sum(sizes.values()) != vec.size:
        raise ValueError(f"vector of length {vec.size} does not fit the arrays {list(names)}")
    offsets = {}
    for n in names:
        offsets[n] = at
        at += sizes[n]
    for k in record.keys():
        if k in chosen:
            t = record[k].numpy()
            o = offsets[k]
            out[k] = Array(vec[o:o + t.size].reshape(t.shape).astype(t.dtype, copy=False))
        else:
            out[k] = Array(np.array(rest[k].numpy(), copy=True))
    return ArrayRecord(array_dict=out)
