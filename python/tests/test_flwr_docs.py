"""docs/FLOWER.md's Python blocks run as written: each is executed on its own, in a fresh
namespace, and a block that defines a ServerApp and a ClientApp is then run for real, the
ServerApp against the ClientApp on ten in-process nodes (flwr_harness.InProcessGrid: Flower's
serialisation, one Context per node). Without Flower: skipped, or failed under CI (conftest's policy)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "FLOWER.md"

needs_flwr = pytest.mark.requires("flwr", install='pip install "privfed[flwr]"')


def python_blocks(text: str):
    """(first line number, code) of every ```python block."""
    out = []
    for m in re.finditer(r"^```python\n(.*?)^```", text, flags=re.S | re.M):
        out.append((text.count("\n", 0, m.start()) + 2, m.group(1)))
    return out


BLOCKS = python_blocks(DOC.read_text())


def test_the_page_has_its_python_blocks():
    assert len(BLOCKS) >= 2, "docs/FLOWER.md lost its Python examples"


@needs_flwr
@pytest.mark.parametrize("line,code", BLOCKS, ids=[f"line{n}" for n, _ in BLOCKS])
def test_block_runs_as_written(line, code, capsys):
    from flwr.app import Context, RecordDict
    from flwr.supercore.task_identity import TaskIdentity
    from flwr_harness import InProcessGrid

    ns = {"__name__": f"FLOWER_md_line{line}"}
    exec(compile(code, f"docs/FLOWER.md:{line}", "exec"), ns)
    server_app, client_app = ns.get("server_app"), ns.get("client_app")
    if server_app is None or client_app is None:
        return
    # a ServerApp and a ClientApp: run them (Flower's Message needs a task identity outside
    # its own processes)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 0
    grid = InProcessGrid(client_app, range(1, 11))
    server_app(grid=grid, context=Context(run_id=1, node_id=0, node_config={},
                                          state=RecordDict(), run_config={}))
    out = capsys.readouterr().out
    # the block prints ε after its rounds: something was privatized and accounted
    eps = [float(x) for x in re.findall(r"ε = ([0-9.]+)", out)]
    assert eps and eps[-1] > 0, out
    assert any(replied for _, _, replied in grid.log)
