"""What a user reads: the public functions present their public names (``help()``, ``__name__``,
``__qualname__``, ``__module__``, argument errors), and an error about a bad value names the field,
never a parser's line and column."""

from __future__ import annotations

import importlib
import pydoc
import re
import types

import pytest

import privfed
from privfed import accounting, distributed, mvu

MODULES = ("accounting", "mvu", "distributed", "secagg", "ddml", "fl")
# The native names the functions had before they carried their public ones: none may show.
NATIVE = re.compile(
    r"\b(_privfed|plan_distributed|skellam_round_event|design_mvu|ddml_\w+|secagg_\w+|fl_train)\b"
)
POSITION = re.compile(r"line \d+|column \d+")


def public_functions():
    """(module, name, function) of every native function a public module exports."""
    out = []
    for mod in MODULES:
        m = importlib.import_module(f"privfed.{mod}")
        for name in m.__all__:
            obj = getattr(m, name)
            if isinstance(obj, types.BuiltinFunctionType):
                out.append((m.__name__, name, obj))
    return out


def ids(cases):
    return [f"{m}.{n}" for m, n, _ in cases]


FUNCTIONS = public_functions()


def test_every_public_module_exports_native_functions():
    found = {m for m, _, _ in public_functions()}
    assert {"privfed.accounting", "privfed.mvu", "privfed.distributed", "privfed.secagg",
            "privfed.ddml", "privfed.fl"} <= found


def check_public_name(module: str, name: str, f) -> None:
    assert f.__name__ == name
    assert f.__qualname__ == name
    assert f.__module__ == module
    text = pydoc.render_doc(f, renderer=pydoc.plaintext)
    assert f"in module {module}" in text, text[:300]
    assert re.search(rf"^{name}\(", text, re.M), text[:300]
    assert not NATIVE.search(text), text[:300]
    # An argument error is raised by the function itself and names it.
    with pytest.raises(TypeError) as e:
        f(no_such_argument=1)
    assert str(e.value).startswith(f"{name}()"), str(e.value)
    assert not NATIVE.search(str(e.value)), str(e.value)


@pytest.mark.parametrize("module,name,f", FUNCTIONS, ids=ids(FUNCTIONS))
def test_public_functions_present_their_public_names(module, name, f):
    check_public_name(module, name, f)


def test_a_value_error_from_a_public_function_names_no_native_function():
    with pytest.raises(privfed.InfeasibleParameters) as e:
        distributed.plan(dim=1000, clip=1.0, bits=2, clients=100, noise_stddev=1.0)
    assert not NATIVE.search(str(e.value)), str(e.value)
    with pytest.raises(privfed.InvalidParameter) as e:
        mvu.design(3, 3, -1.0)
    assert "epsilon" in str(e.value) and not NATIVE.search(str(e.value)), str(e.value)


def test_plan_parameters_name_the_bad_field():
    plan = distributed.plan(dim=10, clip=1.0, bits=16, clients=5, noise_stddev=0.1)
    seed = distributed.rotation_seed(b"session", 0)
    params = dict(plan.params, clip="one")
    with pytest.raises(privfed.InvalidParameter) as e:
        distributed.SkellamEncoder(params, seed)
    msg = str(e.value)
    assert "`clip`" in msg and "string" in msg, msg
    assert not POSITION.search(msg), msg
    # As JSON text, too: the field, not where the parser stood.
    import json

    with pytest.raises(privfed.InvalidParameter) as e:
        distributed.SkellamEncoder(json.dumps(params), seed)
    msg = str(e.value)
    assert "`clip`" in msg and not POSITION.search(msg), msg
    with pytest.raises(privfed.InvalidParameter) as e:
        distributed.round_event(json.dumps(params)[:-1], 5)
    assert not POSITION.search(str(e.value)), str(e.value)


def test_json_text_errors_carry_no_position():
    with pytest.raises(privfed.InvalidParameter) as e:
        mvu.MvuDesign.from_json('{"input_bits": 2,\n "output_bits": "x"}')
    assert not POSITION.search(str(e.value)), str(e.value)
    with pytest.raises(privfed.InvalidParameter) as e:
        accounting.RdpAccountant().compose('{"type": "gaussian", "noise_multiplier": "a"}')
    msg = str(e.value)
    assert "noise_multiplier" in msg and not POSITION.search(msg), msg
