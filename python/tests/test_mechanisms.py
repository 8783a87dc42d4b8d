"""The local randomizers through Python: the Rust results, unbiasedness and variance
(statistically, at stated false-positive rates), dtypes, shapes, seeds and threads, errors."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import privfed
from stats import assert_mean

# Each statistical assertion below fails a correct implementation with probability ALPHA; the
# file makes about 60 of them, so a false alarm per run has probability below 1e-3.
ALPHA = 1e-5


def unit(d: int, rng: np.random.Generator) -> np.ndarray:
    v = rng.standard_normal(d)
    return v / np.linalg.norm(v)


# (constructor, CLI arguments of `privfed describe`, an input in the domain)
CASES = [
    (lambda s: privfed.PrivUnit2(4.0, 20, seed=s), ["privunit2", "--epsilon", "4", "--dim", "20"], "sphere"),
    (lambda s: privfed.PrivUnit2(4.0, 20, parameterization="paper000", epsilon0=1.0, seed=s),
     ["privunit2", "--epsilon", "4", "--dim", "20", "--parameterization", "paper000", "--epsilon0", "1"], "sphere"),
    (lambda s: privfed.PrivUnitG(2.0, 20, seed=s), ["privunitg", "--epsilon", "2", "--dim", "20"], "sphere"),
    (lambda s: privfed.PrivUnitG(2.0, 20, parameterization="dimension_free", seed=s),
     ["privunitg", "--epsilon", "2", "--dim", "20", "--parameterization", "dimension-free"], "sphere"),
    (lambda s: privfed.PrivUnitInf(3.0, 8, seed=s), ["privunit-inf", "--epsilon", "3", "--dim", "8"], "cube"),
    (lambda s: privfed.Separated(5.0, 10, 2.0, seed=s), ["separated", "--epsilon", "5", "--dim", "10", "--r-max", "2"], "ball2"),
    (lambda s: privfed.ScalarDP(1.5, 3.0, seed=s), ["scalar-dp", "--epsilon", "1.5", "--r-max", "3"], "pos3"),
    (lambda s: privfed.ScalarDP(1.5, 3.0, k=4, seed=s), ["scalar-dp", "--epsilon", "1.5", "--r-max", "3", "--k", "4"], "pos3"),
    (lambda s: privfed.ScalarRelDP(2.0, 10.0, 0.5, 2.0, seed=s),
     ["scalar-rel-dp", "--epsilon", "2", "--r-max", "10", "--a", "0.5", "--kappa", "2"], "pos10"),
    (lambda s: privfed.GRR(1.0, 3, -1.0, 1.0, seed=s), ["grr", "--epsilon", "1", "--bits", "3"], "interval"),
    (lambda s: privfed.BitwiseRR(2.0, 2, -1.0, 1.0, seed=s), ["bitwise-rr", "--epsilon", "2", "--bits", "2"], "interval"),
    (lambda s: privfed.Laplace(1.0, 4, norm="l1", radius=2.0, seed=s),
     ["laplace", "--epsilon", "1", "--dim", "4", "--norm", "l1", "--radius", "2"], "ball1"),
    (lambda s: privfed.Gaussian(1.0, 1e-5, 4, seed=s),
     ["gaussian", "--epsilon", "1", "--delta", "1e-5", "--dim", "4"], "ball2"),
]


def point(kind: str, m, rng: np.random.Generator):
    d = m.dim
    if kind == "sphere":
        return unit(d, rng)
    if kind == "cube":
        return rng.uniform(-1, 1, d)
    if kind == "ball2":
        r = m.domain.get("radius", m.parameters.get("r_max", 1.0))
        return 0.7 * r * unit(d, rng)
    if kind == "ball1":
        v = rng.uniform(-1, 1, d)
        return 0.9 * m.domain["radius"] * v / np.abs(v).sum()
    if kind == "pos3":
        return 1.1
    if kind == "pos10":
        return 6.3
    return 0.37


@pytest.mark.parametrize("make,args,kind", CASES, ids=[c[1][0] + str(i) for i, c in enumerate(CASES)])
def test_matches_the_rust_cli(make, args, kind, cli):
    """ε, δ, dimension and worst-case variance are the Rust library's, to the last bit."""
    m = make(1)
    want = cli("describe", *args, "--json")
    assert m.name == want["mechanism"]
    assert m.epsilon == want["epsilon"]
    assert m.delta == want["delta"]
    assert m.dim == want["dim"]
    assert m.variance == want["variance"]
    assert m.domain == want["domain"]
    d = m.describe()
    # The CLI's report, key for key in its order, then the two older names.
    assert list(d)[: len(want)] == list(want)
    assert {k: d[k] for k in want} == want
    assert d["name"] == d["mechanism"] and d["parameters"] == d["params"]


@pytest.mark.parametrize("make,args,kind", CASES, ids=[c[1][0] + str(i) for i, c in enumerate(CASES)])
def test_unbiased_with_the_exact_variance(make, args, kind):
    """E[M(x)] = x (z-tests on two directions) and E‖M(x) − x‖² = variance_at(x) (z-test)."""
    rng = np.random.default_rng(11)
    m = make(2)
    x = point(kind, m, rng)
    n = 20_000
    if m.dim == 1:
        z = m.privatize(np.full(n, x)).reshape(n, 1)
        xv = np.array([x])
    else:
        z = m.privatize(np.tile(x, (n, 1)))
        xv = x
    assert z.shape == (n, m.dim)
    err = z - xv
    for u in (np.eye(m.dim)[0], unit(m.dim, rng)):
        assert_mean(err @ u, 0.0, ALPHA, f"{m.name}: mean error along a direction")
    var = m.variance_at(x)
    assert var <= m.variance * (1 + 1e-12)
    assert_mean((err**2).sum(axis=1), var, ALPHA, f"{m.name}: E‖M(x) − x‖²")


def test_mvu_matches_its_design_and_is_unbiased():
    d = privfed.mvu.design(2, 2, 1.0)
    m = privfed.MVU(1.0, lo=-1.0, hi=1.0, design=d, seed=3)
    # The mechanism recomputes ε exactly from its realized (2^-64-rounded) probabilities.
    assert m.epsilon <= 1.0 and abs(m.epsilon - d.epsilon) < 1e-12
    z = m.privatize(np.full(40_000, 0.25))
    assert_mean(z, 0.25, ALPHA, "MVU mean")
    assert_mean((z - 0.25) ** 2, m.variance_at(0.25), ALPHA, "MVU variance")
    # Every output is a letter of the alphabet, mapped from [0, 1] to [lo, hi].
    letters = -1.0 + 2.0 * d.alphabet
    assert np.all(np.min(np.abs(z[:, None] - letters[None, :]), axis=1) < 1e-12)


def test_seeds_reproduce_and_differ():
    x = unit(300, np.random.default_rng(0))
    a = privfed.PrivUnit2(4.0, 300, seed=7).privatize(x)
    b = privfed.PrivUnit2(4.0, 300, seed=7).privatize(x)
    c = privfed.PrivUnit2(4.0, 300, seed=8).privatize(x)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    # Bytes and hex are full 256-bit keys: the same key gives the same output.
    key = bytes(range(32))
    assert np.array_equal(
        privfed.PrivUnit2(4.0, 300, seed=key).privatize(x),
        privfed.PrivUnit2(4.0, 300, seed=key.hex()).privatize(x),
    )
    # Successive calls on one object differ; unseeded objects differ from each other.
    m = privfed.PrivUnit2(4.0, 300, seed=7)
    assert not np.array_equal(m.privatize(x), m.privatize(x))
    assert not np.array_equal(privfed.PrivUnit2(4.0, 300).privatize(x), privfed.PrivUnit2(4.0, 300).privatize(x))


@pytest.mark.parametrize("make", [
    lambda t: privfed.PrivUnit2(4.0, 70_000, seed=5),
    lambda t: privfed.PrivUnitG(4.0, 70_000, seed=5),
])
def test_output_does_not_depend_on_threads(make):
    """Vectors longer than one block (2^14) are drawn per block: the same bits on 1 or 3 threads,
    for one vector and for a batch."""
    x = unit(70_000, np.random.default_rng(1))
    outs = [make(t).privatize(x, threads=t) for t in (1, 3)]
    assert np.array_equal(outs[0], outs[1])
    xs = np.tile(x, (3, 1))
    outs = [make(t).privatize(xs, threads=t) for t in (1, 2)]
    assert np.array_equal(outs[0], outs[1])
    s = [privfed.GRR(1.0, 3, seed=4).privatize(np.linspace(-1, 1, 50_000), threads=t) for t in (1, 2)]
    assert np.array_equal(s[0], s[1])


def test_float32_in_float32_out():
    x = unit(100, np.random.default_rng(2))
    x32 = x.astype(np.float32)
    z32 = privfed.PrivUnit2(4.0, 100, seed=9).privatize(x32)
    z64 = privfed.PrivUnit2(4.0, 100, seed=9).privatize(x32.astype(np.float64))
    assert z32.dtype == np.float32 and z64.dtype == np.float64
    assert np.array_equal(z32, z64.astype(np.float32))
    assert privfed.PrivUnit2(4.0, 100).privatize(x.tolist()).dtype == np.float64
    assert isinstance(privfed.ScalarDP(1.0).privatize(0.5), float)


def test_batches_are_rows_and_scalars_any_shape():
    m = privfed.PrivUnit2(4.0, 10, seed=1)
    xs = np.tile(unit(10, np.random.default_rng(3)), (5, 1))
    z = m.privatize(xs)
    assert z.shape == (5, 10)
    assert len({tuple(r) for r in z}) == 5  # rows are independent draws
    assert m.privatize(np.zeros((0, 10)) + 0.0).shape == (0, 10)
    s = privfed.GRR(1.0, 2, seed=1).privatize(np.zeros((2, 3, 4)))
    assert s.shape == (2, 3, 4)


def test_bad_inputs_have_clear_typed_errors():
    m = privfed.PrivUnit2(4.0, 10)
    with pytest.raises(privfed.InvalidInput, match=r"shape \(10,\) or \(n, 10\)"):
        m.privatize(np.zeros(11))
    with pytest.raises(privfed.InvalidInput, match="shape"):
        m.privatize(np.zeros((2, 2, 10)))
    with pytest.raises(privfed.InvalidDtype, match="int64"):
        m.privatize(np.zeros(10, dtype=np.int64))
    with pytest.raises(TypeError):
        m.privatize(np.zeros(10, dtype=np.complex128))
    with pytest.raises(privfed.InvalidInput, match="C-contiguous"):
        m.privatize(np.zeros((10, 2))[:, 0])
    with pytest.raises(privfed.InvalidInput, match="not finite"):
        x = np.zeros(10)
        x[3] = np.nan
        m.privatize(x)
    with pytest.raises(privfed.InvalidInput):
        m.privatize(np.full(10, 1.0))  # not a unit vector
    with pytest.raises(ValueError):
        m.privatize([[1.0], [1.0, 2.0]])  # ragged
    with pytest.raises(privfed.InvalidInput):
        privfed.ScalarDP(1.0, 1.0).privatize(2.0)  # outside [0, r_max]
    with pytest.raises(privfed.InvalidParameter):
        m.privatize(unit(10, np.random.default_rng(0)), threads=0)


@pytest.mark.parametrize("call,match", [
    (lambda: privfed.PrivUnit2(-1.0, 10), "epsilon"),
    (lambda: privfed.PrivUnit2(float("nan"), 10), "epsilon"),
    (lambda: privfed.PrivUnit2(4.0, 0), "dim"),
    (lambda: privfed.PrivUnit2(4.0, -3), "dim"),
    (lambda: privfed.PrivUnit2(4.0, 10, parameterization="paper000"), "epsilon0"),
    (lambda: privfed.PrivUnit2(4.0, 10, parameterization="fast"), "parameterization"),
    (lambda: privfed.PrivUnitG(4.0, 10, parameterization="paper000"), "parameterization"),
    (lambda: privfed.Separated(1.0, 10, magnitude_epsilon=2.0), "magnitude_epsilon"),
    (lambda: privfed.Laplace(1.0, 3, norm="l3"), "norm"),
    (lambda: privfed.Gaussian(1.0, 1.5, 3), "delta"),
    (lambda: privfed.GRR(1.0, 3, 1.0, -1.0), "`hi`"),
    (lambda: privfed.PrivUnit2(4.0, 10, seed=-1), "seed"),
    (lambda: privfed.PrivUnit2(4.0, 10, seed=2**64), "seed"),
    (lambda: privfed.PrivUnit2(4.0, 10, seed=b"short"), "32 bytes"),
    (lambda: privfed.PrivUnit2(4.0, 10, seed="xyz"), "hex"),
    (lambda: privfed.PrivUnit2(4.0, 10, seed=1.5), "seed"),
])
def test_bad_parameters_are_invalid_parameter(call, match):
    with pytest.raises(privfed.InvalidParameter, match=match):
        call()


def test_gil_is_released_and_threads_share_an_object():
    """Four Python threads privatize with one object at once; each gets a valid, distinct draw."""
    m = privfed.PrivUnit2(4.0, 50_000, seed=1)
    x = unit(50_000, np.random.default_rng(4))
    out: list = []

    def work():
        out.append(m.privatize(x, threads=1))

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(out) == 4
    assert len({o.tobytes() for o in out}) == 4
    # PrivUnit2's outputs have one norm: the scale m^{-1} of the mechanism.
    norms = [np.linalg.norm(o) for o in out]
    assert np.allclose(norms, norms[0], rtol=1e-9)


def test_repr_and_describe_are_informative():
    m = privfed.Gaussian(1.0, 1e-5, 3)
    assert repr(m).startswith("<gaussian epsilon=") and "delta=" in repr(m)
    d = m.describe()
    g = d["guarantee"]
    assert g["kind"] == "approximate" and g["delta"] == 1e-5 and abs(g["epsilon"] - 1.0) < 1e-12
    assert set(d) >= {"name", "epsilon", "delta", "dim", "variance", "domain", "parameters"}
    assert isinstance(m, privfed.LocalRandomizer)


def test_dp_event_of_one_release():
    from privfed.accounting import GaussianDpEvent, LaplaceDpEvent, PldAccountant, PureDpEvent

    m = privfed.PrivUnit2(4.0, 10)
    assert m.dp_event() == PureDpEvent(4.0)
    g = privfed.Gaussian(1.0, 1e-5, 3, radius=2.0)
    sigma = g.parameters["sigma"]
    assert g.dp_event() == GaussianDpEvent(sigma / 4.0)  # l2 diameter of the radius-2 ball
    lap = privfed.Laplace(1.0, 1)
    ev = lap.dp_event()
    assert isinstance(ev, LaplaceDpEvent)
    # Laplace at ε has scale/ℓ1-sensitivity = 1/ε; the PLD accountant gives back ε at δ → 0.
    assert ev.scale == pytest.approx(1.0, rel=1e-12)
    assert PldAccountant().compose(ev).get_epsilon(1e-12) == pytest.approx(1.0, rel=1e-3)


def test_central_gaussian_projects_averages_and_adds_the_stated_noise():
    """privfed.CentralGaussian (the central step privfed.flwr's CentralDpStrategy draws its
    noise from): rows projected onto the C-ball, summed, divided by the batch size; noise of
    standard deviation z·C/batch (mean and variance tested at 1e-6 false-positive rate each,
    the variance by the normal approximation of χ²(n−1), n = 40,000: relative sd 0.7%)."""
    import math

    from stats import normal_two_sided_critical

    cg = privfed.CentralGaussian(2.0, 1e-9, seed=5)
    rows = np.array([[3.0, 4.0], [0.5, 0.0], [0.0, -30.0]])  # norms 5, 0.5, 30
    clipped = np.array([[1.2, 1.6], [0.5, 0.0], [0.0, -2.0]])
    np.testing.assert_allclose(cg.aggregate(rows, 4.0), clipped.sum(0) / 4, atol=1e-8)
    np.testing.assert_allclose(cg.project(np.array([3.0, 4.0])), [1.2, 1.6], rtol=1e-15)
    assert np.linalg.norm(cg.project(np.full(1000, 7.0))) <= 2.0
    assert cg.clip_norm == 2.0 and cg.noise_multiplier == 1e-9
    # the noise alone: an empty batch of dimension 40,000
    z, c, b = 1.7, 0.3, 5.0
    noisy = privfed.CentralGaussian(c, z, seed=11)
    assert noisy.noise_std(b) == pytest.approx(z * c / b)
    x = noisy.aggregate(np.zeros((0, 40_000)), b) / (z * c / b)
    assert_mean(x, 0.0, 1e-6, "central noise mean")
    s2 = float(np.var(x, ddof=1))
    assert abs((s2 - 1) / math.sqrt(2 / (x.size - 1))) <= normal_two_sided_critical(1e-6), s2
    # seeds reproduce; OS seeding differs
    again = privfed.CentralGaussian(c, z, seed=11).aggregate(np.zeros((0, 40_000)), b)
    assert np.array_equal(again / (z * c / b), x)
    assert not np.array_equal(privfed.CentralGaussian(c, z).aggregate(np.zeros((0, 8)), b),
                              privfed.CentralGaussian(c, z).aggregate(np.zeros((0, 8)), b))
    # clear errors
    with pytest.raises(privfed.InvalidInput, match=r"shape \(n, dim\)"):
        noisy.aggregate(np.zeros(3), 1.0)
    with pytest.raises(privfed.InvalidParameter):
        privfed.CentralGaussian(0.0, 1.0)
    with pytest.raises(privfed.InvalidParameter):
        noisy.aggregate(np.zeros((1, 3)), 0.0)
    with pytest.raises(privfed.InvalidInput):
        noisy.aggregate(np.array([[np.nan, 1.0]]), 1.0)


def _stub_params(class_name):
    """The parameter names of `class_name.__new__` in the stub (without cls and seed); stubtest
    in CI checks the stub against the built extension's signatures."""
    import ast
    import pathlib

    stub = pathlib.Path(privfed.__file__).with_name("_privfed.pyi")
    for node in ast.parse(stub.read_text()).body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for f in node.body:
                if isinstance(f, ast.FunctionDef) and f.name == "__new__":
                    a = f.args
                    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
                    return [n for n in names if n not in ("cls", "seed")]
    return None


def _cli_value(text):
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def test_every_randomizer_in_the_table_has_its_python_class():
    """The randomizer table (privfed_mechanisms::spec, which the CLI's tests parse row by row)
    against the Python package: each row's class is exported, is a LocalRandomizer, takes the
    row's parameters in the row's order (the stub) and builds from the row's example by keyword,
    within its ε; and every exported LocalRandomizer has a row."""
    rows = privfed._privfed._randomizer_specs()
    assert rows
    for row in rows:
        name = row["python_class"]
        assert name in privfed.__all__, name
        cls = getattr(privfed, name)
        assert issubclass(cls, privfed.LocalRandomizer), name
        params = [p["name"] for p in row["params"]]
        assert _stub_params(name) == params, (name, _stub_params(name), params)
        kwargs = {p["name"]: _cli_value(p["example"]) for p in row["params"] if p["example"]}
        m = cls(**kwargs, seed=1)
        assert m.epsilon <= kwargs["epsilon"] * (1 + 1e-9), (name, m.epsilon)
    exported = {
        n for n in privfed.__all__
        if isinstance(getattr(privfed, n), type)
        and issubclass(getattr(privfed, n), privfed.LocalRandomizer)
        and n != "LocalRandomizer"
    }
    assert exported == {r["python_class"] for r in rows}
