"""Tests of the variance decomposition: synthetic data with known components."""

from __future__ import annotations

import math
import types

import numpy as np
import pandas as pd
import pytest

from attn_analysis.analyse import design, variance

CFG = "B32-H8-S512-D64-fp16"


def make_data(sd_machine=0.01, sd_process=0.005, sd_placement=0.008, sd_replay=0.006,
              sd_kernel_placement=None, machines=4, processes=5, placements=8, samples=20,
              candidates=("sdpa",), effect=None, modes=("graph",), seed=0, base_ms=0.05):
    """Placements and samples drawn from the nested log-normal model with known SDs.

    ``processes`` may be a list (processes per machine: unbalanced). ``effect`` maps a
    candidate to a multiplicative factor on its time. The kernel time of a placement
    shares the call's machine, process and placement effects (no replay term), unless
    ``sd_kernel_placement`` gives it its own placement effect.
    """
    rng = np.random.default_rng(seed)
    per_machine = processes if isinstance(processes, list) else [processes] * machines
    effect = effect or {}
    prows, srows = [], []
    for cand in candidates:
        for mi, n_proc in enumerate(per_machine):
            m_eff = rng.normal(0, sd_machine)
            for t in range(n_proc):
                p_eff = rng.normal(0, sd_process)
                for pl in range(placements):
                    pl_eff = rng.normal(0, sd_placement)
                    k_eff = pl_eff if sd_kernel_placement is None else rng.normal(
                        0, sd_kernel_placement)
                    mu = math.log(base_ms * effect.get(cand, 1.0)) + m_eff + p_eff
                    kernel = math.exp(mu + k_eff)
                    for mode in modes:
                        x = np.exp(mu + pl_eff + rng.normal(0, sd_replay, samples))
                        key = dict(machine=f"gpu{mi}", run=f"run{mi}", config=CFG,
                                   candidate=cand, mode=mode, trial=t, placement=pl)
                        prows.append(dict(key, median_ms=float(np.median(x)),
                                          kernel_ms=kernel))
                        srows += [dict(key, sample=i, ms=float(v)) for i, v in enumerate(x)]
    return pd.DataFrame(prows), pd.DataFrame(srows)


def balanced_anova(y):
    """Classical balanced nested ANOVA (a machines, b processes, c placements, n samples)
    on a 4-D array, written out from the textbook mean squares; the reference for
    ``nested_components``."""
    a, b, c, n = y.shape
    m_pl = y.mean(axis=3)
    m_p = y.mean(axis=(2, 3))
    m_m = y.mean(axis=(1, 2, 3))
    g = y.mean()
    ms_e = ((y - m_pl[..., None]) ** 2).sum() / (a * b * c * (n - 1))
    ms_pl = n * ((m_pl - m_p[..., None]) ** 2).sum() / (a * b * (c - 1))
    ms_p = c * n * ((m_p - m_m[:, None]) ** 2).sum() / (a * (b - 1))
    ms_m = b * c * n * ((m_m - g) ** 2).sum() / (a - 1)
    return np.array([(ms_m - ms_p) / (b * c * n), (ms_p - ms_pl) / (c * n),
                     (ms_pl - ms_e) / n, ms_e])


def codes(shape):
    """Group codes of a 4-D balanced layout, flattened in C order."""
    idx = np.indices(shape).reshape(4, -1)
    return [idx[0], idx[1], idx[2]]


# --------------------------------------------------------------------------- estimator

def test_balanced_equals_textbook_anova():
    rng = np.random.default_rng(1)
    y = rng.normal(size=(3, 4, 5, 6)) + rng.normal(size=(3, 1, 1, 1)) \
        + rng.normal(size=(3, 4, 1, 1)) * 0.5
    var, estimable = variance.nested_components(y.ravel(), codes(y.shape))
    assert estimable.all()
    np.testing.assert_allclose(var, balanced_anova(y), rtol=1e-10, atol=1e-12)


def test_unbalanced_estimator_is_unbiased():
    # Henderson's method I is unbiased for any layout: average the raw (unclamped)
    # estimates over replications of an unbalanced design.
    truth = np.array([0.04, 0.02, 0.03, 0.01])
    sizes = [(0, 2), (0, 3), (1, 4), (2, 2), (2, 5)]  # (machine, processes)
    rng = np.random.default_rng(2)
    est = []
    for _ in range(400):
        ys, gm, gp, gl = [], [], [], []
        for m in range(3):
            me = rng.normal(0, math.sqrt(truth[0]))
            for p in range(sum(n for mm, n in sizes if mm == m)):
                pe = rng.normal(0, math.sqrt(truth[1]))
                for pl in range(3 + p % 2):  # placements per process differ too
                    le = rng.normal(0, math.sqrt(truth[2]))
                    k = 4
                    ys += list(me + pe + le + rng.normal(0, math.sqrt(truth[3]), k))
                    gm += [m] * k
                    gp += [p] * k
                    gl += [pl] * k
        est.append(variance.nested_components(np.array(ys), [gm, gp, gl])[0])
    est = np.array(est)
    se = est.std(axis=0) / math.sqrt(len(est))
    assert np.all(np.abs(est.mean(axis=0) - truth) < 4 * se), (est.mean(axis=0), se)


def test_groups_of_wrong_length_are_refused():
    with pytest.raises(ValueError, match="`groups` must hold one code per value"):
        variance.nested_components(np.zeros(6), [[0, 0, 1]])


# --------------------------------------------------------------------------- decompose

def test_decompose_recovers_known_components_at_both_levels():
    p, s = make_data(sd_machine=0.02, sd_process=0.01, sd_placement=0.008, sd_replay=0.006,
                     machines=16, processes=6, placements=8, samples=10, seed=3)
    d = variance.decompose(p, s).set_index("level")
    call, kern = d.loc["call"], d.loc["kernel"]
    assert call["sd_machine"] == pytest.approx(0.02, rel=0.35)
    assert call["sd_process"] == pytest.approx(0.01, rel=0.2)
    assert call["sd_placement"] == pytest.approx(0.008, rel=0.1)
    assert call["sd_replay"] == pytest.approx(0.006, rel=0.05)
    assert kern["sd_placement"] == pytest.approx(0.008, rel=0.1)
    assert kern["sd_process"] == pytest.approx(0.01, rel=0.2)
    assert math.isnan(kern["sd_replay"]) and kern["mode"] == ""
    assert (call["n_machines"], call["n_processes"], call["n_placements"],
            call["n_values"]) == (16, 96, 768, 7680)
    assert kern["n_values"] == 768
    assert call["geo_mean_ms"] == pytest.approx(0.05, rel=0.02)
    assert call["sd_total"] == pytest.approx(math.sqrt(sum(
        call[f"sd_{f}"] ** 2 for f in variance.FACTORS)))


def test_zero_process_variance_is_found_small_and_clamped_to_zero_when_negative():
    hits = 0
    for seed in range(8):
        p, s = make_data(sd_machine=0.0, sd_process=0.0, sd_placement=0.01, sd_replay=0.005,
                         machines=2, processes=6, placements=8, seed=seed)
        r = variance.decompose(p, s, levels="call").iloc[0]
        assert r["sd_process"] < 0.004  # the placement SD is 0.01
        assert r["sd_process"] >= 0 and r["sd_machine"] >= 0
        if "process" in r["clamped"]:
            hits += 1
            assert r["sd_process"] == 0.0
    assert hits >= 1  # with no process effect, some estimates come out negative


def test_one_machine_leaves_the_machine_component_not_estimable():
    p, s = make_data(machines=1, processes=6, seed=4)
    d = variance.decompose(p, s)
    assert d["sd_machine"].isna().all()
    assert d[["sd_process", "sd_placement"]].notna().all().all()


def test_kernel_level_is_one_row_per_cell_whatever_the_modes():
    p, s = make_data(modes=("graph", "per_call"), machines=2, processes=3, seed=5)
    d = variance.decompose(p, s)
    assert sorted(d.loc[d["level"] == "call", "mode"]) == ["graph", "per_call"]
    assert list(d.loc[d["level"] == "kernel", "mode"]) == [""]
    bad = p.copy()
    bad.loc[bad["mode"] == "per_call", "kernel_ms"] *= 1.1
    with pytest.raises(ValueError, match="`placements` must hold one kernel_ms per placement"):
        variance.decompose(bad, s, levels="kernel")


def test_missing_kernel_times_are_skipped():
    p, s = make_data(machines=2, processes=3, seed=6)
    p["kernel_ms"] = np.nan
    d = variance.decompose(p, s)
    assert list(d["level"]) == ["call"]


@pytest.mark.parametrize("kwargs, message", [
    (dict(levels="both"), "`levels` must be a non-empty subset of ('call', 'kernel')"),
    (dict(levels=()), "`levels` must be a non-empty subset"),
    (dict(samples=None), "`samples` must be a pandas DataFrame"),
    (dict(placements=pd.DataFrame({"run": [1]})), "`placements` must have columns"),
])
def test_decompose_refuses_bad_input_naming_the_parameter(kwargs, message):
    p, s = make_data(machines=1, processes=2, placements=2, samples=3)
    args = {"placements": p, "samples": s, **kwargs}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        variance.decompose(**args)


def test_decompose_refuses_non_positive_times():
    p, s = make_data(machines=1, processes=2, placements=2, samples=3)
    s.loc[0, "ms"] = 0.0
    with pytest.raises(ValueError, match=r"`samples\['ms'\]` must hold positive finite"):
        variance.decompose(p, s)


# --------------------------------------------------------------------------- question (a)

def test_single_placement_spread_separates_placement_from_process():
    # placement noise only: one placement per process shows a spread, the process
    # component does not, so nearly all of it is placement
    p, s = make_data(sd_machine=0.01, sd_process=0.0, sd_placement=0.01, sd_replay=0.001,
                     machines=2, processes=12, seed=7)
    a = variance.single_placement_spread(p, variance.decompose(p, s)).set_index("level")
    assert a.loc["call", "df_one_placement"] == 22
    assert a.loc["call", "sd_one_placement"] == pytest.approx(0.01, rel=0.4)
    assert a.loc["call", "share_placement"] > 0.7
    # process noise only: the one-placement spread is the process effect
    p, s = make_data(sd_machine=0.01, sd_process=0.01, sd_placement=0.0, sd_replay=0.001,
                     machines=2, processes=12, seed=8)
    a = variance.single_placement_spread(p, variance.decompose(p, s)).set_index("level")
    assert a.loc["call", "share_placement"] < 0.3
    assert a.loc["kernel", "share_placement"] < 0.3


def test_single_placement_spread_refuses_an_unrecorded_placement():
    p, s = make_data(machines=1, processes=2, placements=2, samples=3)
    with pytest.raises(ValueError, match=r"`placement` must be one of the recorded placements \[0, 1\]"):
        variance.single_placement_spread(p, variance.decompose(p, s), placement=5)


# --------------------------------------------------------------------------- question (b)

def test_speedup_by_level_finds_a_known_lead_on_each_machine():
    # no machine effect: each candidate draws its own, which would move the true ratio
    p, s = make_data(candidates=("sdpa", "fast"), effect={"fast": 1 / 1.1}, machines=2,
                     processes=6, placements=8, samples=10, sd_machine=0.0, seed=9)
    b = variance.speedup_by_level(p, s, CFG, candidate="fast", n_resamples=500)
    assert len(b) == 4 and set(b["level"]) == {"call", "kernel"}
    assert (b["n_comparisons"] == 4).all()
    assert (b["verdict"] == "faster").all()
    assert ((b["ci_low"] < 1.1) & (b["ci_high"] > 1.1)).all()


def test_speedup_by_level_sees_no_lead_where_there_is_none():
    p, s = make_data(candidates=("sdpa", "same"), machines=2, processes=5, placements=8,
                     samples=10, sd_machine=0.0, sd_process=0.001, sd_placement=0.003,
                     sd_replay=0.002, seed=10)
    b = variance.speedup_by_level(p, s, CFG, candidate="same", n_resamples=500)
    assert (b["verdict"] == "equivalent").all()


@pytest.mark.parametrize("kwargs, message", [
    (dict(config="B1-H1-S1-D64-fp16"), "`config` must be one of"),
    (dict(candidate="nope"), "`candidate` must be one of ['fast', 'sdpa']"),
    (dict(baseline="nope"), "`baseline` must be one of"),
    (dict(modes=("cold_l2",)), "`modes` must be a non-empty subset of the recorded modes"),
])
def test_speedup_by_level_refuses_bad_input(kwargs, message):
    p, s = make_data(candidates=("sdpa", "fast"), machines=1, processes=2, placements=2,
                     samples=3)
    args = {"config": CFG, "candidate": "fast", "n_resamples": 100, **kwargs}
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        variance.speedup_by_level(p, s, **args)


# --------------------------------------------------------------------------- design

ARM = {"sd_process": 0.004, "sd_placement": 0.008, "sd_replay": 0.01}


def test_log_speedup_se_formula():
    se = design.log_speedup_se(ARM, ARM, processes=2, placements=8, samples=20)
    one = 0.004 ** 2 / 2 + 0.008 ** 2 / 16 + 0.01 ** 2 / 320
    assert se == pytest.approx(math.sqrt(2 * one))
    kernel = dict(ARM, sd_replay=float("nan"))
    assert design.log_speedup_se(kernel, kernel, 2, 8, 20) == pytest.approx(
        math.sqrt(2 * (0.004 ** 2 / 2 + 0.008 ** 2 / 16)))
    assert design.log_speedup_se(ARM, ARM, 2, 16, 20) < se


def test_cheapest_design_matches_brute_force():
    kw = dict(process_overhead_s=30.0, placement_s=0.5, samples=20)
    target = 0.004
    d = design.cheapest_design(ARM, ARM, target, **kw)
    grid = [(p * (30.0 + 2 * m * 0.5), p, m) for p in range(2, 65) for m in range(1, 65)
            if design.log_speedup_se(ARM, ARM, p, m, 20) <= target]
    cost, p, m = min(grid)
    assert (d.processes, d.placements, d.cost_s) == (p, m, pytest.approx(cost))
    assert d.se <= target
    assert design.cheapest_design(ARM, ARM, 1e-6, **kw) is None  # out of the grid's reach


@pytest.mark.parametrize("kwargs, message", [
    (dict(target_se=0), "`target_se` must be a finite number > 0"),
    (dict(placement_s=-1.0), "`placement_s` must be a finite number > 0"),
    (dict(process_overhead_s=float("inf")), "`process_overhead_s` must be a finite number >= 0"),
    (dict(samples=0), "`samples` must be an integer >= 1"),
    (dict(baseline={"sd_placement": 0.1}), "`baseline` must have finite sd_process"),
])
def test_cheapest_design_refuses_bad_input(kwargs, message):
    args = {"baseline": ARM, "candidate": ARM, "target_se": 0.01, "process_overhead_s": 1.0,
            "placement_s": 1.0, **kwargs}
    with pytest.raises(ValueError, match=message):
        design.cheapest_design(**args)


# --------------------------------------------------------------------------- joining runs

def fake_run(uuid_of_trial):
    p, s = make_data(machines=1, processes=len(uuid_of_trial), placements=2, samples=3)
    p, s = p.drop(columns=["machine", "run"]), s.drop(columns=["machine", "run"])
    trials = {str(t): {"gpu_uuid": u} for t, u in uuid_of_trial.items()}
    return types.SimpleNamespace(placements=p, samples=s, fingerprint={"trials": trials})


def test_stack_takes_the_machine_from_each_trials_fingerprint():
    p, s = variance.stack({"a": fake_run({0: "GPU-aaaa1111-x", 1: "GPU-aaaa1111-x"}),
                           "b": fake_run({0: "bbbb2222-y", 1: "cccc3333-z"})})
    assert set(p["run"]) == {"a", "b"}
    assert sorted(s.groupby("run")["machine"].nunique()) == [1, 2]
    assert [variance.machine_label(u) for u in sorted(set(p["machine"]))] == [
        "aaaa1111", "bbbb2222", "cccc3333"]


def test_stack_refuses_a_trial_without_gpu_uuid():
    with pytest.raises(ValueError, match=r"`runs` must record a gpu_uuid .* trials \[1\]"):
        variance.stack({"a": fake_run({0: "u", 1: None})})


def test_variance_module_does_not_import_torch():
    import ast
    import inspect
    for module in (variance, design):
        tree = ast.parse(inspect.getsource(module))
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                 for a in n.names}
        names |= {n.module.split(".")[0] for n in ast.walk(tree)
                  if isinstance(n, ast.ImportFrom) and n.module}
        assert not names & {"torch", "triton", "pathlib", "os"}


def test_documented_defaults():
    import inspect
    sb = inspect.signature(variance.speedup_by_level).parameters
    assert (sb["baseline"].default, sb["candidate"].default, sb["margin"].default) == (
        "sdpa", "eager_compiled", 0.02)
    cd = inspect.signature(design.cheapest_design).parameters
    assert (cd["samples"].default, cd["arms"].default, cd["min_processes"].default) == (20, 2, 2)
    assert inspect.signature(variance.decompose).parameters["levels"].default == ("call", "kernel")


def test_speedup_by_level_gives_the_intervals_of_the_runs_family_in_the_fixed_shape_chapter():
    """The variance chapter's rows for a target run are the fixed-shape chapter's rows of
    the same comparisons, when given that run's family size (one family, one interval)."""
    from pathlib import Path

    from attn_analysis.analyse import comparisons
    from attn_analysis import record
    from attn_analysis.configs import TARGET
    run = record.load(Path(__file__).resolve().parents[1] / "data/runs/h200-target-p2-m1")
    fam = comparisons.target_family(run, TARGET.key)
    m = int(fam["n_comparisons"].iloc[0])
    places, samples = variance.stack({run.run_id: run})
    spd = variance.speedup_by_level(places, samples, TARGET.key, candidate="eager_compiled",
                                    n_comparisons={u: m for u in set(places["machine"])})
    mine = fam[fam["candidate"] == "eager_compiled"]
    for r in spd.itertuples():
        row = mine[(mine["level"] == r.level)
                   & ((mine["mode"] == r.mode) if r.level == "call" else True)].iloc[0]
        assert (r.speedup, r.ci_low, r.ci_high) == pytest.approx(
            (row["speedup"], row["ci_low"], row["ci_high"]), rel=1e-12)
        assert r.verdict == row["verdict"]
    assert len(spd) == 4  # three call-level modes and the kernel level
    with pytest.raises(ValueError, match="`n_comparisons` must give a family size for every"):
        variance.speedup_by_level(places, samples, TARGET.key, n_comparisons={})
