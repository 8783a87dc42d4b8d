"""The learning task: MNIST (gzip'd IDX files as distributed), an iid split over the clients,
multinomial logistic regression in numpy (no torch)."""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

DIM_IN, CLASSES = 784, 10
_CACHE: Dict[tuple, object] = {}


def default_data_dir() -> str:
    """``$PRIVFED_DATA_DIR`` (as the Rust CLI), else ``../shared/data`` beside the repository."""
    env = os.environ.get("PRIVFED_DATA_DIR")
    if env:
        return env
    return str(Path(__file__).resolve().parents[3].parent / "shared" / "data")


def _read_idx(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic = int.from_bytes(raw[0:4], "big")
    if magic == 0x803:
        n, r, c = (int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(3))
        return np.frombuffer(raw, np.uint8, offset=16).reshape(n, r * c)
    if magic == 0x801:
        n = int.from_bytes(raw[4:8], "big")
        return np.frombuffer(raw, np.uint8, offset=8)[:n]
    raise ValueError(f"{path}: not an IDX image or label file (magic {magic:#x})")


_FILES = {"x_train": "train-images-idx3-ubyte.gz", "y_train": "train-labels-idx1-ubyte.gz",
          "x_test": "t10k-images-idx3-ubyte.gz", "y_test": "t10k-labels-idx1-ubyte.gz"}


def _raw(data_dir: str, part: str) -> np.ndarray:
    """One IDX file of ``data_dir/mnist`` as stored (uint8), read once per process."""
    key = ("raw", data_dir, part)
    if key not in _CACHE:
        d = Path(data_dir) / "mnist"
        if not d.is_dir():
            raise FileNotFoundError(f"no MNIST at {d} (pass --data-dir or set PRIVFED_DATA_DIR)")
        _CACHE[key] = _read_idx(d / _FILES[part])
    return _CACHE[key]  # type: ignore[return-value]


def _pixels(raw: np.ndarray) -> np.ndarray:
    return (raw / 255.0).astype(np.float32)


def load_mnist(data_dir: str) -> Dict[str, np.ndarray]:
    """MNIST from ``data_dir/mnist`` (pixels scaled to [0, 1], float32)."""
    return {"x_train": _pixels(_raw(data_dir, "x_train")),
            "y_train": _raw(data_dir, "y_train").astype(np.int64),
            **test_data(data_dir)}


def test_data(data_dir: str) -> Dict[str, np.ndarray]:
    """The test set only (what the ServerApp evaluates on), cached per process."""
    key = ("test", data_dir)
    if key not in _CACHE:
        _CACHE[key] = {"x_test": _pixels(_raw(data_dir, "x_test")),
                       "y_test": _raw(data_dir, "y_test").astype(np.int64)}
    return _CACHE[key]  # type: ignore[return-value]


def iid_split(rows: int, clients: int, seed: int) -> List[np.ndarray]:
    """A seeded permutation of the training rows cut into ``clients`` equal shards."""
    perm = np.random.default_rng(seed).permutation(rows)
    per = rows // clients
    return [perm[i * per : (i + 1) * per] for i in range(clients)]


def client_data(data_dir: str, clients: int, seed: int, partition: int) -> Tuple[np.ndarray, np.ndarray]:
    """Shard ``partition`` of ``clients``. Only the shard's pixels are converted to float32:
    a deployed ClientApp runs in a fresh process for every message."""
    x, y = _raw(data_dir, "x_train"), _raw(data_dir, "y_train")
    idx = iid_split(len(y), clients, seed)[partition]
    return _pixels(x[idx]), y[idx].astype(np.int64)


# ---------------------------------------------------------------- the model (softmax regression)
def init_params() -> Dict[str, np.ndarray]:
    """Zero weights and biases (the loss is convex; no initial randomness needed)."""
    return {"w": np.zeros((DIM_IN, CLASSES), np.float32), "b": np.zeros(CLASSES, np.float32)}


def _logits(p: Dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    return x @ p["w"] + p["b"]


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def local_sgd(p: Dict[str, np.ndarray], x: np.ndarray, y: np.ndarray, *, epochs: int,
              batch_size: int, learning_rate: float, seed: int) -> Tuple[Dict[str, np.ndarray], float]:
    """Minibatch SGD on the cross-entropy; returns the new parameters and the mean loss."""
    w, b = p["w"].astype(np.float32).copy(), p["b"].astype(np.float32).copy()
    rng = np.random.default_rng(seed)
    losses = []
    for _ in range(epochs):
        order = rng.permutation(len(y))
        for i in range(0, len(y), batch_size):
            sel = order[i : i + batch_size]
            xb, yb = x[sel], y[sel]
            prob = _softmax(xb @ w + b)
            losses.append(float(-np.log(prob[np.arange(len(yb)), yb] + 1e-12).mean()))
            prob[np.arange(len(yb)), yb] -= 1.0
            prob /= len(yb)
            w -= learning_rate * (xb.T @ prob)
            b -= learning_rate * prob.sum(axis=0)
    return {"w": w, "b": b}, float(np.mean(losses)) if losses else 0.0


def evaluate(p: Dict[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> Tuple[float, float]:
    """(accuracy, mean cross-entropy)."""
    prob = _softmax(_logits(p, x))
    loss = float(-np.log(prob[np.arange(len(y)), y] + 1e-12).mean())
    return float((prob.argmax(axis=1) == y).mean()), loss
