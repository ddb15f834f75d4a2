"""Tests of the book's table functions on small hand-built frames with known answers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from attn_analysis.analyse import (catalog, comparisons, kernel_evidence, latency_tables,
                                   provenance, reference, reports_statistics, sample_groups,
                                   stats, workload)
from attn_analysis.configs import Config

TARGET = "B32-H8-S512-D64-fp16"
SMALL = "B8-H8-S512-D64-fp16"


def make_samples(spec: dict, n: int = 40, jitter: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """Samples for {(config, candidate, mode): [trial medians]}: n values per trial."""
    rng = np.random.default_rng(seed)
    rows = []
    for (config, cand, mode), medians in spec.items():
        for trial, m in enumerate(medians):
            vals = m * (1 + jitter * rng.standard_normal(n)) if jitter else np.full(n, m)
            rows += [{"config": config, "candidate": cand, "mode": mode, "trial": trial,
                      "ms": float(v)} for v in vals]
    return pd.DataFrame(rows)


def test_latency_table_constant_trials_closed_form():
    s = make_samples({(TARGET, "sdpa", "graph"): [1.0, 1.0, 2.0]})
    t = latency_tables.latency_table(s, modes=("graph",), n_resamples=200)
    row = t.iloc[0]
    assert row["median_ms"] == 1.0  # pooled: 80 ones and 40 twos
    assert row["trial_spread"] == pytest.approx(1.0)  # max/min - 1 = 2/1 - 1
    assert row["n_trials"] == 3 and row["n_samples"] == 120
    assert 1.0 <= row["ci_high_ms"] <= 2.0 and row["ci_low_ms"] == 1.0
    assert row["seq_len"] == 512 and row["batch"] == 32


def test_latency_table_ci_modes_nan_elsewhere():
    s = make_samples({(TARGET, "sdpa", "graph"): [1.0, 1.1],
                      (TARGET, "sdpa", "per_call"): [2.0, 2.0]})
    t = latency_tables.latency_table(s, ci_modes=("graph",), n_resamples=100).set_index("mode")
    assert math.isnan(t.loc["per_call", "ci_low_ms"])
    assert not math.isnan(t.loc["graph", "ci_low_ms"])


def test_speedup_table_exact_ratio_and_verdicts():
    s = make_samples({(TARGET, "sdpa", "graph"): [2.0] * 4,
                      (TARGET, "fast", "graph"): [1.0] * 4,
                      (TARGET, "slow", "graph"): [4.0] * 4,
                      (TARGET, "same", "graph"): [2.0] * 4}, jitter=0.001)
    t = comparisons.speedup_table(s, n_resamples=300, include_baseline=True)
    t = t.set_index("candidate")
    assert t.loc["fast", "speedup"] == pytest.approx(2.0, rel=1e-2)
    assert t.loc["slow", "speedup"] == pytest.approx(0.5, rel=1e-2)
    assert t.loc["fast", "verdict"] == "faster"
    assert t.loc["slow", "verdict"] == "slower"
    assert t.loc["same", "verdict"] == "equivalent"
    assert t.loc["sdpa", "speedup"] == pytest.approx(1.0)
    r = t.loc["same"]
    assert r["resolvable_margin"] == pytest.approx(max(1 - r["ci_low"], r["ci_high"] - 1))


def test_speedup_table_skips_configs_without_baseline_and_excludes_baseline():
    s = make_samples({(TARGET, "sdpa", "graph"): [1.0, 1.0], (TARGET, "x", "graph"): [1.0, 1.0],
                      (SMALL, "x", "graph"): [1.0, 1.0]}, jitter=0.01)
    t = comparisons.speedup_table(s, n_resamples=100)
    assert list(t["config"]) == [TARGET] and list(t["candidate"]) == ["x"]


def test_fastest_table_names_the_lowest_median():
    s = make_samples({(TARGET, "sdpa", "graph"): [2.0] * 3, (TARGET, "fast", "graph"): [1.0] * 3,
                      (SMALL, "sdpa", "graph"): [1.0] * 3, (SMALL, "slow", "graph"): [3.0] * 3},
                     jitter=0.001)
    lat = latency_tables.latency_table(s, n_resamples=100, modes=("graph",))
    spd = comparisons.speedup_table(s, n_resamples=100, include_baseline=True)
    f = latency_tables.fastest_table(lat, spd).set_index("config")
    assert f.loc[TARGET, "fastest"] == "fast" and f.loc[TARGET, "established"] == "fast"
    assert f.loc[SMALL, "fastest"] == "sdpa" and f.loc[SMALL, "verdict"] == "is the baseline"
    assert f.loc[TARGET, "baseline_median_ms"] == pytest.approx(2.0, rel=1e-2)


def test_verdict_counts_has_every_verdict_column():
    spd = pd.DataFrame({"mode": ["graph"] * 3, "candidate": ["sdpa", "a", "b"],
                        "baseline": ["sdpa"] * 3, "verdict": ["inconclusive", "faster", "faster"]})
    c = comparisons.verdict_counts(spd)
    assert c.loc["graph", "faster"] == 2 and c.loc["graph", "inconclusive"] == 0
    assert list(c.columns) == [v.value for v in stats.Verdict]


def test_throughput_table_closed_forms():
    lat = pd.DataFrame({"config": [TARGET], "median_ms": [0.05], "ci_low_ms": [0.04],
                        "ci_high_ms": [0.1]})
    t = latency_tables.throughput_table(lat, {"matmul": {"tflops": 500.0}, "copy": {"gbs": 2000.0}},
                                        "NVIDIA H100 80GB HBM3").iloc[0]
    flops = 4 * 32 * 8 * 512**2 * 64
    nbytes = 4 * 32 * 8 * 512 * 64 * 2
    assert t["flops"] == flops and t["min_bytes"] == nbytes
    assert t["tflops"] == pytest.approx(flops / 0.05e-3 / 1e12)
    assert t["tflops_low"] == pytest.approx(flops / 0.1e-3 / 1e12)
    assert t["frac_matmul"] == pytest.approx(t["tflops"] / 500.0)
    assert t["eff_gbs"] == pytest.approx(nbytes / 0.05e-3 / 1e9)
    spec = workload.HARDWARE["NVIDIA H100 SXM5 80GB"]
    assert t["frac_peak_bw"] == pytest.approx(t["eff_gbs"] / spec.mem_bandwidth_gbs)
    unknown = latency_tables.throughput_table(lat).iloc[0]
    assert math.isnan(unknown["frac_matmul"]) and math.isnan(unknown["frac_peak_tflops"])


def test_sweep_table_picks_longest_slice_through_target():
    keys = [Config(32, 8, s).key for s in (128, 256, 512)] + [Config(b, 8, 512).key
                                                               for b in (8, 16)]
    df = sample_groups.with_config_fields(pd.DataFrame({"config": keys, "median_ms": range(5)}))
    assert list(latency_tables.sweep_table(df, "seq_len")["seq_len"]) == [128, 256, 512]
    assert list(latency_tables.sweep_table(df, "batch")["batch"]) == [8, 16, 32]
    with pytest.raises(ValueError, match="`axis` must be one of"):
        latency_tables.sweep_table(df, "head_dim")


def test_kernel_family_and_table():
    assert catalog.kernel_family("cudnn_generated_fort_native_sdpa_sm90") == "cuDNN attention"
    assert catalog.kernel_family("flash_fwd_kernel") == "FlashAttention-2 (PyTorch's copy)"
    assert catalog.kernel_family("something_else") == "other"
    with pytest.raises(ValueError, match="`kernel` must be a string"):
        catalog.kernel_family(3)
    k = pd.DataFrame({"config": [TARGET] * 2, "candidate": ["sdpa"] * 2,
                      "kernel": ["flash_fwd_kernel", "memset"], "calls_per_call": [1, 1],
                      "device_ms_per_call": [0.03, 0.01]})
    row = kernel_evidence.kernel_table(k).iloc[0]
    assert row["share"] == pytest.approx(0.75) and row["total_ms"] == pytest.approx(0.04)


def test_kernel_vs_library_ratio_and_tuning():
    s = make_samples({(TARGET, "sdpa", "graph"): [2.0] * 3,
                      (TARGET, "sdpa_cudnn", "graph"): [1.0] * 3,
                      (TARGET, "triton", "graph"): [1.25] * 3}, jitter=0.001)
    row = comparisons.kernel_vs_library(s, n_resamples=200).iloc[0]
    assert row["library"] == "sdpa_cudnn"
    assert row["ratio"] == pytest.approx(1.25, rel=1e-2)
    assert row["speedup"] == pytest.approx(0.8, rel=1e-2) and row["verdict"] == "slower"
    assert row["n_comparisons"] == 1
    # A second configuration makes the table a family of two: wider intervals.
    other = "B8-H8-S512-D64-fp16"
    s2 = pd.concat([s, make_samples({(other, "sdpa", "graph"): [2.0] * 3,
                                     (other, "sdpa_cudnn", "graph"): [1.0] * 3,
                                     (other, "triton", "graph"): [1.25] * 3}, jitter=0.001)])
    two = comparisons.kernel_vs_library(s2, n_resamples=200).set_index("config")
    assert set(two["n_comparisons"]) == {2}
    wide, narrow = two.loc[TARGET], row
    assert wide["ci_high"] - wide["ci_low"] >= narrow["ci_high"] - narrow["ci_low"]
    with pytest.raises(ValueError, match="`libraries` must name at least one"):
        comparisons.kernel_vs_library(s, libraries=())
    units = pd.DataFrame({"config": [TARGET, TARGET], "candidate": ["triton"] * 2,
                          "trial": [1, 0], "info": ['{"tuning": {"BLOCK_M": 64}}',
                                                    '{"tuning": {"BLOCK_M": 128}}']})
    assert provenance.tuning_table(units).iloc[0]["BLOCK_M"] == 128  # the first trial's tuning


def test_reported_latency_counts_mentions_and_marks_as_reported():
    rep = pd.DataFrame({"quantity": ["median_latency_ms"] * 3 + ["speedup"],
                        "value": [0.32, 0.32, 0.5, 1.0], "batch": [32] * 4, "heads": [8] * 4,
                        "seq_len": [512] * 4, "head_dim": [64] * 4, "dtype": ["float16"] * 4,
                        "source_file": ["a", "a", "a", "a"], "device": ["NVIDIA L4"] * 4,
                        "backend": ["flash", "flash", "memory_efficient", "flash"],
                        "status": ["as reported"] * 4})
    t = reference.reported_latency(rep)
    assert list(t["value_ms"]) == [0.32] and list(t["n_mentions"]) == [2]
    assert set(t["status"]) == {"as reported"}
    lat = pd.DataFrame({"run": ["r"], "device": ["d"], "config": [TARGET],
                        "candidate": ["sdpa"], "mode": ["graph"], "median_ms": [0.04]})
    x = reference.cross_device_table(lat, rep).iloc[0]
    assert x["l4_over_ours"] == pytest.approx(0.32 / 0.04)


def test_choose_lead():
    runs = pd.DataFrame({"run": ["cpu-big", "gpu-a", "gpu-b"], "device_kind": ["cpu", "cuda",
                                                                                "cuda"],
                         "n_units": [999, 10, 20]})
    assert provenance.choose_lead(runs) == "gpu-b"
    assert provenance.choose_lead(runs, "gpu-a") == "gpu-a"
    with pytest.raises(ValueError, match="`run` must be one of"):
        provenance.choose_lead(runs, "nope")
    with pytest.raises(ValueError, match="`runs` is empty"):
        provenance.choose_lead(runs.iloc[:0])


def test_validation_messages():
    good = make_samples({(TARGET, "sdpa", "graph"): [1.0]})
    with pytest.raises(ValueError, match="`samples` must be a pandas DataFrame"):
        latency_tables.latency_table([1, 2])
    with pytest.raises(ValueError, match=r"`samples` must have columns .*missing \['ms'\]"):
        latency_tables.latency_table(good.drop(columns="ms"))
    with pytest.raises(ValueError, match="`samples` column `ms` must hold positive finite"):
        latency_tables.latency_table(good.assign(ms=-1.0))
    with pytest.raises(ValueError, match="`modes` must be drawn from"):
        latency_tables.latency_table(good, modes=("warm",))
    with pytest.raises(ValueError, match="`n_resamples` must be a positive integer"):
        latency_tables.latency_table(good, n_resamples=0)
    with pytest.raises(ValueError, match="`baseline` must be one of"):
        comparisons.speedup_table(good, baseline="nope")
    with pytest.raises(ValueError,
                       match="`results` values must be reports_statistics.ReportsProtocol"):
        reports_statistics.reports_protocol_table({"x": 1})


def test_process_groups_split_by_trial_then_placement_in_sample_order():
    rows = [  # shuffled: trial 3 before 1, placements and samples out of order
        (3, 1, 0, 7.0), (1, 1, 1, 4.0), (1, 0, 1, 2.0), (3, 0, 0, 5.0), (1, 0, 0, 1.0),
        (1, 1, 0, 3.0), (3, 0, 1, 6.0)]
    df = pd.DataFrame(rows, columns=["trial", "placement", "sample", "ms"])
    keyed = sample_groups.process_groups_by_trial(df)
    assert list(keyed) == [1, 3]
    assert [[a.tolist() for a in p] for p in keyed.values()] == \
        [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0]]]
    assert [[a.tolist() for a in p] for p in sample_groups.process_groups(df)] == \
        [[a.tolist() for a in p] for p in keyed.values()]
    # before protocol 2 (no placement column) a process is one placement
    old = df.drop(columns="placement")
    assert [[a.tolist() for a in p] for p in sample_groups.process_groups(old)] == \
        [[[1.0, 3.0, 4.0, 2.0]], [[7.0, 5.0, 6.0]]]  # by sample, stable within one
    assert sample_groups.process_groups(df.iloc[:0]) == []
