"""Claim A from every confirmatory run (chapters.target_answer) on synthetic runs of known
truth: which runs count, the family each is judged at, and the answer per GPU model."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from attn_analysis.analyse import power
from attn_analysis.chapters import target_answer as ta, target_table
from attn_analysis.configs import TARGET
from test_state_of_the_art import LONG, make_run


def _faster(run, cand: str, factor: float = 0.9):
    """``run`` with ``cand``'s times at the target scaled by ``factor`` (< 1: faster)."""
    for frame, col in ((run.samples, "ms"), (run.placements, "kernel_ms"),
                       (run.kernels, "device_ms_per_call")):
        rows = (frame["candidate"] == cand) & (frame["config"] == TARGET.key)
        frame.loc[rows, col] = frame.loc[rows, col] * factor
    return run


def _confirm(run_id, uuid, gpu="NVIDIA H200", **kw):
    return make_run(run_id=run_id, uuid=uuid, gpu=gpu, matrix="confirm-v1", **kw)


def test_only_confirmatory_runs_that_timed_a_custom_kernel_at_the_target_count():
    runs = {"a-confirm": _confirm("a-confirm", "GPU-aaaaaaaa-1"),
            "b-explore": make_run(run_id="b-explore", uuid="GPU-bbbbbbbb-1"),
            "c-long": _confirm("c-long", "GPU-cccccccc-1", configs_=(LONG,)),
            "d-controls": _confirm("d-controls", "GPU-dddddddd-1",
                                   candidates=("sdpa", "sdpa_twin", "cudnn_frontend"))}
    assert list(ta.target_tables(runs, n_resamples=300)) == ["a-confirm"]
    with pytest.raises(ValueError, match="`runs`"):
        ta.target_tables([runs["a-confirm"]])


def test_a_run_is_judged_at_the_family_its_plan_registered(monkeypatch):
    runs = {"a-confirm": _confirm("a-confirm", "GPU-aaaaaaaa-1")}
    default = ta.target_tables(runs, n_resamples=300)["a-confirm"]
    assert default["n_comparisons"].iloc[0] == len(default)  # every row of the run
    monkeypatch.setattr(power, "registered_family", lambda info: 2)
    registered = ta.target_tables(runs, n_resamples=300)["a-confirm"]
    assert set(registered["n_comparisons"]) == {2}
    width = lambda t: float((t["ci_high"] - t["ci_low"]).mean())  # noqa: E731
    assert width(registered) < width(default)


def test_precomputed_tables_are_used_as_given_and_only_missing_runs_are_computed(monkeypatch):
    from attn_analysis.chapters import state_of_the_art as sota
    runs = {"a-confirm": _confirm("a-confirm", "GPU-aaaaaaaa-1"),
            "b-confirm": _confirm("b-confirm", "GPU-bbbbbbbb-1"),
            "c-explore": make_run(run_id="c-explore", uuid="GPU-cccccccc-1")}
    fresh = ta.target_tables(runs, n_resamples=300)
    given = {"a-confirm": sota.comparison_table(runs["a-confirm"], n_resamples=300),
             "c-explore": sota.comparison_table(runs["c-explore"], n_resamples=300)}
    computed = []
    real = sota.comparison_table
    monkeypatch.setattr(sota, "comparison_table",
                        lambda run, **kw: computed.append(run.run_id) or real(run, **kw))
    out = ta.target_tables(runs, n_resamples=300, precomputed=given)
    assert computed == ["b-confirm"]  # a-confirm's table is not computed again
    # a-confirm's table is the one given, with the tuned variants added
    pd.testing.assert_frame_equal(out["a-confirm"][list(given["a-confirm"])],
                                  given["a-confirm"])
    assert list(out) == list(fresh) and {"variant", "variant_models"} <= set(out["a-confirm"])
    assert "c-explore" not in out  # a precomputed table does not make a run confirmatory
    for run_id, table in fresh.items():  # the same tables as without them
        pd.testing.assert_frame_equal(out[run_id], table)
    assert list(ta.target_tables(runs, n_resamples=300, precomputed=None)) == list(fresh)


def test_precomputed_tables_must_be_the_runs_own_at_the_margin_and_registered_family(
        monkeypatch):
    from attn_analysis.chapters import state_of_the_art as sota
    runs = {"a-confirm": _confirm("a-confirm", "GPU-aaaaaaaa-1")}
    table = sota.comparison_table(runs["a-confirm"], n_resamples=300)
    bad = {"a list": [table], "an unknown run": {"z-run": table},
           "not a table": {"a-confirm": table.to_dict()},
           "no columns": {"a-confirm": table.drop(columns="same_kernel_as_baseline")},
           "empty": {"a-confirm": table.iloc[:0]},
           "another run's": {"a-confirm": table.assign(run="b-confirm")},
           "another margin": {"a-confirm": table.assign(margin=0.05)}}
    for why, precomputed in bad.items():
        with pytest.raises(ValueError, match="`precomputed`"):
            ta.target_tables(runs, n_resamples=300, precomputed=precomputed)
            pytest.fail(why)
    monkeypatch.setattr(power, "registered_family", lambda info: 2)
    with pytest.raises(ValueError, match=r"`precomputed` .* registered family m \(2\)"):
        ta.target_tables(runs, n_resamples=300, precomputed={"a-confirm": table})
    at_two = table.assign(n_comparisons=2)
    used = ta.target_tables(runs, n_resamples=300, precomputed={"a-confirm": at_two})
    pd.testing.assert_frame_equal(used["a-confirm"][list(at_two)], at_two)


def test_the_claim_holds_per_model_where_no_custom_kernel_wins():
    runs = {"h100": _confirm("h100", "GPU-11111111-1", gpu="NVIDIA H100 80GB HBM3"),
            "h200": _confirm("h200", "GPU-22222222-1")}
    tables = ta.by_machine(ta.target_tables(runs, n_resamples=300))
    text = ta.claim_target(tables)
    beats = "SDPA beats every custom kernel timed beyond the margin, per call and per kernel."
    assert text == ("At the reports' own shape no custom kernel beats SDPA beyond the margin. "
                    f"On the H100 11111111, {beats} On the H200 22222222, {beats}")
    assert ta.conclusion_sentences(tables) == (
        "Per call, no custom kernel beats SDPA beyond the margin on the H100 and the H200: "
        "the reports' conclusion holds. Per kernel, no custom kernel beats SDPA beyond the "
        "margin on the H100 and the H200: the reports' conclusion holds. "
        f"On the H100 11111111, {beats} On the H200 22222222, {beats}")
    assert ta.claim_target({}) == ("No confirmatory run timed a custom kernel at the reports' "
                                   "shape.")


def test_one_winning_run_fails_the_claim_for_its_model_and_says_what_the_others_timed():
    runs = {"win": _faster(_confirm("win", "GPU-33333333-1"), "triton", 0.9),
            "same": _confirm("same", "GPU-44444444-1"),
            "other": _confirm("other", "GPU-55555555-1", candidates=("sdpa", "fa4")),
            "h100": _confirm("h100", "GPU-11111111-1", gpu="NVIDIA H100 80GB HBM3")}
    tables = ta.by_machine(ta.target_tables(runs, n_resamples=300))
    text = ta.claim_target(tables)
    assert text.startswith("At the reports' own shape the claim fails per call on the H200. "
                           "On the H200, our Triton kernel is faster per call.")
    assert text.endswith("On the H100 11111111, SDPA beats every custom kernel timed beyond "
                         "the margin, per call and per kernel.")
    runs["h100"] = _confirm("h100", "GPU-11111111-1", gpu="NVIDIA H100 80GB HBM3",
                            candidates=("sdpa", "fa4"))
    untried = ta.claim_target(ta.by_machine(ta.target_tables(runs, n_resamples=300)))
    assert untried.endswith("No confirmatory H100 run timed our Triton kernel, which leads "
                            "per call on the H200.")
    runs["h100"] = _confirm("h100", "GPU-11111111-1", gpu="NVIDIA H100 80GB HBM3")
    assert "On the H200, our Triton kernel is faster per call. It runs at " in text
    assert "in run win." in text
    runs["win2"] = _faster(_confirm("win2", "GPU-77777777-1"), "triton", 0.9)
    two = ta.claim_target(ta.by_machine(ta.target_tables(runs, n_resamples=300)))
    assert re.search(r"It runs at 1\.\d\d× \(1\.\d\d–1\.\d\d\) in run win and 1\.\d\d× "
                     r"\(1\.\d\d–1\.\d\d\) in run win2\.", two)
    assert two.count("is faster per call") == 1
    assert "Run other did not time it." in text
    assert "Run same found no faster kernel." in text
    assert ta.claim_target(tables, detail=False) == (
        text[:text.index(" On the H200,")] + text[text.index(" On the H100"):].replace(
            ", per call and per kernel.", "."))  # the levels only in the detail
    best = ta.best_custom_by_model(tables)
    assert sorted(best) == ["H100 11111111", "H200 33333333"]
    assert best["H200 33333333"]["custom_candidate"] == "triton"
    # a replication where the same kernel wins by more: the smaller speedup is quoted
    again = {**runs, "win3": _faster(_confirm("win3", "GPU-88888888-1"), "triton", 0.8)}
    best3 = ta.best_custom_by_model(ta.by_machine(ta.target_tables(again, n_resamples=300)))
    assert "H200 33333333" in best3 and "H200 88888888" not in best3
    values = ta.section_values(tables)
    assert values["sa_h200_target_summary"].startswith("On the H200 33333333 (run win)")
    assert "H200 44444444" not in values["sa_h200_target_summary"]  # one GPU per model
    assert values["sa_target_custom_phrase"].startswith("is our Triton kernel, at ")
    assert values["gl_lead_sentence"] == ""  # no Gluon kernel here
    assert values["sa_claim_runs"] == "h100, other, same, win"


def test_where_sdpa_wins_the_answer_says_so_and_names_the_winning_variant_never_timed():
    """A positive result on the H100 (every custom kernel slower beyond the margin, at
    both levels) is said as such, and the H200's winning Gluon variant, which no H100 run
    timed, is named; once an H100 run timed that variant, only the confirmatory gap is."""
    from test_gluon_kernel_chapter import make_run as gluon_run
    h100 = dict(gpu="NVIDIA H100 80GB HBM3", uuid="GPU-11111111-1")
    runs = {"h200-win": gluon_run("h200-win", "confirm-v1",
                                  {TARGET: {"sdpa": 1.0, "gluon": 0.9}},
                                  variants={TARGET.key: "fa3_x"}),
            "h100-slow": gluon_run("h100-slow", "confirm-v1",
                                   {TARGET: {"sdpa": 1.0, "triton": 1.2}}, **h100),
            "h100-explore": gluon_run("h100-explore", "fixed-v1",
                                      {TARGET: {"sdpa": 1.0, "gluon": 1.0}},
                                      variants={TARGET.key: "plain"}, **h100)}
    tables = ta.target_tables(runs, n_resamples=300)
    assert list(tables) == ["h100-slow", "h200-win"]  # the exploratory run is no evidence
    call = tables["h200-win"].query("candidate == 'gluon' and level == 'call'").iloc[0]
    assert (call["variant"], call["variant_models"]) == ("fa3_x", "H200")
    text = ta.claim_target(ta.by_machine(tables))
    held = ("On the H100 11111111, SDPA beats every custom kernel timed beyond the margin, "
            "per call and per kernel. No H100 run timed fa3_x, our Gluon kernel's variant "
            "that leads per call on the H200.")
    assert text.startswith("At the reports' own shape the claim fails per call on the H200. "
                           "On the H200, our Gluon kernel (FA3-style) is faster per call.")
    assert text.endswith(" " + held)
    assert ta.claim_target(ta.by_machine(tables), detail=False) == (
        "At the reports' own shape the claim fails per call on the H200. "
        + held.replace(", per call and per kernel.", "."))
    # the conclusions: per level and model where the reports' conclusion fails and holds
    # (the Gluon kernel is 10 % faster per call and per kernel here), then the evidence
    assert ta.conclusion_sentences(ta.by_machine(tables)) == (
        "Per call, our Gluon kernel (FA3-style) beats SDPA beyond the margin on the H200: "
        "the reports' conclusion fails there; it holds on the H100 for the kernels timed "
        "there. Per kernel, our Gluon kernel (FA3-style) beats SDPA beyond the margin on the "
        "H200: the reports' conclusion fails there; it holds on the H100 for the kernels "
        "timed there. " + held)
    assert ta.section_values(ta.by_machine(tables))["sa_conclusion_sentences"] == \
        ta.conclusion_sentences(ta.by_machine(tables))
    assert ta.conclusion_sentences({}) == ta.claim_target({})
    runs["h100-explore"] = gluon_run("h100-explore", "fixed-v1",
                                     {TARGET: {"sdpa": 1.0, "gluon": 1.0}},
                                     variants={TARGET.key: "fa3_x"}, **h100)
    runs["h100-slow"] = gluon_run("h100-slow", "confirm-v1",  # SDPA's equal: no positive
                                  {TARGET: {"sdpa": 1.0, "triton": 1.0}}, **h100)  # result
    again = ta.claim_target(ta.by_machine(ta.target_tables(runs, n_resamples=300)))
    assert again.endswith("On the H100 11111111, no custom kernel timed beats SDPA beyond the "
                          "margin. No confirmatory H100 run timed our Gluon kernel, which "
                          "leads per call on the H200.")


def test_two_runs_on_one_gpu_cannot_be_told_apart_by_label():
    runs = {"a": _confirm("a", "GPU-66666666-1"), "b": _confirm("b", "GPU-66666666-1")}
    with pytest.raises(ValueError, match="one run per GPU"):
        ta.by_machine(ta.target_tables(runs, n_resamples=300))


def test_summaries_are_joined_per_model_in_label_order():
    tables = {"H200-b": "second", "H100-a": "only", "H200-a": "first"}
    out = ta.summaries_by_model(tables, lambda machine, t: f"{machine}:{t}")
    assert out == {"h100": "H100-a:only", "h200": "H200-a:first H200-b:second"}


def _gluon_plan_info():
    from attn_analysis import configs
    g = configs.GLUON_PLANS["gluon-v2-target"]
    return {"plan": {"matrix": g["matrix"], "modes": list(g["modes"]),
                     "candidates": list(g["candidates"])}}


def test_family_scope_reads_the_registered_plan_and_none_without_one():
    assert ta.family_scope(_gluon_plan_info()) == (("call", "kernel"), ("gluon",))
    assert ta.family_scope({"plan": {"matrix": "confirm-v1", "modes": ["graph"],
                                     "candidates": ["sdpa", "nobody"]}}) == (None, None)
    assert ta.family_scope(None) == (None, None)


def test_confirmatory_rows_hold_each_custom_kernel_per_level_and_mark_the_family(monkeypatch):
    runs = {"a-confirm": _faster(_confirm("a-confirm", "GPU-aaaaaaaa-1"), "triton", 0.8),
            "b-confirm": _confirm("b-confirm", "GPU-bbbbbbbb-1")}
    tables = ta.target_tables(runs, n_resamples=300)
    # b's plan registers a family of the call and kernel levels of triton alone
    runs["b-confirm"].info = {**(runs["b-confirm"].info or {}), "marker": "b"}
    monkeypatch.setattr(ta, "family_scope", lambda info: (
        (("call", "kernel"), ("triton",)) if (info or {}).get("marker") == "b"
        else (None, None)))
    rows = ta.confirmatory_rows(tables, runs)
    # TRUTH: the target holds custom kernels fa4 and triton (cudnn_frontend runs SDPA's
    # kernel, the twin is a control); three levels each, in both runs
    assert set(rows["candidate"]) == {"fa4", "triton"}
    assert len(rows) == 2 * 2 * 3 and set(rows["level"]) == {"call", "kernel", "attention"}
    a = rows[rows["run"] == "a-confirm"]
    assert a["in_family"].all()  # no registered family: every comparison is a member
    b = rows[rows["run"] == "b-confirm"].set_index(["candidate", "level"])["in_family"]
    assert b[("triton", "call")] and b[("triton", "kernel")]
    assert not b[("triton", "attention")] and not b[("fa4", "call")]
    # a's triton is 0.8 of its time at the target: faster per call, beyond the margin
    call = a[(a["candidate"] == "triton") & (a["level"] == "call")].iloc[0]
    assert call["verdict"] == "faster" and call["ci_low"] > 1.02
    assert set(rows["m"]) == {int(t["n_comparisons"].iloc[0]) for t in tables.values()}
    phrase = ta.figure_runs_phrase(rows)
    m = {r: int(t["n_comparisons"].iloc[0]) for r, t in tables.items()}
    machine = {r: str(t["machine"].iloc[0]) for r, t in tables.items()}
    assert phrase == (f"{machine['a-confirm']}: a-confirm, m = {m['a-confirm']}; "
                      f"{machine['b-confirm']}: b-confirm, m = {m['b-confirm']}")
    with pytest.raises(ValueError, match="`runs`"):
        ta.confirmatory_rows(tables, {"a-confirm": runs["a-confirm"]})
    with pytest.raises(ValueError, match="`rows`"):
        ta.figure_runs_phrase(rows.iloc[:0])


def _row(machine, run, cand, level, speedup, verdict="slower", in_family=True, m=4):
    return dict(machine=machine, run=run, m=m, candidate=cand, label=f"our {cand}",
                level=level, speedup=speedup, ci_low=speedup - 0.01, ci_high=speedup + 0.01,
                verdict=verdict, in_family=in_family)


def test_confirmatory_table_shows_each_run_and_kernel_with_every_level_and_the_family():
    rows = pd.DataFrame([
        _row("H200-ae", "r-gluon", "gluon", "call", 1.044, "faster", m=2),
        _row("H200-ae", "r-gluon", "gluon", "attention", 0.999, "equivalent", False, m=2),
        _row("H200-g", "r-sota", "fa4", "call", 0.86),
        _row("H200-g", "r-sota", "triton", "call", 0.97),
        _row("H200-g", "r-sota", "triton", "kernel", 0.94),
        _row("H100-b", "r-h100", "triton", "call", 0.94)])
    t = target_table.confirmatory_table(rows)
    assert list(t.columns) == ["machine", "run", "m", "label", "call", "kernel", "attention"]
    # the figure's order: H100 first, then the shorter label; fastest per call first
    assert list(zip(t["machine"], t["label"])) == [
        ("H100-b", "our triton"), ("H200-g", "our triton"), ("H200-g", "our fa4"),
        ("H200-ae", "our gluon")]
    g = t.iloc[3]
    assert (g["run"], g["m"]) == ("r-gluon", 2)
    assert g["call"] == "1.044 (1.034–1.054) faster"
    # judged at m = 2 but outside the family: marked; a level the run lacks: a dash
    assert g["attention"] == "0.999 (0.989–1.009) equivalent*" and g["kernel"] == "–"
    assert t.iloc[1]["kernel"] == "0.940 (0.930–0.950) slower"
    with pytest.raises(ValueError, match="`rows`"):
        target_table.confirmatory_table(rows.iloc[:0])
    with pytest.raises(ValueError, match="`rows`"):
        target_table.confirmatory_table(rows.drop(columns="in_family"))


def test_replications_are_later_runs_of_one_plan_on_one_gpu_model():
    from attn_analysis import configs
    g = configs.GLUON_PLANS["gluon-v2-target"]
    plan = {"matrix": g["matrix"], "modes": list(g["modes"]), "candidates": list(g["candidates"])}
    runs = {r: _confirm(r, u, gpu=gpu) for r, u, gpu in (
        ("h200-x", "GPU-aaaaaaaa-1", "NVIDIA H200"), ("h200b-x", "GPU-bbbbbbbb-1", "NVIDIA H200"),
        ("h100-x", "GPU-cccccccc-1", "NVIDIA H100 80GB HBM3"),
        ("h200-other", "GPU-dddddddd-1", "NVIDIA H200"))}
    for r in ("h200-x", "h200b-x", "h100-x"):
        runs[r].info["plan"] = dict(plan)
    runs["h200-other"].info["plan"] = {"matrix": "no-such-matrix"}
    # TRUTH: h200b-x repeats h200-x's plan on an H200; the H100 run is a first of its model;
    # a plan of no configs campaign is never a replication
    assert ta.replications(runs) == {"h200b-x"}
    assert ta.replications({}) == set()
    with pytest.raises(ValueError, match="`runs`"):
        ta.replications(list(runs.values()))
