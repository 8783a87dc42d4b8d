"""privfed.accounting through Python: the same events composed by Google's dp_accounting 0.6.0
give the same ε (tolerances as in the Rust suite, crates/privfed-accounting/tests/it/common.rs),
and the accountant API behaves as documented (ledger, state, budgets, errors)."""

from __future__ import annotations

import copy
import json
import math
import pickle

import pytest

import privfed
import privfed.accounting as pa

try:
    import dp_accounting as dpa
    from dp_accounting import pld as dpa_pld
    from dp_accounting import rdp as dpa_rdp
except ImportError:  # the comparisons follow conftest's policy; the API tests still run
    dpa = dpa_pld = dpa_rdp = None

needs_dpa = pytest.mark.requires(
    "dp_accounting", install="Google's dp_accounting: pip install dp-accounting==0.6.0"
)

# At the same Rényi orders both compute the same closed forms: the per-order values agree to
# 1e-6 relative (Rust suite), so ε does too, to 1e-5.
RDP_SAME_ORDERS_REL = 1e-5
# On privfed's default grid (a superset of dp_accounting's) ε may only be smaller, or larger by
# at most 0.5%.
RDP_DEFAULT_MAX_LOOSER = 0.005
# PLD: within 0.5%, and never more than 0.2% below (both are pessimistic).
PLD_REL = 0.005
PLD_MAX_BELOW = 0.002
CALIBRATION_REL = 0.01
DELTA = 1e-5


def pair_poisson_gaussian(q: float, z: float, n: int):
    if q == 1.0:
        return (
            dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(z), n),
            pa.SelfComposedDpEvent(pa.GaussianDpEvent(z), n),
        )
    return (
        dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(z)), n),
        pa.SelfComposedDpEvent(pa.PoissonSampledDpEvent(q, pa.GaussianDpEvent(z)), n),
    )


def pair_mixed():
    theirs = dpa.ComposedDpEvent([
        dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.02, dpa.GaussianDpEvent(1.3)), 500),
        dpa.SelfComposedDpEvent(dpa.LaplaceDpEvent(10.0), 3),
        dpa.GaussianDpEvent(20.0),
    ])
    ours = pa.ComposedDpEvent([
        pa.SelfComposedDpEvent(pa.PoissonSampledDpEvent(0.02, pa.GaussianDpEvent(1.3)), 500),
        pa.SelfComposedDpEvent(pa.LaplaceDpEvent(10.0), 3),
        pa.GaussianDpEvent(20.0),
    ])
    return theirs, ours


PAIRS = [
    pair_poisson_gaussian(0.01, 1.1, 1000),
    pair_poisson_gaussian(0.01, 1.1, 10_000),
    pair_poisson_gaussian(0.001, 0.8, 100_000),
    pair_poisson_gaussian(1.0, 2.0, 10),
    (dpa.SelfComposedDpEvent(dpa.LaplaceDpEvent(2.0), 5), pa.SelfComposedDpEvent(pa.LaplaceDpEvent(2.0), 5)),
    pair_mixed(),
] if dpa is not None else [pytest.param(None, None, marks=needs_dpa)]


@needs_dpa
@pytest.mark.parametrize("theirs,ours", PAIRS)
def test_rdp_matches_dp_accounting(theirs, ours):
    ref = dpa_rdp.RdpAccountant()
    ref.compose(theirs)
    want = ref.get_epsilon(DELTA)
    same = pa.RdpAccountant(orders=list(ref._orders)).compose(ours).get_epsilon(DELTA)
    assert abs(same - want) <= RDP_SAME_ORDERS_REL * want, (same, want)
    default = pa.RdpAccountant().compose(ours).get_epsilon(DELTA)
    assert default <= want * (1 + RDP_DEFAULT_MAX_LOOSER), (default, want)


@needs_dpa
@pytest.mark.parametrize("theirs,ours", PAIRS)
def test_pld_matches_dp_accounting(theirs, ours):
    ref = dpa_pld.PLDAccountant()
    ref.compose(theirs)
    want = ref.get_epsilon(DELTA)
    got = pa.PldAccountant().compose(ours).get_epsilon(DELTA)
    assert abs(got - want) <= PLD_REL * want, (got, want)
    assert got >= want * (1 - PLD_MAX_BELOW), (got, want)


@needs_dpa
def test_delta_for_epsilon_matches_dp_accounting():
    theirs, ours = pair_poisson_gaussian(0.01, 1.1, 1000)
    ref = dpa_rdp.RdpAccountant()
    ref.compose(theirs)
    want = ref.get_delta(2.0)
    got = pa.RdpAccountant(orders=list(ref._orders)).compose(ours).get_delta(2.0)
    assert abs(got - want) <= 1e-5 * want


@needs_dpa
def test_calibration_matches_dp_accounting():
    z = pa.get_noise_multiplier(2.0, DELTA, 0.01, 1000)
    ref = dpa.calibrate_dp_mechanism(
        dpa_rdp.RdpAccountant,
        lambda s: dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(s)), 1000),
        2.0,
        DELTA,
    )
    assert abs(z - ref) <= CALIBRATION_REL * ref, (z, ref)
    # The calibrated multiplier meets the target, and is the smallest that does (to 1e-6).
    acc = pa.RdpAccountant()
    acc.step(noise_multiplier=z, sample_rate=0.01, steps=1000)
    assert acc.get_epsilon(DELTA) <= 2.0
    acc2 = pa.RdpAccountant()
    acc2.step(noise_multiplier=z * (1 - 1e-5), sample_rate=0.01, steps=1000)
    assert acc2.get_epsilon(DELTA) > 2.0
    assert pa.get_laplace_scale(1.0, DELTA) > 0
    assert pa.get_skellam_variance(1.0, DELTA, 4.0, 2.0) > 0


def test_step_is_the_poisson_gaussian_event():
    a = pa.RdpAccountant()
    for _ in range(3):
        a.step(noise_multiplier=1.1, sample_rate=0.01)
    b = pa.RdpAccountant().compose(pa.PoissonSampledDpEvent(0.01, pa.GaussianDpEvent(1.1)), count=3)
    assert a.get_epsilon(DELTA) == b.get_epsilon(DELTA)
    psg = pa.PoissonSampledDpEvent(0.01, pa.GaussianDpEvent(1.1))
    assert len(a) == 3 and a.ledger == [pa.SelfComposedDpEvent(psg, 3)]
    assert a.ledger_runs == [(psg, 3)]
    # Rate 1 is the Gaussian alone.
    c = pa.RdpAccountant()
    c.step(noise_multiplier=2.0, sample_rate=1.0, steps=4)
    assert c.ledger_runs == [(pa.GaussianDpEvent(2.0), 4)]


@pytest.mark.parametrize("make", [pa.RdpAccountant, pa.PLDAccountant, pa.PureCappedRdpAccountant])
def test_repeated_steps_coalesce_into_one_run(make):
    """Identical steps extend one run: ε as one SelfComposed event (exactly), a compact state
    that reloads to the same ε, and the older one-entry-per-step state still loads."""
    kw = {"value_discretization_interval": 1e-3} if make is pa.PLDAccountant else {}
    a = make(**kw)
    for _ in range(2000):
        a.step(noise_multiplier=1.1, sample_rate=0.01)
    psg = pa.PoissonSampledDpEvent(0.01, pa.GaussianDpEvent(1.1))
    once = make(**kw).compose(pa.SelfComposedDpEvent(psg, 2000))
    assert a.get_epsilon(DELTA) == once.get_epsilon(DELTA)
    assert len(a) == 2000 and len(a.ledger_runs) == 1
    state = a.state_dict()
    text = json.dumps(state)
    assert len(json.dumps(state["runs"])) < 200 and "events" not in state
    b = make(**kw)
    b.load_state_dict(json.loads(text))
    assert b.ledger_runs == a.ledger_runs and b.get_epsilon(DELTA) == a.get_epsilon(DELTA)
    old = dict(state)
    runs = old.pop("runs")
    old["events"] = [r["event"] for r in runs for _ in range(r["count"])]
    c = make(**kw)
    c.load_state_dict(old)
    assert c.ledger_runs == a.ledger_runs and c.get_epsilon(DELTA) == a.get_epsilon(DELTA)
    # A different step starts a new run; querying in between changes nothing.
    a.step(noise_multiplier=2.0, sample_rate=0.01)
    a.get_epsilon(DELTA)
    a.step(noise_multiplier=1.1, sample_rate=0.01, steps=5)
    assert [n for _, n in a.ledger_runs] == [2000, 1, 5]
    assert "2006 compositions in 3 runs" in repr(a)


def test_opacus_and_dp_accounting_names():
    a = pa.RdpAccountant()
    a.step(noise_multiplier=1.1, sample_rate=0.01, steps=1000)
    eps, alpha = a.get_privacy_spent(delta=DELTA)
    assert (eps, alpha) == a.get_epsilon_and_optimal_order(DELTA)
    assert a.get_privacy_spent(DELTA) == (eps, alpha)
    assert a.get_epsilon(delta=DELTA) == a.get_epsilon(DELTA) == eps
    assert a.get_delta(epsilon=eps) == a.get_delta(eps)
    assert alpha in a.orders
    # alphas=: the ledger on those orders, as an accountant built with them answers.
    alphas = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))
    b = pa.RdpAccountant(orders=alphas)
    b.step(noise_multiplier=1.1, sample_rate=0.01, steps=1000)
    assert a.get_privacy_spent(delta=DELTA, alphas=alphas) == b.get_epsilon_and_optimal_order(DELTA)
    with pytest.raises(privfed.InvalidParameter, match="delta"):
        a.get_epsilon()
    with pytest.raises(privfed.InvalidParameter, match="twice"):
        a.get_epsilon(DELTA, delta=DELTA)
    # PLDAccountant: dp_accounting's name and argument order, the same accountant.
    assert issubclass(pa.PLDAccountant, pa.PldAccountant) and "PLDAccountant" in pa.__all__
    p = pa.PLDAccountant("add_or_remove_one", 1e-3)
    q = pa.PldAccountant(1e-3)
    for acc in (p, q):
        acc.step(noise_multiplier=1.1, sample_rate=0.01, steps=100)
    assert p.get_epsilon(delta=DELTA) == q.get_epsilon(DELTA)
    assert p.state_dict()["discretization"] == 1e-3
    with pytest.raises(privfed.InvalidParameter, match="neighboring_relation"):
        pa.PLDAccountant("replace_one")
    with pytest.raises(privfed.InvalidParameter, match="neighboring_relation"):
        pa.RdpAccountant(neighboring_relation="swap_two")


def _wor(n, m, z):
    return pa.SampledWithoutReplacementDpEvent(n, m, pa.GaussianDpEvent(z))


def test_sampled_without_replacement_needs_replace_one():
    ev = _wor(1000, 10, 1.0)
    r1 = pa.RdpAccountant(neighboring_relation="replace_one")
    assert r1.neighbouring_relation == "replace_one" and r1.supports(ev)
    r1.compose(ev, count=100)
    assert 0 < r1.get_epsilon(DELTA) < math.inf
    poisson = pa.PoissonSampledDpEvent(0.01, pa.GaussianDpEvent(1.0))
    assert not r1.supports(poisson)
    with pytest.raises(privfed.UnsupportedEvent, match="add/remove-one"):
        r1.compose(poisson)
    for acc in (pa.RdpAccountant(), pa.PLDAccountant()):
        assert not acc.supports(ev)
        with pytest.raises(privfed.UnsupportedEvent, match="SampledWithoutReplacement"):
            acc.compose(ev)
    with pytest.raises(privfed.UnsupportedEvent, match="Gaussian only"):
        r1.compose(pa.SampledWithoutReplacementDpEvent(100, 5, pa.LaplaceDpEvent(1.0)))
    with pytest.raises(privfed.InvalidParameter, match="sample_size"):
        _wor(10, 11, 1.0)
    # The relation is part of the state: a replace-one state does not load into the default.
    with pytest.raises(privfed.InvalidParameter, match="neighbouring_relation"):
        pa.RdpAccountant().load_state_dict(r1.state_dict())
    r2 = pa.RdpAccountant(neighboring_relation="replace_one")
    r2.load_state_dict(r1.state_dict())
    assert r2.get_epsilon(DELTA) == r1.get_epsilon(DELTA)
    assert pa.event_from_dict(ev.to_dict()) == ev


@needs_dpa
@pytest.mark.parametrize("n,m,z,steps", [(1000, 10, 1.0, 100), (60000, 256, 1.1, 1000), (100, 10, 1.1, 1)])
def test_sampled_without_replacement_matches_dp_accounting(n, m, z, steps):
    theirs = dpa.SelfComposedDpEvent(
        dpa.SampledWithoutReplacementDpEvent(n, m, dpa.GaussianDpEvent(z)), steps
    )
    ref = dpa_rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    ref.compose(theirs)
    want = ref.get_epsilon(DELTA)
    orders = list(ref._orders)
    ours = pa.RdpAccountant(orders=orders, neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    # dp_accounting's own event object, composed directly.
    ours.compose(theirs)
    got = ours.get_epsilon(DELTA)
    # Equal, or smaller where privfed's cap by the un-sampled Gaussian bites.
    assert want * (1 - 1e-6) <= got <= want * (1 + 1e-9) or got < want, (got, want)
    default = pa.RdpAccountant(neighboring_relation="replace_one").compose(_wor(n, m, z), count=steps)
    assert default.get_epsilon(DELTA) <= want * (1 + RDP_DEFAULT_MAX_LOOSER)


@needs_dpa
def test_dp_accounting_events_are_accepted_and_produced():
    theirs, ours = pair_mixed()
    a = pa.RdpAccountant().compose(theirs)
    b = pa.RdpAccountant().compose(ours)
    assert a.get_epsilon(DELTA) == b.get_epsilon(DELTA) and a.ledger == b.ledger
    assert ours.to_dp_event() == theirs
    assert a.as_event().to_dp_event() == dpa.ComposedDpEvent([theirs])
    assert _wor(100, 5, 2.0).to_dp_event() == dpa.SampledWithoutReplacementDpEvent(
        100, 5, dpa.GaussianDpEvent(2.0)
    )
    assert pa.NoOpDpEvent().to_dp_event() == dpa.NoOpDpEvent()
    # Nested inside privfed's events too.
    nested = pa.SelfComposedDpEvent(dpa.GaussianDpEvent(3.0), 2)
    assert nested == pa.SelfComposedDpEvent(pa.GaussianDpEvent(3.0), 2) or nested.to_dict() == (
        pa.SelfComposedDpEvent(pa.GaussianDpEvent(3.0), 2).to_dict()
    )
    with pytest.raises(privfed.UnsupportedEvent, match="RandomizedResponseDpEvent"):
        pa.RdpAccountant().compose(dpa.RandomizedResponseDpEvent(0.5, 2))
    with pytest.raises(privfed.UnsupportedEvent, match="pure_dp"):
        pa.PureDpEvent(1.0).to_dp_event()
    r1 = pa.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    assert r1.neighbouring_relation == "replace_one"


def test_dp_accounting_events_are_duck_typed():
    """Converted by class name: a stand-in class from a module named dp_accounting is accepted
    without dp_accounting installed."""

    class GaussianDpEvent:
        __module__ = "dp_accounting.dp_event"

        def __init__(self, z):
            self.noise_multiplier = z

    class TreeAggregationDpEvent:
        __module__ = "dp_accounting.dp_event"

    a = pa.RdpAccountant().compose(GaussianDpEvent(2.0), count=3)
    assert a.ledger_runs == [(pa.GaussianDpEvent(2.0), 3)]
    with pytest.raises(privfed.UnsupportedEvent, match="TreeAggregationDpEvent"):
        a.compose(TreeAggregationDpEvent())
    with pytest.raises(privfed.InvalidParameter, match="got object"):
        a.compose(object())


def test_error_messages_name_the_field_not_a_parser_position():
    a = pa.RdpAccountant()
    cases = [
        ({"type": "gaussian", "noise_multiplier": "a"}, "noise_multiplier"),
        ({"type": "gaussian", "noise_multiplier": math.nan}, "noise_multiplier"),
        ({"type": "gaussian"}, "noise_multiplier"),
        ({"type": "poisson_sampled", "rate": 0.1, "event": {"type": "gaussian", "noise_multiplier": [1]}},
         "noise_multiplier"),
        ({"type": "teleport"}, "teleport"),
        ('{"type": "gaussian", "noise_multiplier": nan}', "noise_multiplier"),
        ('{"type": "gaussian", "noise_multiplier": 1.0} extra', "trailing"),
    ]
    for bad, field in cases:
        with pytest.raises(privfed.InvalidParameter) as info:
            a.compose(bad)
        msg = str(info.value)
        assert field in msg or "expected value" in msg, msg
        assert "line" not in msg and "column" not in msg, msg
    with pytest.raises(privfed.InvalidParameter) as info:
        pa.GaussianDpEvent(math.nan)
    msg = str(info.value)
    assert "noise_multiplier" in msg and "line" not in msg and "column" not in msg, msg
    state = pa.RdpAccountant().state_dict()
    state["runs"] = [{"event": {"type": "gaussian", "noise_multiplier": 1.0}, "count": -1}]
    with pytest.raises(privfed.InvalidParameter) as info:
        pa.RdpAccountant().load_state_dict(state)
    msg = str(info.value)
    assert "count" in msg and "line" not in msg, msg


def test_ledger_state_dict_round_trip():
    a = pa.PldAccountant()
    events = [pa.GaussianDpEvent(3.0), pa.PureDpEvent(0.5), pa.PoissonSampledDpEvent(0.1, pa.LaplaceDpEvent(2.0))]
    for e in events:
        a.compose(e)
    assert a.ledger == events
    state = json.loads(json.dumps(a.state_dict()))  # JSON-serializable
    b = pa.PldAccountant()
    b.load_state_dict(state)
    assert b.ledger == events and b.get_epsilon(DELTA) == a.get_epsilon(DELTA)
    with pytest.raises(privfed.InvalidParameter, match="accountant"):
        pa.RdpAccountant().load_state_dict(state)
    with pytest.raises(privfed.InvalidParameter, match="discretization"):
        pa.PldAccountant(value_discretization_interval=1e-3).load_state_dict(state)
    r = pa.RdpAccountant(orders=[2.0, 4.0, 8.0])
    r.compose(events[0])
    r2 = pa.RdpAccountant(orders=[2.0, 4.0, 8.0])
    r2.load_state_dict(r.state_dict())
    assert r2.get_epsilon(DELTA) == r.get_epsilon(DELTA)
    assert a.as_event() == pa.ComposedDpEvent(events)


def test_events_round_trip_and_validate():
    e = pa.ComposedDpEvent([
        pa.SkellamDpEvent(50.0, 4.0, 2.0),
        pa.LocalSampledDpEvent(0.3, pa.PureDpEvent(1.0)),
        pa.RdpCurveDpEvent([2.0, 8.0], [0.1, 0.5]),
        pa.DistributedDiscreteGaussianDpEvent(30.0, 40.0, 6.0, 1e-3, 64),
        pa.NoOpDpEvent(),
    ])
    assert pa.event_from_dict(json.loads(json.dumps(e.to_dict()))) == e
    with pytest.raises(privfed.InvalidParameter, match="noise_multiplier"):
        pa.GaussianDpEvent(-1.0)
    with pytest.raises(privfed.InvalidParameter):
        pa.PoissonSampledDpEvent(1.5, pa.GaussianDpEvent(1.0))
    with pytest.raises(privfed.InvalidParameter):
        pa.RdpCurveDpEvent([2.0, 1.5], [0.1, 0.2])
    with pytest.raises(privfed.InvalidParameter, match="unknown"):
        pa.event_from_dict({"type": "teleport"})
    # Dicts in the serde form are accepted wherever an event is.
    a = pa.RdpAccountant().compose({"type": "gaussian", "noise_multiplier": 2.0})
    assert a.ledger == [pa.GaussianDpEvent(2.0)]


def test_unsupported_events_change_nothing():
    a = pa.PldAccountant().compose(pa.GaussianDpEvent(2.0))
    curve = pa.RdpCurveDpEvent([2.0, 8.0], [0.1, 0.5])
    before = a.get_epsilon(DELTA)
    assert not a.supports(curve)
    with pytest.raises(privfed.UnsupportedEvent, match="pld"):
        a.compose(curve)
    assert a.get_epsilon(DELTA) == before and len(a.ledger) == 1
    assert pa.RdpAccountant().supports(curve)
    assert not pa.RdpAccountant().supports({"type": "gaussian", "noise_multiplier": -1})


def test_would_exceed_is_a_dry_run():
    a = pa.RdpAccountant()
    a.step(noise_multiplier=1.1, sample_rate=0.01, steps=1000)
    eps = a.get_epsilon(DELTA)
    assert not a.would_exceed((eps + 0.01, DELTA))
    assert a.would_exceed((eps - 0.01, DELTA))
    more = pa.SelfComposedDpEvent(pa.PoissonSampledDpEvent(0.01, pa.GaussianDpEvent(1.1)), 1000)
    assert a.would_exceed(pa.Budget(eps + 0.01, DELTA), more)
    assert a.get_epsilon(DELTA) == eps and len(a.ledger) == 1
    with pytest.raises(privfed.InvalidParameter, match="budget"):
        a.would_exceed("a lot")


def test_pure_capped_uses_the_sum_for_pure_events():
    a = pa.PureCappedRdpAccountant().compose(pa.PureDpEvent(0.1), count=3)
    assert a.get_epsilon(DELTA) <= 0.3 + 1e-12
    assert a.name == "rdp_pure_capped"


def test_query_errors_are_typed():
    a = pa.RdpAccountant().compose(pa.GaussianDpEvent(1.0))
    for bad in (0.0, 1.0, -1.0, math.nan):
        with pytest.raises(privfed.InvalidParameter):
            a.get_epsilon(bad)
    with pytest.raises(privfed.InvalidParameter):
        a.get_delta(-1.0)
    with pytest.raises(privfed.InvalidParameter):
        pa.RdpAccountant(orders=[0.5, 2.0])
    with pytest.raises(privfed.InvalidParameter, match="accountant"):
        pa.get_noise_multiplier(1.0, DELTA, 0.01, 10, accountant="moments")
    with pytest.raises(privfed.InfeasibleParameters):
        pa.get_noise_multiplier(1e-9, 1e-12, 1.0, 10**6)


def _same_json(a, b, where="event"):
    """`a == b` as JSON values, with int and float kept apart (so a count written as 3.0 or a
    rate written as 1 is drift, not equality)."""
    assert type(a) is type(b), f"{where}: {a!r} ({type(a).__name__}) vs {b!r} ({type(b).__name__})"
    if isinstance(a, dict):
        assert a.keys() == b.keys(), f"{where}: keys {sorted(a)} vs {sorted(b)}"
        for k in a:
            _same_json(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), f"{where}: {len(a)} items vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            _same_json(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def test_every_rust_event_variant_round_trips_through_the_python_classes():
    """Schema drift: Rust lists one example of every DpEvent variant (an exhaustive match makes a
    new variant fail to compile until it has one); each is rebuilt by `event_from_dict` as its own
    class, written back by `to_dict()` to the same JSON, and read back by the Rust accountant to
    the same event (its ledger)."""
    from privfed import _privfed

    examples = [json.loads(t) for t in _privfed._dp_event_examples()]
    types = [d["type"] for d in examples]
    assert len(types) == len(set(types)) and len(types) >= 11, types
    classes = set()
    for d in examples:
        ev = pa.event_from_dict(d)
        assert isinstance(ev, pa.DpEvent), d
        classes.add(type(ev).__name__)
        _same_json(ev.to_dict(), d, d["type"])
        relation = "replace_one" if d["type"] == "sampled_without_replacement" else "add_or_remove_one"
        acct = pa.RdpAccountant(neighboring_relation=relation).compose(ev)
        (back,) = acct.ledger
        _same_json(back.to_dict(), d, d["type"] + " (through the accountant)")
    # Every exported event class is the image of one Rust variant (NoOpDpEvent is a function
    # returning the empty ComposedDpEvent).
    exported = {
        n for n in pa.__all__
        if n.endswith("DpEvent") and isinstance(getattr(pa, n), type) and n != "DpEvent"
    }
    assert classes == exported, (sorted(classes), sorted(exported))


@pytest.mark.parametrize(
    "args,event,kwargs",
    [
        (
            "--accountant rdp --noise-multiplier 1.1 --sampling-rate 0.01 --steps 1000 --delta 1e-5",
            pa.GaussianDpEvent(1.1),
            dict(accountant="rdp", steps=1000, sampling_rate=0.01, delta=1e-5),
        ),
        (
            "--accountant pld --noise-multiplier 1.1 --sampling-rate 0.01 --steps 1000 --epsilon 1",
            pa.GaussianDpEvent(1.1),
            dict(accountant="pld", steps=1000, sampling_rate=0.01, epsilon=1.0),
        ),
        (
            "--accountant rdp --mechanism pure --local-epsilon 2 --sampling-rate 0.1 --steps 3 --delta 1e-9",
            pa.PureDpEvent(2.0),
            dict(accountant="rdp", steps=3, sampling_rate=0.1, delta=1e-9),
        ),
    ],
)
def test_account_report_is_the_cli_report(cli, args, event, kwargs):
    """`privfed.accounting.account` returns the report `privfed account --json` prints: the same
    keys in the same order and the same values (one library function behind both)."""
    want = cli("account", *args.split(), "--json")
    got = pa.account(event, **kwargs)
    assert list(got) == list(want)
    assert got == want


def test_calibrate_report_is_the_cli_report(cli):
    want = cli(
        "calibrate", *"--accountant rdp --mechanism laplace --target-epsilon 2 --delta 1e-5 --steps 10 --json".split()
    )
    got = pa.calibrate("laplace", accountant="rdp", target_epsilon=2.0, delta=1e-5, steps=10)
    assert list(got) == list(want) and got == want
    assert got["scale"] == got["parameter"]
    with pytest.raises(privfed.InvalidParameter):
        pa.calibrate("skellam", accountant="rdp", target_epsilon=2.0, delta=1e-5, steps=10)
    with pytest.raises(privfed.InvalidParameter):
        pa.account(pa.GaussianDpEvent(1.0), 1, accountant="rdp")


ANALYSES = [
    ("ddml --local-epsilon 2 --instances 10 --updates 100",
     lambda: pa.draw_and_discard_analysis(2.0, 10, 100)),
    ("ddml --local-epsilon 0.5 --instances 3 --updates 4 --delta-t 1e-3",
     lambda: pa.draw_and_discard_analysis(0.5, 3, 4, delta_t=1e-3)),
    ("reconstruction --dimension 10 --threshold 0.5 --epsilon 1",
     lambda: pa.reconstruction_analysis(10, 0.5, epsilon=1.0)),
    ("reconstruction --dimension 100 --threshold 0.3 --target-bound 0.01",
     lambda: pa.reconstruction_analysis(100, 0.3, target_bound=0.01)),
    ("gaussian --epsilon 1 --delta 1e-5 --sensitivity 2",
     lambda: pa.analytic_gaussian_analysis(1.0, 1e-5, sensitivity=2.0)),
    ("epsilon-vs-noise --sigmas 0.8,3 --scale 16 --clients 10 --steps 3 --delta 1e-6",
     lambda: pa.epsilon_vs_noise([0.8, 3.0], scale=16, clients=10, steps=3, delta=1e-6)),
    # The defaults (scale, clients, steps, delta left out on both sides) are the same ones.
    ("epsilon-vs-noise --sigmas 0.8,3",
     lambda: pa.epsilon_vs_noise([0.8, 3.0])),
]


@pytest.mark.parametrize("args,call", ANALYSES, ids=[a.split()[0] + str(i) for i, (a, _) in enumerate(ANALYSES)])
def test_analysis_reports_are_the_cli_reports(cli, args, call):
    """Each `privfed analyze ... --json` report is what `privfed.accounting`'s function of the
    same analysis returns: the same keys in the same order and the same numbers (one library
    function behind both)."""
    want = cli("analyze", *args.split(), "--json")
    got = call()
    assert list(got) == list(want)
    assert got == want


def test_analysis_errors():
    with pytest.raises(privfed.InvalidParameter, match="target_bound"):
        pa.reconstruction_analysis(10, 0.5, epsilon=1.0, target_bound=0.1)
    with pytest.raises(privfed.InvalidParameter, match="target_bound"):
        pa.reconstruction_analysis(10, 0.5)
    with pytest.raises(privfed.InvalidParameter):
        pa.draw_and_discard_analysis(1.0, 0, 10)
    with pytest.raises(privfed.InvalidParameter):
        pa.analytic_gaussian_analysis(1.0, 2.0)
    with pytest.raises(privfed.InvalidParameter, match="noise levels"):
        pa.epsilon_vs_noise([0.0])


# ---------------------------------------------------------------- step(): counted runs
# A run of bare step() calls with the same event is counted in Python and composed in Rust (one
# `steps=count` call) before any other method runs. Each row reads or changes the accountant;
# it must see exactly what it sees on an accountant stepped the slow way (the steps handed to
# Rust with an explicit `steps=`), and differ from one that lost the counted steps (so the row
# can fail).
Z1, Q1 = 1.1, 0.01


def _step_rows(make):
    # a budget halfway between ε of the full ledger and of one that lost the counted steps
    budget = ((_slow(make, 5).get_epsilon(DELTA) + _slow(make, 1).get_epsilon(DELTA)) / 2, DELTA)
    rows = {
        "get_epsilon": lambda a: a.get_epsilon(DELTA),
        "get_epsilon(delta=)": lambda a: a.get_epsilon(delta=DELTA),
        "get_delta": lambda a: a.get_delta(1.0),
        "would_exceed": lambda a: a.would_exceed(budget),
        "would_exceed(event)": lambda a: a.would_exceed(budget, pa.GaussianDpEvent(50.0)),
        "ledger": lambda a: a.ledger,
        "ledger_runs": lambda a: a.ledger_runs,
        "len": len,
        "as_event": lambda a: a.as_event(),
        "state_dict": lambda a: a.state_dict(),
        "repr": repr,
        "compose": lambda a: a.compose(pa.GaussianDpEvent(3.0)).ledger_runs,
        "step, another event": lambda a: (a.step(noise_multiplier=2.0, sample_rate=Q1),
                                          a.ledger_runs),
        "step(steps=3), the same event": lambda a: (
            a.step(noise_multiplier=Z1, sample_rate=Q1, steps=3), a.ledger_runs),
        "load_state_dict, then a step": lambda a: (
            a.load_state_dict(make(**_kw(make)).compose(pa.GaussianDpEvent(4.0)).state_dict()),
            a.step(noise_multiplier=Z1, sample_rate=Q1), a.ledger_runs),
        "pickle": lambda a: pickle.loads(pickle.dumps(a)).state_dict(),
        "copy.copy": lambda a: copy.copy(a).state_dict(),
        "copy.deepcopy": lambda a: copy.deepcopy(a).state_dict(),
        "==": lambda a: a == _slow(make, 5),
    }
    if issubclass(make, pa.RdpAccountant):
        rows["get_privacy_spent"] = lambda a: a.get_privacy_spent(delta=DELTA)
        rows["get_privacy_spent(alphas=)"] = lambda a: a.get_privacy_spent(
            delta=DELTA, alphas=[2.0, 8.0, 32.0])
        rows["get_epsilon_and_optimal_order"] = lambda a: a.get_epsilon_and_optimal_order(DELTA)
    return rows


# A row that replaces the ledger: a lost step cannot show, counted steps left behind would.
_REPLACING_ROWS = ("load_state_dict, then a step",)
# Rows that do not depend on the ledger: they must agree, but no lost step could change them.
_STATELESS_ROWS = ("name", "neighbouring_relation", "orders", "supports")


def _kw(make):
    return {"value_discretization_interval": 1e-3} if issubclass(make, pa.PldAccountant) else {}


def _slow(make, n):
    a = make(**_kw(make)).compose(pa.LaplaceDpEvent(20.0))
    a.step(noise_multiplier=Z1, sample_rate=Q1, steps=n)
    return a


def _fast(make, n):
    a = make(**_kw(make)).compose(pa.LaplaceDpEvent(20.0))
    for _ in range(n):
        a.step(noise_multiplier=Z1, sample_rate=Q1)
    return a


ACCOUNTANTS = [pa.RdpAccountant, pa.PldAccountant, pa.PLDAccountant, pa.PureCappedRdpAccountant]


@pytest.mark.parametrize("make", ACCOUNTANTS)
def test_every_method_sees_the_counted_steps(make):
    """Five bare steps: the first is checked in Rust at once, all five are counted."""
    for name, row in _step_rows(make).items():
        fast, slow = _fast(make, 5), _slow(make, 5)
        got, want = row(fast), row(slow)
        assert got == want, (name, got, want)
        if name not in _REPLACING_ROWS:
            assert row(_slow(make, 0)) != want, f"{name}: lost steps would go unseen"
        # after the row, the accountant goes on counting
        fast.step(noise_multiplier=Z1, sample_rate=Q1)
        slow.step(noise_multiplier=Z1, sample_rate=Q1, steps=1)
        assert fast.state_dict() == slow.state_dict(), name
    for name in _STATELESS_ROWS:
        if hasattr(make, name):
            f = (lambda a: a.supports(pa.GaussianDpEvent(1.0))) if name == "supports" else (
                lambda a, n=name: getattr(a, n))
            assert f(_fast(make, 5)) == f(_slow(make, 5)), name


def test_every_native_method_is_wrapped():
    """Each public attribute of the native accountants is overridden by the Python class (it
    composes the counted steps first), so a method added in Rust cannot read a stale ledger."""
    from privfed import _privfed as native

    for py, nat in [(pa.RdpAccountant, native.RdpAccountant),
                    (pa.PldAccountant, native.PldAccountant),
                    (pa.PureCappedRdpAccountant, native.PureCappedRdpAccountant)]:
        own = [k for c in nat.__mro__ if c is not object for k in vars(c)
               if not k.startswith("__") or k in ("__len__", "__repr__")]
        for k in own:
            if k == "__new__":
                continue
            assert getattr(py, k) is not getattr(nat, k), f"{py.__name__}.{k} is not wrapped"
        assert set(own) - {"__new__"} <= set(pa._FLUSHING_METHODS) | set(
            pa._FLUSHING_PROPERTIES) | {"step"}, sorted(own)


BAD_VALUES = [
    dict(noise_multiplier=float("nan"), sample_rate=0.01),
    dict(noise_multiplier=-1.0, sample_rate=0.01),
    dict(noise_multiplier=1.1, sample_rate=1.5),
    dict(noise_multiplier=1.1, sample_rate=-0.1),
    dict(noise_multiplier="1.1", sample_rate=0.01),
    dict(noise_multiplier=1.1, sample_rate=None),
    dict(noise_multiplier=1.1, sample_rate=0.01, steps=-1),
    dict(noise_multiplier=1.1, sample_rate=0.01, steps=1.0),
]


def _native_of(make):
    from privfed import _privfed as native

    return next(c for c in make.__mro__ if c.__module__ == "privfed.accounting"
                and c in vars(native).values())


@pytest.mark.parametrize("make", ACCOUNTANTS)
@pytest.mark.parametrize("bad", BAD_VALUES, ids=lambda b: ",".join(f"{k}={v!r}" for k, v in
                                                                     b.items()))
def test_a_bad_step_raises_at_the_call_with_the_native_message(make, bad):
    """While a counted run is pending, a step with a bad value raises at that call with the
    native class's exception and message, and the counted steps are kept."""
    with pytest.raises(Exception) as want:
        _native_of(make)(**_kw(make)).step(**bad)
    a = _fast(make, 5)
    with pytest.raises(type(want.value)) as got:
        a.step(**bad)
    assert str(got.value) == str(want.value)
    assert a.state_dict() == _slow(make, 5).state_dict()
    # a bad value with the pending event's other argument: still checked
    with pytest.raises(type(want.value)):
        a.step(**{**dict(noise_multiplier=Z1, sample_rate=Q1), **bad})


def test_a_step_with_missing_or_positional_arguments_is_a_type_error_naming_them():
    a = _fast(pa.RdpAccountant, 2)
    with pytest.raises(TypeError, match="sample_rate"):
        a.step(noise_multiplier=Z1)
    with pytest.raises(TypeError, match="positional"):
        a.step(Z1, Q1)
    assert a.state_dict() == _slow(pa.RdpAccountant, 2).state_dict()


class MyAccountant(pa.RdpAccountant):
    """A user's subclass (pickled by reference: module level)."""

    def epsilon_now(self):
        return self.get_epsilon(DELTA)


@pytest.mark.parametrize("make, kw", [
    (pa.RdpAccountant, {"orders": [1.5, 2.0, 4.0, 16.0]}),
    (pa.RdpAccountant, {"neighboring_relation": "replace_one"}),
    (pa.PldAccountant, {"value_discretization_interval": 2e-3}),
    (pa.PLDAccountant, {"value_discretization_interval": 2e-3}),
    (pa.PureCappedRdpAccountant, {}),
    (MyAccountant, {}),
])
def test_accountants_pickle_and_copy_with_their_settings_and_counted_steps(make, kw):
    """Pickling, copy.copy and copy.deepcopy keep the class, the settings and the ledger
    (counted steps included); the copy is an accountant of its own. A replace-one RDP
    accountant (which refuses Poisson-sampled steps) is stepped by composing its event."""
    a = make(**kw).compose(pa.LaplaceDpEvent(20.0))
    if kw.get("neighboring_relation") == "replace_one":
        def one_step(acc):
            acc.compose(_wor(100, 10, 1.1))
    else:
        def one_step(acc):
            acc.step(noise_multiplier=Z1, sample_rate=Q1)
    for _ in range(7):
        one_step(a)
    for b in (pickle.loads(pickle.dumps(a)), copy.copy(a), copy.deepcopy(a)):
        assert type(b) is make and b == a and b is not a
        assert b.state_dict() == a.state_dict() and b.get_epsilon(DELTA) == a.get_epsilon(DELTA)
        assert [n for _, n in b.ledger_runs] == [1, 7]
        assert b.neighbouring_relation == a.neighbouring_relation
        one_step(b)  # the copy is its own accountant
        assert b != a and len(b) == len(a) + 1
    with pytest.raises(TypeError, match="unhashable"):  # value equality, mutable
        hash(a)
