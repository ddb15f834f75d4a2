"""The design calibrated over its processes (analyse.design_calibration): rates at each k
from one synthetic run with known effects, the rule that chooses the processes, the short
table, the figure; and, on the recorded runs, that the sweep's default is what the rule
chose."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attn_analysis.present import audit_plots
from attn_analysis.analyse import calibration, design_calibration as dc, protocols

CFG = "B32-H8-S512-D64-fp16"


def _run(n_trials=24, process_sd=0.004, seed=5):
    """sdpa, its twin and two spin controls 1 % and 4 % slower (0.5 and 2 margins), with a
    process spread that two processes cannot average out."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_trials):
        for cand, slow in (("sdpa", 0.0), ("sdpa_twin", 0.0), ("sdpa_spin1", 0.01),
                           ("sdpa_spin4", 0.04)):
            proc = rng.normal(0, process_sd)
            for p in range(4):
                ms = np.exp(np.log1p(slow) + proc + rng.normal(0, 0.001, 5))
                rows += [{"config": CFG, "candidate": cand, "mode": "graph", "trial": t,
                          "placement": p, "sample": i, "ms": float(x)}
                         for i, x in enumerate(ms)]
    return protocols.pool_runs({"r": (pd.DataFrame(rows), None)})


@pytest.fixture(scope="module")
def rates():
    return dc.rates_by_processes({"call": _run()}, "GPU A", ks=(2, 4, 6), n_resamples=100)


def test_rates_at_each_k_count_disjoint_replications_and_measure_sizes(rates):
    assert list(rates.columns) == list(dc.RATE_COLUMNS)
    aa = rates[rates["outcome"] == "claimed difference"].set_index("k")
    assert aa["n"].to_dict() == {2: 12, 4: 6, 6: 4}  # 24 processes // k
    assert (aa["candidate"] == "sdpa_twin").all() and (rates["device"] == "GPU A").all()
    sizes = rates[rates["outcome"] == "slower"].groupby("candidate")["size_margins"].mean()
    assert sizes["sdpa_spin1"] == pytest.approx(0.5, abs=0.2)  # 1 %, process noise 0.4 %
    assert sizes["sdpa_spin4"] == pytest.approx(2.0, abs=0.2)


def test_power_grows_with_processes_and_the_rule_picks_the_fewest_that_reach_the_goal(rates):
    big = rates[(rates["candidate"] == "sdpa_spin4") & (rates["outcome"] == "slower")]
    power = big.set_index("k")["rate"]
    assert power[2] < dc.POWER_GOAL <= power[4] <= power[6]
    assert dc.choose_processes(rates) == 4
    # no control of 3 margins or more: the rule cannot choose
    assert dc.choose_processes(rates, min_size=3.0) is None
    # a device where no k reaches the goal makes the whole choice None
    other = rates.assign(device="GPU B", rate=0.0)
    assert dc.choose_processes(pd.concat([rates, other])) is None
    assert dc.choose_processes(rates, level="kernel") is None  # no kernel-level rows


def test_the_design_meets_the_goal_at_every_level_that_can_be_held_to_it(rates):
    # only the call level has rows: the design is its choice
    assert dc.choose_design(rates) == (4, {"call": 4, "kernel": None})
    # a kernel level whose controls are small cannot be held to the goal: it does not vote
    small = rates.assign(level="kernel", size_margins=rates["size_margins"] / 10)
    assert dc.choose_design(pd.concat([rates, small])) == (4, {"call": 4, "kernel": None})
    # a kernel level that needs more processes decides the design
    slow = rates.assign(level="kernel", rate=np.where(rates["k"] == 6, 1.0, 0.0))
    assert dc.choose_design(pd.concat([rates, slow])) == (6, {"call": 4, "kernel": 6})
    # a level that has large controls but reaches the goal at no k: no design
    never = rates.assign(level="kernel", rate=0.0)
    assert dc.choose_design(pd.concat([rates, never])) == (None, {"call": 4, "kernel": None})
    # no control of 3 margins anywhere: nothing to hold the design to
    assert dc.choose_design(rates, min_size=3.0) == (None, {"call": None, "kernel": None})


def test_design_table_is_short_and_says_events_and_sizes(rates):
    t = dc.design_table(rates, 4)
    assert list(t["control"]) == ["sdpa_twin", "sdpa_spin1", "sdpa_spin4"]  # smallest first
    assert all(x.endswith("/6") for x in t["events / replications"])
    events = [int(x.split("/")[0]) for x in t["events / replications"]]
    assert list(t["rate"]) == pytest.approx([e / 6 for e in events])
    assert all("%–" in x for x in t["95 % interval"])
    assert t["size (margins)"].iloc[2] == pytest.approx(2.0, abs=0.2)
    with pytest.raises(ValueError, match="`k` must be one of"):
        dc.design_table(rates, 5)


@pytest.mark.parametrize("call, message", [
    (lambda: dc.rates_by_processes({}, "d"), "`frames` must map levels"),
    (lambda: dc.rates_by_processes({"wall": _run()}, "d"), "`frames` must map levels"),
    (lambda: dc.rates_by_processes({"call": _run()}, "d", ks=()), "`ks` must hold"),
    (lambda: dc.rates_by_processes({"call": _run()}, "d", ks=(0,)), "`ks`"),
    (lambda: dc.choose_processes(pd.DataFrame({"k": [2]})), "`rates`"),
])
def test_invalid_arguments_are_refused_with_their_name(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_processes_figure_has_a_panel_per_level_and_device(rates):
    two = pd.concat([rates, rates.assign(level="kernel")])
    fig = audit_plots.power_by_processes(two, dc.POWER_GOAL, "synthetic")
    assert len(fig.axes) == 2
    assert [ax.get_title() for ax in fig.axes] == ["GPU A\ncall level", "GPU A\nkernel level"]


@pytest.mark.slow
def test_the_sweep_default_is_what_the_recorded_calibration_chose():
    """The default processes (measure.plan.DEFAULT_TRIALS) follow the rule applied at both
    levels to the recorded calibration runs, pooled per GPU model (the calibration chapter's
    runs, through the chapter's own code)."""
    from attn_analysis import record
    from attn_analysis.chapters import design_calibration as chapter
    from attn_analysis.measure.plan import DEFAULT_TRIALS
    runs = [record.load(Path(__file__).parents[1] / "data" / "runs" / f"{name}-calibration-{v}")
            for name, v in (("h100", "v3"), ("h100", "v4"), ("h100b", "v4"), ("h200", "v3"),
                            ("h200", "v4"))]
    cal = chapter.calibrate_design(runs, (2, 3, 4), margin=0.02)
    assert [len(g) for g in cal.groups.values()] == [3, 2]
    assert (cal.choice, cal.by_level) == (DEFAULT_TRIALS, {"call": 3, "kernel": 4})
    assert DEFAULT_TRIALS == 4
    texts = chapter.design_texts(cal)
    assert texts["cal3_choice"] == "4" and texts["cal3_choice_kernel"] == "4"
    assert "H100 (GPUs H100-c, H100-d, H100-e)" in texts["cal3_processes"]
    assert texts["cal3_runs_by_model"] == (
        "H100 (GPUs H100-c, H100-d, H100-e): h100-calibration-v3, h100-calibration-v4, "
        "h100b-calibration-v4; H200 (GPUs H200-h, H200-i): h200-calibration-v3, "
        "h200-calibration-v4")
    # the design's A/A twin beyond the margin, per GPU model (the abstract's sentence)
    assert texts["cal3_aa_beyond_short"] == (
        "0 of 72 replications (H100) and 0 of 75 (H200), per call and kernel")
    assert ("at the kernel level on the H100 (GPUs H100-c, H100-d, H100-e), 51% at 1.46 "
            "margins (sdpa_spin1000, 37/72) and 100% at 2.30 margins (sdpa_spin2500, 57/57)"
            ) in texts["cal3_near_goal"]
    # the -v3 and -v4 runs of a model share seed 0; h100b-calibration-v4 has its own
    assert texts["cal3_seeds"] == ("on the H100 (GPUs H100-c, H100-d, H100-e), 120 of "
                                   "289; on the H200 (GPUs H200-h, H200-i), 190 of 303")


def _fake_run(run_id, uuid, seed, start="spawn", plan_seed=0):
    import types
    samples = _run(n_trials=12, seed=seed)[0].drop(columns="run")
    places = (samples.groupby(["config", "candidate", "mode", "trial", "placement"],
                              as_index=False)["ms"].median()
              .rename(columns={"ms": "kernel_ms"}).assign(kernel_ms=lambda d: d["kernel_ms"] * 0.9))
    return types.SimpleNamespace(
        run_id=run_id, device="NVIDIA H100 80GB HBM3", start_method=start, samples=samples,
        placements=places, kernels=None, info={"plan": {"seed": plan_seed}},
        fingerprint={"trials": {"0": {"gpu_uuid": f"GPU-{uuid}-0"}}})


def test_the_chapter_pools_a_models_runs_and_puts_the_rates_in_words():
    from attn_analysis.chapters import design_calibration as chapter
    runs = [_fake_run("a", "aaaaaaaa", 1), _fake_run("b", "bbbbbbbb", 2, "forkserver")]
    cal = chapter.calibrate_design(runs, (2, 4), margin=0.02)
    assert set(cal.rates["device"]) == {"H100 (GPUs aaaaaaaa, bbbbbbbb)"}
    aa = cal.pick("call", 4, "aa", "claimed difference")
    assert aa["n"].tolist() == [6]  # 12 // 4 replications in each of the two runs
    texts = chapter.design_texts(cal)
    assert "cal3_runs" not in texts  # the processes' text names the runs
    assert "(a)" in texts["cal3_processes"] and "(b)" in texts["cal3_processes"]
    assert texts["cal3_runs_by_model"] == "H100 (GPUs aaaaaaaa, bbbbbbbb): a, b"
    c = cal.pick("call", 4, "aa", "beyond margin").iloc[0]
    kr = cal.pick("kernel", 4, "aa", "beyond margin").iloc[0]
    if (c["events"], c["n"]) == (kr["events"], kr["n"]):
        assert texts["cal3_aa_beyond_short"] == (
            f"{int(c['events'])} of 6 replications (H100), per call and kernel")
    else:
        assert texts["cal3_aa_beyond_short"] == (
            f"{int(c['events'])}/6 per call and {int(kr['events'])}/6 per kernel (H100)")
    assert texts["cal3_processes"] == ("12 (a) + 12 (b) processes on the H100 "
                                       "(GPUs aaaaaaaa, bbbbbbbb)")
    assert texts["cal3_choice_call"] == str(cal.by_level["call"] or chapter.NO_CHOICE)
    assert "at the call level (95 % upper bound" in texts["cal3_aa"]
    # the controls on either side of 1.5 margins at each level: the 1 % spin (0.5 margins)
    # below, the 4 % spin (2 margins) above
    near = texts["cal3_near_goal"].split("; ")
    assert [t.split(",")[0] for t in near] == ["at the call level on the H100 (GPUs aaaaaaaa",
                                                "at the kernel level on the H100 (GPUs aaaaaaaa"]
    assert all(t.index("(sdpa_spin1, ") < t.index(" and ") < t.index("(sdpa_spin4, ")
               and t.count("/6)") == 2 for t in near)
    beyond = cal.pick("kernel", 4, "aa", "beyond margin")
    assert len(beyond) == 1 and texts["cal3_aa_beyond"].startswith(
        f"On the H100 (GPUs aaaaaaaa, bbbbbbbb): "
        f"{int(cal.pick('call', 4, 'aa', 'beyond margin')['events'].iloc[0])}/6 per call "
        f"and {int(beyond['events'].iloc[0])}/6 per kernel (95 % upper bound at most ")
    assert texts["cal3_aa_beyond"].endswith(").")
    assert "margins on the H100 (GPUs" in texts["cal3_power_k2"]
    assert texts["cal3_seeds"] == "on the H100 (GPUs aaaaaaaa, bbbbbbbb), 24 of 24"
    table, sentence = chapter.spread_table(cal)
    assert table["processes start"].tolist() == ["spawn", "forkserver"]
    assert sentence.startswith("on the H100 (GPUs aaaaaaaa, bbbbbbbb), ")
    assert "(spawn, a) against" in sentence and "(forkserver, b)" in sentence


def test_repeated_draws_counts_processes_sharing_seed_and_trial_within_a_model():
    runs = [_fake_run("a", "aaaaaaaa", 1), _fake_run("b", "bbbbbbbb", 2),
            _fake_run("c", "cccccccc", 3, plan_seed=12),  # trials 0..11 draw 12..23
            _fake_run("d", "dddddddd", 4)]  # another model: counted apart
    runs[3].device = "NVIDIA H200"
    # a and b repeat each other's 12 trials; c's (12, t) pairs are its own; d, on another
    # model, draws what a and b drew but is not pooled with them
    assert dc.repeated_draws(runs) == {"NVIDIA H100 80GB HBM3": (24, 36), "NVIDIA H200": (0, 12)}
    runs[2].info = {"plan": {}}  # a plan without a seed was seeded 0
    assert dc.repeated_draws(runs[:3]) == {"NVIDIA H100 80GB HBM3": (36, 36)}


def test_process_spread_reads_the_baseline_and_the_twin_of_each_process():
    import types
    rng = np.random.default_rng(3)
    rows = []
    for t in range(6):
        shift = rng.normal(0, 0.01)
        for cand, extra in (("sdpa", 0.0), ("sdpa_twin", 0.002 * (-1) ** t)):
            rows += [{"config": CFG, "candidate": cand, "mode": "graph", "trial": t,
                      "placement": 0, "sample": i, "ms": 0.05 * np.exp(shift + extra)}
                     for i in range(3)]
    run = types.SimpleNamespace(run_id="r", device="GPU A", start_method="forkserver",
                                samples=pd.DataFrame(rows))
    out = dc.process_spread(run)
    assert set(out) == set(dc.SPREAD_COLUMNS) and out["processes"] == 6
    assert out["start_method"] == "forkserver" and out["device"] == "GPU A"
    per = np.log(pd.DataFrame(rows).query("candidate == 'sdpa'").groupby("trial")["ms"].first())
    assert out["sd_process_pct"] == pytest.approx(100 * per.std(ddof=1))
    assert out["sd_twin_ratio_pct"] == pytest.approx(100 * np.std([0.002, -0.002] * 3, ddof=1))
    assert out["twin_ratio_pct"] == pytest.approx(0.0, abs=1e-9)
    run.samples = run.samples[run.samples["candidate"] == "sdpa"]
    with pytest.raises(ValueError, match="must hold 'sdpa' and 'sdpa_twin'"):
        dc.process_spread(run)


def test_runs_are_grouped_by_model_and_pooled_per_level():
    import types
    base = pd.DataFrame({"config": [CFG] * 2, "candidate": ["sdpa", "sdpa_twin"],
                         "mode": ["graph"] * 2, "trial": [0, 0], "sample": [0, 0],
                         "ms": [0.05, 0.05]})
    places = base.drop(columns="sample").assign(placement=0, kernel_ms=0.04)
    mk = lambda rid, dev: types.SimpleNamespace(run_id=rid, device=dev, samples=base,
                                                placements=places, kernels=None)
    runs = [mk("a", "H100"), mk("b", "H200"), mk("c", "H100")]
    groups = dc.runs_by_model(runs)
    assert {m: [r.run_id for r in rs] for m, rs in groups.items()} == {"H100": ["a", "c"],
                                                                        "H200": ["b"]}
    frames = dc.pooled_levels(groups["H100"])
    assert set(frames) == set(calibration.LEVELS)
    assert sorted(frames["call"][0]["run"].unique()) == ["a", "c"]
    assert frames["kernel"][0]["ms"].tolist() == [0.04] * 4
    with pytest.raises(ValueError, match="one GPU model"):
        dc.pooled_levels(runs)
    with pytest.raises(ValueError, match="at least one loaded run"):
        dc.runs_by_model([])


def test_level_samples_gives_a_runs_timed_samples_or_its_kernel_times():
    import types
    samples = pd.DataFrame({"config": [CFG], "candidate": ["sdpa"], "mode": ["graph"],
                            "trial": [0], "sample": [0], "ms": [0.05]})
    placements = pd.DataFrame({"config": [CFG] * 2, "candidate": ["sdpa"] * 2,
                               "mode": ["graph"] * 2, "trial": [0, 0], "placement": [0, 1],
                               "kernel_ms": [0.047, None]})
    run = types.SimpleNamespace(samples=samples, placements=placements)
    assert protocols.level_samples(run, "call") is samples
    kernel = protocols.level_samples(run, "kernel")
    assert list(kernel["ms"]) == [0.047] and list(kernel["placement"]) == [0]
    with pytest.raises(ValueError, match="`level` must be one of"):
        protocols.level_samples(run, "wall")


def test_end_of_line_labels_are_moved_apart_and_stay_on_the_axes():
    from attn_analysis.present.audit_plots import _spread_labels
    out = _spread_labels([(1.0, "2.9 m", "a"), (1.0, "1.9 m", "b"), (0.5, "1.3 m", "c")],
                         gap=0.07)
    ys = [y for y, _, _ in out]
    assert [t for _, t, _ in out] == ["1.3 m", "2.9 m", "1.9 m"]  # lowest first, stable
    assert ys[0] == 0.5 and ys[-1] == pytest.approx(1.0)
    assert all(b - a >= 0.07 - 1e-12 for a, b in zip(ys, ys[1:]))
    assert _spread_labels([(0.2, "x", "k")], gap=0.07) == [(0.2, "x", "k")]


def test_the_processes_figure_counts_the_aa_twin_as_the_abstract_does(rates):
    """Fig. 'design power' plots the A/A twin's differences beyond the margin (the outcome
    the abstract's "0 of n" counts), not within-margin verdicts, unless asked."""
    def aa_labels(fig):
        return [lbl for ax in fig.axes for lbl in ax.get_legend_handles_labels()[1]
                if "A/A" in lbl]
    labels = aa_labels(audit_plots.power_by_processes(rates, dc.POWER_GOAL, "synthetic"))
    assert labels and all(lbl.endswith("A/A, beyond margin") for lbl in labels)
    labels = aa_labels(audit_plots.power_by_processes(
        rates, dc.POWER_GOAL, "synthetic", aa_outcome="claimed difference"))
    assert labels and all(lbl.endswith("A/A, claimed difference") for lbl in labels)
    with pytest.raises(ValueError, match="`aa_outcome`"):
        audit_plots.power_by_processes(rates, dc.POWER_GOAL, "synthetic", aa_outcome="x")
