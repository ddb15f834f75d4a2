"""chapters.powered: verdict counts, the inconclusive share, the plan's timing and the
neighbours sentence, on synthetic tables with known answers."""

import pandas as pd
import pytest

from attn_analysis.chapters import powered as pw


def _table():
    v = ["slower", "equivalent", "inconclusive", "faster", "slower", "equivalent"]
    return pd.DataFrame({"config": ["A"] * 3 + ["B"] * 3, "candidate": ["x", "y", "z"] * 2,
                         "level": ["call", "kernel", "attention", "call", "kernel", "call"],
                         "speedup": 1.0, "ci_low": 0.99, "ci_high": 1.01, "verdict": v})


def test_counts_cover_call_and_kernel_levels_only():
    c = pw.verdict_counts(_table())
    assert c["total"] == 5 and "inconclusive" not in c and c["slower"] == 2
    assert pw.counts_sentence(c).startswith("Of 5 comparisons, 2 slower")
    assert pw.inconclusive_share({"inconclusive": 1, "slower": 3, "total": 4}) == 0.25
    with pytest.raises(ValueError, match="`table`"):
        pw.verdict_counts(_table().query("level == 'attention'"))


def test_plan_sentence_orders_commit_and_first_entry_and_claims_nothing_without_git():
    row = {"run": "r", "plan_committed_utc": "2026-11-28T06:30:02+00:00",
           "first_entry_utc": "2026-11-28T06:44:25+00:00"}
    assert "before its first process" in pw.plan_sentence(row)
    assert "after" in pw.plan_sentence({**row, "plan_committed_utc": "2026-11-28T07:00:00+00:00"})
    assert "does not claim" in pw.plan_sentence({**row, "plan_committed_utc": None})


def test_neighbours_sentence_follows_the_verdicts():
    e = pd.DataFrame({"candidate": ["sdpa_twin"], "level": ["call"], "ratio": [0.999],
                      "ci_low": [0.996], "ci_high": [1.001], "processes_concurrent": [12],
                      "processes_serial": [12], "verdict": ["equivalent"]})
    assert pw.neighbours_sentence(e, 0.02).startswith("Neighbours do not move")
    assert pw.neighbours_sentence(e.assign(verdict="inconclusive"), 0.02).startswith(
        "Neighbours are not shown")


def test_speedup_display_has_one_column_per_level():
    d = pw.speedup_display(_table())
    assert {"call", "kernel"} <= set(d.columns) and "attention" not in d.columns
