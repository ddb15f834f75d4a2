"""chapters.peer_rates: rates from comparison tables, the crossover read from a check
payload, the gate per environment; on synthetic inputs with known answers and the
recorded H200 files."""

from pathlib import Path

import pandas as pd
import pytest

from attn_analysis.chapters import peer_rates as pr
from attn_analysis.record import checks

ROOT = Path(__file__).resolve().parents[1]


def _table(ms_base=1.0, ms_cand=0.5):
    return pd.DataFrame({"device": ["NVIDIA H200"] * 2, "config": ["B32-H8-S512-D64-fp16"] * 2,
                         "candidate": ["fa3", "fa3"], "level": ["kernel", "call"],
                         "candidate_ms": [ms_cand, 9.0], "baseline_ms": [ms_base, 9.0]})


def test_rates_use_kernel_times_and_the_stated_formula():
    r = pr.rates([_table()]).set_index("candidate")
    flops = 4 * 32 * 8 * 512 ** 2 * 64
    assert r.loc["fa3", "tflops"] == pytest.approx(flops / 0.5e-3 / 1e12)
    assert r.loc["sdpa", "tflops"] == pytest.approx(flops / 1e-3 / 1e12)
    assert 0 < r.loc["fa3", "fraction_of_peak"] < 1
    shown = pr.rate_display(r.reset_index())
    assert list(shown.columns[:2]) == ["GPU", "shape"] and "%" in shown.loc[0, "fa3"]
    assert "%" not in pr.rate_display(r.reset_index(), percent=False).loc[0, "fa3"]
    with pytest.raises(ValueError, match="`min_seq_len`"):
        pr.rate_display(r.reset_index(), min_seq_len=pr.LONG_S)


def test_rates_refuse_tables_without_kernel_level():
    with pytest.raises(ValueError, match="`tables`"):
        pr.rates([_table().query("level == 'call'")])


def test_rate_campaigns_are_chosen_by_pattern_not_gpu():
    assert pr.rate_campaign("peers2-long") and pr.rate_campaign("powered-v1-reports")
    assert not pr.rate_campaign("sota-target") and not pr.rate_campaign(None)


def test_crossover_of_the_recorded_h200_file_names_the_fastest_kernel():
    doc = checks.read(ROOT / "data/checks/crossover_ncu_h200.json", "crossover_ncu")
    f = pr.crossover_frame(doc)
    assert len(f) == len(doc["kernels"])
    text = pr.crossover_sentence(f)
    fastest = f.sort_values("time_us").groupby("config").first()
    for config, row in fastest.iterrows():
        assert f"at {config}: {pr._NAMES[row.candidate]} " in text
    lead = pr.crossover_lead(f, 0.02)
    assert lead.count(doc["gpu"]) == 1  # each GPU named once (issue 41: it was repeated)
    for config, c in f.groupby("config"):
        c = c.sort_values("time_us")
        name = pr._NAMES[c["candidate"].iloc[0]]
        if c["time_us"].iloc[1] <= c["time_us"].iloc[0] * 1.02:
            assert f"{name} and {pr._NAMES[c['candidate'].iloc[1]]} tie within ±2% at " \
                f"{config}" in lead
        else:
            assert f"{name} is fastest at {config}" in lead
    # with no tolerance every shape has one fastest kernel
    assert "tie" not in pr.crossover_lead(f, 0.0)
    with pytest.raises(ValueError, match="`tie`"):
        pr.crossover_lead(f, 2)
    with pytest.raises(ValueError, match="`doc`"):
        pr.crossover_frame({"kernels": []})


def test_gate_names_versions_per_environment_and_reasons():
    doc = checks.read(ROOT / "data/checks/peers2_check_h200.json", "peers_check")
    g = pr.gate_frame(doc)
    rows = g[g["candidate"] == "sdpa_fa4"]
    assert len(rows) == len(doc["environments"]) - 1  # xFormers' environment lacks it
    s = pr.sdpa_fa4_sentence(g)
    assert "passes the gate" in s and "fails" in s
    assert "installed alone" in pr.xformers_sentence(g)
    assert "0 of 0" not in g["gate"].tolist()
