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
    assert pw.counts_sentence(c).startswith("2 are slower, ") and "5" not in pw.counts_sentence(c)
    assert pw.counts_sentence({"equivalent": 1, "total": 1}) == "1 is equivalent"
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
    text = pw.neighbours_sentence({"runs a, b (4 GPUs)": e, "runs c, d (2 GPUs)": e}, 0.02)
    assert text == ("Hosts tested: runs a, b (4 GPUs); runs c, d (2 GPUs). On each, neighbours "
                    "move no control beyond the margin (±2%): all 2 ratios of concurrent over "
                    "one-at-a-time are equivalent, within [0.9960, 1.0010].")
    text = pw.neighbours_sentence({"h1": e, "h2": e.assign(verdict="inconclusive")}, 0.02)
    assert text.startswith("Neighbours are not shown") and "on h2 0.9990" in text
    assert "on h1" not in text
    with pytest.raises(ValueError, match="`effects`"):
        pw.neighbours_sentence({}, 0.02)


def test_speedup_display_leaves_out_the_attention_level():
    d = pw.speedup_display(_table()).set_index("config")
    assert d.loc["A", "z"] == "" and d.loc["A", "x"] == "1.000▼ -"


# ------------------------------------------------------------------ the page and the CLI

@pytest.mark.slow  # loads and verifies the recorded run twice (about 30 s)
def test_page_counts_agree_with_the_compare_command_on_the_powered_run():
    """Regression (issue 41): the page counted 39 equivalent where `compare` counted 38,
    since the page judged the run with the attention level in its family (m = 180, wider
    intervals: cudnn_frontend at B32 H8 S256, call level, 'slower within margin' at m = 120
    became 'equivalent'). Both now judge the pre-registered family, the same rows."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from attn_analysis import configs, record

    root = Path(__file__).resolve().parents[1]
    run_dir = root / "data" / "runs" / "h200-powered-v1-reports"
    if not run_dir.is_dir():
        pytest.skip("the powered run is not recorded in this checkout")
    plan = configs.POWERED_PLANS["powered-v1-reports"]
    page = pw.family_table(record.load(run_dir), plan, margin=0.02, n_resamples=2000)
    out = subprocess.run([sys.executable, "-m", "attn_analysis", "compare", str(run_dir),
                          "--json", "--resamples", "2000"], capture_output=True, text=True,
                         cwd=root, check=True).stdout
    cli = pd.DataFrame(json.loads(out)["rows"])
    assert json.loads(out)["n_comparisons"] == int(page["n_comparisons"].iloc[0]) \
        == plan["family_size"]
    keys = ["config", "candidate", "level"]
    both = page.merge(cli, on=keys, suffixes=("_page", "_cli"), how="outer", indicator=True)
    assert (both["_merge"] == "both").all()
    assert (both["verdict_page"] == both["verdict_cli"]).all()
    # the page's counts (family and controls) add up to the command's, verdict by verdict
    family = pw.verdict_counts(page, plan["family_candidates"])
    twin = pw.verdict_counts(page, ["sdpa_twin"])
    for verdict, n in cli["verdict"].value_counts().items():
        assert family.get(verdict, 0) + twin.get(verdict, 0) == n, verdict
    assert cli["verdict"].eq("equivalent").sum() == 38  # the recorded run, as published


def test_family_table_refuses_a_campaign_without_levels():
    with pytest.raises(ValueError, match="`campaign`"):
        pw.family_table(None, {"matrix": "x"}, margin=0.02)


def test_speedup_display_marks_each_level():
    t = _table().assign(verdict=["slower", "equivalent", "inconclusive", "faster", "slower",
                                 "equivalent"])
    d = pw.speedup_display(t)
    assert list(d.columns) == ["config", "x", "y", "z"]
    row = d.set_index("config").loc["B"]
    assert row["x"] == "1.000▲ -" and row["y"] == "- 1.000▼" and row["z"] == "1.000≈ -"
    with pytest.raises(ValueError, match="mark"):
        pw.speedup_display(t.assign(verdict="maybe"))
def test_headline_counts_fold_the_verdicts_into_four_that_sum_to_the_total():
    """The abstract says faster / equivalent / slower / inconclusive of the total: the
    within-margin verdicts are equivalent and 'undecided' inconclusive (3.7's run: 10, 21,
    63, 6 of 100 where the page lists seven verdicts)."""
    from attn_analysis.analyse.stats import Verdict as V
    counts = {V.SLOWER.value: 63, V.EQUIVALENT.value: 18, V.FASTER.value: 10,
              V.INCONCLUSIVE.value: 5, V.SLOWER_WITHIN_MARGIN.value: 2,
              V.FASTER_WITHIN_MARGIN.value: 1, V.UNDECIDED.value: 1, "total": 100}
    assert pw.headline_counts(counts) == {"equivalent": 21, "faster": 10, "slower": 63,
                                          "inconclusive": 6}
    # the within-margin verdicts by the names methods give them (faster or slower within
    # margin), counted inside equivalent
    assert pw.headline_phrase(counts) == ("10 faster, 21 equivalent (3 of them faster or "
                                          "slower within the margin), 63 slower and 6 "
                                          "inconclusive")
    assert pw.headline_phrase(counts, within=False) == (
        "10 faster, 21 equivalent, 63 slower and 6 inconclusive")
    assert pw.headline_phrase({V.EQUIVALENT.value: 20, "total": 20}) == (
        "0 faster, 20 equivalent, 0 slower and 0 inconclusive")
    # every equivalent verdict within the margin: said once, not "4 of them" of 4
    assert pw.headline_phrase({V.FASTER.value: 5, V.FASTER_WITHIN_MARGIN.value: 3,
                               V.SLOWER_WITHIN_MARGIN.value: 1, "total": 9}) == (
        "5 faster, 4 equivalent (all faster or slower within the margin), 0 slower and 0 "
        "inconclusive")
    with pytest.raises(ValueError, match="`counts`"):
        pw.headline_counts({V.SLOWER.value: 3})
    with pytest.raises(ValueError, match="sum"):
        pw.headline_counts({V.SLOWER.value: 3, "total": 4})


def test_decidability_sentence_says_whether_the_processes_decide_then_what_each_level_needs():
    from types import SimpleNamespace as Row
    rows = [Row(level="call", needed=14, sigma=0.0059, decides=True, family=120),
            Row(level="kernel", needed=11, sigma=0.0047, decides=True, family=120)]
    assert pw.decidability_sentence(rows, 24) == (
        "24 processes decide at m = 120. 80 % power and 90 % A/A equivalence need 14 processes "
        "per call and 11 per kernel. That is at this GPU model's per-process SDs, pooled over "
        "its runs: 0.0059 per call and 0.0047 per kernel.")
    assert "at the H200's per-process SDs" in pw.decidability_sentence(rows, 24, "H200")
    rows[1] = Row(level="kernel", needed=None, sigma=0.03, decides=False, family=120)
    assert pw.decidability_sentence(rows, 24).startswith(
        "24 processes do not decide at every level at m = 120.")


def test_lever_sentence_calls_it_placement_noise_only_near_the_noise_ratio():
    from attn_analysis.analyse.placement_lever import LeverSummary
    near = {"r1": LeverSummary(32, 8, 16, 0.47, 0.5)}
    assert pw.lever_sentence(near) == (
        "In run r1, 32 placements per process instead of 8 cut the per-process SD to 0.47 of "
        "its value (median of 16 comparisons). Pure placement noise gives 0.50, so the "
        "spread is placement noise and placements are the lever.")
    far = {"r1": LeverSummary(32, 8, 16, 0.47, 0.5), "r2": LeverSummary(48, 12, 24, 0.9, 0.5)}
    text = pw.lever_sentence(far)
    assert ". In run r2, 48 placements" in text and text.endswith("do not remove the spread.")
    assert "No run" in pw.lever_sentence({})


def test_run_texts_state_the_family_and_the_twin_apart_from_the_inventory_row():
    from attn_analysis.analyse.stats import Verdict as V
    rows = [("A", "k1", "call", V.FASTER.value), ("A", "k1", "kernel", V.FASTER.value),
            ("A", "k2", "call", V.SLOWER.value), ("A", "k2", "kernel", V.INCONCLUSIVE.value),
            ("A", "twin", "call", V.EQUIVALENT.value), ("A", "twin", "kernel", V.EQUIVALENT.value)]
    table = pd.DataFrame(rows, columns=["config", "candidate", "level", "verdict"]).assign(
        speedup=1.0, n_comparisons=4)
    row = pd.Series({"run": "r1", "campaign": "p1", "model": "H200", "processes": 6,
                     "gpus": ["H200-a", "H200-b"],
                     "plan_committed_utc": "2026-11-28T06:30:02+00:00",
                     "first_entry_utc": "2026-11-28T06:44:25+00:00"})
    plan = {"family_candidates": ("k1", "k2"), "matrix": "long-v2", "levels": ("call", "kernel")}
    untimed = pd.DataFrame({"candidate": ["k2", "twin"], "status": ["unsupported"] * 2,
                            "reason": ["not importable (detail)", "x"]})
    t = pw.run_texts(row, table, plan, untimed)
    assert t["headline"] == t["headline_short"] == (
        "2 faster, 0 equivalent, 1 slower and 1 inconclusive")
    assert t["total"] == "4" and t["m"] == "4" and t["inconclusive_share"] == "25%"
    # the GPU labels come from the row, compact; the family from its plan, where it lives
    assert t["gpus"] == "H200-a,b"
    assert t["counts_sentence"] == (
        "Run r1 measured the long grid's rows at S = 2048 and 8192 with 6 processes on "
        "H200-a,b (H200). Its family, fixed in attn_analysis/configs.py (plan p1), is 2 "
        "custom kernels against SDPA at 1 configurations and 2 levels (call, kernel): m = 4. "
        "Of its 4 comparisons: 2 faster, 0 equivalent, 1 slower and 1 inconclusive. Of the "
        "A/A twin's 2, judged at the same m, 2 are equivalent.")
    # a planned member that was not timed keeps its place in m
    fewer = pw.run_texts(row, table.assign(n_comparisons=6),
                         {**plan, "family_candidates": ("k1", "k2", "k3")})
    assert "Of its 6 comparisons, 4 were timed: 2 faster" in fewer["counts_sentence"]
    # only the family's untimed candidates, the reason before its parenthesis
    assert t["untimed_sentence"] == ("Candidate k2 was planned but not timed (unsupported: "
                                     "not importable).")
    assert t["plan_sentence"].startswith("Pre-registered")
    assert "matrix other-v9" in pw.run_texts(row, table, {**plan, "matrix": "other-v9"}
                                             )["counts_sentence"]
    with pytest.raises(ValueError, match="`campaign`"):
        pw.run_texts(row, table, {"levels": ("call",)})
    with pytest.raises(ValueError, match="`table`"):
        pw.run_texts(row, table.iloc[:0], plan)


def test_family_clause_refuses_an_m_its_plan_does_not_give():
    plan = {"family_candidates": ("a", "b", "c"), "levels": ("call", "kernel")}
    assert pw.family_clause(plan, "p", 48, 8).endswith("8 configurations and 2 levels "
                                                      "(call, kernel): m = 48.")
    with pytest.raises(ValueError, match="`m`"):
        pw.family_clause(plan, "p", 50, 8)


def test_design_sentence_judges_the_plan_levels_and_says_when_no_sd_is_recorded():
    plan = {"levels": ("kernel",)}
    text = pw.design_sentence({"call": 0.005, "kernel": 0.005}, plan, 24, 96, "H200", 0.02)
    assert text.startswith("24 processes decide at m = 96.") and "per call" not in text
    assert "per kernel" in text
    assert pw.design_sentence(None, plan, 24, 96, "H200", 0.02).startswith("No design SDs")
    with pytest.raises(ValueError, match="`campaign`"):
        pw.design_sentence({}, {}, 24, 96, "H200", 0.02)


def test_placements_and_unrun_plan_sentences_name_what_is_needed():
    from types import SimpleNamespace as Row
    rows = [Row(level="call", needed=47, sigma=0.0144, decides=False, family=48),
            Row(level="kernel", needed=None, sigma=0.05, decides=False, family=48)]
    assert pw.placements_need_sentence(rows, 12) == (
        "At 12 placements per process the same family would need 47 processes per call and "
        "no number of per kernel.")
    text = pw.unrun_plan_sentence("p-long", {"trials": 24}, rows[:1], "H200")
    assert text == ("Plan p-long (configs.POWERED_PLANS) asked 24 processes at 8 placements "
                    "each, family m = 48. It could not decide: at the H200's design SDs as "
                    "recorded now, it needs 47 processes at the call level. It was never run, "
                    "so no data of it exist.")
    with pytest.raises(ValueError, match="`report`"):
        pw.placements_need_sentence([], 12)
    with pytest.raises(ValueError, match="`report`"):
        pw.unrun_plan_sentence("p", {"trials": 2}, [], "H200")


def test_both_need_sentences_share_one_need_phrase_with_their_own_unknown():
    """decidability_sentence and placements_need_sentence build one phrase
    (powered._need_phrase): 'processes' after the first level only, each level named,
    an unknown need as '?' in the one and 'no number of' in the other, at any position."""
    from types import SimpleNamespace as Row
    rows = [Row(level="call", needed=None, sigma=0.02, decides=False, family=48),
            Row(level="kernel", needed=9, sigma=0.004, decides=True, family=48),
            Row(level="attention", needed=None, sigma=0.03, decides=False, family=48)]
    assert pw.decidability_sentence(rows, 8, "H100") == (
        "8 processes do not decide at every level at m = 48. 80 % power and 90 % A/A "
        "equivalence need ? processes per call and 9 per kernel and ? at the attention level. "
        "That is at the H100's per-process SDs, pooled over its runs: 0.0200 per call and "
        "0.0040 per kernel and 0.0300 at the attention level.")
    assert pw.placements_need_sentence(rows, 4) == (
        "At 4 placements per process the same family would need no number of processes per "
        "call and 9 per kernel and no number of at the attention level.")
    one = [Row(level="kernel", needed=3, sigma=0.001, decides=True, family=2)]
    assert "need 3 processes per kernel. That" in pw.decidability_sentence(one, 4)
    assert pw.placements_need_sentence(one, 2).endswith("would need 3 processes per kernel.")


def test_merge_sentence_names_versions_and_dirty_shards_from_run_json():
    shard = lambda k, v, dirty=None: {"shard": [k, 5], "attn_analysis_version": v,
                                      "code_dirty": dirty}
    info = {"run_id": "r", "merged_from": [shard(1, "0.3.0", True), shard(2, "0.3.0", True),
                                           shard(3, "0.4.0"), shard(5, "0.4.0"),
                                           shard(4, "0.4.0")]}
    assert pw.merge_sentence(info) == (
        "Run r merges 5 shards, recorded by package versions 0.3.0 (shards 1-2) and 0.4.0 "
        "(shards 3-5), with merge --across-versions. Shards 1-2 record code_dirty, so "
        "their recorded commit does not by itself show the code that ran.")
    one = {"run_id": "r", "merged_from": [shard(1, "0.2.0"), shard(2, "0.2.0")]}
    assert pw.merge_sentence(one) == "Run r merges 2 shards of one package version (0.2.0)."
    assert pw.merge_sentence({"run_id": "r"}) == ""
