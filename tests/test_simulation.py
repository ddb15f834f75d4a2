"""The simulation that chose the interval: seeded, reproducible, fed by the recorded runs'
variance components, and the recorded result (data/simulations) still what the code gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attn_analysis import record
from attn_analysis.analyse import simulation, stats, variance
from attn_analysis.configs import TARGET

ROOT = Path(__file__).resolve().parents[1]
CSV = ROOT / "data" / "simulations" / "interval_coverage.csv"
DECOMPOSITION_RUNS = ("h200-decomp-p2-m1", "h200-decomp-p2-m2")  # as scripts/simulate_intervals


@pytest.fixture(scope="module")
def recorded():
    return pd.read_csv(CSV)


def test_draws_are_reproducible_and_the_effect_is_a_shift():
    sc = simulation.Scenario("x", 0.0, 0.0, 0.0, placements=2, samples=3)
    a = simulation.simulate_pair(np.random.default_rng([1, 2]), sc, 2, 0.02)
    b = simulation.simulate_pair(np.random.default_rng([1, 2]), sc, 2, 0.02)
    for u, v in zip(a, b):
        for p, q in zip(u, v):
            for x, y in zip(p, q):
                np.testing.assert_array_equal(x, y)
    base, cand = a  # no noise at all: every candidate time is 1.02 x the baseline's
    np.testing.assert_allclose(cand[0][0] / base[0][0], 1.02)


def test_a_scenario_validates_itself():
    with pytest.raises(ValueError, match="`rho` must be a number in"):
        simulation.Scenario("x", 0.1, 0.1, 0.1, rho=2)
    with pytest.raises(ValueError, match="`sd_process` must be a finite number >= 0"):
        simulation.Scenario("x", -0.1, 0.1, 0.1)
    with pytest.raises(ValueError, match="`level` must be one of"):
        simulation.Scenario("x", 0.1, 0.1, 0.1, level="host")


@pytest.mark.parametrize("kwargs, match", [
    (dict(processes=(1, 2)), r"`processes` must be integers >= 2"),
    (dict(methods=("t",)), r"`methods` must be drawn from"),
    (dict(n_reps=0), r"`n_reps` must be a positive integer"),
    (dict(n_resamples=10), r"`n_resamples` must be an integer >= 100"),
])
def test_interval_study_refuses_bad_arguments(kwargs, match):
    sc = simulation.Scenario("x", 0.001, 0.001, 0.001)
    with pytest.raises(ValueError, match=match):
        simulation.interval_study(sc, **kwargs)


def test_a_small_study_separates_the_honest_interval_from_the_bootstrap():
    """Two processes with a 0.6 % process effect per arm: the t-interval covers, the
    hierarchical bootstrap does not (a few seconds: small samples, 300 runs)."""
    sc = simulation.Scenario("big process", 0.006, 0.003, 0.003, placements=3, samples=3)
    study = simulation.interval_study(sc, processes=(2,), methods=("process-t", "bootstrap"),
                                      n_reps=300, n_resamples=200, seed=1)
    ok = simulation.honest(study)
    assert ok["process-t"] and not ok["bootstrap"]
    assert list(study.columns) == list(simulation.COLUMNS)


def test_the_recorded_scenarios_are_the_recorded_runs_components(recorded):
    runs = {r: record.load(ROOT / "data" / "runs" / r) for r in DECOMPOSITION_RUNS}
    want = simulation.scenarios_from(variance.decompose(*variance.stack(runs)), TARGET.key)
    got = recorded.drop_duplicates("scenario").set_index("scenario")
    assert list(got.index) == [s.name for s in want]
    for s in want:
        row = got.loc[s.name]
        assert (row["sd_process"], row["sd_placement"], row["sd_replay"], row["rho"]) == \
            pytest.approx((s.sd_process, s.sd_placement, s.sd_replay, s.rho), rel=1e-5)
        assert (row["placements"], row["samples"], row["level"]) == (
            s.placements, s.samples, s.level)


@pytest.mark.slow  # several seconds of simulation
def test_the_recorded_study_reproduces_and_chose_the_interval_compare_uses(recorded):
    """One recorded cell recomputed from the code and seed in the README (kernel level,
    two processes: one sample per placement keeps it quick), and the choice it supports."""
    runs = {r: record.load(ROOT / "data" / "runs" / r) for r in DECOMPOSITION_RUNS}
    sc = simulation.scenarios_from(variance.decompose(*variance.stack(runs)), TARGET.key)[1]
    cell = recorded[(recorded["scenario"] == sc.name) & (recorded["processes"] == 2)]
    fast = ("process-t", "welch", "hybrid")
    again = simulation.interval_study(sc, processes=(2,), methods=fast,
                                      n_reps=int(cell["n_reps"].iloc[0]), seed=20240622)
    mine = cell.set_index("method").loc[list(fast)]
    for col in ("covered", "aa_claims", "slower"):
        assert list(again[col]) == list(mine[col])
    ok = simulation.honest(recorded)
    assert ok[stats.DEFAULT_INTERVAL] and not ok["bootstrap"]
    assert set(ok.index) == set(simulation.METHODS) and int(recorded["n_reps"].min()) >= 1000
