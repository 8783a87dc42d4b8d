"""The package as a user meets it: the README example, the exception hierarchy, the stubs."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

import privfed
import privfed.accounting

PKG = Path(privfed.__file__).parent
README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_example_runs():
    """The README's Python block (between the `python` fence after "## Python") runs as is."""
    text = README.read_text()
    start = text.index("```python", text.index("## Python"))
    code = text[start + len("```python"):text.index("```", start + 3)]
    exec(compile(code, "README.md", "exec"), {})


def test_names_outside_checks_use():
    m = privfed.PrivUnit2(epsilon=4.0, dim=1000)
    x = np.zeros(1000)
    x[0] = 1.0
    assert m.privatize(x).shape == (1000,)
    assert m.epsilon == 4.0 and m.variance > 0
    a = privfed.accounting
    e = a.SelfComposedDpEvent(a.PoissonSampledDpEvent(sampling_probability=0.01, event=a.GaussianDpEvent(noise_multiplier=1.0)), count=10)
    for acc in (a.RdpAccountant(), a.PldAccountant()):
        acc.compose(e)
        assert acc.get_epsilon(1e-5) > 0 and 0 < acc.get_delta(1.0) < 1
    a.RdpAccountant().compose(a.ComposedDpEvent([a.LaplaceDpEvent(scale=1.0)]))


def test_exception_hierarchy():
    for name in privfed.errors.__all__:
        cls = getattr(privfed, name)
        assert issubclass(cls, privfed.PrivfedError)
    assert issubclass(privfed.InvalidParameter, ValueError)
    assert issubclass(privfed.InvalidDtype, TypeError)


def test_stubs_cover_the_native_module():
    """Every public name of the native module has a stub (py.typed ships with the package)."""
    assert (PKG / "py.typed").exists()
    tree = ast.parse((PKG / "_privfed.pyi").read_text())
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    stubbed |= {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
    native = {n for n in dir(privfed._privfed) if not n.startswith("_")} | {"__version__"}
    assert native <= stubbed, f"missing stubs: {sorted(native - stubbed)}"


def test_every_exported_name_resolves():
    """`from privfed import *` gives what __all__ promises, submodules included."""
    import types

    for name in privfed.__all__:
        assert hasattr(privfed, name), name
    for mod in ("accounting", "audit", "mvu", "distributed", "secagg", "ddml", "fl", "errors"):
        assert isinstance(getattr(privfed, mod), types.ModuleType), mod


def test_the_tests_skip_only_through_conftest():
    """A missing optional dependency goes through conftest's one policy (`missing` or the
    `requires` marker), which fails under CI: no test skips on its own when a module is absent."""
    here = Path(__file__).resolve().parent
    own_skips = ("pytest.import" + "orskip", "pytest.mark." + "skipif")
    own = [
        f"{p.name}:{i}"
        for p in sorted(here.rglob("*.py"))
        if p.name != "conftest.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if any(s in line for s in own_skips)
    ]
    assert not own, own


def test_missing_optional_dependency_fails_under_ci_and_skips_elsewhere(tmp_path):
    """conftest's one policy, run on a test that needs a module that does not exist."""
    import os
    import subprocess
    import sys

    here = Path(__file__).resolve().parent
    (tmp_path / "test_needs.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.requires('privfed_no_such_module', install='pip install it')\n"
        "def test_needs():\n    pass\n"
    )

    def run(ci):
        env = {k: v for k, v in os.environ.items() if k != "CI"}
        env["PYTHONPATH"] = str(here) + os.pathsep + env.get("PYTHONPATH", "")
        if ci is not None:
            env["CI"] = ci
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "conftest", "-p", "no:cacheprovider",
             "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_needs.py")],
            capture_output=True, text=True, env=env, timeout=120,
        )

    for ci in (None, "0", "false"):
        out = run(ci)
        assert out.returncode == 0 and "1 skipped" in out.stdout, out.stdout + out.stderr
        assert "privfed_no_such_module not installed: pip install it" in out.stdout, out.stdout
    out = run("1")
    assert out.returncode != 0 and "required under CI" in out.stdout, out.stdout + out.stderr
