"""Shared fixtures of the binding tests: the privfed CLI (for comparisons with the Rust results)
and the team's shared data sets; and the one policy for anything optional a test needs.

**Optional dependencies** (a Python package such as flwr or dp_accounting, Flower's executables,
the CLI, the shared data): a test that needs one that is absent calls :func:`missing` (or carries
``@pytest.mark.requires("module", install="pip install ...")``, which calls it). Under CI (env
``CI`` set, and not ``0`` or ``false``) that fails the test, as the Rust tests do; elsewhere the
test is skipped with the reason. Nothing passes silently."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"

# The Flower secure-aggregation client keeps its sealing key and stage journal in a node-local
# directory (privfed.flwr.vault); the tests, and the SuperNodes they start (which inherit the
# environment), use a scratch one rather than ~/.local/state/privfed, deleted when pytest exits.
if not os.environ.get("PRIVFED_STATE_DIR"):
    import atexit
    import shutil
    import tempfile

    os.environ["PRIVFED_STATE_DIR"] = tempfile.mkdtemp(prefix="privfed-state-")
    atexit.register(shutil.rmtree, os.environ["PRIVFED_STATE_DIR"], ignore_errors=True)


def under_ci() -> bool:
    """Whether this run is CI's (env ``CI`` set, and not ``0`` or ``false``)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def missing(reason: str) -> NoReturn:
    """The test needs something absent (`reason` says what and how to get it): a failure under
    CI, a skip with the reason elsewhere."""
    if under_ci():
        pytest.fail(f"{reason} (required under CI)")
    pytest.skip(reason)


def have_module(name: str) -> bool:
    """Whether `name` is importable as an installed module (not a stray directory of that name,
    such as Ray's temp dir ``ray/`` in the working directory, which imports as an empty namespace
    package)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin is not None


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "requires(*modules, install): the test needs these Python modules; absent, it fails "
        "under CI and is skipped elsewhere (conftest.missing)",
    )


def pytest_runtest_setup(item):
    for mark in item.iter_markers("requires"):
        absent = [m for m in mark.args if not have_module(m)]
        if absent:
            install = mark.kwargs.get("install")
            missing(f"{', '.join(absent)} not installed" + (f": {install}" if install else ""))


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


@pytest.fixture
def flower_task_identity():
    """Flower's Message constructor reads the run/node/task identity that a ServerApp or
    ClientApp process has set; the Flower tests build messages outside both (used by them as
    ``pytest.mark.usefixtures("flower_task_identity")``)."""
    if not have_module("flwr"):
        yield
        return
    from flwr.supercore.task_identity import TaskIdentity

    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 0
    yield


@pytest.fixture(scope="session")
def cli():
    """Runs the Rust `privfed` CLI with arguments and returns its parsed `--json` output."""
    path = _cli_path()
    if path is None:
        missing(
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
        missing(f"the shared data sets are not at {path} (set PRIVFED_DATA_DIR)")
    return path


@pytest.fixture(scope="session")
def data_dir(shared_data) -> Path:
    """Another name of `shared_data`."""
    return shared_data
