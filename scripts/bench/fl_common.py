"""Shared workload for the federated-training speed baselines (pfl-research and Flower).

Both `pfl_fedavg_mnist.py` and `flower_fedavg_mnist.py` import this file so that the data,
the client split, the models, the cohort sampling and the JSON record are the same code in
both. Nothing here comes from either tool: plain numpy + PyTorch.

Workload (see FL_BASELINES.md):
* MNIST train, 60,000 rows, pixels / 255 (float32), read from the original gzip'd IDX files;
* IID split into `clients` x (60,000 / clients) rows with a seeded permutation
  (numpy default_rng(seed)); client i gets rows perm[i*m:(i+1)*m];
* LeNet-5 (61,706 parameters) or MLP 784-200-200-10 (199,210 parameters), float32, initialised
  with torch.manual_seed(seed) and PyTorch's default initialisers;
* cohorts: `cohort` clients uniformly without replacement, one numpy default_rng(seed + 1)
  draw per round (`CohortSchedule`).
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import subprocess
import time
from typing import Any

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F


# --------------------------------------------------------------------------------------- data
def _read_idx(path: str) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        raw = f.read()
    zero, dtype_code, ndim = raw[0:2], raw[2], raw[3]
    if zero != b"\x00\x00" or dtype_code != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ValueError(f"{path}: size mismatch")
    return data.reshape(dims)


def load_mnist(data_dir: str) -> dict[str, np.ndarray]:
    """{x_train (60000,784) f32 in [0,1], y_train (60000,) i64, x_test, y_test}."""
    d = os.path.join(data_dir, "mnist")
    if not os.path.isdir(d):
        d = data_dir  # allow pointing straight at the mnist folder
    out = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        x = _read_idx(os.path.join(d, f"{prefix}-images-idx3-ubyte.gz"))
        y = _read_idx(os.path.join(d, f"{prefix}-labels-idx1-ubyte.gz"))
        out[f"x_{split}"] = (x.reshape(x.shape[0], -1).astype(np.float32) / 255.0)
        out[f"y_{split}"] = y.astype(np.int64)
    assert out["x_train"].shape == (60000, 784) and out["x_test"].shape == (10000, 784)
    return out


def iid_split(num_rows: int, clients: int, seed: int) -> list[np.ndarray]:
    """Row indices per client: a seeded permutation cut into equal contiguous pieces."""
    if num_rows % clients != 0:
        raise ValueError(f"{num_rows} rows do not split evenly into {clients} clients")
    per = num_rows // clients
    perm = np.random.default_rng(seed).permutation(num_rows)
    return [perm[i * per:(i + 1) * per] for i in range(clients)]


class CohortSchedule:
    """Round r's cohort: `cohort` distinct client ids, uniform, from default_rng(seed + 1)."""

    def __init__(self, clients: int, cohort: int, seed: int):
        self.clients, self.cohort = clients, cohort
        self._rng = np.random.default_rng(seed + 1)

    def next_cohort(self) -> list[int]:
        return [int(i) for i in self._rng.choice(self.clients, size=self.cohort, replace=False)]


# -------------------------------------------------------------------------------------- models
class LeNet5(nn.Module):
    """1x28x28 -> conv5x5 6 pad 2 -> ReLU -> pool2 -> conv5x5 16 -> ReLU -> pool2 -> 400 -> 120 -> 84 -> 10."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(400, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = x.view(-1, 1, 28, 28)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class MLP(nn.Module):
    """784 -> 200 -> ReLU -> 200 -> ReLU -> 10."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 200)
        self.fc2 = nn.Linear(200, 200)
        self.fc3 = nn.Linear(200, 10)

    def forward(self, x):
        x = x.view(-1, 784)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


EXPECTED_PARAMS = {"lenet5": 61_706, "mlp": 199_210}


def make_model(name: str, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    model = {"lenet5": LeNet5, "mlp": MLP}[name]()
    n = sum(p.numel() for p in model.parameters())
    if n != EXPECTED_PARAMS[name]:
        raise AssertionError(f"{name}: {n} parameters, expected {EXPECTED_PARAMS[name]}")
    return model


@torch.no_grad()
def test_accuracy(model: nn.Module, x: np.ndarray, y: np.ndarray, batch: int = 1000) -> float:
    model.eval()
    correct = 0
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    for i in range(0, len(xt), batch):
        correct += int((model(xt[i:i + batch]).argmax(1) == yt[i:i + batch]).sum())
    model.train()
    return correct / len(xt)


# ------------------------------------------------------------------------------------ records
_STARTED_UTC = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())  # process start (import)

def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        with open("/proc/loadavg") as f:
            return "loadavg " + f.read().strip()


def loadavg() -> list[float]:
    with open("/proc/loadavg") as f:
        return [float(v) for v in f.read().split()[:3]]


def base_record(tool: str, tool_version: str, args: Any) -> dict[str, Any]:
    return {
        "tool": tool,
        "tool_version": tool_version,
        "torch_version": torch.__version__,
        "python": platform.python_version(),
        "model": args.model,
        "params": EXPECTED_PARAMS[args.model],
        "dp": args.dp,
        "clients": args.clients,
        "cohort": args.cohort,
        "local_epochs": 1,
        "batch_size": 10,
        "local_lr": 0.05,
        "server_lr": 1.0,
        "clip": 1.0 if args.dp == "central" else None,
        "noise_multiplier": 1.0 if args.dp == "central" else None,
        "rounds": args.rounds,
        "warmup": args.warmup,
        "seed": args.seed,
        "label": args.label,
        "started_utc": _STARTED_UTC,
        "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def append_jsonl(path: str | None, rec: dict[str, Any]) -> None:
    line = json.dumps(rec, sort_keys=False)
    print(line, flush=True)
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "a") as f:
            f.write(line + "\n")


def add_common_args(p) -> None:
    p.add_argument("--model", choices=["lenet5", "mlp"], default="lenet5")
    p.add_argument("--dp", choices=["none", "central"], default="none")
    p.add_argument("--rounds", type=int, default=20, help="timed rounds")
    p.add_argument("--warmup", type=int, default=2, help="untimed rounds before them")
    p.add_argument("--clients", type=int, default=1000)
    p.add_argument("--cohort", type=int, default=50)
    p.add_argument("--data-dir", default="/work/shared/data")
    p.add_argument("--out", default=None, help="JSONL file to append the run's record to")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--label", default="", help="free text stored in the record")
