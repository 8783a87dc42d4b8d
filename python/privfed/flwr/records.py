"""Flower records <-> flat numpy vectors (the form privfed's mechanisms take)."""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
from flwr.app import Array, ArrayRecord, RecordDict

#: The ConfigRecord of a canary message of :class:`privfed.flwr.AuditStrategy`: server -> client
#: ``{"index", "arrays", "update", "weight"}``; client -> server ``{"index"}``.
CANARY_RECORD = "privfed-canary"
#: The keys of a canary message's record (what :func:`privfed.flwr.privatize_mod` lets through).
CANARY_KEYS = ("arrays", "index", "update", "weight")


def single_array_record(content: RecordDict, key: Optional[str] = None) -> Tuple[str, ArrayRecord]:
    """The message's model: the ArrayRecord under ``key``, or its only ArrayRecord."""
    records = content.array_records
    if key is not None:
        if key not in records:
            raise ValueError(f"the message has no ArrayRecord {key!r} (it has {list(records)})")
        return key, records[key]
    if len(records) != 1:
        raise ValueError(
            f"expected exactly one ArrayRecord in the message, found {len(records)} "
            f"({list(records)}); name the model's record with arrays_key="
        )
    k = next(iter(records))
    return k, records[k]


def flatten_arrays(record: ArrayRecord) -> np.ndarray:
    """The record's arrays, in the record's key order, as one float64 vector."""
    parts = [np.asarray(a.numpy(), dtype=np.float64).ravel() for a in record.values()]
    return np.concatenate(parts) if parts else np.zeros(0)


def unflatten_like(vec: np.ndarray, template: ArrayRecord) -> ArrayRecord:
    """``vec`` cut into arrays with the keys, shapes and dtypes of ``template``."""
    vec = np.asarray(vec)
    out = {}
    at = 0
    for k, a in template.items():
        t = a.numpy()
        n = t.size
        if at + n > vec.size:
            raise ValueError(f"vector of length {vec.size} is shorter than the record")
        out[k] = Array(vec[at : at + n].reshape(t.shape).astype(t.dtype, copy=False))
        at += n
    if at != vec.size:
        raise ValueError(f"vector of length {vec.size} is longer than the record ({at})")
    return ArrayRecord(array_dict=out)


def check_same_layout(a: ArrayRecord, b: ArrayRecord) -> None:
    """Both records hold the same keys with the same shapes (else ValueError)."""
    ka, kb = list(a.keys()), list(b.keys())
    if ka != kb:
        raise ValueError(f"the reply's arrays {kb} are not the received model's {ka}")
    for k in ka:
        if tuple(a[k].shape) != tuple(b[k].shape):
            raise ValueError(f"array {k!r}: reply shape {b[k].shape} != model shape {a[k].shape}")


def keep_dtypes(arrays: ArrayRecord, model: ArrayRecord) -> ArrayRecord:
    """``arrays`` (an inner strategy's aggregate) with each array in the dtype it has in
    ``model`` (the round's global model). Flower's FedAvg multiplies every array by a float
    weight, which turns an int64 counter (BatchNorm's ``num_batches_tracked``) into float64;
    the next round would then take it for a parameter and clip and noise it. Integer arrays
    are rounded back (``rint``); arrays ``model`` lacks are left as they are."""
    out = {}
    changed = False
    for k, a in arrays.items():
        v = a.numpy()
        if k in model.keys():
            want = model[k].numpy().dtype
            if v.dtype != want:
                changed = True
                v = np.rint(v) if np.issubdtype(want, np.integer) else v
                v = np.asarray(v).astype(want)
        out[k] = Array(np.asarray(v))
    return ArrayRecord(array_dict=out) if changed else arrays
