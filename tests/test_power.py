"""The power of the comparison design at its family (analyse.power): the verdict rates
against simulated campaigns with known variance components, the processes needed, the
components read back from synthetic runs, and the pre-registered powered plans."""

import math

import numpy as np
import pandas as pd
import pytest

from attn_analysis import configs
from attn_analysis.analyse import power as pw
from attn_analysis.analyse import stats


def _simulate(delta, sigma_inter, sd_place, processes, placements, family, n_reps, seed):
    """Verdict shares of stats.compare over simulated campaigns: per process a shared
    process effect, a process-by-candidate effect of SD ``sigma_inter`` and placements of
    SD ``sd_place`` on each arm (one sample per placement: the placement's value)."""
    rng = np.random.default_rng(seed)
    counts = {}
    for _ in range(n_reps):
        base, cand = [], []
        for _ in range(processes):
            shared = rng.normal(0, 0.05)
            inter = rng.normal(0, sigma_inter)
            b = np.exp(shared + rng.normal(0, sd_place, placements))
            c = np.exp(shared - delta + inter + rng.normal(0, sd_place, placements))
            base.append([np.array([x]) for x in b])
            cand.append([np.array([x]) for x in c])
        v = stats.compare(base, cand, n_comparisons=family).verdict.value
        counts[v] = counts.get(v, 0) + 1
    return {k: v / n_reps for k, v in counts.items()}


@pytest.mark.parametrize("delta,processes,family", [
    (0.0, 4, 43), (0.0, 12, 120), (math.log(1.03), 8, 20), (math.log(1.03), 24, 120),
    (math.log(0.97), 6, 10)])
def test_verdict_rates_match_simulated_campaigns(delta, processes, family):
    inter, place, m = 0.004, 0.006, 8
    sigma = pw.diff_sd(inter, (place, place), m)
    rates = pw.verdict_rates(delta, sigma, processes, family)
    sim = _simulate(delta, inter, place, processes, m, family, n_reps=1500, seed=processes)
    for verdict in ("faster", "slower", "equivalent"):
        # 1500 replications: a binomial SD of at most 0.013; 4 SDs
        assert abs(rates[verdict] - sim.get(verdict, 0.0)) < 0.052, (verdict, rates, sim)


def test_rates_grow_with_processes_and_fall_with_the_family():
    sigma = 0.006
    powers = [pw.power(sigma, p, 120) for p in range(2, 40, 3)]
    eqs = [pw.equivalence_rate(sigma, p, 120) for p in range(2, 40, 3)]
    assert all(b >= a - 1e-9 for a, b in zip(powers, powers[1:]))
    assert all(b >= a - 1e-3 for a, b in zip(eqs, eqs[1:]))  # quadrature noise at ~1
    by_family = [pw.power(sigma, 12, m) for m in (1, 10, 100, 1000)]
    assert all(b <= a + 1e-12 for a, b in zip(by_family, by_family[1:]))
    assert by_family[-1] < by_family[0] - 0.1
    # the A/A twin is never called faster or slower beyond the margin
    r = pw.verdict_rates(0.0, sigma, 12, 120)
    assert r["faster"] < 1e-6 and r["slower"] < 1e-6


def test_processes_needed_is_the_fewest_that_reach_both_goals():
    for sigma, family in ((0.003, 43), (0.006, 120), (0.009, 96)):
        n = pw.processes_needed(sigma, family)
        ok = lambda p: (pw.power(sigma, p, family) >= pw.POWER_GOAL and
                        pw.equivalence_rate(sigma, p, family) >= pw.EQUIVALENCE_GOAL)
        assert ok(n) and not ok(n - 1)
    assert pw.processes_needed(0.05, 1000, max_processes=64) is None
    # the finding: 4 processes at m = 43 cannot decide at the calibration's SD
    assert pw.processes_needed(0.0047, 43) > 4
    assert pw.equivalence_rate(0.0047, 4, 43) < 0.5


def test_invalid_input_names_the_parameter():
    for kwargs, name in (({"sigma": 0.0}, "sigma"), ({"processes": 1}, "processes"),
                         ({"family": 0}, "family"), ({"margin": 1.5}, "margin")):
        args = dict(delta=0.0, sigma=0.01, processes=4, family=1)
        args.update(kwargs)
        with pytest.raises(ValueError, match=f"`{name}`"):
            pw.verdict_rates(**args)
    with pytest.raises(ValueError, match="`placements`"):
        pw.diff_sd(0.01, (0.01,), 0)


def _synthetic_placements(inter, place, processes=60, placements=8, seed=1):
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(processes):
        shared, i = rng.normal(0, 0.05), rng.normal(0, inter)
        for cand, extra in (("sdpa", 0.0), ("peer", i)):
            for p in range(placements):
                v = math.exp(shared + extra + rng.normal(0, place))
                rows.append(dict(config="B1-H1-S16-D64-fp16", candidate=cand, mode="graph",
                                 trial=t, placement=p, median_ms=v, kernel_ms=v * 0.9))
    return pd.DataFrame(rows)


def test_paired_components_recover_known_components():
    frame = _synthetic_placements(inter=0.005, place=0.008, processes=400)
    for level in ("call", "kernel"):
        row = pw.paired_components(frame, level=level).iloc[0]
        assert row.processes == 400 and row.placements == 8
        assert row.sd_placement_base == pytest.approx(0.008, rel=0.05)
        assert row.sd_interaction == pytest.approx(0.005, rel=0.15)
        assert row.sd_diff == pytest.approx(pw.diff_sd(0.005, (0.008, 0.008), 8), rel=0.1)
    comps = pw.paired_components(frame)
    assert pw.family_sigma(comps, 8) == pytest.approx(comps.sd_diff.iloc[0], rel=0.1)


def test_design_report_says_whether_a_design_decides():
    report = pw.design_report(4, 43, {"call": 0.0047, "kernel": 0.0063})
    assert [r.level for r in report] == ["call", "kernel"]
    assert not any(r.decides for r in report)
    text = pw.decidability_text(report)
    assert "CANNOT DECIDE" in text and "m = 43" in text
    ok = pw.design_report(24, 120, {"call": 0.006})[0]
    assert ok.decides and ok.power >= 0.8 and ok.equivalence >= 0.9


@pytest.mark.parametrize("name", sorted(configs.POWERED_PLANS))
def test_powered_plans_state_their_family_and_are_sized_for_it(name):
    plan = configs.POWERED_PLANS[name]
    assert configs.sweep_arguments(name)  # a sweep can run it
    if "family_candidates" not in plan:
        return
    assert plan["candidates"][0] == configs.BASELINE
    assert set(plan["family_candidates"]) < set(plan["candidates"])
    assert "sdpa_twin" in plan["candidates"]
    m = len(configs.matrix(plan["matrix"])) * len(plan["family_candidates"]) * len(
        plan["levels"])
    assert plan["family_size"] == m
    assert plan["trials"] % plan["shards"] == 0
    assert "Bonferroni" in plan["rule"]
    # sized as the comment above POWERED_PLANS says: decides up to an SD of 0.0088
    needed = pw.processes_needed(0.0088, m)
    assert needed is not None and needed <= plan["trials"]


def test_the_preregistered_gluon_plan_states_its_family_and_is_sized_for_it(capsys):
    """configs.GLUON_PLANS['gluon-v2-target'] (issue 43): gluon against sdpa at the target,
    both levels, m = 2; its processes at least what ``plan --power`` asks on the H100 and
    the H200 from the recorded SDs, both for gluon's comparisons alone and for all its
    candidates' (the twin's included); a run of it is judged at the registered m."""
    from conftest import main_here
    plan = configs.GLUON_PLANS["gluon-v2-target"]
    assert configs.sweep_arguments("gluon-v2-target")[-4:] == list(plan["candidates"])
    assert plan["candidates"][0] == configs.BASELINE and "sdpa_twin" in plan["candidates"]
    assert set(plan["family_candidates"]) == {"gluon"} < set(plan["candidates"])
    m = len(configs.matrix(plan["matrix"])) * len(plan["family_candidates"]) * len(
        plan["levels"])
    assert plan["family_size"] == m == 2 and plan["rule"] == configs.POWERED_RULE
    info = {"plan": {"matrix": plan["matrix"], "modes": list(plan["modes"]),
                     "candidates": list(plan["candidates"])}}
    assert pw.registered_family(info) == 2
    for gpu in ("NVIDIA H200", "NVIDIA H100 80GB HBM3"):
        for how in (("--campaign", "gluon-v2-target"),
                    ("--matrix", "fixed-v1", "--candidates", "sdpa", "gluon")):
            done = main_here(capsys, "plan", "--power", *how, "--gpu-model", gpu,
                             "--placements", str(plan["placements"]))
            assert done.returncode == 0, done.stderr
            for level in plan["levels"]:
                need = int(done.stdout.split(f"{level}: needs ")[1].split()[0])
                assert need <= plan["trials"], (gpu, how, level, need)


def test_family_size_counts_every_comparison_with_sdpa():
    assert pw.family_size(10, ("sdpa", "a", "b")) == 40
    assert pw.family_size(10, ("sdpa", "a"), levels=("kernel",)) == 10
    with pytest.raises(ValueError, match="`levels`"):
        pw.family_size(1, ("a",), levels=())


def test_recorded_design_sigmas_are_the_runs_and_pick_the_plan_shapes():
    import subprocess
    import sys
    from conftest import ROOT
    done = subprocess.run([sys.executable, "scripts/design_sigmas.py", "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    reports = [c.key for c in configs.matrix("reports-v1")]
    both = reports + [c.key for c in configs.matrix("long-grid-v1")]
    r = pw.load_design_sigmas(ROOT / pw.DESIGN_SIGMAS, "NVIDIA H200", reports[:3])
    a = pw.load_design_sigmas(ROOT / pw.DESIGN_SIGMAS, None, both)
    assert set(r) == {"call", "kernel"} and r != a
    assert pw.load_design_sigmas(ROOT / "no-such.json") is None
    # a filter that leaves no row falls back to the wider set, never to nothing
    sds = pw.load_design_sds(ROOT / pw.DESIGN_SIGMAS)
    assert pw.sigmas_of(sds, "no GPU", ["B1-H1-S1-D64-fp16"], ["nope"]) == pw.sigmas_of(sds)
    twin = pw.sigmas_of(sds, candidates=["sdpa_twin"])
    rows = sds[(sds.candidate == "sdpa_twin") & (sds.level == "call")]
    assert twin["call"] == pytest.approx(np.quantile(rows.sd, pw.SIGMA_QUANTILE))


def test_run_decidability_judges_a_recorded_run_at_its_family():
    from attn_analysis import record
    from conftest import ROOT
    run = record.load(ROOT / "data" / "runs" / "h200-sota-target")
    text = pw.run_decidability(run, sigmas={"call": 0.005, "kernel": 0.005})
    m = pw.family_size(run.samples["config"].nunique(), run.samples["candidate"].unique())
    assert f"family m = {m}" in text and "CANNOT DECIDE" in text  # 4 processes
    assert "decides at its family" in pw.run_decidability(
        run, sigmas={"call": 0.0005, "kernel": 0.0005})


def test_a_run_of_a_preregistered_plan_is_judged_at_the_registered_family():
    """The powered run measured configs.POWERED_PLANS['powered-v1-reports'], whose family
    (m = 120) leaves out its A/A twin: its decidability is said at that m, as 3.7 and
    ``compare`` judge it, not at the 140 comparisons its candidates would give."""
    from attn_analysis import configs, record
    from conftest import ROOT
    run = record.load(ROOT / "data" / "runs" / "h200-powered-v1-reports")
    registered = configs.POWERED_PLANS["powered-v1-reports"]["family_size"]
    assert pw.registered_family(run.info) == registered
    # every planned candidate but the baseline, the twin included, would give 140
    planned = pw.family_size(run.samples["config"].nunique(), run.info["plan"]["candidates"])
    assert planned != registered
    text = pw.run_decidability(run, sigmas={"call": 0.005, "kernel": 0.005})
    assert f"family m = {registered}" in text
    assert pw.registered_family({"plan": {"matrix": "no-such"}}) is None
    assert pw.registered_family(None) is None
    # an explicit family wins over the registered one
    assert "family m = 7" in pw.run_decidability(run, sigmas={"call": 0.005, "kernel": 0.005},
                                                 family=7)


def test_cli_plan_power_prints_the_family_and_the_processes_needed(capsys):
    from conftest import main_here
    done = main_here(capsys, "plan", "--power", "--campaign", "powered-v1-reports",
                     "--sigma", "0.005", "0.004")
    assert done.returncode == 0, done.stderr
    assert "family m = 120 (pre-registered)" in done.stdout
    need = pw.processes_needed(0.005, 120)
    assert f"call: needs {need} processes" in done.stdout
    small = main_here(capsys, "plan", "--power", "--matrix", "reports-v1", "--candidates",
                      "sdpa", "triton", "--trials", "2", "--sigma", "0.005", "0.005")
    assert "family m = 20" in small.stdout and "CANNOT DECIDE" in small.stdout
    bad = main_here(capsys, "plan", "--power", "--campaign", "nope")
    assert bad.returncode == 1 and "`--campaign`" in bad.stderr


def test_sweep_warns_when_its_design_cannot_decide(capsys):
    from attn_analysis.__main__ import _power_warning
    from attn_analysis.measure import sweep
    plan = sweep.Plan(configs=configs.matrix("reports-v1"), candidates=("sdpa", "triton"),
                      trials=2, device="cpu")
    _power_warning(plan)
    err = capsys.readouterr().err
    assert "cannot decide at its family (m = 20)" in err
    _power_warning(sweep.Plan(configs=configs.matrix("reports-v1"),
                              candidates=("sdpa", "triton"), trials=64, device="cpu"))
    assert capsys.readouterr().err == ""


def test_sigmas_at_more_placements_come_from_the_components():
    from conftest import ROOT
    sds = pw.load_design_sds(ROOT / pw.DESIGN_SIGMAS)
    assert set(pw.COMPONENT_COLUMNS) <= set(sds.columns)
    recorded = pw.sigmas_of(sds)
    assert pw.sigmas_of(sds, placements=8) == pytest.approx(recorded, abs=2e-6)  # rounding
    more = pw.sigmas_of(sds, placements=32)
    assert all(more[lv] < recorded[lv] for lv in recorded)
    # the SD of each row at P placements is diff_sd of its components
    row = sds.iloc[0]
    one = pw.sigmas_of(sds.iloc[[0]], placements=16)[row.level]
    assert one == pytest.approx(pw.diff_sd(row.sd_interaction, (row.sd_placement_base,
                                                               row.sd_placement_cand), 16))
    with pytest.raises(ValueError, match="`placements`"):
        pw.sigmas_of(sds[["device", "run", "config", "candidate", "level", "sd"]],
                     placements=16)
    with pytest.raises(ValueError, match="`placements`"):
        pw.sigmas_of(sds, placements=0)


def test_cli_plan_power_sizes_the_design_at_its_placements(capsys):
    from conftest import main_here
    at = {}
    for p in ("8", "48"):
        done = main_here(capsys, "plan", "--power", "--campaign", "powered-v2-long",
                         "--gpu-model", "NVIDIA H200", "--placements", p)
        assert done.returncode == 0, done.stderr
        assert f"at {p} placements per process" in done.stdout
        at[p] = int(done.stdout.split("kernel: needs ")[1].split()[0])
    assert at["48"] < at["8"]
    bad = main_here(capsys, "plan", "--power", "--campaign", "powered-v2-long",
                    "--placements", "0")
    assert bad.returncode == 1 and "`--placements`" in bad.stderr


def test_subsample_check_recovers_the_placement_lever():
    from attn_analysis.analyse import placement_lever
    frame = _synthetic_placements(inter=0.0, place=0.02, processes=300, placements=32)
    check = placement_lever.subsample_check(frame, groups=4)
    assert list(check.columns) == list(placement_lever.CHECK_COLUMNS)
    for r in check.itertuples():
        assert r.subset == 8
        assert r.sd_subset == pytest.approx(r.predicted_subset, rel=0.1)
        assert r.sd_all == pytest.approx(r.sd_subset / 2, rel=0.15)  # 4x placements: half
    # with a large process-by-candidate part the lever stops working
    stiff = placement_lever.subsample_check(
        _synthetic_placements(inter=0.03, place=0.005, processes=300, placements=32))
    assert (stiff.sd_all > 0.8 * stiff.sd_subset).all()
    with pytest.raises(ValueError, match="`groups`"):
        placement_lever.subsample_check(frame, groups=1)
    with pytest.raises(ValueError, match="`groups`"):
        placement_lever.subsample_check(_synthetic_placements(0.0, 0.02, 10, 6), groups=4)
    with pytest.raises(ValueError, match="`placements`"):
        placement_lever.subsample_check(frame.iloc[:0])


def test_lever_summary_is_the_median_ratio_of_the_check():
    from attn_analysis.analyse import placement_lever
    frame = _synthetic_placements(inter=0.0, place=0.02, processes=200, placements=32)
    got = placement_lever.lever_summary(frame)
    check = placement_lever.subsample_check(frame)
    assert got.comparisons == len(check) and got.placements == 32 and got.subset == 8
    assert got.median_ratio == pytest.approx((check.sd_all / check.sd_subset).median())
    assert got.noise_ratio == pytest.approx(0.5)
    assert got.median_ratio == pytest.approx(0.5, abs=0.08)
    with pytest.raises(ValueError, match="`baseline`"):
        placement_lever.lever_summary(frame, baseline="nope")
