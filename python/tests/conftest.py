"""Shared fixtures of the binding tests: the privfed CLI (for comparisons with the Rust results)
and the team's shared data sets. A test that needs something absent is skipped with the reason,
never passed silently; under CI (env ``CI`` set) a missing CLI or data set fails instead, as the
Rust tests do."""

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
    """`$PRIVFED_CLI`, else a built binary (release before debug; `$CARGO_TARGET_DIR` before the
    repository's target/), else `privfed` on the PATH."""
    env = os.environ.get("PRIVFED_CLI")
    if env:
        return env
    targets = [REPO / "target"]
    if os.environ.get("CARGO_TARGET_DIR"):
        targets.insert(0, Path(os.environ["CARGO_TARGET_DIR"]))
    for profile in ("release", "debug"):
        for t in targets:
            c = t / profile / "privfed"
            if c.is_file() and os.access(c, os.X_OK):
                return str(c)
    return shutil.which("privfed")


@pytest.fixture(scope="session")
def cli():
    """Runs the Rust `privfed` CLI with arguments and returns its parsed `--json` output."""
    path = _cli_path()
    if path is None:
        _missing(
            "the privfed CLI is not built: run `cargo build --release -p privfed` "
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
    """The team's shared data sets (MNIST, Adult, Tiny Shakespeare): `$PRIVFED_DATA_DIR` (as the
    Rust crates read it), else ../shared/data beside the repository."""
    path = Path(os.environ.get("PRIVFED_DATA_DIR", SHARED_DATA))
    if not (path / "mnist").is_dir():
        _missing(f"the shared data sets are not at {path} (set PRIVFED_DATA_DIR)")
    return path


@pytest.fixture(scope="session")
def data_dir(shared_data) -> Path:
    """Another name of `shared_data`."""
    return shared_data
