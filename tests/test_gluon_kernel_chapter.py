"""The state-of-the-art chapter's section on our Gluon kernel (``chapters.gluon_kernel``) on
synthetic runs of known truth: which runs it reads, the variant each shape's tuning chose,
the direct comparison with FlashAttention-4 and the sentences about the goals."""

from __future__ import annotations

import json
import types

import numpy as np
import pandas as pd
import pytest

from attn_analysis.chapters import state_of_the_art as sota
from attn_analysis.analyse import catalog
from attn_analysis.chapters import gluon_kernel as gk
from attn_analysis.configs import TARGET, Config

SHORT, MID, LONG = Config(128, 32, 128, 64), Config(8, 32, 2048, 64), Config(2, 32, 8192, 64)
KERNELS = {"sdpa": "cudnn_fprop", "sdpa_cudnn": "cudnn_fprop", "fa4": "flash_fwd_sm90",
           "gluon": "_gluon_attn_fwd", "triton": "_attn_fwd"}


def make_run(run_id, matrix, truth, trials=4, gpu="NVIDIA H200", uuid="GPU-78684018-aaaa",
             variants=None, seed=0):
    """A loaded-run stand-in: ``truth`` maps config -> candidate -> time relative to
    SDPA; ``variants`` maps config -> the variant the Gluon kernel's tuning chose (trial 0
    tunes, the later trials reuse)."""
    rng = np.random.default_rng(seed)
    samples, placements, kernels, units = [], [], [], []
    for config, by_cand in truth.items():
        base = 0.05 * config.seq_len / 512
        for cand, factor in by_cand.items():
            for t in range(trials):
                for p in range(4):
                    ms = base * factor * (1 + 0.002 * rng.standard_normal(20))
                    samples += [{"config": config.key, "candidate": cand, "mode": "graph",
                                 "trial": t, "placement": p, "ms": float(x)} for x in ms]
                    placements.append({"config": config.key, "candidate": cand,
                                       "mode": "graph", "trial": t, "placement": p,
                                       "kernel_ms": float(np.median(ms)) * 0.97})
                info = {"meta": catalog.meta_for(cand).as_dict()}
                if cand == "gluon":
                    info["config"] = {"variant": (variants or {}).get(config.key, "plain"),
                                      "tuned_ms": base * factor, "n_tried": 6,
                                      **({"reused": True} if t else {})}
                units.append({"config": config.key, "candidate": cand, "trial": t,
                              "status": "ok", "reason": "", "info": json.dumps(info)})
            kernels.append({"config": config.key, "candidate": cand, "kernel": KERNELS[cand],
                            "calls_per_call": 1.0, "device_ms_per_call": base * factor * 0.97})
    return types.SimpleNamespace(
        run_id=run_id, device=gpu, samples=pd.DataFrame(samples),
        placements=pd.DataFrame(placements), kernels=pd.DataFrame(kernels),
        units=pd.DataFrame(units), info={"plan": {"matrix": matrix}},
        fingerprint={"trials": {"0": {"gpu_name": gpu, "gpu_uuid": uuid}}})


TARGET_TRUTH = {TARGET: {"sdpa": 1.0, "sdpa_cudnn": 1.0, "triton": 1.08, "gluon": 1.10}}
LONG_TRUTH = {SHORT: {"sdpa": 1.0, "gluon": 0.90, "fa4": 1.3},
              MID: {"sdpa": 1.0, "gluon": 1.10, "fa4": 0.95},
              LONG: {"sdpa": 1.0, "gluon": 0.80, "fa4": 0.80}}


@pytest.fixture(scope="module")
def runs():
    return {"g-target": make_run("g-target", "fixed-v1", TARGET_TRUTH),
            "g-long": make_run("g-long", "long-grid-v1", LONG_TRUTH,
                               variants={MID.key: "pingpong", LONG.key: "fa3"}),
            "other": make_run("other", "fixed-v1", {TARGET: {"sdpa": 1.0, "triton": 1.0}}),
            "g-reports": make_run("g-reports", "reports-v1", TARGET_TRUTH)}


def test_gluon_runs_split_by_matrix_and_refuse_what_they_cannot_use(runs):
    found = gk.gluon_runs(runs)
    assert {part: list(rs) for part, rs in found.items()} == {"target": ["g-target"],
                                                              "long": ["g-long"]}
    assert list(gk.gluon_runs(runs, ["g-long"])["target"]) == []
    with pytest.raises(ValueError, match="must name recorded runs"):
        gk.gluon_runs(runs, ["nope"])
    with pytest.raises(ValueError, match="measured the Gluon kernel"):
        gk.gluon_runs(runs, ["other"])
    with pytest.raises(ValueError, match="measured the Gluon kernel"):
        gk.gluon_runs(runs, ["g-reports"])  # a matrix the section does not show


def test_the_state_of_the_art_campaigns_leave_gluon_runs_out(runs):
    with_peer = make_run("g-peer", "long-grid-v1", LONG_TRUTH)
    assert sota.campaign_runs({"g-peer": with_peer}, "long") == {}


def test_variant_choices_read_each_shapes_tuning(runs):
    got = gk.variant_choices(runs["g-long"]).set_index("config")
    assert got.loc[MID.key, "variant"] == "pingpong" and got.loc[LONG.key, "variant"] == "fa3"
    assert got.loc[SHORT.key, "variant"] == "plain"
    assert (got["n_processes"] == 4).all() and (got["n_reused"] == 3).all()
    # another candidate's build record is not the Gluon kernel's, whatever its keys
    other = make_run("x", "long-grid-v1", {MID: {"fa4": 1.0, "gluon": 1.0, "sdpa": 1.0}})
    other.units.loc[other.units["candidate"] == "fa4", "info"] = json.dumps(
        {"config": {"variant": "pingpong"}})
    assert set(gk.variant_choices(other)["variant"]) == {"plain"}
    assert list(gk.variant_choices(runs["other"]).columns) == [
        "config", "variant", "tuned_ms", "n_tried", "n_processes", "n_reused"]
    assert gk.variant_choices(runs["other"]).empty


def test_against_peer_is_its_own_family_from_the_given_length(runs):
    vs = gk.against_peer(runs["g-long"], "fa4", min_seq_len=2048, n_resamples=500)
    assert set(vs["config"]) == {MID.key, LONG.key}  # S = 128 left out
    assert set(vs["candidate"]) == {"gluon"} and (vs["n_comparisons"] == len(vs)).all()
    kernel = vs[vs["level"] == "kernel"].set_index("config")
    # MID: gluon 1.10 of SDPA's time, fa4 0.95: gluon is slower than fa4 (speedup ~0.86)
    assert kernel.loc[MID.key, "verdict"] == "slower"
    assert kernel.loc[MID.key, "speedup"] == pytest.approx(0.95 / 1.10, rel=0.02)
    assert kernel.loc[LONG.key, "verdict"] == "equivalent"  # the same time
    counts = gk.verdict_counts(vs)
    assert counts == {"slower": 1, "equivalent": 1, "n": 2, "lowest": pytest.approx(
        kernel["speedup"].min()), "highest": pytest.approx(kernel["speedup"].max())}
    text = gk.versus_sentence("H200 78684018", counts, "FlashAttention-4")
    assert "over 2 configurations: 1 equivalent, 1 slower" in text
    with pytest.raises(ValueError, match="no samples of 'fa4'"):
        gk.against_peer(runs["g-target"], "fa4")
    with pytest.raises(ValueError, match="seq_len >= 100000"):
        gk.against_peer(runs["g-long"], "fa4", min_seq_len=100_000)


def test_goal_sentences_follow_the_data(runs):
    slow = sota.comparison_table(runs["g-target"], n_resamples=500)
    assert "is not reached on the H200 78684018" in gk.goal_sentence([slow])
    fast = sota.comparison_table(make_run("f", "fixed-v1", {TARGET: {"sdpa": 1.0,
                                                                     "gluon": 0.80}}),
                                 n_resamples=500)
    assert "is reached on every GPU measured" in gk.goal_sentence([fast])
    assert gk.goal_sentence([]).startswith("No recorded run")
    assert "no worse than FA4 is not reached: ours is slower beyond the " \
        "margin at 1 of 2 shapes from S = 2048 on the X" in gk.peer_goal_sentence({"X": {"slower": 1, "n": 2}},
                                                            "FA4", "from S = 2048")
    assert "goal of being no worse is met" in gk.peer_goal_sentence({"X": {"n": 2}}, "FA4")
    with pytest.raises(ValueError, match="`level` must be one of"):
        gk.verdict_counts(slow, level="wall")


def test_goal_sentence_reads_the_kernel_level_lower_ends(runs):
    tables = [sota.comparison_table(runs["g-target"], n_resamples=500)]
    got = gk.goal_sentence(tables)
    assert got.startswith(
        "The kernel's goal was a kernel-level interval above 1.02 over SDPA. It is not "
        "reached on the H200 78684018. Lower ends: 0.")
    assert max(len(s.split()) for s in got.split(". ")) < 25  # sentences under 25 words


def test_long_section_counts_and_stacks_per_gpu(runs):
    tables = {"g-long": sota.comparison_table(runs["g-long"], n_resamples=500)}
    values, versus, choices = gk.long_section(tables, {"g-long": runs["g-long"]}, "fa4",
                                              "FlashAttention-4", n_resamples=500)
    # against SDPA per kernel: 0.90 and 0.80 of SDPA's time are faster, 1.10 slower
    assert (values["gl_h200_long_n"], values["gl_h200_long_faster"],
            values["gl_h200_long_slower"]) == (3, 2, 1)
    assert values["gl_h200_fa4_m"] == len(versus) == 6
    assert "shapes from S = 2048 on the H200" in values["gl_fa4_goal_sentence"]
    assert "at 1 of 2 shapes from S = 2048 on the H200 78684018" in values["gl_fa4_goal_sentence"]
    # said once per model, grammatical for any count (no "faster at 0 of 3")
    assert values["gl_long_sentence"] == (
        "Across the long grid, in exploratory runs, the Gluon kernel is faster than SDPA's "
        "kernel at 2 of 3 shapes on the H200.")
    assert set(choices["machine"]) == {"H200 78684018"} and len(choices) == 3


def _with_info(run, **info):
    run.info = {**run.info, **info}
    return run


def test_lead_runs_take_a_confirmatory_run_per_model_else_the_newest():
    fast = {TARGET: {"sdpa": 1.0, "sdpa_cudnn": 1.0, "gluon": 0.9}}
    runs = {"old": _with_info(make_run("old", "fixed-v1", TARGET_TRUTH),
                              finished_utc="2026-11-25T00:00:00+00:00"),
            "new": _with_info(make_run("new", "fixed-v1", TARGET_TRUTH, uuid="GPU-11111111-a"),
                              finished_utc="2026-11-26T00:00:00+00:00"),
            "h100": make_run("h100", "fixed-v1", TARGET_TRUTH, gpu="NVIDIA H100 80GB HBM3",
                             uuid="GPU-22222222-a")}
    assert list(gk.lead_runs(runs)) == ["h100", "new"]
    runs["conf"] = _with_info(make_run("conf", "confirm-v1", fast, uuid="GPU-33333333-a"),
                              finished_utc="2026-11-20T00:00:00+00:00")
    assert list(gk.lead_runs(runs)) == ["h100", "conf"]
    runs["conf2"] = make_run("conf2", "confirm-v1", fast, uuid="GPU-44444444-a")
    assert list(gk.lead_runs(runs)) == ["h100", "conf", "conf2"]  # replications


def test_target_sentence_states_every_level_the_family_and_sdpas_other_kernels(monkeypatch):
    run = make_run("conf", "confirm-v1", {TARGET: {"sdpa": 1.0, "sdpa_cudnn": 1.0,
                                                   "gluon": 0.9}},
                   variants={TARGET.key: "fa3_n128_s3"})
    run.kernels = pd.concat([run.kernels, pd.DataFrame([{
        "config": TARGET.key, "candidate": "sdpa", "kernel": "Memset (Device)",
        "calls_per_call": 1.0, "device_ms_per_call": 0.0008}])], ignore_index=True)
    t = sota.comparison_table(run, n_resamples=300, n_comparisons=2)
    text = gk.target_sentence(t, run)
    assert "the confirmatory run conf has 4 processes, a family of m = 2" in text
    assert "variant fa3_n128_s3" in text
    assert "Our Gluon kernel runs at 1.1" in text and "faster) of SDPA per call" in text
    assert "Per kernel it runs at" in text and "per attention kernel at" in text
    assert text.endswith("SDPA's call also runs Memset (Device) beside its attention "
                         "kernel: 0.8 µs per call in the profile.")
    assert "(outside the family)" not in text  # no plan registered a family here
    from attn_analysis.analyse import power
    monkeypatch.setattr(power, "registered_family", lambda info: 2)
    assert "per attention kernel (outside the family) at" in gk.target_sentence(t, run)
    with pytest.raises(ValueError, match="no gluon row"):
        gk.target_sentence(t[t["candidate"] != "gluon"], run)


def _levels(call: str, attention: str) -> pd.DataFrame:
    rows = [("call", call, 1.04), ("attention", attention, 1.0)]
    return pd.DataFrame([{"candidate": "gluon", "config": TARGET.key, "level": lv,
                          "verdict": v, "speedup": x, "ci_low": x - 0.01,
                          "ci_high": x + 0.01} for lv, v, x in rows])


def test_lead_sentence_says_where_a_lead_per_call_comes_from():
    assert gk.lead_sentence(_levels("equivalent", "equivalent"), "H200-a") == ""
    tie = gk.lead_sentence(_levels("faster", "equivalent"), "H200-a")
    assert tie == ("Per attention kernel it is equivalent to SDPA's on the H200-a "
                   "(1.000×, 0.990–1.010): the lead is in the call.")
    assert "slower than SDPA's only within the margin" in gk.lead_sentence(
        _levels("faster", "slower within margin"), "H200-a")
    assert "It is also faster per attention kernel on the H200-a" in gk.lead_sentence(
        _levels("faster", "faster"), "H200-a")
