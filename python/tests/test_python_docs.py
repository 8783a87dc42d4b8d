"""Every ```python block of the guides runs as written, so an example in the documentation
cannot rot.

The guides are README.md, CONTRIBUTING.md, python/README.md and docs/*.md, except
docs/FLOWER.md (its blocks need Flower and are run by test_flwr_docs.py). Each block runs on its
own, in a fresh namespace, with the working directory set to an empty temporary directory (so
nothing a block writes lands in the repository). A failure names the guide and the line: the
block is compiled so that the traceback's line numbers are the guide's own.

The info string after ```python may carry, as the shell blocks' test in
crates/privfed/tests/cli/doc_blocks.rs reads them:
* ``no_run``: the block is not run (a synopsis with placeholders, a long job); it is listed as
  skipped, so the count is visible;
* ``needs_data``: the block reads the team's shared data sets. It runs with
  ``PRIVFED_DATA_DIR`` set to them (the package's default data directory), and without them it
  is skipped, or fails under CI (conftest.py's ``shared_data``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# docs/FLOWER.md's blocks are test_flwr_docs.py's
NOT_HERE = {"docs/FLOWER.md"}
KNOWN_WORDS = {"no_run", "needs_data"}


def guides() -> list[str]:
    names = ["README.md", "CONTRIBUTING.md", "python/README.md"]
    names += sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))
    return [n for n in names if (REPO / n).is_file() and n not in NOT_HERE]


def python_blocks(text: str):
    """(line of the block's first code line, info words after the language, code) of every
    ```python block (fences may be indented; the code is dedented by the fence's indent)."""
    out = []
    pattern = r"^([ \t]*)```python([^\n]*)\n(.*?)^[ \t]*```[ \t]*$"
    for m in re.finditer(pattern, text, flags=re.S | re.M):
        indent = len(m.group(1))
        words = [w for w in re.split(r"[\s,]+", m.group(2)) if w]
        code = "".join(line[indent:] if line[:indent].isspace() else line
                       for line in m.group(3).splitlines(keepends=True))
        out.append((text.count("\n", 0, m.start()) + 2, words, code))
    return out


def run_block(code: str, where: str, line: int, path: str | None = None) -> dict:
    """Runs `code` in a fresh namespace, compiled as the file `path` (default `where`) so that
    its traceback shows the guide's own lines (`line` is that of its first code line); an
    exception is re-raised as an AssertionError naming `where:line`."""
    ns = {"__name__": "__doc_block__"}
    compiled = compile("\n" * (line - 1) + code, path or where, "exec")
    try:
        exec(compiled, ns)
    except Exception as e:  # noqa: BLE001 - any exception is the block failing
        raise AssertionError(
            f"the ```python block at {where}:{line} raises {type(e).__name__}: {e}") from e
    return ns


CASES = [(g, line, words, code)
         for g in guides()
         for line, words, code in python_blocks((REPO / g).read_text(encoding="utf-8"))]


def test_the_guides_have_their_python_blocks():
    per_guide = {g: sum(1 for c in CASES if c[0] == g) for g in guides()}
    assert per_guide["docs/PYTHON.md"] >= 4, "docs/PYTHON.md lost its Python examples"
    assert per_guide["README.md"] >= 1, "README.md lost its Python example"


def test_info_words_are_known():
    """A misspelt marker (``no-run``) would silently change how a block is run."""
    for g, line, words, _ in CASES:
        unknown = set(words) - KNOWN_WORDS
        assert not unknown, f"{g}:{line}: unknown word(s) {sorted(unknown)} after ```python"


@pytest.mark.parametrize("guide,line,words,code", CASES,
                         ids=[f"{g}:{line}" for g, line, _, _ in CASES])
def test_block_runs_as_written(guide, line, words, code, request, monkeypatch, tmp_path):
    if "no_run" in words:
        pytest.skip(f"{guide}:{line} is marked no_run")
    if "needs_data" in words:
        monkeypatch.setenv("PRIVFED_DATA_DIR", str(request.getfixturevalue("shared_data")))
    monkeypatch.chdir(tmp_path)
    run_block(code, guide, line, str(REPO / guide))


def test_a_failing_block_is_reported_with_its_line(tmp_path):
    """The runner above can fail: a block that raises is reported with the guide's line, and
    the traceback points at the guide's line of the failing statement."""
    guide = "# A guide\n\ntext\n\n```python\nx = 1\nraise ValueError('broken')\n```\n"
    [(line, words, code)] = python_blocks(guide)
    assert (line, words) == (6, [])
    with pytest.raises(AssertionError, match=r"GUIDE\.md:6 raises ValueError: broken") as info:
        run_block(code, "GUIDE.md", line)
    tb = info.value.__cause__.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert (tb.tb_frame.f_code.co_filename, tb.tb_lineno) == ("GUIDE.md", 7)
    # and the markers are read
    marked = "```python no_run\nraise SystemExit\n```\n  ```python needs_data\n  y = 2\n  ```\n"
    assert [(w, c) for _, w, c in python_blocks(marked)] == [
        (["no_run"], "raise SystemExit\n"), (["needs_data"], "y = 2\n")]
