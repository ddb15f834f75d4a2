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



def test_rate_display_drops_candidates_measured_at_too_few_shapes():
    # fa3 at two of three shapes, fa4 at one, sdpa at all three
    three = pd.concat([_table(), _table().assign(config="B32-H8-S1024-D64-fp16"),
                       _table().assign(config="B32-H8-S2048-D64-fp16", candidate="fa4")],
                      ignore_index=True)
    r = pr.rates([three]).reset_index()
    assert {"fa3", "fa4", "sdpa"} <= set(pr.rate_display(r).columns)
    assert list(pr.rate_display(r, min_filled=0.5).columns) == ["GPU", "shape", "fa3", "sdpa"]
    assert list(pr.rate_display(r, min_filled=1).columns) == ["GPU", "shape", "sdpa"]
    with pytest.raises(ValueError, match="`min_filled`"):
        pr.rate_display(r, min_filled=2)


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
