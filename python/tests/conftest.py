"""Shared fixtures: the repository paths, the privfed CLI (for comparisons with the Rust
results) and the team's data directory. Anything absent makes the tests that need it *skip with
the reason* — never pass."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("PRIVFED_DATA", REPO.parent / "shared" / "data"))


def _find_cli() -> Path | None:
    env = os.environ.get("PRIVFED_CLI")
    if env:
        return Path(env)
    for p in (REPO / "target" / "release" / "privfed", REPO / "target" / "debug" / "privfed"):
        if p.exists():
            return p
    found = shutil.which("privfed")
    return Path(found) if found else None


@pytest.fixture(scope="session")
def cli():
    """Runs the Rust `privfed` CLI with `--json` output and returns the parsed JSON."""
    path = _find_cli()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("the privfed CLI is not built (cargo build -p privfed) and CI is set")
        pytest.skip("the privfed CLI is not built: run `cargo build -p privfed` (or set PRIVFED_CLI)")

    def run(*args: str):
        out = subprocess.run([str(path), *args], check=True, capture_output=True, text=True)
        return json.loads(out.stdout)

    return run


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not (DATA / "mnist").exists() and not any(DATA.glob("*mnist*")):
        pytest.skip(f"the team's datasets are not at {DATA} (set PRIVFED_DATA)")
    return DATA
