"""Tests for attn_analysis.chapters.matrix: what the matrix chapter computes."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from attn_analysis.chapters import matrix as mx

T = "B32-H8-S512-D64-fp16"
S = "B32-H8-S1024-D64-fp16"


def two(rows):
    """A two-level family: (config, candidate, level, verdict, speedup) rows."""
    return pd.DataFrame([{"config": c, "candidate": n, "level": lv, "verdict": v, "speedup": sp,
                          "ci_low": sp - 0.01, "ci_high": sp + 0.01, "n_comparisons": 9}
                         for c, n, lv, v, sp in rows])


FAMILY = two([(T, "a", "call", "faster", 1.1), (T, "a", "kernel", "equivalent", 1.0),
              (T, "a", "attention", "slower", 0.9),
              (T, "b", "call", "faster", 1.2), (T, "b", "kernel", "faster", 1.2),
              (T, "b", "attention", "faster", 1.3),
              (S, "a", "call", "slower", 0.9), (S, "a", "kernel", "faster", 1.1)])


def test_level_split_tells_faster_per_call_only_from_a_faster_kernel():
    v = mx.level_split(FAMILY)
    assert v["m"] == 9 and (v["n_call_faster"], v["n_kernel_faster"]) == (2, 1)
    assert v["only_call"] == f"a at {T} (kernel level: equivalent)"
    assert v["both"] == f"b at {T}"
    assert v["n_kernel_fast_all"] == 2
    # in the pivot's order; a level the family lacks for that pair reads "nan"
    assert v["split"] == f"a at {S} is nan; b at {T} is faster"
    assert (v["n_attention"], v["n_attention_faster"]) == (2, 1)


def test_triton_values_and_the_attention_answer():
    tr = two([(T, "triton", "kernel", "faster", 1.05), (S, "triton", "kernel", "slower", 0.9),
              (T, "triton", "attention", "faster", 1.1)])
    vs_lib = pd.DataFrame({"config": [T, S], "verdict": ["faster", "inconclusive"],
                           "ratio": [0.9, 1.0], "ci_low": [0.85, 0.9], "ci_high": [0.95, 1.1],
                           "library": ["sdpa_flash", "sdpa_cudnn"]})
    v = mx.triton_values(tr, vs_lib, T)
    assert (v["k_n_faster"], v["k_n_slower"], v["k_n"], v["k_m"]) == (1, 1, 2, 9)
    assert v["beats_attention_kernel"] == T and v["n_beats_attention_kernel"] == 1
    assert v["k_target"] == 1.05 and v["target_lib"] == "sdpa_flash"
    assert (v["n_faster"], v["n_inconclusive"], v["n_slower"]) == (1, 1, 0)
    empty = mx.triton_values(pd.DataFrame(), pd.DataFrame(), T)
    assert empty["k_n"] == 0 and math.isnan(empty["k_target"]) and empty["target_lib"] == "none"
    # the counts worded for every outcome: all, none, nothing compared
    assert v["att_sentence"].endswith("beyond the margin at its one shape.")
    assert v["lib_tally"] == "1 of 2 shapes is faster and 1 inconclusive; none is equivalent or slower"
    assert empty["att_sentence"] == "It was not compared with cuDNN's attention kernel alone."
    assert empty["lib_tally"] == "no shape was compared"
    answer = mx.attention_answer(FAMILY, "lead", tr, "tr")
    assert answer.endswith(f"b at {T} (run lead); triton at {T} (run tr)")
    assert mx.attention_answer(pd.DataFrame(), "lead", pd.DataFrame(), "").startswith("no ")


def test_triton_table_joins_tuning_and_levels():
    tr = two([(T, "triton", "kernel", "faster", 1.05)])
    vs_lib = pd.DataFrame({"config": [T], "library": ["sdpa_flash"], "kernel_ms": [0.1],
                           "library_ms": [0.11], "ratio": [0.9], "speedup": [1.1],
                           "ci_low": [1.0], "ci_high": [1.2], "verdict": ["faster"]})
    tuning = pd.DataFrame({"config": [T], "BLOCK_M": [128], "num_warps": [8]})
    table, shown = mx.triton_table(vs_lib, tuning, tr)
    assert shown == ["config", "library", "speedup", "verdict", "kernel_verdict"]
    assert table.loc[T, "BLOCK_M"] == 128 and table.loc[T, "kernel_speedup_vs_sdpa"] == 1.05


def test_tuning_values_and_per_run():
    tune = pd.DataFrame({"run": ["r1", "r2", "r1"], "config": [T, T, S],
                         "BLOCK_M": [128, 64, 128], "BLOCK_N": [64, 64, 32],
                         "num_warps": [8, 4, 8], "num_stages": [2, 2, 3],
                         "n_processes": [4, 4, 4], "n_reused": [3, 2, 3],
                         "same_everywhere": [True, False, True]})
    v = mx.tuning_values(tune)
    assert (v["n_runs"], v["n_cells"], v["n_reused"], v["n_same"]) == (2, 3, 2, 2)
    assert v["differ"].startswith("B32 H8 S512") and "r2: 4 warps, 64×64, 2 stages" in v["differ"]
    per = mx.tuning_per_run(tune).set_index("run")
    assert per.loc["r1", "n_configs"] == 2 and per.loc["r1", "blocks"] == "32, 64"
    assert mx.tuning_values(tune.iloc[:0])["differ"] == "none"
    assert mx.tuning_per_run(tune.iloc[:0]).empty


def test_latest_values_at_the_target():
    latest = two([(T, "triton", "call", "faster", 1.1), (T, "triton", "kernel", "slower", 0.95),
                  (S, "triton", "call", "faster", 1.2)]).assign(run="r", device="H200")
    v = mx.latest_values(latest, T, ["r"])
    assert v["call"] == 1.1 and v["kernel_v"] == "slower" and v["attention_v"] == "not measured"
    assert (v["n_faster"], v["n"], v["runs"], v["label"]) == (2, 3, "r", "H200")
    none = mx.latest_values(pd.DataFrame(), T, [])
    assert math.isnan(none["call"]) and none["runs"] == "none" and none["label"] == "no run"


def test_leads_sentence_words_each_outcome():
    import pytest
    from attn_analysis.chapters import matrix as mx
    base = {"both": "a at x", "only_call": "b at y"}
    none = mx.leads_sentence({**base, "n_call_faster": 0, "n_kernel_faster": 0})
    assert "0 of" not in none and none.startswith("No comparison")
    assert mx.leads_sentence({**base, "n_call_faster": 3, "n_kernel_faster": 3}).startswith(
        "All 3 per-call leads")
    assert mx.leads_sentence({**base, "n_call_faster": 1, "n_kernel_faster": 1}).startswith(
        "The one per-call lead is faster")
    assert "None of the 2" in mx.leads_sentence({**base, "n_call_faster": 2,
                                                  "n_kernel_faster": 0})
    one = mx.leads_sentence({**base, "n_call_faster": 1, "n_kernel_faster": 0})
    assert "is not a faster kernel" in one
    # the memset is cuDNN's engine's (cuDNN called directly runs it too), not the dispatch's
    assert "the memset cuDNN's engine runs in SDPA's call" in one
    assert "dispatch's memset" not in one
    assert mx.leads_sentence({**base, "n_call_faster": 3, "n_kernel_faster": 1}).startswith(
        "1 of the 3")
    with pytest.raises(ValueError, match="`split`"):
        mx.leads_sentence({**base, "n_call_faster": 1, "n_kernel_faster": 2})
    with pytest.raises(ValueError, match="`split`"):
        mx.leads_sentence({})


def test_verdict_tally_never_reads_faster_at_zero():
    # the chapter once read "faster at 0, slower at 0 and undecided at 16"
    assert mx.verdict_tally(pd.Series(["inconclusive"] * 16), "shapes") == (
        "all 16 shapes are inconclusive; none is faster, equivalent or slower")
    assert mx.verdict_tally(pd.Series(["slower"] * 3 + ["inconclusive"] * 77)) == (
        "3 of 80 comparisons are slower and 77 inconclusive; none is faster or equivalent")
    assert mx.verdict_tally(pd.Series(["faster", "slower", "equivalent"])) == (
        "1 of 3 comparisons is faster, 1 equivalent and 1 slower")
    with pytest.raises(ValueError, match="`verdicts`"):
        mx.verdict_tally(pd.Series(["quicker"]))


def test_attention_sentence_words_each_outcome():
    assert mx.attention_sentence(0, 0) == "No attention kernel was compared alone."
    assert "None of its 60 comparisons shows an attention kernel faster" in \
        mx.attention_sentence(0, 60)
    assert "All 3 of its comparisons show" in mx.attention_sentence(3, 3)
    assert "1 of its 60 comparisons shows" in mx.attention_sentence(1, 60)
    assert "without the memset cuDNN's engine runs beside it." in mx.attention_sentence(1, 60)
    assert "dispatch's memset" not in mx.attention_sentence(1, 60)
    assert "0 of" not in mx.attention_sentence(0, 60)
    with pytest.raises(ValueError, match="`k` and `n`"):
        mx.attention_sentence(2, 1)
