"""The neighbours' effect (analyse.neighbours): a control's speedup with a process on
every GPU at a time against one at a time, judged against the margin (synthetic runs)."""

import math

import numpy as np
import pandas as pd
import pytest

from attn_analysis.analyse import neighbours


def _run(shift_twin, shift_spin, processes=12, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(processes):
        shared = rng.normal(0, 0.05)
        for cand, effect in (("sdpa", 0.0), ("sdpa_twin", shift_twin),
                             ("sdpa_spin1000", 0.038 + shift_spin)):
            for p in range(8):
                v = math.exp(shared + effect + rng.normal(0, 0.002) + rng.normal(0, 0.001))
                rows.append(dict(config="B32-H8-S512-D64-fp16", candidate=cand, mode="graph",
                                 trial=t, placement=p, median_ms=v, kernel_ms=v))
    return pd.DataFrame(rows)


def test_no_neighbour_effect_is_called_equivalent():
    table = neighbours.neighbour_effect(_run(0, 0, seed=1), _run(0, 0, seed=2))
    assert list(table.columns) == list(neighbours.NEIGHBOUR_COLUMNS)
    assert len(table) == 4 and set(table["verdict"]) == {"equivalent"}
    spin = table[table.candidate == "sdpa_spin1000"]
    assert spin["speedup_serial"].iloc[0] == pytest.approx(math.exp(-0.038), rel=0.003)


def test_a_neighbour_effect_beyond_the_margin_is_called():
    # with neighbours the spin control is 5 % slower still: its speedup ratio is < 0.98
    table = neighbours.neighbour_effect(_run(0, 0.05, seed=3), _run(0, 0, seed=4))
    spin = table[table.candidate == "sdpa_spin1000"]
    assert set(spin["verdict"]) == {"slower"}
    assert set(table[table.candidate == "sdpa_twin"]["verdict"]) == {"equivalent"}


def test_invalid_input_names_the_parameter():
    with pytest.raises(ValueError, match="`placements`"):
        neighbours.neighbour_effect(_run(0, 0), _run(0, 0), controls=("nope",))
    with pytest.raises(ValueError, match="`controls`"):
        neighbours.neighbour_effect(_run(0, 0), _run(0, 0), controls=())


def test_control_pairs_pair_each_host_by_stem():
    runs = ["h200-neighbours-v1-concurrent", "h200-neighbours-v1-serial",
            "h200x2-neighbours-v1-serial", "h200x2-neighbours-v1-concurrent",
            "h100-neighbours-v1-concurrent", "h200-powered-v1-reports"]
    assert neighbours.control_pairs(runs) == [
        ("h200-neighbours-v1-concurrent", "h200-neighbours-v1-serial"),
        ("h200x2-neighbours-v1-concurrent", "h200x2-neighbours-v1-serial")]
    assert neighbours.control_pairs([]) == []
