"""The MVU designer (paper 004 §3.4) through Python: the same design as the Rust CLI, JSON round
trips, the designer's report, and the mechanism built on a design."""

from __future__ import annotations

import json

import numpy as np
import pytest

import privfed


def test_same_design_as_the_cli(cli):
    d = privfed.mvu.design(2, 3, 1.0)
    want = cli("mvu", "design", "--input-bits", "2", "--output-bits", "3", "--epsilon", "1", "--json")
    assert np.array_equal(d.p, np.array(want["P"]))
    assert np.array_equal(d.alphabet, np.array(want["alphabet"]))
    assert d.epsilon == want["ldp_epsilon"] <= 1.0
    r = d.report
    assert r["variance"] == want["variance"] and r["grr_variance"] == want["grr_variance"]
    assert r["variance"] < r["grr_variance"]  # the point of paper 004


def test_metric_designs():
    d = privfed.mvu.design(2, 2, 1.0, constraint="metric", power=2)
    assert d.constraint == {"kind": "metric", "power": 2}
    assert d.constraint_epsilon <= 1.0 + 1e-9
    with pytest.raises(privfed.InvalidParameter, match="constraint"):
        privfed.mvu.design(2, 2, 1.0, constraint="renyi")


def test_json_round_trip_and_validation():
    d = privfed.mvu.design(2, 2, 2.0)
    e = privfed.mvu.MvuDesign.from_json(d.to_json())
    assert np.array_equal(e.p, d.p) and e.report is None
    assert privfed.mvu.MvuDesign.from_json(d.to_dict()).to_json() == d.to_json()
    bad = d.to_dict()
    bad["p"][0][0] += 0.5  # rows no longer sum to 1
    with pytest.raises(privfed.InvalidParameter, match="MVU design"):
        privfed.mvu.MvuDesign.from_json(json.dumps(bad))


def test_mechanism_refuses_a_design_above_its_epsilon():
    d = privfed.mvu.design(2, 2, 2.0)
    with pytest.raises(privfed.InvalidParameter, match="design"):
        privfed.MVU(1.0, design=d)
    m = privfed.MVU(2.0, lo=0.0, hi=10.0, design=d)
    assert m.domain == {"kind": "interval", "lo": 0.0, "hi": 10.0}


@pytest.mark.parametrize("args,exc", [
    ((0, 2, 1.0), privfed.InvalidParameter),
    ((2, 0, 1.0), privfed.InvalidParameter),
    ((2, 2, -1.0), privfed.InvalidParameter),
    ((9, 2, 1.0), privfed.InvalidParameter),
])
def test_bad_requests(args, exc):
    with pytest.raises(exc):
        privfed.mvu.design(*args)


def test_design_report_is_the_cli_report(cli):
    """`MvuDesign.report` is the report `privfed mvu design --json` prints (the designer's
    `DesignSummary`), all keys in the same order and the same numbers but the wall time."""
    d = privfed.mvu.design(2, 3, 1.0, constraint="metric", power=1)
    want = cli("mvu", "design", *"--input-bits 2 --output-bits 3 --epsilon 1 --metric-dp l1 --json".split())
    got = d.report
    assert list(got) == list(want)
    assert got.pop("seconds") >= 0.0 and want.pop("seconds") >= 0.0
    assert got == want


@pytest.mark.parametrize("args,kwargs", [
    ([], {}),
    (["--orders", "2,4.5", "--dim", "8", "--sensitivity", "0.5"],
     {"orders": [2.0, 4.5], "dim": 8, "sensitivity": 0.5}),
])
def test_rdp_report_is_the_cli_report(cli, tmp_path, args, kwargs):
    """`privfed.mvu.rdp_report(design)` is the report of `privfed mvu rdp --json` on the same
    design file: the scalar curve and, with a dimension and sensitivity, the vector bounds."""
    d = privfed.mvu.design(2, 2, 2.0)
    path = tmp_path / "design.json"
    path.write_text(d.to_json())
    want = cli("mvu", "rdp", "--design", str(path), *args, "--json")
    got = privfed.mvu.rdp_report(d, **kwargs)
    assert list(got) == list(want)
    assert got == want
    assert ("vector" in got) == bool(kwargs)


def test_rdp_report_errors():
    d = privfed.mvu.design(2, 2, 2.0)
    with pytest.raises(privfed.InvalidParameter, match="sensitivity"):
        privfed.mvu.rdp_report(d, dim=8)
    with pytest.raises(privfed.InvalidParameter, match="dim"):
        privfed.mvu.rdp_report(d, sensitivity=1.0)
    with pytest.raises(privfed.InvalidParameter):
        privfed.mvu.rdp_report(d, [1.0])
