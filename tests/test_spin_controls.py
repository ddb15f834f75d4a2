"""The sparse spin controls (``sdpa_spin<N>e<M>``), their names and catalog labels, the
cheapest-first order of spins, the float64 reference cache of the correctness gate, and the
calibration campaign's plan."""

from __future__ import annotations

import dataclasses
import importlib

import pytest
import torch

from attn_analysis import __main__ as cli
from attn_analysis import configs
from attn_analysis.analyse import catalog
from attn_analysis.configs import Config
from attn_analysis.measure import candidates as cands
from attn_analysis.measure import gate
from attn_analysis.measure import controls

SMALL = Config(2, 2, 64)


# ------------------------------------------------------------------ names and registry

def test_spin_names_and_the_control_list():
    assert controls.SPARSE_SPINS == ((1000, 3), (2000, 2))
    assert controls.spin_name(1000, 3) == "sdpa_spin1000e3"
    assert controls.spin_name(2000, 2) == "sdpa_spin2000e2"
    assert controls.spin_name(1000) == controls.spin_name(1000, 1) == "sdpa_spin1000"
    assert controls.spin_name(0) == "sdpa_spin0"
    assert controls.CONTROL_NAMES == (
        "sdpa_twin", "sdpa_spin0", "sdpa_spin1000", "sdpa_spin2500", "sdpa_spin6000",
        "sdpa_spin1000e3", "sdpa_spin2000e2")
    for name in controls.CONTROL_NAMES:
        assert name in cands.CANDIDATES


def test_the_plugin_loads_again_without_error():
    """``--plugin attn_analysis.measure.controls`` (or its old path, tests/test_plugin_paths.py)
    names the imported module; loading it again must not register the controls twice
    (``register`` refuses a repeated name)."""
    before = dict(cands.CANDIDATES)
    cands.load_plugins(["attn_analysis.measure.controls"])
    assert importlib.import_module("attn_analysis.measure.controls") is controls
    assert cands.CANDIDATES == before
    with pytest.raises(ValueError, match="already registered"):
        cands.register(cands.CANDIDATES["sdpa_spin1000e3"])


# ------------------------------------------------------------------ sparse spin behaviour

@pytest.mark.parametrize("cycles, every", controls.SPARSE_SPINS)
def test_sparse_spin_spins_only_on_every_mth_call(monkeypatch, cycles, every):
    spins = []
    monkeypatch.setattr(controls, "_spin_cpu", lambda n: spins.append(n))
    name = controls.spin_name(cycles, every)
    built = cands.build(name, SMALL, "cpu")
    # The build's own trial call (candidates._try_once) is the counter's call 0.
    assert spins == [cycles]
    q, k, v = cands.make_inputs(SMALL, "cpu", seed=5)
    spun_on = []
    for call in range(1, 7):  # calls 1..6 of the callable, after the build's call 0
        before = len(spins)
        built.fn(q, k, v)
        if len(spins) > before:
            spun_on.append(call)
    assert spun_on == [c for c in range(1, 7) if c % every == 0]
    assert spins == [cycles] * (1 + len(spun_on))


@pytest.mark.parametrize("cycles, every", controls.SPARSE_SPINS)
def test_sparse_spin_counter_starts_at_zero_for_each_build(monkeypatch, cycles, every):
    """Each build has its own counter: a second build spins on its own call 0 even when
    the first build's counter is mid-cycle."""
    spins = []
    monkeypatch.setattr(controls, "_spin_cpu", lambda n: spins.append(n))
    name = controls.spin_name(cycles, every)
    first = cands.build(name, SMALL, "cpu")
    q, k, v = cands.make_inputs(SMALL, "cpu", seed=5)
    first.fn(q, k, v)  # first's counter now at 2 (no spin: 1 % every != 0)
    assert len(spins) == 1
    cands.build(name, SMALL, "cpu")  # second build: its call 0 spins
    assert len(spins) == 2


def test_dense_spin_spins_on_every_call(monkeypatch):
    spins = []
    monkeypatch.setattr(controls, "_spin_cpu", lambda n: spins.append(n))
    built = cands.build("sdpa_spin2500", SMALL, "cpu")
    q, k, v = cands.make_inputs(SMALL, "cpu", seed=5)
    for _ in range(4):
        built.fn(q, k, v)
    assert spins == [2500] * 5  # the build's call and four more


@pytest.mark.parametrize("name", ["sdpa_spin1000e3", "sdpa_spin2000e2"])
def test_sparse_spin_output_is_sdpas_and_info_records_the_spin(name):
    cycles, every = catalog.spin_spec(name)
    built = cands.build(name, SMALL, "cpu")
    base = cands.build("sdpa", SMALL, "cpu")
    q, k, v = cands.make_inputs(SMALL, "cpu", seed=7)
    ref = base.fn(q, k, v)
    for _ in range(every + 1):  # calls with and without the spin
        assert torch.equal(built.fn(q, k, v), ref)
    assert built.info["spin_cycles"] == cycles
    assert built.info["spin_every_calls"] == every
    assert built.info["spin_kernel"] == "host busy wait (ns)"
    assert built.info["meta"]["origin"] == "control"
    assert built.info["layout"] == "BHSD"


@pytest.mark.parametrize("name", ["sdpa_spin1000e3", "sdpa_spin2000e2"])
def test_sparse_spins_pass_the_correctness_gate_on_cpu(name):
    built = cands.build(name, SMALL, "cpu")
    result = cands.check(built, SMALL, "cpu", seed=3, name=name)
    assert result.passed, result.reason
    assert result.candidate == name and result.config == SMALL.key
    assert 0 < result.rel_error < result.threshold and result.nonfinite == 0


# ------------------------------------------------------------------ catalog

@pytest.mark.parametrize("name, spec", [
    ("sdpa_spin1000e3", (1000, 3)), ("sdpa_spin2000e2", (2000, 2)), ("sdpa_spin0", (0, 1)),
    ("sdpa_spin6000", (6000, 1)), ("sdpa_spin1000e1", (1000, 1)),
    ("sdpa_twin", None), ("sdpa", None), ("sdpa_spin", None), ("sdpa_spin1000e", None),
    ("xsdpa_spin1000", None), ("sdpa_spin1000e3x", None), ("sdpa_spin-5", None),
    ("sdpa_spin1000e0", None), ("sdpa_spin1000e03", None), (None, None), (1000, None),
])
def test_spin_spec(name, spec):
    assert catalog.spin_spec(name) == spec


def test_spin_order_is_cheapest_first_then_sparser_first():
    names = ["sdpa_spin1000", "sdpa_spin2000e2", "sdpa_spin1000e3", "sdpa_spin0"]
    assert sorted(names, key=catalog.spin_order) == [
        "sdpa_spin0", "sdpa_spin1000e3", "sdpa_spin2000e2", "sdpa_spin1000"]
    assert catalog.spin_order("sdpa_spin1000e3") == pytest.approx((1000 / 3, -3))
    assert catalog.spin_order("sdpa_spin2000e2") == (1000.0, -2)
    assert catalog.spin_order("sdpa_spin1000") == (1000.0, -1)
    # every control the plugin registers sorts; the dense spins in cycle order
    spins = [n for n in controls.CONTROL_NAMES if catalog.spin_spec(n)]
    assert sorted(spins, key=catalog.spin_order) == [
        "sdpa_spin0", "sdpa_spin1000e3", "sdpa_spin2000e2", "sdpa_spin1000", "sdpa_spin2500",
        "sdpa_spin6000"]


def test_calibration_plan_spins_sort_as_the_audit_sorts_them():
    """audit.calibration_runs_iv keeps the candidates that are spins, sorted by spin_order."""
    plan = configs.CALIBRATION_PLANS["calibration-v3"]
    spins = sorted([c for c in plan["candidates"] if catalog.spin_spec(c)],
                   key=catalog.spin_order)
    assert spins == ["sdpa_spin1000e3", "sdpa_spin2000e2", "sdpa_spin1000"]


def test_meta_for_labels_spin_controls():
    sparse = catalog.meta_for("sdpa_spin1000e3")
    assert sparse.label == "SDPA + 1000-cycle spin every 3 calls"
    assert sparse.origin == "control" and sparse.family == catalog.SDPA_DEFAULT_FAMILY
    assert sparse.kernel_pattern == ""
    dense = catalog.meta_for("sdpa_spin0")
    assert dense.label == "SDPA + 0-cycle spin"
    assert dense.origin == "control" and dense.family == catalog.SDPA_DEFAULT_FAMILY
    assert catalog.meta_for("sdpa_spin2000e2").label == "SDPA + 2000-cycle spin every 2 calls"
    # the registered candidates carry the same labels
    assert cands.CANDIDATES["sdpa_spin1000e3"].meta == sparse
    assert catalog.meta_for("sdpa_spin1000e3x").origin == "ours"  # not a spin name


# ------------------------------------------------------------------ reference cache

@pytest.fixture
def counted_reference(monkeypatch):
    """The gate's reference wrapped to count its calls, with an empty reference cache."""
    calls = []
    real = gate.reference

    def counting(q, k, v, causal, *args, **kwargs):
        calls.append((tuple(q.shape), causal))
        return real(q, k, v, causal, *args, **kwargs)
    monkeypatch.setattr(gate, "reference", counting)
    monkeypatch.setattr(gate, "_last_reference", {})
    return calls


def test_reference_is_computed_once_per_seed_and_configuration(counted_reference):
    sdpa = cands.build("sdpa", SMALL, "cpu")
    spin = cands.build("sdpa_spin1000e3", SMALL, "cpu")
    r1 = cands.check(sdpa, SMALL, "cpu", seed=11, name="sdpa")
    r2 = cands.check(spin, SMALL, "cpu", seed=11, name="sdpa_spin1000e3")
    assert len(counted_reference) == 1
    assert r1.passed and r2.passed
    assert r1.rel_error == r2.rel_error  # same output, same (cached) reference
    cands.check(sdpa, SMALL, "cpu", seed=12, name="sdpa")  # another seed: recomputed
    assert len(counted_reference) == 2
    cands.check(spin, SMALL, "cpu", seed=12, name="sdpa_spin1000e3")  # cached again
    assert len(counted_reference) == 2
    cands.check(sdpa, SMALL, "cpu", seed=11, name="sdpa")  # one entry held: recomputed
    assert len(counted_reference) == 3
    assert len(gate._last_reference) == 1


def test_reference_cache_is_keyed_by_configuration_and_layout(counted_reference):
    causal = Config(2, 2, 64, causal=True)
    cands.check(cands.build("sdpa", SMALL, "cpu"), SMALL, "cpu", seed=1)
    r = cands.check(cands.build("sdpa", causal, "cpu"), causal, "cpu", seed=1)
    assert len(counted_reference) == 2 and counted_reference[-1][1] is True
    assert r.passed, r.reason  # a stale non-causal reference would fail the causal output
    bshd = dataclasses.replace(cands.build("sdpa", causal, "cpu"), layout="BSHD")
    r = cands.check(bshd, causal, "cpu", seed=1)
    assert len(counted_reference) == 3
    assert r.passed, r.reason  # the BSHD inputs' own reference, not the BHSD one


def test_cached_reference_gives_the_results_of_a_fresh_one(monkeypatch):
    """A check after the cache holds another seed's reference equals a check from empty."""
    built = cands.build("sdpa", SMALL, "cpu")
    monkeypatch.setattr(gate, "_last_reference", {})
    fresh = cands.check(built, SMALL, "cpu", seed=21)
    cands.check(built, SMALL, "cpu", seed=22)
    again = cands.check(built, SMALL, "cpu", seed=21)
    assert again == fresh


# ------------------------------------------------------------------ calibration plan

def test_calibration_v3_plan():
    plan = configs.CALIBRATION_PLANS["calibration-v3"]
    assert plan["matrix"] == "fixed-v1" and plan["matrix"] in configs.MATRICES
    assert plan["trials"] == 144 and plan["modes"] == ("graph",)
    assert plan["candidates"] == ("sdpa", "sdpa_twin", "sdpa_spin1000e3", "sdpa_spin2000e2",
                                  "sdpa_spin1000")
    assert plan["plugins"] == ("attn_analysis.measure.controls",)
    for name in plan["candidates"]:
        assert name in cands.CANDIDATES
        assert "cpu" in cands.CANDIDATES[name].devices and "cuda" in cands.CANDIDATES[name].devices
    assert len(set(plan["candidates"])) == len(plan["candidates"])


def test_sweep_arguments_of_the_calibration_uses_only_its_own_plugin():
    args = configs.sweep_arguments("calibration-v3")
    assert args == ["--plugin", "attn_analysis.measure.controls", "--matrix", "fixed-v1",
                    "--trials", "144", "--modes", "graph", "--candidates", "sdpa", "sdpa_twin",
                    "sdpa_spin1000e3", "sdpa_spin2000e2", "sdpa_spin1000"]
    assert "attn_analysis.measure.peers" not in args
    parsed = cli.build_parser().parse_args(["sweep", "--out", "x", *args])
    assert parsed.plugin == ["attn_analysis.measure.controls"] and parsed.trials == 144
    assert parsed.candidates == list(configs.CALIBRATION_PLANS["calibration-v3"]["candidates"])


def test_campaign_sweep_arguments_keep_the_default_plugins():
    args = configs.sweep_arguments("target")
    plugins = [args[i + 1] for i, a in enumerate(args) if a == "--plugin"]
    assert tuple(plugins) == configs.PLUGINS


def test_unknown_campaign_is_refused_naming_the_choices():
    with pytest.raises(ValueError) as info:
        configs.sweep_arguments("calibration-v9")
    message = str(info.value)
    assert "`campaign` must be one of" in message and "'calibration-v9'" in message
    for choice in (*configs.CAMPAIGN_PLANS, *configs.CALIBRATION_PLANS):
        assert repr(choice) in message
