"""Protocol v2's statistics and verbs: nested bootstrap, the margin-aware verdict rule,
family-wise adjustment, call and kernel speedups, and the compare / calibrate CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attn_analysis.analyse import bootstrap, calibration, comparisons, kernel_evidence, stats
from attn_analysis import record
from attn_analysis.measure import sweep
from attn_analysis.configs import Config
from conftest import main_here

ROOT = Path(__file__).resolve().parents[1]


def nested(rng, centre, procs=6, places=8, n=20, sd_place=0.003, sd_sample=0.001):
    """Processes -> placements -> samples around ``centre`` with the given spreads."""
    return [[centre * rng.normal(1, sd_place) * rng.normal(1, sd_sample, n)
             for _ in range(places)] for _ in range(procs)]


@pytest.mark.parametrize("ratio, verdict", [
    (1.00, stats.Verdict.EQUIVALENT),
    (1.01, stats.Verdict.FASTER_WITHIN_MARGIN),
    (0.99, stats.Verdict.SLOWER_WITHIN_MARGIN),
    (1.05, stats.Verdict.FASTER),
    (0.95, stats.Verdict.SLOWER),
])
def test_verdict_rule_separates_beyond_margin_from_within(ratio, verdict):
    rng = np.random.default_rng(1)
    base, cand = nested(rng, 1.0), nested(rng, 1.0 / ratio)
    assert stats.compare(base, cand, margin=0.02, n_resamples=2000).verdict is verdict


def test_a_real_difference_that_straddles_the_margin_is_inconclusive_not_faster():
    rng = np.random.default_rng(2)
    base, cand = nested(rng, 1.0, procs=3, places=3, sd_place=0.01), None
    cand = nested(rng, 1.0 / 1.02, procs=3, places=3, sd_place=0.01)
    cmp = stats.compare(base, cand, margin=0.02, n_resamples=2000)
    assert cmp.ratio_ci.low < 1.02 < cmp.ratio_ci.high
    assert cmp.verdict is stats.Verdict.INCONCLUSIVE


def test_bonferroni_widens_the_interval_and_can_turn_faster_into_inconclusive():
    rng = np.random.default_rng(3)
    base, cand = nested(rng, 1.0, procs=4, places=4), nested(rng, 1.0 / 1.027, procs=4, places=4)
    one = stats.compare(base, cand, n_resamples=20000)
    many = stats.compare(base, cand, n_resamples=20000, n_comparisons=200)
    assert many.ratio_ci.low < one.ratio_ci.low and many.ratio_ci.high > one.ratio_ci.high
    assert many.ratio_ci.confidence == pytest.approx(1 - 0.05 / 200)
    with pytest.raises(ValueError, match="n_comparisons"):
        stats.compare(base, cand, n_comparisons=0)


def test_the_placement_level_carries_placement_variance_into_the_interval():
    """Tight samples, spread placements: resampling placements must widen the interval
    beyond what resampling processes and samples of flattened placements gives."""
    rng = np.random.default_rng(4)
    base = nested(rng, 1.0, procs=3, places=8, sd_place=0.02, sd_sample=0.0005)
    cand = nested(rng, 1.0, procs=3, places=8, sd_place=0.02, sd_sample=0.0005)
    three = bootstrap.ratio_ci(base, cand, n_resamples=4000)
    single = bootstrap.ratio_ci([[p[0]] for p in base], [[p[0]] for p in cand], n_resamples=4000)
    assert three.high - three.low > 0.01
    # with one placement per process the same code is the two-stage bootstrap
    flat = bootstrap.ratio_ci([p[0] for p in base], [p[0] for p in cand], n_resamples=4000)
    assert (single.low, single.high) == (flat.low, flat.high)


def _frames(kernel=True, extra=None):
    rng = np.random.default_rng(5)
    rows, places = [], []
    arms = (("sdpa", 1.0), ("fast", 0.9), ("twin", 1.0)) + ((extra,) if extra else ())
    for cand, centre in arms:
        for t in range(4):
            for p in range(4):
                ms = centre * rng.normal(1, 0.003) * rng.normal(1, 0.001, 10)
                rows += [{"config": "C", "candidate": cand, "mode": "graph", "trial": t,
                          "placement": p, "sample": i, "ms": x} for i, x in enumerate(ms)]
                places.append({"config": "C", "candidate": cand, "mode": "graph", "trial": t,
                               "placement": p,
                               "kernel_ms": centre * 0.95 * rng.normal(1, 0.003) if kernel
                               else np.nan})
    return pd.DataFrame(rows), pd.DataFrame(places)


def test_speedup_table_reports_call_and_kernel_levels_in_one_family():
    samples, placements = _frames()
    table = comparisons.speedup_table(samples, placements, n_resamples=2000)
    assert list(table.columns) == list(comparisons.COLUMNS)
    assert set(zip(table["candidate"], table["level"])) == {
        ("fast", "call"), ("fast", "kernel"), ("twin", "call"), ("twin", "kernel")}
    assert (table["n_comparisons"] == 4).all()
    fast = table.set_index(["candidate", "level"])
    assert fast.loc[("fast", "call"), "verdict"] == "faster"
    assert fast.loc[("fast", "kernel"), "speedup"] == pytest.approx(1 / 0.9, rel=0.01)
    assert fast.loc[("twin", "call"), "verdict"] == "equivalent"
    assert fast.loc[("fast", "call"), "n_processes"] == 4
    assert fast.loc[("fast", "call"), "n_placements"] == 16


def test_speedup_table_has_no_kernel_level_without_kernel_times_and_checks_its_input():
    samples, placements = _frames(kernel=False)
    table = comparisons.speedup_table(samples, placements, n_resamples=500)
    assert set(table["level"]) == {"call"}
    with pytest.raises(ValueError, match="baseline"):
        comparisons.speedup_table(samples, placements, baseline="nope")
    with pytest.raises(ValueError, match="mode"):
        comparisons.speedup_table(samples, placements, mode="per_call")
    with pytest.raises(ValueError, match="configs"):
        comparisons.speedup_table(samples, placements, configs=["X"])
    with pytest.raises(ValueError, match="margin"):
        comparisons.speedup_table(samples, placements, margin=2)


def test_kernel_split_separates_the_attention_kernel_from_the_memset():
    kernels = pd.DataFrame({
        "config": ["S128"] * 3 + ["S512"] * 2,
        "candidate": ["sdpa", "sdpa", "triton", "sdpa", "sdpa"],
        "kernel": ["cudnn_fprop", "Memset (Device)", "_attn_fwd", "Memset (Device)",
                   "cudnn_fprop"],
        "device_ms_per_call": [0.00646, 0.00077, 0.00669, 0.00085, 0.04607]})
    split = kernel_evidence.kernel_split(kernels).set_index(["config", "candidate"])
    sdpa = split.loc[("S128", "sdpa")]
    assert sdpa["main_kernel"] == "cudnn_fprop" and sdpa["n_kernels"] == 2
    assert (sdpa["main_ms"], sdpa["other_ms"]) == pytest.approx((0.00646, 0.00077))
    assert sdpa["total_ms"] == pytest.approx(0.00723)
    # Summed, triton's one kernel is shorter; its attention kernel alone is not.
    tri = split.loc[("S128", "triton")]
    assert tri["total_ms"] < sdpa["total_ms"] and tri["main_ms"] > sdpa["main_ms"]
    assert split.loc[("S512", "sdpa"), "main_kernel"] == "cudnn_fprop"  # order-free
    with pytest.raises(ValueError, match="device_ms_per_call"):
        kernel_evidence.kernel_split(kernels.drop(columns="device_ms_per_call"))


def test_attention_level_compares_the_longest_kernels_without_the_baselines_memset():
    samples, placements = _frames()
    configs = sorted(set(placements["config"]))
    kernels = pd.DataFrame([
        {"config": c, "candidate": cand, "kernel": name, "device_ms_per_call": ms}
        for c in configs for cand, name, ms in (
            ("sdpa", "attn", 1.0), ("sdpa", "Memset (Device)", 0.1),
            ("twin", "attn", 1.0), ("twin", "Memset (Device)", 0.1), ("fast", "attn", 0.9),
            ("unfused", "gemm", 0.4), ("unfused", "softmax", 0.3), ("unfused", "gemm2", 0.3))])
    samples, placements = _frames(extra=("unfused", 1.0))
    table = comparisons.speedup_table(samples, placements, n_resamples=500, kernels=kernels)
    assert set(table["level"]) == {"call", "kernel", "attention"}
    # An unfused call has no single attention kernel: no attention row for it.
    assert set(table.loc[table["level"] == "attention", "candidate"]) == {"fast", "twin"}
    assert kernel_evidence.kernel_split(kernels).set_index("candidate").loc[
        "unfused", "main_share"] == pytest.approx(0.4)
    assert set(table["n_comparisons"]) == {len(table)}  # one family over all three levels
    t = table.set_index(["candidate", "level"])
    # Each side less its own other kernels: the baseline's kernel time falls by 0.1 ms.
    base_k = t.loc[("fast", "kernel"), "baseline_ms"]
    assert t.loc[("fast", "attention"), "baseline_ms"] == pytest.approx(base_k - 0.1)
    assert t.loc[("fast", "attention"), "speedup"] < t.loc[("fast", "kernel"), "speedup"]
    assert t.loc[("twin", "attention"), "verdict"] == "equivalent"
    without = comparisons.speedup_table(samples, placements, n_resamples=500)
    assert "attention" not in set(without["level"])


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """A protocol-2 CPU run with the A/A twin and two spin controls: 4 processes x 2
    placements, so calibrate forms two replications of two processes."""
    out = tmp_path_factory.mktemp("v2") / "cpu-controls"
    plan = sweep.Plan(configs=(Config(1, 2, 32, 64, "float16", False),),
                      candidates=("sdpa", "sdpa_twin", "sdpa_spin0", "sdpa_spin6000"),
                      modes=("graph",), trials=4, device="cpu", timing={"n_samples": 8},
                      plugins=("attn_analysis.measure.controls",), ceilings=False, profile=False,
                      placements=2, process_warmup_ms=0.0)
    sweep.run(out, plan, progress=False)
    return out


@pytest.mark.slow
def test_a_cpu_run_has_placements_and_loads_as_protocol_2(cpu_run):
    assert record.verify(cpu_run) == []
    run = record.load(cpu_run)
    assert run.protocol == 2 and set(run.samples["placement"]) == {0, 1}
    assert len(run.placements) == 4 * 4 * 2
    # graph mode: each unit sized its calls per replay at its first placement, kept them after
    assert run.placements.groupby(["candidate", "trial"])["calls_per_sample"].nunique().eq(1).all()
    for path in record.journal_paths(cpu_run, "timing"):
        places = record.read_unit(path)["placements"]
        assert [p["calls_per_sample_sized"] for p in places] == [True, False]
        # no profiler on the CPU: neither a kernel time nor the calls it would average
        assert [(p["kernel_ms"], p["kernel_calls"]) for p in places] == [(None, None)] * 2


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "attn_analysis", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


# Each CLI test below runs its verb once through the command line (``_cli``) and its
# other cases through ``main`` in this process (``main_here``, about 1 s less a case).
@pytest.mark.slow
def test_compare_cli_prints_a_table_and_a_json_document_with_the_documented_schema(cpu_run,
                                                                                   capsys):
    text = _cli("compare", str(cpu_run), "--resamples", "500")
    assert text.returncode == 0, text.stderr
    assert "sdpa_twin" in text.stdout and "Bonferroni" in text.stdout
    doc = json.loads(main_here(capsys, "compare", str(cpu_run), "--resamples", "500",
                               "--json").stdout)
    assert doc["schema"] == comparisons.JSON_SCHEMA and doc["protocol"] == 2
    assert set(doc) == {"schema", "run", "device", "protocol", "baseline", "mode", "margin",
                        "confidence", "correction", "interval", "n_comparisons",
                        "not_compared", "rows"}
    assert doc["interval"] == "process-t" and len(doc["not_compared"]) == 3
    assert {r["candidate"] for r in doc["rows"]} == {"sdpa_twin", "sdpa_spin0", "sdpa_spin6000"}
    assert set(doc["rows"][0]) == {"config", "candidate", "level", "speedup", "ci_low",
                                   "ci_high", "verdict", "n_processes", "n_placements",
                                   "baseline_ms", "candidate_ms"}
    assert {r["verdict"] for r in doc["rows"]} <= {v.value for v in stats.Verdict}
    # A CPU run has no profiler evidence: --attention is accepted, adds no row and says why.
    att = json.loads(main_here(capsys, "compare", str(cpu_run), "--resamples", "500",
                               "--json", "--attention").stdout)
    assert att["rows"] == doc["rows"]
    assert all("no kernel times" in n for n in att["not_compared"])


@pytest.mark.slow
def test_compare_cli_refuses_bad_arguments_with_one_line(cpu_run, capsys):
    refused = [(_cli("compare", str(cpu_run), "--margin", "2"), "--margin")]
    refused += [(main_here(capsys, "compare", str(cpu_run), *args), word)
                for args, word in ((("--baseline", "nope"), "baseline"),
                                   (("--resamples", "5"), "--resamples"))]
    for res, word in refused:
        assert res.returncode == 1 and word in res.stderr and "Traceback" not in res.stderr
        assert res.stderr.count("\n") == 1, res.stderr


@pytest.mark.slow
def test_calibrate_cli_gives_rates_with_intervals_and_replication_counts(cpu_run, capsys):
    doc = json.loads(_cli("calibrate", str(cpu_run), "--json", "--resamples", "500",
                          "--processes", "2").stdout)
    assert doc["schema"] == calibration.CALIBRATE_SCHEMA and doc["processes_per_replication"] == 2
    rows = {(r["protocol"][:4], r["candidate"], r["outcome"]): r for r in doc["rows"]}
    twin = rows[("ours", "sdpa_twin", "claimed difference")]
    assert twin["replications"] == 2 and 0 <= twin["ci_low"] <= twin["rate"] <= twin["ci_high"]
    assert ("ours", "sdpa_spin6000", "slower") in rows
    assert ("repo", "sdpa_twin", "significant") in rows
    res = main_here(capsys, "calibrate", str(cpu_run), "--processes", "0")
    assert res.returncode == 1 and "--processes" in res.stderr
    from attn_analysis.__main__ import build_parser
    from attn_analysis.measure.plan import DEFAULT_TRIALS
    assert build_parser().parse_args(["calibrate", "r"]).processes == DEFAULT_TRIALS


def test_summary_figure_has_both_levels_a_linear_axis_around_one_and_the_margin_band():
    samples, placements = _frames()
    table = comparisons.speedup_table(samples, placements, n_resamples=500)
    from attn_analysis.present import plots
    fig = plots.speedup_summary({"GPU a": table, "GPU b": table}, 0.02, "NVIDIA H200, test")
    call, kernel = fig.axes[:2]
    assert "call" in call.get_title() and "kernel" in kernel.get_title()
    for ax in (call, kernel):
        lo, hi = ax.get_xlim()
        assert ax.get_xscale() == "linear" and lo < 0.98 and hi > 1.02 and hi - lo < 0.5
        assert "(×)" in ax.get_xlabel()
    assert "NVIDIA H200" in fig._suptitle.get_text()
    assert fig.legends and not call.get_legend()
    with pytest.raises(ValueError, match="tables"):
        plots.speedup_summary({}, 0.02, "x")


# ------------------------------------------------------------------ one family, one interval

def test_a_comparison_reported_in_two_tables_of_one_family_has_one_interval():
    """The issue's 26-vs-39 and 80-vs-220: a chapter gives every table of a run the
    family's m, and the same comparison then comes out identical whichever levels the
    table holds (samples only: call level; with placements: call and kernel)."""
    key = Config(32, 8, 512).key
    samples, placements = (f.assign(config=key) for f in _frames())
    fam = comparisons.speedup_table(samples, placements, mode=["graph"], n_comparisons=7)
    per = comparisons.speedup_table(samples, mode=("graph",), n_comparisons=7)
    assert set(per["level"]) == {"call"}
    call = fam[fam["level"] == "call"].set_index("candidate")
    per = per.set_index("candidate")
    for col in ("speedup", "ci_low", "ci_high", "verdict"):
        assert list(call.loc[per.index, col]) == list(per[col])
    assert set(fam["n_comparisons"]) == set(per["n_comparisons"]) == {7}


def test_the_baseline_against_itself_comes_last_unpaired_and_outside_the_family():
    samples, placements = _frames()
    fam = comparisons.speedup_table(samples, placements)
    both = comparisons.speedup_table(samples, placements, include_baseline=True)
    assert both.iloc[:len(fam)].equals(fam)
    own = both.iloc[len(fam):]
    assert list(zip(own["candidate"], own["level"], own["mode"])) == [("sdpa", "call", "graph")]
    assert own["speedup"].iloc[0] == pytest.approx(1.0) and (both["n_comparisons"] == 4).all()
    base = comparisons.call_groups(samples, "C", "sdpa", "graph")
    unpaired = stats.compare(base, base, n_comparisons=4, paired=False)
    assert (own["ci_low"].iloc[0], own["ci_high"].iloc[0]) == (unpaired.ratio_ci.low,
                                                               unpaired.ratio_ci.high)


def test_plan_comparisons_says_which_levels_were_left_out_and_why():
    samples, placements = _frames(kernel=False)
    plan, missing = comparisons.plan_comparisons(samples, placements)
    assert {p[2] for p in plan} == {"call"} and len(missing) == 2
    assert all("no kernel times" in m for m in missing)
    samples, placements = _frames()
    kernels = pd.DataFrame([{"config": "C", "candidate": c, "kernel": k, "device_ms_per_call": ms}
                            for c, k, ms in (("sdpa", "attn", 1.0), ("fast", "gemm", 0.5),
                                             ("fast", "softmax", 0.4), ("twin", "attn", 1.0))])
    _, missing = comparisons.plan_comparisons(samples, placements, kernels=kernels)
    assert missing == ["C fast: attention level: fast is not a fused call (its "
                       "longest kernel holds less than 80% of its kernel time, or it was not "
                       "profiled)"]


def test_target_family_is_every_mode_and_the_kernel_level_in_one_family():
    samples, placements = _frames()
    samples = pd.concat([samples, samples.assign(mode="per_call")])
    run = type("Run", (), {"samples": samples, "placements": placements})()
    fam = comparisons.target_family(run, "C")
    assert set(zip(fam["level"], fam["mode"])) == {("call", "graph"), ("call", "per_call"),
                                                    ("kernel", "graph")}
    assert set(fam["n_comparisons"]) == {len(fam)} == {6}


# ------------------------------------------------------------------ the CLI on recorded runs

RUNS = ROOT / "data" / "runs"


@pytest.mark.parametrize("args, message", [
    (("calibrate", "h200-calibration-p2a", "--processes", "30"),
     r"`--processes` must be an integer in \[1, 29\], the most processes one run holds "
     r"\(h200-calibration-p2a: 29\)"),
    (("calibrate", "h100-calibration-v1", "h200-calibration-p2a"),
     r"`runs` must come from one GPU model to be pooled; got NVIDIA H100 80GB HBM3: "
     r"\['h100-calibration-v1'\]; NVIDIA H200: \['h200-calibration-p2a'\]"),
    (("calibrate", "h200-triton-p2"),
     r"`runs` must hold the calibration controls; missing \['sdpa_twin', 'a positive "
     r"control \(sdpa_spin<N>\)'\]"),
    (("calibrate", "h200-calibration-p2a", "--level", "kernel"),
     r"`--level` kernel needs the profiler's kernel time at each placement; runs "
     r"\['h200-calibration-p2a'\] recorded none"),
    (("calibrate", "h200-calibration-p2a", "--level", "host"),
     r"`--level` must be one of \('call', 'kernel'\); got 'host'"),
    (("compare", "h200-calibration-p2a", "--interval", "t"),
     r"`--interval` must be one of \('process-t', 'bootstrap'\); got 't'"),
])
def test_calibrate_and_compare_refuse_with_one_line_naming_the_parameter(args, message,
                                                                        capsys):
    from attn_analysis.__main__ import main
    verb, *rest = args
    argv = [verb] + [str(RUNS / a) if a.startswith("h") and "-" in a else a for a in rest]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert re.search(message, err), err
    with pytest.raises(ValueError, match=message):  # the same ValueError, raised inside
        from attn_analysis import __main__ as cli
        cli.COMMANDS[verb](cli.build_parser().parse_args(argv))


def test_compare_attention_says_when_kernel_times_are_missing(capsys):
    from attn_analysis.__main__ import main
    assert main(["compare", str(RUNS / "h200-calibration-p2a"), "--attention"]) == 0
    out = capsys.readouterr().out
    assert out.count("not compared:") == 3 and "recorded no kernel times" in out
