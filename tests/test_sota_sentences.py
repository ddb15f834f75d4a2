"""The state-of-the-art chapter's sentences (chapters.sota_sentences) on synthetic runs of
known truth, for every outcome, and the title's interpretation on the recorded runs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from attn_analysis.chapters import state_of_the_art as sota
from attn_analysis.chapters import sota_sentences as ss
from test_state_of_the_art import make_run

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def table():
    return sota.comparison_table(make_run(), n_resamples=500)


def _with_verdict(t: pd.DataFrame, cand: str, verdict: str) -> pd.DataFrame:
    t = t.copy()
    t.loc[(t["candidate"] == cand) & (t["level"] == "call"), "verdict"] = verdict
    return t


def test_target_summary_states_each_value_once_with_its_run_and_level(table):
    text = ss.target_summary("H200-a", table)
    # TRUTH (time over SDPA's): cudnn_frontend 0.97 (faster, SDPA's own kernel, not
    # custom), fa4 1.15 and triton 1.05 (slower)
    assert text.startswith("On the H200-a (run h200-sota-x) cuDNN frontend (direct) is faster")
    assert "the fastest custom kernel, our Triton kernel, runs at 0.95×" in text
    assert "Per call," in text and "Per attention kernel they run at" in text
    assert text.count("FlashAttention-4") == 1
    no_winner = table[table["candidate"] != "cudnn_frontend"]
    assert ss.target_summary("H200-a", no_winner).startswith(
        "On the H200-a (run h200-sota-x) no candidate is faster than SDPA's default dispatch")
    with pytest.raises(ValueError, match="`machine`"):
        ss.target_summary("", table)
    # one builder: the summary opens with state_of_the_art.target_sentence, run named
    head = sota.target_sentence("H200-a", sota.fastest(table), run="h200-sota-x",
                                custom=False)
    assert text.startswith(head + " Per call, ")
    assert "fastest custom kernel" not in head
    assert "(run " not in sota.target_sentence("H200-a", sota.fastest(table))


def test_dispatch_and_bshd_conclusions_only_where_every_machine_is_equivalent(table):
    eq = _with_verdict(table, "cudnn_frontend", "equivalent")
    assert ss.dispatch_sentence({"H100-a": eq, "H200-a": eq}).endswith(
        "costs nothing measurable inside a graph replay.")
    slow = _with_verdict(table, "cudnn_frontend", "slower")
    text = ss.dispatch_sentence({"H100-a": eq, "H200-a": slow})
    assert "not shown negligible" in text and "equivalent and equivalent" not in text
    # no sdpa_bshd in the synthetic run: "not measured", said once, no conclusion drawn
    text = ss.bshd_sentence({"H100-a": table, "H200-a": table})
    assert text == ("SDPA on (B, S, H, D) memory is not measured on both the H100-a and the "
                    "H200-a.")
    bshd = pd.concat([table, table[table["candidate"] == "sdpa_twin"].assign(
        candidate="sdpa_bshd", verdict="equivalent")])
    text = ss.bshd_sentence({"H100-a": bshd, "H200-a": bshd})
    assert "equivalent on both the H100-a and the H200-a: memory order" in text
    assert "(H100) and" not in text


def _kernels(ref_memset_ms, direct_memset_ms, config="B32-H8-S512-D64-fp16"):
    """A run's kernel table: SDPA and cuDNN called directly, each cuDNN's attention kernel
    and, where its time is given (None: not run), a memset."""
    rows = []
    for cand, mem in (("sdpa", ref_memset_ms), ("cudnn_frontend", direct_memset_ms)):
        rows.append((config, cand, "cudnn_generated_fort_native_sdpa_sm90", 1.0, 0.046))
        if mem is not None:
            rows.append((config, cand, "Memset (Device)", 1.0, mem))
    return pd.DataFrame(rows, columns=["config", "candidate", "kernel", "calls_per_call",
                                       "device_ms_per_call"])


def test_memset_clause_says_whose_memset_from_the_direct_calls_kernels(table):
    # TRUTH: both run a memset on both GPUs -> cuDNN's engine's, each time in µs
    both = {"H200-f": _kernels(0.000794, 0.000811), "H100-a": _kernels(0.000768, 0.000771)}
    text = ss.memset_clause(both)
    assert text == ("SDPA's call also runs a memset of 0.77–0.79 µs; cuDNN called directly "
                    "runs it too (0.77–0.81 µs): cuDNN's engine's work, not SDPA's dispatch.")
    one = ss.memset_clause({"H100-a": _kernels(0.000768, 0.000771)})
    assert one.startswith("SDPA's call also runs a memset of 0.77 µs; ")
    # the direct call runs none on one GPU -> there it is SDPA's own
    text = ss.memset_clause({"H100-a": _kernels(0.000768, 0.000771),
                             "H200-f": _kernels(0.000794, None)})
    assert text.endswith("cuDNN called directly runs none on the H200-f, so there the "
                         "memset is SDPA's own.")
    # SDPA runs no memset, or the direct call was not profiled: nothing to say
    assert ss.memset_clause({"H100-a": _kernels(None, 0.0008)}) == ""
    assert ss.memset_clause({"H100-a": _kernels(0.0008, None).query(
        "candidate == 'sdpa'")}) == ""
    assert ss.memset_us(_kernels(0.0008, None), "cudnn_frontend") == 0.0
    assert ss.memset_us(_kernels(0.0008, None), "fa4") is None
    with pytest.raises(ValueError, match="`kernels`"):
        ss.memset_clause([])
    with pytest.raises(ValueError, match="`kernels`"):
        ss.memset_us(pd.DataFrame({"config": []}), "sdpa")
    # dispatch_sentence keeps its verdict and adds the clause
    eq = _with_verdict(table, "cudnn_frontend", "equivalent")
    text = ss.dispatch_sentence({"H100-a": eq, "H200-f": eq}, kernels=both)
    assert text.startswith("So SDPA's dispatch costs nothing measurable inside a graph "
                           "replay. SDPA's call also runs a memset")
    assert text.endswith("not SDPA's dispatch.")


def test_recorded_direct_cudnn_runs_the_memset_at_the_target():
    """On every recorded run that profiled cuDNN called directly at the target, it runs the
    memset that SDPA's call runs: the book's "cuDNN's engine's work" holds on the data."""
    from attn_analysis import configs
    found = 0
    for path in sorted((ROOT / "data" / "runs").glob("*/kernels.parquet")):
        k = pd.read_parquet(path)
        if ss.memset_us(k, "cudnn_frontend") is None or not ss.memset_us(k, "sdpa"):
            continue
        found += 1
        assert ss.memset_us(k, "cudnn_frontend", configs.TARGET.key) > 0, path.parent.name
    assert found >= 2


def test_from_s_sentence_reads_right_for_every_outcome():
    assert ss.from_s_sentence({"h100": 2048, "h200": 2048}) == (
        "Per attention kernel, a custom kernel leads first at S = 2048 on both the H100 and "
        "the H200.")
    assert ss.from_s_sentence({"h100": 2048, "h200": 8192}) == (
        "Per attention kernel, a custom kernel leads first at S = 2048 on the H100 and first "
        "at S = 8192 on the H200.")
    assert ss.from_s_sentence({"h100": None, "h200": None}).startswith("No custom")
    with pytest.raises(ValueError, match="`from_s`"):
        ss.from_s_sentence({})


def test_attention_from_s_and_long_sequence_wins_on_known_truth(table):
    # TRUTH: fa4 is 0.8 of SDPA's time at S = 8192 (a lead), slower at the target
    assert ss.attention_from_s([table]) == {"h200": 8192}
    wins = ss.long_sequence_wins([table])
    assert [c for _, c in wins["h200"]] == ["fa4"]


def _title() -> str:
    """The book's title, the same in _config.yml and book/index.md's heading."""
    import yaml
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["title"]
    heading = (ROOT / "book" / "index.md").read_text().splitlines()[0].removeprefix("# ")
    assert config == heading
    return config


def test_short_sequence_wins_finds_per_call_leads_at_short_sequences_only(table):
    # TRUTH: the synthetic run's only lead is fa4 at S = 8192: none at S <= 256
    assert ss.short_sequence_wins([table]) == {"h200": []}
    assert [c for _, c in ss.short_sequence_wins([table], max_seq_len=8192)["h200"]] == [
        "fa4"]
    with pytest.raises(ValueError, match="`max_seq_len`"):
        ss.short_sequence_wins([table], max_seq_len=0)


def test_title_claim_holds_on_the_recorded_runs():
    """The title's "On Hopper, at long sequences and per call at short ones; at the reports'
    shape, only per call on the H200" (book/index.md, _config.yml): on every GPU model the
    confirmatory runs hold a custom kernel faster than SDPA beyond the margin per call AND
    per attention kernel at a shape other than the target (S >= LONG_SEQ_LEN), and one
    faster per call at S <= SHORT_SEQ_LEN, which the title then names; at the reports'
    shape a custom kernel is faster on the H200 alone, and there per call but not per
    attention kernel. Fails if the recorded data stop supporting the title, or the title
    leaves out a kind of lead they hold."""
    from attn_analysis import record
    from attn_analysis.chapters import target_answer as ta
    runs = {p.name: p for p in record.find_runs(ROOT / "data" / "runs")}
    confirm = [record.load(runs[r]) for r in ("h100-sota-confirm", "h200-sota-confirm")]
    tabs = [sota.comparison_table(r, n_resamples=200) for r in confirm]
    wins = ss.long_sequence_wins(tabs)
    assert all(wins.get(m) for m in ("h100", "h200")), wins
    title = _title()
    assert "at long sequences" in title
    short = ss.short_sequence_wins(tabs)
    if all(short.get(m) for m in ("h100", "h200")):  # per-call leads at short sequences
        assert "per call at short ones" in title, (title, short)
    else:
        assert "short" not in title, short
    from attn_analysis import configs
    assert all(cfg != configs.TARGET.key for m in ("h100", "h200") for cfg, _ in wins[m])
    at_target = {r: record.load(runs[r]) for r in (
        "h100-sota-confirm", "h200-sota-confirm", "h200-powered-v1-reports",
        "h200-gluon-v2-target")}
    tables = ta.by_machine(ta.target_tables(at_target, n_resamples=200))
    assert ta.claim_target(tables, detail=False) == (
        "At the reports' own shape the claim fails per call on the H200. On the H100-b, "
        "SDPA beats every custom kernel timed beyond the margin. No H100 run timed "
        "fa3_n128_s3, our Gluon kernel's variant that leads per call on the H200.")
    for machine, t in tables.items():
        best = sota.fastest(t)
        if best.get("custom_verdict") != "faster":
            continue
        row = t[(t["config"] == configs.TARGET.key) & (t["level"] == "attention")
                & (t["candidate"] == best["custom_candidate"])]
        assert row["verdict"].iloc[0] != "faster", machine


def test_runs_phrase_names_each_gpu_and_run_once():
    a = pd.DataFrame({"machine": ["H100-a", "H100-a"], "run": ["r1", "r1"]})
    b = pd.DataFrame({"machine": ["H200-f"], "run": ["r2"]})
    assert ss.runs_phrase([b, a]) == "H100-a, run r1; H200-f, run r2"
    with pytest.raises(ValueError, match="`tables`"):
        ss.runs_phrase([a.drop(columns="run")])
    with pytest.raises(ValueError, match="`tables`"):
        ss.runs_phrase([])


def test_custom_target_phrase_names_the_kernel_once_and_each_gpu_with_its_interval():
    best = {"H200-g": {"custom_label": "our Triton kernel", "custom_speedup": 0.9659,
                       "custom_ci_low": 0.9547, "custom_ci_high": 0.9774},
            "H100-b": {"custom_label": "our Triton kernel", "custom_speedup": 0.9377,
                       "custom_ci_low": 0.9314, "custom_ci_high": 0.9441}}
    assert ss.custom_target_phrase(best) == ("is our Triton kernel, at 0.94× (0.93–0.94) on "
                                             "the H100-b and 0.97× (0.95–0.98) on the H200-g")
    best["H200-g"] = {**best["H200-g"], "custom_label": "FlashAttention-4 (CuTe DSL)"}
    assert ss.custom_target_phrase(best) == (
        "is our Triton kernel on the H100-b, at 0.94× (0.93–0.94), and FlashAttention-4 "
        "(CuTe DSL) on the H200-g, at 0.97× (0.95–0.98)")
    with pytest.raises(ValueError, match="`best`"):
        ss.custom_target_phrase({"H100-b": {"winner_verdict": "baseline"}})


def test_inconclusive_runs_sentence_names_only_runs_without_a_finding():
    t = pd.DataFrame({"machine": ["H200-f\nexploratory"] * 2 + ["H200-g\nconfirmatory"] * 2,
                      "run": ["long", "long", "confirm", "confirm"], "level": ["call"] * 4,
                      "verdict": ["inconclusive", "undecided at this precision", "faster",
                                  "inconclusive"]})
    assert ss.inconclusive_runs_sentence(t) == (
        "Every verdict on H200-f (run long) is inconclusive.")
    assert ss.inconclusive_runs_sentence(t.assign(verdict="slower")) == ""
    with pytest.raises(ValueError, match="`table`"):
        ss.inconclusive_runs_sentence(t.drop(columns="run"))


def _sentences(text):
    import re
    return [t for t in re.split(r"(?<=[.)])\s+(?=[A-Z0-9])", text) if t]


def test_wins_sentence_splits_a_long_where_list_into_sentences_under_25_words():
    from attn_analysis.present.book_words import count_words
    where = ("FlashAttention-4 (CuTe DSL) at S = 2048, 8192; FlashInfer (batch prefill) at "
             "S = 2048, 8192; our Triton kernel at S = 128, 256, 512")
    row = dict(machine="H200-g", n_faster=12, n_custom=36, where=where, min_processes=6,
               best_candidate="our Triton kernel", best_config="B32-H8-S128-D64-fp16",
               best_speedup=1.283, best_low=1.258, best_high=1.308, n_undecided=4,
               undecided=where + "; FlexAttention, FLASH backend at S = 1024, 2048, 4096, "
               "8192")
    text = ss.wins_sentence(row)
    assert text.startswith("On the H200-g, custom kernels are faster than SDPA beyond the "
                           "margin in 12 of 36 comparisons. Leads: FlashAttention-4")
    assert "The largest is our Triton kernel at B32-H8-S128-D64-fp16: 1.28× (1.26–1.31)." in text
    assert "4 more lead by their point estimate beyond the margin" in text
    # every part of both lists is said once, none dropped by the split
    for part in row["undecided"].split("; "):
        assert part in text
    assert text.count("FlexAttention, FLASH backend at S = 1024") == 1
    assert "More undecided: " in text  # the undecided list did not fit one sentence
    lengths = [count_words(t) for t in _sentences(text)]
    assert max(lengths) < 25, list(zip(lengths, _sentences(text)))
    # too few processes: direction only, also split; none at all says so
    one = dict(row, n_faster=0, min_processes=1, direction=where, n_undecided=0)
    text = ss.wins_sentence(one)
    assert "too few for a finding (at least 2)." in text
    assert "For direction only, faster beyond the margin: FlashAttention-4" in text
    assert max(count_words(t) for t in _sentences(text)) < 25
    assert "no custom kernel lies beyond" in ss.wins_sentence(dict(one, direction=""))
    none = ss.wins_sentence(dict(row, n_faster=0, n_undecided=0))
    assert none == ("On the H200-g, no custom kernel is faster than SDPA beyond the margin in "
                    "36 comparisons.")
