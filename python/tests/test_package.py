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
