"""Tests for attn_analysis.chapters.fixed_shape: what the fixed-shape chapter computes."""

from __future__ import annotations

import types

import numpy as np
import pandas as pd
import pytest

from attn_analysis.chapters import fixed_shape as fx

CONFIG = "B32-H8-S512-D64-fp16"


def family(m=12, modes=("graph", "per_call")):
    rows = [{"candidate": "a", "level": "call", "mode": mo, "n_comparisons": m} for mo in modes]
    rows.append({"candidate": "a", "level": "kernel", "mode": "graph", "n_comparisons": m})
    return pd.DataFrame(rows)


def two_level():
    rows = []
    for cand, call, kernel in (("sdpa_twin", 1.0, 1.001), ("triton", 1.10, 0.95)):
        for level, sp in (("call", call), ("kernel", kernel)):
            rows.append({"candidate": cand, "level": level, "speedup": sp, "ci_low": sp - 0.01,
                         "ci_high": sp + 0.01, "verdict": "faster" if sp > 1.05 else "slower",
                         "n_processes": 4, "n_placements": 32, "baseline_ms": 0.2})
    return pd.DataFrame(rows)


def test_gpu_label_lists_each_gpu_once_by_its_inventory_label():
    # outside a folder of recorded runs: the UUID block; inside: the inventory's label
    run = types.SimpleNamespace(fingerprint={"trials": {
        "0": {"gpu_uuid": "GPU-1234abcd-ffff"}, "1": {"gpu_uuid": "GPU-1234abcd-ffff"},
        "2": {}}})
    assert fx.gpu_label(run) == "1234abcd, unknown"
    from attn_analysis.analyse import inventory
    from attn_analysis.record import run as record
    recorded = record.load("data/runs/h200-target-p2-m1")
    uuid = next(iter(recorded.fingerprint["trials"].values()))["gpu_uuid"]
    assert fx.gpu_label(recorded) == inventory.gpu_label(uuid, "data/runs")


def test_family_note_names_m_the_modes_and_the_run():
    note = fx.family_note({"r1": family()}, "r1")
    assert "m = 12" in note and "graph and per_call mode" in note and "run r1" in note
    assert "graph mode" in fx.family_note({"r1": family(modes=("graph",))}, "r1")
    assert fx.family_note({}, "r2") == "95 % interval (one comparison, no family)"


def test_two_level_table_puts_both_levels_side_by_side():
    t = fx.two_level_table(two_level())
    assert list(t.columns) == ["candidate", "call speedup (×)", "call verdict",
                               "kernel speedup (×)", "kernel verdict"]
    row = t.set_index("candidate").loc["triton"]
    assert row["call speedup (×)"] == "1.100 (1.090–1.110)" and row["kernel verdict"] == "slower"


def test_run_values_quote_each_candidate_at_each_level():
    v = fx.run_values(two_level(), "1")
    assert (v["procs1"], v["places1"], v["sdpa_us1"]) == (4, 8, pytest.approx(200.0))
    assert v["triton_call1"] == 1.10 and v["triton_kernel1_v"] == "slower"
    assert v["sdpa_twin_kernel1_lo"] == pytest.approx(0.991)
    assert not any(k.startswith("eager_compiled") for k in v)  # not in the run: no key


def test_twin_sentence_and_k_range():
    t = two_level().query("level == 'call'").set_index("candidate")
    assert fx.twin_sentence(t).startswith("the A/A twin (the default dispatch built")
    assert fx.twin_sentence(t, explain=False) == (
        "the A/A twin is slower, speedup 1.000 (family-wise interval 0.990–1.010)")
    assert fx.twin_sentence(t.drop(index="sdpa_twin")) == "the run has no A/A twin"
    assert fx.k_range(pd.DataFrame({"k_min": [2, 3], "k_max": [5, 4]})) == "2–5"
    assert fx.k_versus("1–21", "1–21") == "k = 1–21 calls per replay, as the lead run did"
    assert fx.k_versus("1–9", "1–21") == "k = 1–9 calls per replay, against 1–21 in the lead run"
    with pytest.raises(ValueError, match="`lead`"):
        fx.k_versus("1–9", "")


def test_replication_join_keeps_the_common_candidates_without_the_baseline():
    cols = {"speedup": [1.0, 1.1, 0.9], "ci_low": [0.99, 1.0, 0.8], "ci_high": [1.01, 1.2, 1.0],
            "verdict": ["equivalent", "faster", "inconclusive"]}
    lead = pd.DataFrame(cols, index=["sdpa", "a", "b"])
    rep = pd.DataFrame(cols, index=["sdpa", "a", "c"])
    k = pd.DataFrame({"k_min": [1, 2, 2], "k_max": [1, 2, 3]}, index=["sdpa", "a", "b"])
    both = fx.replication_join(lead, rep, k, k)
    assert list(both.index) == ["a"]
    assert {"speedup_lead", "speedup_replication", "k_min_lead", "k_max_replication"} <= \
        set(both.columns)
    short = fx.replication_table(both)
    assert list(short.columns) == ["candidate", "speedup_lead", "verdict_lead", "k_lead",
                                   "speedup_replication", "verdict_replication",
                                   "k_replication"]
    assert short["k_lead"].tolist() == ["2"]


def test_reports_side_by_side_joins_their_statistics_with_our_verdict():
    rng = np.random.default_rng(0)
    rows = [{"config": CONFIG, "candidate": c, "mode": "graph", "ms": x}
            for c, scale in (("sdpa", 1.0), ("a", 0.9)) for x in rng.lognormal(0, 0.01, 50)
            * scale]
    ours = pd.DataFrame({"ci_low": [1.1], "ci_high": [1.12], "verdict": ["faster"]},
                        index=["a"])
    table, protocol = fx.reports_side_by_side(pd.DataFrame(rows), CONFIG, "graph", ours)
    assert list(table.index) == [fx.REPORTS_SAME, "sdpa vs a"]
    assert protocol[fx.REPORTS_SAME].speedup == 1.0 and protocol[fx.REPORTS_SAME].p_value == 1.0
    assert table.loc["sdpa vs a", "our_verdict"] == "faster"
    assert np.isnan(table.loc[fx.REPORTS_SAME, "our_ci_low"])


def test_graph_check_table_in_microseconds():
    check = {"fingerprint": {"gpu_name": "G", "torch_version": "2.x"},
             "recaptures": {"sdpa": [0.010, 0.012, 0.011]},
             "device_timeline": {"sdpa": {"span_us_per_call": 9.0, "busy_us_per_call": 8.0,
                                          "kernels_per_replay": 8}}}
    table, label = fx.graph_check_table(check)
    assert label == "G, torch 2.x"
    row = table.loc["sdpa"]
    assert (row["captures"], row["min_us"], row["median_us"], row["max_us"]) == \
        (3, pytest.approx(10.0), pytest.approx(11.0), pytest.approx(12.0))
    assert row["kernels_per_call"] == 2.0


def test_reports_sentence_words_each_outcome():
    import pytest
    from attn_analysis.chapters.fixed_shape import reports_sentence
    s = reports_sentence(3, 0, 2)
    assert "3 pairs significantly different" in s and "None of the 2 pairs" in s
    assert "0 of" not in s
    assert reports_sentence(0, 0, 0) == ("On real pairs the reports' test calls no "
                                         "difference significant. "
                                         "Our interval shows no pair equivalent within the "
                                         "margin.")
    assert "2 of the 2 pairs" in reports_sentence(5, 2, 2) and "are among them" in \
        reports_sentence(5, 2, 2)
    assert "The one pair" in reports_sentence(1, 0, 1)
    named = reports_sentence(3, 0, 2, names=["eager_compiled", "sdpa_cudnn"])
    assert "None of the 2 pairs (eager_compiled, sdpa_cudnn) our interval" in named
    assert "The one pair (a) our" in reports_sentence(1, 0, 1, names=["a"])
    with pytest.raises(ValueError, match="`names`"):
        reports_sentence(3, 0, 2, names=["a"])
    with pytest.raises(ValueError, match="`n_sig_equivalent`"):
        reports_sentence(1, 2, 2)
    with pytest.raises(ValueError, match="`n_equivalent`"):
        reports_sentence(1, 0, -1)


def _two_level(call: dict, kernel: dict | None) -> pd.DataFrame:
    rows = [{"candidate": c, "level": "call", "verdict": v} for c, v in call.items()]
    rows += [{"candidate": c, "level": "kernel", "verdict": v}
             for c, v in (kernel or {}).items()]
    return pd.DataFrame(rows)


def test_answer_sentence_reads_right_for_every_outcome():
    none = _two_level({"triton": "slower", "flex": "equivalent"},
                      {"triton": "slower", "flex": "equivalent"})
    both = _two_level({"triton": "faster"}, {"triton": "faster"})
    call_only = _two_level({"triton": "faster", "flex": "slower"},
                           {"triton": "inconclusive", "flex": "slower"})
    # the same outcome on two GPUs is said once, naming both, never "On H200-a: no: no ..."
    text = fx.answer_sentence({"H200-a": none, "H200-b": none}, 0.02)
    assert text == ("On H200-a and H200-b no candidate is faster than the default dispatch "
                    "beyond the ±2% margin, per call or per kernel.")
    text = fx.answer_sentence({"H200-a": both, "H200-b": call_only}, 0.02)
    assert text == ("On H200-a triton is faster per call and per kernel (beyond the ±2% "
                    "margin). On H200-b triton is faster per call only (beyond the ±2% margin).")
    no_kernel = _two_level({"triton": "slower"}, None)
    assert "recorded no kernel times; per call no candidate is faster" in fx.answer_sentence(
        {"H100-a": no_kernel}, 0.02)
    assert ": no:" not in text
    with pytest.raises(ValueError, match="`tables_by_gpu`"):
        fx.answer_sentence({}, 0.02)
    with pytest.raises(ValueError, match="`margin`"):
        fx.answer_sentence({"H200-a": none}, 2)


def test_verdict_scope_names_pytorchs_paths_and_each_custom_kernel():
    run_3_1 = ["sdpa", "sdpa_twin", "sdpa_flash", "sdpa_cudnn", "eager_compiled", "flex",
               "triton", "sdpa_spin0"]
    assert fx.verdict_scope(run_3_1) == "PyTorch's own paths and our Triton kernel"
    assert fx.verdict_scope(["sdpa", "sdpa_math"]) == "PyTorch's own paths"
    assert fx.verdict_scope(["fa4", "triton"]) == ("FlashAttention-4 (CuTe DSL) and our "
                                                   "Triton kernel")
    from attn_analysis.analyse import catalog  # what the run recorded wins over the catalog
    peer = catalog.meta_for("fa4").as_dict() | {"label": "a peer as recorded"}
    assert fx.verdict_scope(["fa4"], {"fa4": catalog.Meta.from_dict(peer)}) == \
        "a peer as recorded"
    for bad in ([], "triton", [""], ["sdpa", "sdpa_twin"]):
        with pytest.raises(ValueError, match="`candidates`"):
            fx.verdict_scope(bad)
