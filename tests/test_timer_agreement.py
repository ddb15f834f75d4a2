"""attn_analysis.analyse.timer_agreement on synthetic cross-checks with known answers, and the
CPU-testable parts of scripts/timer_crosscheck.py (its plan, its order, a CPU smoke run)."""

from __future__ import annotations

import importlib.util
import math
import random
from pathlib import Path

import numpy as np
import pytest

from attn_analysis.analyse import timer_agreement as ta
from attn_analysis.record import checks

ROOT = Path(__file__).resolve().parents[1]
SHAPE = "B32-H8-S512-D64-fp16"


def synthetic(n_proc=6, sigma=0.002, bias=None, true=None, host=None, seed=0, kernel=True,
              place_sd=0.01):
    """A cross-check document: candidate times ``true[c]`` (ms) under every timer, times
    ``bias[(c, timer)]``, times a lognormal process effect (shared by every timer of a
    candidate in a process, as a placement is) and a small per-timer noise; per_call adds
    ``host[c]`` ms on top of the kernel time."""
    rng = np.random.default_rng(seed)
    true = true or {"sdpa": 0.050, "fast": 0.045, "plain": 0.048}
    bias, host = bias or {}, host or {}
    procs = []
    for p in range(n_proc):
        units = []
        for cand, t in true.items():
            place = math.exp(rng.normal(0, place_sd))
            timers = {}
            for timer in ta.TIMERS:
                mult = bias.get((cand, timer), 1.0) * math.exp(rng.normal(0, sigma))
                med = t * place * mult + (host.get(cand, 0.0) if timer == "per_call" else 0.0)
                timers[timer] = {"times_ms": [med * f for f in (0.999, 1.0, 1.001)]}
            unit = dict(shape=SHAPE, candidate=cand, timers=timers)
            if kernel:
                unit["kernel"] = {"device_ms_per_call": t * place, "n_calls": 10}
            units.append(unit)
        procs.append(dict(worker=p, units=units, fingerprint={"gpu_name": "NVIDIA H100"}))
    return {"processes": procs}


def cell(rows, cand, a, b):
    (d,) = [r for r in rows if r["candidate"] == cand and {r["timer_a"], r["timer_b"]} == {a, b}]
    return d


def test_a_timer_with_a_known_bias_is_flagged_and_an_unbiased_one_is_not():
    doc = synthetic(bias={("fast", "do_bench_cudagraph"): 1.03})
    sp = ta.speedups(ta.unit_rows(doc))
    dis = ta.disagreements(sp)
    biased = cell(dis, "fast", "graph", "do_bench_cudagraph")
    assert biased["verdict"] == "exceeds" and biased["above_threshold"]
    assert biased["difference"] == pytest.approx(0.03, abs=0.004)  # speedup under graph / dbcg
    assert biased["low"] > 0.01
    plain = cell(dis, "plain", "graph", "do_bench_cudagraph")
    assert plain["verdict"] == "within" and not plain["above_threshold"]
    assert cell(dis, "fast", "graph", "per_call")["verdict"] == "within"
    assert all(d["candidate"] != "sdpa" for d in dis)  # the reference is not compared


def test_a_bias_of_the_reference_moves_every_speedup_under_that_timer():
    dis = ta.disagreements(ta.speedups(ta.unit_rows(synthetic(bias={("sdpa", "do_bench"): 0.97}))))
    for cand in ("fast", "plain"):
        d = cell(dis, cand, "graph", "do_bench")
        assert d["verdict"] == "exceeds" and d["difference"] == pytest.approx(1 / 0.97 - 1, abs=0.004)


def test_one_process_gives_no_interval_and_is_unresolved():
    dis = ta.disagreements(ta.speedups(ta.unit_rows(synthetic(n_proc=1))))
    assert dis and all(d["verdict"] == "unresolved" and math.isnan(d["low"]) for d in dis)


def test_speedup_is_the_known_ratio_and_its_interval_covers_it():
    sp = ta.speedups(ta.unit_rows(synthetic(sigma=0.0, place_sd=0.0)))
    (r,) = [r for r in sp if r["candidate"] == "fast" and r["timer"] == "graph"]
    assert r["n_processes"] == 6 and r["speedup"] == pytest.approx(0.050 / 0.045)
    assert r["low"] == pytest.approx(r["speedup"]) == r["high"]  # no spread, no width
    (s,) = [r for r in ta.speedups(ta.unit_rows(synthetic(sigma=0.01)))
            if r["candidate"] == "fast" and r["timer"] == "graph"]
    assert s["low"] < s["speedup"] < s["high"] and s["high"] / s["low"] < 1.05


def test_intervals_cover_at_about_their_confidence():
    hits, reps = 0, 300
    for seed in range(reps):
        sp = ta.speedups(ta.unit_rows(synthetic(n_proc=4, sigma=0.01, seed=seed)), confidence=0.9)
        (r,) = [r for r in sp if r["candidate"] == "fast" and r["timer"] == "do_bench"]
        hits += r["low"] <= 0.050 / 0.045 <= r["high"]
    assert 0.85 <= hits / reps <= 0.95  # 0.9 nominal; binomial sd 0.017


def test_eager_answer_reads_the_host_share_of_each_call():
    doc = synthetic(sigma=0.0, host={"fast": 0.100, "sdpa": 0.010, "plain": 0.0})
    rows = {r["candidate"]: r for r in ta.eager_answer(ta.unit_rows(doc), SHAPE)}
    f = rows["fast"]
    assert f["host_ms"] == pytest.approx(0.100, rel=1e-9)
    assert f["host_share"] == pytest.approx(f["host_ms"] / f["per_call_ms"])
    assert f["speedup_per_call"] < 1 < f["speedup_graph"]  # faster kernel, slower eager call
    assert rows["plain"]["host_ms"] == pytest.approx(0.0, abs=1e-12)


def test_eager_answer_without_kernel_times_says_none():
    rows = ta.eager_answer(ta.unit_rows(synthetic(kernel=False)), SHAPE)
    assert rows and all(r["kernel_ms"] is None and r["host_share"] is None for r in rows)


def test_unit_rows_skip_failed_timers_and_units_and_name_the_gpu():
    doc = synthetic(n_proc=1)
    u = doc["processes"][0]["units"][0]
    u["timers"]["do_bench"] = {"error": "RuntimeError: boom"}
    doc["processes"][0]["units"].append(dict(shape=SHAPE, candidate="late", skipped="deadline"))
    rows = ta.unit_rows(doc)
    assert not [r for r in rows if r["candidate"] == u["candidate"] and r["timer"] == "do_bench"]
    assert not [r for r in rows if r["candidate"] == "late"]
    assert {r["timer"] for r in rows} == set(ta.ALL_TIMERS)
    assert ta.gpu_label(doc) == "NVIDIA H100"
    assert "fast" in ta.summary_text(doc)


@pytest.mark.parametrize("call, message", [
    (lambda: ta.unit_rows({}), "`doc` must be a timers cross-check"),
    (lambda: ta.speedups([], confidence=1.5), "`confidence`"),
    (lambda: ta.disagreements([], threshold=0), "`threshold`"),
])
def test_bad_input_is_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_experiment_rows_reduce_each_experiment():
    times = {"times_ms": [1.0, 1.02, 1.04]}
    doc = {"processes": [], "experiment_processes": [{"worker": 0, "units": [dict(
        shape=SHAPE, candidate="fast", experiments={
            "l2": {"graph_kernel": {"hot_kernel_ms": 0.04, "flushed_kernel_ms": 0.05},
                   "do_bench_flush": times, "do_bench_no_flush": {"times_ms": [0.9]},
                   "cold_l2": times, "graph": times},
            "composition": {"graph_k1": dict(times, clock_samples=[[0.0, 1980], [0.01, 1755]])},
            "placement": {"graph": [{"times_ms": [1.0]}, {"times_ms": [1.05]}]}})]}]}
    (r,) = ta.experiment_rows(doc)
    assert r["l2_kernel_ratio"] == pytest.approx(1.25)
    assert r["do_bench_flush_ms"] == pytest.approx(1.02) and r["do_bench_no_flush_ms"] == 0.9
    assert (r["graph_k1_clock_min_mhz"], r["graph_k1_clock_max_mhz"]) == (1755, 1980)
    assert r["placement_spread"] == pytest.approx(0.05)


# ------------------------------------------------------------ scripts/timer_crosscheck.py

def load_script():
    path = ROOT / "scripts" / "timer_crosscheck.py"
    spec = importlib.util.spec_from_file_location("script_timer_crosscheck", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("argv, message", [
    (["--device", "tpu"], "`--device`"),
    (["--processes", "0"], "`--processes`"),
    (["--budget-s", "-1"], "`--budget-s`"),
    (["--gpu", "-2"], "`--gpu`"),
    (["--gpu", "1", "--device", "cpu"], "`--gpu` needs"),
    (["--candidates", "triton"], "must include the reference"),
    (["--shapes", "B32-H8-S512"], "`config`"),
])
def test_script_refuses_bad_arguments_before_any_process(argv, message, tmp_path):
    script = load_script()
    with pytest.raises(ValueError, match=message):
        script.main(argv + ["--out", str(tmp_path / "t.json")])
    assert not (tmp_path / "t.json").exists()


def test_script_plan_covers_the_target_and_four_long_shapes():
    script = load_script()
    plan = script.make_plan(script.parse_args([]))
    assert plan["shapes"][0] == SHAPE and len(plan["shapes"]) == 5 and plan["candidates"] is None
    assert plan["target"] == SHAPE and set(plan["timers"]) == set(ta.TIMERS)
    units = script.units_for(plan["shapes"], ["sdpa", "eager", "triton"], plan["target_only"],
                             plan["target"])
    assert ("B32-H8-S512-D64-fp16", "eager") in units
    assert not [u for u in units if u[1] == "eager" and u[0] != SHAPE]
    assert len(units) == 1 + 2 * 5


def test_script_order_is_random_but_grouped_by_shape_and_complete():
    script = load_script()
    units = [(s, c) for s in "abc" for c in "xyz"]
    a, b = (script.ordered(units, random.Random(seed)) for seed in (1, 2))
    assert sorted(a) == sorted(units) == sorted(b) and a != b
    shapes = [s for s, _ in a]
    assert all(shapes.index(s) + 3 == len(shapes) - shapes[::-1].index(s) for s in "abc")


@pytest.mark.slow
def test_script_cpu_quick_run_writes_a_sealed_file_the_analysis_reads(tmp_path):
    out = tmp_path / "timers.json"
    script = load_script()
    script.main(["--device", "cpu", "--quick", "--experiments", "--out", str(out)])
    assert checks.verify(out) == []
    doc = checks.read(out, "timers")
    assert len(doc["processes"]) == 2 and doc["plan"]["device"] == "cpu"
    (build,) = doc["build_process"]
    assert all(b["gate"]["passed"] for b in build["builds"][doc["plan"]["target"]].values())
    first = doc["processes"][0]
    assert first["fingerprint"]["device_kind"] == "cpu"
    timed = [u for u in first["units"] if "timers" in u]
    assert {u["candidate"] for u in timed} == {"sdpa", "sdpa_math", "eager"}
    for u in timed:
        assert u["timers"]["do_bench"] == {"skipped": "needs CUDA"}
        assert len(u["timers"]["graph"]["times_ms"]) >= 20
    assert {r["timer"] for r in ta.unit_rows(doc)} == {"graph", "per_call"}
    assert ta.experiment_rows(doc)


# ------------------------------------------------------------ attn_analysis/chapters/timers.py

def test_chapter_figure_from_recorded_data():
    from attn_analysis.chapters import timers as ch
    doc = synthetic(bias={("fast", "do_bench_cudagraph"): 1.03}, host={"fast": 0.1})
    assert ch.by_model({"timers_h100": doc}) == {"H100": doc}
    fig = ch.speedup_figure(doc, "H100-a (torch 2.11)")
    ax = fig.axes[0]
    assert "H100-a" in ax.get_title() and SHAPE in ax.get_title()
    assert "95 % interval" in ax.get_title()
    lo, hi = ax.get_xlim()
    assert lo < 0.050 / 0.045 * 0.99 and hi > 0.050 / 0.045 and hi - lo < 1.0
    labels = [t.get_text() for t in fig.legends[0].get_texts()] if fig.legends else \
        [t.get_text() for t in ax.get_legend().get_texts()]
    assert ch.TIMER_LABELS["do_bench_cudagraph"] in labels


def test_chapter_says_plainly_when_nothing_is_recorded(tmp_path):
    from attn_analysis.chapters import timers as ch
    assert ch.recorded(tmp_path) == {}
    assert ch.by_model({}) == {}
    with pytest.raises(ValueError, match="`device_label`"):
        ch.speedup_figure(synthetic(), "")


def test_experiment_summary_names_each_effect():
    def proc(w, hot, flushed):
        return {"worker": w, "units": [dict(shape=SHAPE, candidate="fast", experiments={
            "l2": {"graph_kernel": {"hot_kernel_ms": hot, "flushed_kernel_ms": flushed},
                   "do_bench_flush": {"times_ms": [0.055]}, "do_bench_no_flush": {"times_ms": [0.05]}},
            "composition": {"graph_k1": {"times_ms": [0.052]}, "graph_k100": {"times_ms": [0.05]},
                            "graph_kauto": {"times_ms": [0.05]},
                            "do_bench_cudagraph_rep20": {"times_ms": [0.048]}}})]}
    doc = {"processes": [], "experiment_processes": [proc(0, 0.04, 0.044), proc(1, 0.04, 0.046)]}
    (r,) = ta.experiment_summary(doc)
    assert r["n_processes"] == 2 and r["l2_effect"] == pytest.approx(0.125)
    assert r["do_bench_flush_effect"] == pytest.approx(0.1)
    assert r["graph_k1_over_k100"] == pytest.approx(0.04)
    assert r["graph_over_dbcg_rep20"] == pytest.approx(0.05 / 0.048 - 1)
    assert r["dbcg_rep100_over_rep20"] is None  # not measured: no number invented


def real_shaped(t_exp=None):
    """A trimmed copy of the structure of data/checks/timers_h100.json (synthetic numbers):
    four main processes under a deadline, each reaching a few units of one shape; at the
    target the reference sdpa and fa4 are ``skipped: deadline`` in every process while
    triton and fa3 are timed in one; one experiment process times the target (L2: graph,
    do_bench flushed, hot kernel; composition: do_bench_cudagraph rep 20)."""
    long_ = "B2-H32-S8192-D64-fp16"
    t_exp = t_exp or {"sdpa": 0.048, "triton": 0.052, "fa4": 0.057}

    def timed(shape, cand, ms, host):
        timers = {t: {"times_ms": [ms + (host if t == "per_call" else 0.0)] * 3, "median_ms": ms}
                  for t in ta.TIMERS}
        return dict(shape=shape, candidate=cand, order=0, timers=timers,
                    kernel={"device_ms_per_call": ms, "n_calls": 10})

    def skipped(shape, cand):
        return dict(shape=shape, candidate=cand, order=9, skipped="deadline")

    fp = {"gpu_name": "NVIDIA H100 80GB HBM3"}
    procs = [
        dict(worker=0, fingerprint=fp, units=[timed(long_, "sdpa", 2.4, 0.1),
             timed(long_, "triton", 2.5, 0.1)] + [skipped(SHAPE, c) for c in
                                                  ("sdpa", "fa4", "triton", "fa3")]),
        dict(worker=1, fingerprint=fp, units=[timed(SHAPE, "triton", 0.052, 0.046),
             timed(SHAPE, "fa3", 0.057, 0.222), skipped(SHAPE, "sdpa"), skipped(SHAPE, "fa4")]),
        dict(worker=2, fingerprint=fp, units=[skipped(SHAPE, c) for c in ("sdpa", "fa4")]),
        dict(worker=3, fingerprint=fp, units=[skipped(SHAPE, c) for c in ("fa4", "sdpa")]),
    ]
    xunits = [dict(shape=SHAPE, candidate=c, experiments={
        "l2": {"graph": {"times_ms": [ms] * 3}, "do_bench_flush": {"times_ms": [ms * 1.1] * 3},
               "graph_kernel": {"hot_kernel_ms": ms * 0.97, "flushed_kernel_ms": ms}},
        "composition": {"do_bench_cudagraph_rep20": {"times_ms": [ms * 1.01] * 3}}})
        for c, ms in t_exp.items()]
    xunits.append(dict(shape=long_, candidate="sdpa", skipped="deadline"))
    return {"processes": procs, "experiment_processes": [dict(worker=0, units=xunits)]}


def test_real_shaped_check_without_the_reference_at_the_target_says_why():
    """Regression (timers_h100.json): sdpa skipped at the target in every main process; the
    coverage says so, the main processes give no speedup at the target, and the experiment
    process supplies one (one process: no interval, which the figure's title says)."""
    from attn_analysis.chapters import timers as ch
    from attn_analysis.chapters import timer_answer as tn
    doc = real_shaped()
    cov = {r["candidate"]: r for r in ta.coverage(doc, SHAPE)}
    assert cov["sdpa"]["timed"] == [] and cov["sdpa"]["skipped"] == {"deadline": 4}
    assert cov["triton"]["timed"] == [1] and cov["triton"]["skipped"] == {"deadline": 1}
    assert not [r for r in ta.speedups(ta.unit_rows(doc)) if r["shape"] == SHAPE]
    x = {(r["candidate"], r["timer"]): r for r in ta.speedups(ta.experiment_unit_rows(doc))
         if r["shape"] == SHAPE}
    assert x[("triton", "graph")]["speedup"] == pytest.approx(0.048 / 0.052)
    assert math.isnan(x[("triton", "graph")]["low"]) and ("triton", "per_call") not in x
    with pytest.raises(ValueError, match="no custom kernel"):
        tn.answer_values(doc)  # no build metadata and no sdpa at the target
    title = ch.speedup_figure(doc, "H100", source="experiments").axes[0].get_title()
    assert "one process, no interval" in title
    with pytest.raises(ValueError, match="`source`"):
        ch.speedup_figure(doc, "H100", source="nope")
    # the long shape, timed with its reference in one process, still gives a point speedup
    (r,) = [r for r in ta.speedups(ta.unit_rows(doc)) if r["candidate"] == "triton"
            and r["timer"] == "graph"]
    assert r["speedup"] == pytest.approx(2.4 / 2.5) and math.isnan(r["low"])


def test_experiment_summary_reads_a_unit_that_only_a_later_process_measured():
    """Regression (timers_h200.json): the first experiment process's deadline skipped the
    target, and the summary took its fields from that process's row only, so every
    composition effect of the second process read as missing."""
    skipped = {"worker": 0, "units": [dict(shape=SHAPE, candidate="fast", skipped="deadline")]}
    measured = {"worker": 1, "units": [dict(shape=SHAPE, candidate="fast", experiments={
        "composition": {"graph_kauto": {"times_ms": [0.05]},
                        "do_bench_cudagraph_rep20": {"times_ms": [0.048]}}})]}
    doc = {"processes": [], "experiment_processes": [skipped, measured]}
    (r,) = ta.experiment_summary(doc)
    assert r["n_processes"] == 1
    assert r["graph_over_dbcg_rep20"] == pytest.approx(0.05 / 0.048 - 1)


@pytest.mark.slow
def test_script_cpu_experiments_only_run_reports_its_experiments(tmp_path, capsys):
    """--experiments-only writes no main processes; the closing summary then prints the
    experiments' rows instead of failing on the missing `processes` list."""
    out = tmp_path / "timers.json"
    script = load_script()
    script.main(["--device", "cpu", "--quick", "--experiments-only", "--out", str(out)])
    doc = checks.read(out, "timers")
    assert "processes" not in doc and doc["experiment_processes"]
    err = capsys.readouterr()
    assert "summary failed" not in err.out + err.err
    assert ta.experiment_summary(doc)


def test_recorded_leaves_out_an_experiments_only_file():
    """data/checks/timers_h200c_gluon_v2_exp.json holds experiment processes alone: no
    main processes, so no GPU model and no answer; recorded() leaves it out and keeps the
    main checks."""
    from attn_analysis.chapters import timers as ch
    docs = ch.recorded(Path(__file__).resolve().parents[1] / "data" / "checks")
    assert "timers_h200c_gluon_v2_exp" not in docs and "timers_h200c_gluon_v2" in docs
    assert all(isinstance(d["processes"], list) for d in docs.values())
    assert set(ch.by_model(docs)) == {"H100", "H200"}
