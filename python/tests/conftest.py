"""Shared helpers of the binding tests: the release CLI (for comparisons with Rust results) and
the shared data sets. A test that needs something absent is skipped with the reason, never
passed silently; under CI a missing shared data set fails instead (as the Rust tests do)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"


def _missing(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (required under CI)")
    pytest.skip(reason)


def _cli_path() -> str | None:
    env = os.environ.get("PRIVFED_CLI")
    if env:
        return env
    candidates = []
    if os.environ.get("CARGO_TARGET_DIR"):
        candidates.append(Path(os.environ["CARGO_TARGET_DIR"]) / "release" / "privfed")
    candidates.append(REPO / "target" / "release" / "privfed")
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    return shutil.which("privfed")


@pytest.fixture(scope="session")
def cli():
    """Runs the release CLI with arguments and returns its parsed --json output."""
    path = _cli_path()
    if path is None:
        pytest.skip(
            "the release CLI is not built: run `cargo build --release -p privfed` "
            "(or set PRIVFED_CLI to the binary)"
        )

    def run(*args: str):
        out = subprocess.run(
            [path, *args], check=True, capture_output=True, text=True, timeout=600
        )
        return json.loads(out.stdout)

    return run


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The team's shared data sets (MNIST, Adult, Tiny Shakespeare) beside the repository."""
    path = Path(os.environ.get("PRIVFED_DATA_DIR", SHARED_DATA))
    if not (path / "mnist").is_dir():
        _missing(f"the shared data sets are not at {path} (set PRIVFED_DATA_DIR)")
    return path


@pytest.fixture(scope="session")
def data_dir(shared_data) -> Path:
    """main's name for the shared data sets (kept for the tests written against it)."""
    return shared_data
