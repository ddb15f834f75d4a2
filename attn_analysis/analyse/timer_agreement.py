"""Do the timers agree? Speedups over SDPA under each timer of a cross-check (issue 46).

Pure functions over the JSON that ``scripts/timer_crosscheck.py`` writes (kind ``timers``):

- :func:`unit_rows`: one row per process, shape, candidate and timer, with the median of its raw
  times; the profiler's kernel time of the same call is the pseudo-timer ``"kernel"``;
- :func:`speedups`: per shape, candidate and timer, the speedup over the reference
  (``t_ref / t_cand``, same process, same timer), its geometric mean over processes and a
  t-interval of that mean on the log scale (processes are the replicates);
- :func:`disagreements`: per shape, candidate and pair of timers, the ratio of their
  speedups, paired by process, with its interval and a verdict at the margin ``threshold``
  (default 1 %): ``"exceeds"`` when the interval lies beyond it, ``"within"`` when it lies
  inside, else ``"unresolved"``;
- :func:`eager_answer`: per candidate at one shape, the eager call (``per_call``), its kernel
  time, the host's share ``(per_call - kernel) / per_call``, and the speedup under each;
- :func:`coverage`: per candidate at one shape, the main processes that timed it and those
  that skipped it (with the reason, e.g. the run's deadline): a missing reference shows here;
- :func:`experiment_unit_rows`: the experiment processes' own timings in :func:`unit_rows`'s
  form (graph, do_bench flushed, do_bench_cudagraph rep 20, hot kernel time; no per_call),
  so that :func:`speedups` can read them where the main part lacks a unit;
- :func:`experiment_rows`: the controlled experiments reduced to one row each;
- :func:`clock_after`: per candidate and timer at one shape, the SM clock read right after the
  timer ran (clocks are recorded, never set): a sustained timer can time two kernels at
  different clocks;
- :func:`build_meta` and :func:`main_kernels`: what each candidate is (as its build recorded
  it) and the kernel that takes most of its call, to tell custom kernels from SDPA's own;
- :func:`summary_text`: a short text report (printed at the end of a run).

Nothing here reads files or touches a GPU.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

__all__ = ["TIMERS", "KERNEL", "ALL_TIMERS", "DEFAULT_THRESHOLD", "unit_rows", "speedups",
           "disagreements", "eager_answer", "coverage", "experiment_unit_rows", "experiment_rows", "experiment_summary",
           "summary_text", "gpu_label", "clock_after", "build_meta", "main_kernels"]

TIMERS = ("graph", "per_call", "do_bench", "do_bench_cudagraph")
KERNEL = "kernel"
ALL_TIMERS = TIMERS + (KERNEL,)
DEFAULT_THRESHOLD = 0.01
VERDICTS = ("exceeds", "within", "unresolved")


def _median(xs) -> float:
    return float(np.median(np.asarray(xs, dtype=float)))


def _doc_iv(doc) -> dict:
    if not isinstance(doc, dict) or not isinstance(doc.get("processes"), list):
        raise ValueError("`doc` must be a timers cross-check (a dict with a `processes` list).")
    return doc


def _number_iv(name, value, low=0.0, high=math.inf):
    if not (isinstance(value, (int, float)) and not isinstance(value, bool)
            and low < value < high):
        raise ValueError(f"`{name}` must be a number in ({low}, {high}); got {value!r}.")
    return float(value)


def gpu_label(doc) -> str | None:
    """The GPU's model name from the first process's fingerprint (None on the CPU)."""
    for p in _doc_iv(doc)["processes"]:
        name = (p.get("fingerprint") or {}).get("gpu_name")
        if name:
            return name
    return None


def unit_rows(doc) -> list[dict]:
    """One row per (process, shape, candidate, timer) that has times: ``process``, ``shape``,
    ``candidate``, ``timer``, ``median_ms``, ``n``; the kernel rows (profiler) have n calls."""
    rows = []
    for p in _doc_iv(doc)["processes"]:
        for u in p.get("units", []):
            base = dict(process=p.get("worker"), shape=u["shape"], candidate=u["candidate"])
            for timer, r in (u.get("timers") or {}).items():
                times = r.get("times_ms") or []
                if times:
                    rows.append(dict(base, timer=timer, median_ms=_median(times), n=len(times)))
            k = u.get("kernel") or {}
            if isinstance(k.get("device_ms_per_call"), (int, float)) and k["device_ms_per_call"] > 0:
                rows.append(dict(base, timer=KERNEL, median_ms=float(k["device_ms_per_call"]),
                                 n=int(k.get("n_calls", 0))))
    return rows


def coverage(doc, shape) -> list[dict]:
    """Per candidate at ``shape`` in the main processes: ``timed`` (workers whose unit has at
    least one timer's times), ``skipped`` (reason -> count, e.g. ``{"deadline": 3}``) and
    ``n_processes``. A reference that no process timed (so no speedup exists) shows here."""
    out: dict = {}
    procs = _doc_iv(doc)["processes"]
    for p in procs:
        for u in p.get("units", []):
            if u.get("shape") != shape:
                continue
            r = out.setdefault(u["candidate"], dict(candidate=u["candidate"], timed=[],
                                                     skipped={}, n_processes=len(procs)))
            if any((t or {}).get("times_ms") for t in (u.get("timers") or {}).values()):
                r["timed"].append(p.get("worker"))
            elif u.get("skipped"):
                reason = str(u["skipped"])
                r["skipped"][reason] = r["skipped"].get(reason, 0) + 1
    return [out[c] for c in sorted(out)]


# Experiment measurements read as timers: (timer, experiment, key) -> unit_rows' timer name.
EXPERIMENT_TIMERS = (("graph", "l2", "graph"), ("do_bench", "l2", "do_bench_flush"),
                     ("do_bench_cudagraph", "composition", "do_bench_cudagraph_rep20"))


def experiment_unit_rows(doc) -> list[dict]:
    """The experiment processes' timings as :func:`unit_rows` rows (process ``"x<worker>"``):
    ``graph`` (the protocol's graph mode, L2 experiment), ``do_bench`` (L2 flushed),
    ``do_bench_cudagraph`` (rep 20, composition experiment) and ``kernel`` (hot kernel
    time in graph replay). No per_call: the experiments time no eager call."""
    _doc_iv(doc)
    rows = []
    for p in doc.get("experiment_processes", []) or []:
        for u in p.get("units", []):
            e = u.get("experiments") or {}
            base = dict(process=f"x{p.get('worker')}", shape=u["shape"], candidate=u["candidate"])
            for timer, part, key in EXPERIMENT_TIMERS:
                times = ((e.get(part) or {}).get(key) or {}).get("times_ms") or []
                if times:
                    rows.append(dict(base, timer=timer, median_ms=_median(times), n=len(times)))
            hot = ((e.get("l2") or {}).get("graph_kernel") or {}).get("hot_kernel_ms")
            if isinstance(hot, (int, float)) and hot > 0:
                rows.append(dict(base, timer=KERNEL, median_ms=float(hot), n=0))
    return rows


def _t_interval(logs, confidence) -> tuple[float, float, float]:
    """Mean of ``logs`` and its two-sided t-interval (nan bounds with fewer than 2 values)."""
    from scipy import stats
    x = np.asarray(logs, dtype=float)
    mean = float(x.mean())
    if x.size < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.5 + confidence / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return mean, mean - half, mean + half


def _by_key(rows) -> dict:
    return {(r["process"], r["shape"], r["candidate"], r["timer"]): r["median_ms"] for r in rows}


def speedups(rows, reference="sdpa", confidence=0.95) -> list[dict]:
    """Speedup over ``reference`` per shape, candidate and timer: ``speedup`` (geometric mean
    over processes of ``t_ref / t_cand``, both from the same process and timer), ``low`` and
    ``high`` (its t-interval at ``confidence``), ``n_processes`` and ``per_process``."""
    _number_iv("confidence", confidence, 0.0, 1.0)
    at = _by_key(rows)
    groups: dict = {}
    for (proc, shape, cand, timer), ms in at.items():
        ref = at.get((proc, shape, reference, timer))
        if ref is None or not ms > 0 or not ref > 0:
            continue
        groups.setdefault((shape, cand, timer), {})[proc] = ref / ms
    out = []
    for (shape, cand, timer), per in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        mean, lo, hi = _t_interval([math.log(v) for v in per.values()], confidence)
        out.append(dict(shape=shape, candidate=cand, timer=timer, speedup=math.exp(mean),
                        low=math.exp(lo) if math.isfinite(lo) else math.nan,
                        high=math.exp(hi) if math.isfinite(hi) else math.nan,
                        n_processes=len(per), per_process=dict(sorted(per.items()))))
    return out


def disagreements(speedup_rows, threshold=DEFAULT_THRESHOLD, confidence=0.95,
                  timers=ALL_TIMERS, reference="sdpa") -> list[dict]:
    """For each shape, candidate and pair of timers (a, b): ``ratio`` = speedup under a over
    speedup under b (geometric mean over the processes that have both), its t-interval
    ``low``/``high``, ``difference`` = ratio - 1, and ``verdict``: ``"exceeds"`` when the
    interval lies wholly beyond +-``threshold``, ``"within"`` when wholly inside, else
    ``"unresolved"`` (one process gives no interval, so it is always unresolved);
    ``above_threshold`` says whether the point estimate alone lies beyond the threshold. The
    ``reference`` candidate (speedup 1 under every timer by construction) is left out."""
    threshold = _number_iv("threshold", threshold, 0.0, 1.0)
    _number_iv("confidence", confidence, 0.0, 1.0)
    index = {(r["shape"], r["candidate"], r["timer"]): r["per_process"] for r in speedup_rows}
    cells = sorted({(s, c) for s, c, _ in index if c != reference})
    out = []
    for shape, cand in cells:
        for a, b in itertools.combinations(timers, 2):
            pa, pb = index.get((shape, cand, a)), index.get((shape, cand, b))
            if not pa or not pb:
                continue
            procs = sorted(set(pa) & set(pb), key=str)
            logs = [math.log(pa[p] / pb[p]) for p in procs]
            if not logs:
                continue
            mean, lo, hi = _t_interval(logs, confidence)
            low, high = (math.exp(lo) - 1, math.exp(hi) - 1) if math.isfinite(lo) else (
                math.nan, math.nan)
            if math.isfinite(low) and (low > threshold or high < -threshold):
                verdict = "exceeds"
            elif math.isfinite(low) and -threshold <= low and high <= threshold:
                verdict = "within"
            else:
                verdict = "unresolved"
            out.append(dict(shape=shape, candidate=cand, timer_a=a, timer_b=b,
                            ratio=math.exp(mean), difference=math.exp(mean) - 1, low=low,
                            high=high, n_processes=len(procs), verdict=verdict,
                            above_threshold=abs(math.exp(mean) - 1) > threshold))
    return out


def eager_answer(rows, shape, reference="sdpa") -> list[dict]:
    """Per candidate at ``shape``: ``per_call_ms`` and ``graph_ms`` and ``kernel_ms`` (medians
    over processes of each process's median), ``host_ms`` = per_call - kernel, ``host_share``
    = host_ms / per_call_ms, and the speedup over ``reference`` under per_call and graph
    (ratio of those medians). Candidates without a per_call time are left out."""
    med: dict = {}
    for r in rows:
        if r["shape"] == shape:
            med.setdefault((r["candidate"], r["timer"]), []).append(r["median_ms"])
    m = {k: _median(v) for k, v in med.items()}
    out = []
    for cand in sorted({c for c, _ in m}):
        pc = m.get((cand, "per_call"))
        if pc is None:
            continue
        kern, graph = m.get((cand, KERNEL)), m.get((cand, "graph"))
        ref_pc, ref_g = m.get((reference, "per_call")), m.get((reference, "graph"))
        host = pc - kern if kern is not None else None
        out.append(dict(candidate=cand, per_call_ms=pc, graph_ms=graph, kernel_ms=kern,
                        host_ms=host, host_share=host / pc if host is not None else None,
                        speedup_per_call=ref_pc / pc if ref_pc else None,
                        speedup_graph=ref_g / graph if ref_g and graph else None))
    return out


def clock_after(doc, shape) -> list[dict]:
    """Per candidate and timer at ``shape`` in the main processes: the SM clock the GPU
    reported right after the timer ran (``gpu_state_after``): ``median_mhz``, ``min_mhz``
    and ``n_processes``. A timer that keeps the GPU busy longer draws more power, and a
    kernel that draws more power lowers the clock more, so a sustained timer can time two
    kernels at different clocks. Units without a clock reading are left out."""
    got: dict = {}
    for p in _doc_iv(doc)["processes"]:
        for u in p.get("units", []):
            if u.get("shape") != shape:
                continue
            for timer, r in (u.get("timers") or {}).items():
                mhz = ((r or {}).get("gpu_state_after") or {}).get("sm_clock_mhz")
                if isinstance(mhz, (int, float)) and mhz > 0:
                    got.setdefault((u["candidate"], timer), []).append(float(mhz))
    return [dict(candidate=c, timer=t, median_mhz=_median(v), min_mhz=min(v), n_processes=len(v))
            for (c, t), v in sorted(got.items())]


def build_meta(doc, shape) -> dict:
    """Candidate -> the metadata its build recorded at ``shape`` (``info["meta"]``: label,
    origin, family) in the cross-check's build process; candidates without it are left out."""
    out = {}
    for p in doc.get("build_process") or []:
        for cand, b in ((p.get("builds") or {}).get(shape) or {}).items():
            meta = ((b or {}).get("info") or {}).get("meta")
            if isinstance(meta, dict) and cand not in out:
                out[cand] = meta
    return out


def main_kernels(doc, shape) -> dict:
    """Candidate -> the name of the kernel with the largest time per call at ``shape``, from
    the first main process whose profiler recorded one (``kernel["kernels"]``)."""
    out = {}
    for p in _doc_iv(doc)["processes"]:
        for u in p.get("units", []):
            ks = (u.get("kernel") or {}).get("kernels") or []
            if u.get("shape") == shape and ks and u["candidate"] not in out:
                out[u["candidate"]] = max(ks, key=lambda k: k.get("ms_per_call") or 0)["name"]
    return out


def _med(r) -> float | None:
    t = (r or {}).get("times_ms") or []
    return _median(t) if t else None


def _clock_range(samples):
    mhz = [c for _, c in samples or [] if c is not None]
    return (min(mhz), max(mhz)) if mhz else (None, None)


def experiment_rows(doc) -> list[dict]:
    """One row per experiment process, shape and candidate: L2 (``hot_kernel_ms``,
    ``flushed_kernel_ms``, their ratio ``l2_kernel_ratio``; ``do_bench_flush_ms``,
    ``do_bench_no_flush_ms``, ``cold_l2_ms``, ``graph_ms``), composition (graph medians at 1,
    auto and 100 calls per replay, do_bench_cudagraph at rep 20 and 100, and the SM clock's
    lowest and highest sample during each), placement (graph medians at further placements,
    their spread max/min - 1)."""
    out = []
    for p in doc.get("experiment_processes", []) or []:
        for u in p.get("units", []):
            e = u.get("experiments") or {}
            row = dict(process=p.get("worker"), shape=u["shape"], candidate=u["candidate"])
            l2 = e.get("l2") or {}
            gk = l2.get("graph_kernel") or {}
            row.update(hot_kernel_ms=gk.get("hot_kernel_ms"),
                       flushed_kernel_ms=gk.get("flushed_kernel_ms"),
                       do_bench_flush_ms=_med(l2.get("do_bench_flush")),
                       do_bench_no_flush_ms=_med(l2.get("do_bench_no_flush")),
                       cold_l2_ms=_med(l2.get("cold_l2")), graph_ms=_med(l2.get("graph")))
            if row["hot_kernel_ms"] and row["flushed_kernel_ms"]:
                row["l2_kernel_ratio"] = row["flushed_kernel_ms"] / row["hot_kernel_ms"]
            for key, r in (e.get("composition") or {}).items():
                if isinstance(r, dict):
                    row[f"{key}_ms"] = _med(r)
                    row[f"{key}_clock_min_mhz"], row[f"{key}_clock_max_mhz"] = _clock_range(
                        r.get("clock_samples"))
            pl = [_med(r) for r in ((e.get("placement") or {}).get("graph") or [])]
            pl = [v for v in pl if v]
            row["placement_graph_ms"] = pl
            row["placement_spread"] = max(pl) / min(pl) - 1 if len(pl) > 1 else None
            out.append(row)
    return out


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def experiment_summary(doc) -> list[dict]:
    """:func:`experiment_rows` reduced per shape and candidate (median over experiment
    processes of each numeric field), with the effects that explain a disagreement:
    ``l2_effect`` (flushed / hot kernel time - 1), ``do_bench_flush_effect`` (do_bench with
    its flush / without - 1), ``graph_k1_over_k100`` (one call a replay / 100 - 1),
    ``dbcg_rep100_over_rep20`` - 1, ``graph_over_dbcg_rep20`` - 1 (the protocol's automatic
    graph against do_bench_cudagraph's default), and the median placement spread."""
    groups: dict = {}
    for r in experiment_rows(doc):
        groups.setdefault((r["shape"], r["candidate"]), []).append(r)
    out = []
    for (shape, cand), rows in sorted(groups.items()):
        m = {}
        # every process's fields: a process whose deadline skipped the unit has none
        for key in dict.fromkeys(k for r in rows for k in r):
            vals = [r.get(key) for r in rows]
            vals = [v for v in vals if _is_number(v)]
            if vals and key != "process":
                m[key] = _median(vals)

        def ratio(a, b):
            return m[a] / m[b] - 1 if m.get(a) and m.get(b) else None
        measured = [r for r in rows if any(_is_number(v) for k, v in r.items() if k != "process")]
        out.append(dict(shape=shape, candidate=cand, n_processes=len(measured), **m,
                        l2_effect=ratio("flushed_kernel_ms", "hot_kernel_ms"),
                        do_bench_flush_effect=ratio("do_bench_flush_ms", "do_bench_no_flush_ms"),
                        graph_k1_over_k100=ratio("graph_k1_ms", "graph_k100_ms"),
                        dbcg_rep100_over_rep20=ratio("do_bench_cudagraph_rep100_ms",
                                                     "do_bench_cudagraph_rep20_ms"),
                        graph_over_dbcg_rep20=ratio("graph_kauto_ms",
                                                    "do_bench_cudagraph_rep20_ms")))
    return out


def summary_text(doc, reference="sdpa", threshold=DEFAULT_THRESHOLD) -> str:
    """A short report: speedups per timer at each shape, and every disagreement that
    exceeds ``threshold``."""
    rows = unit_rows(doc)
    sp = speedups(rows, reference)
    lines = [f"GPU: {gpu_label(doc) or 'none (CPU run)'}; processes: "
             f"{len(doc['processes'])}; reference: {reference}"]
    cells: dict = {}
    for r in sp:
        cells.setdefault((r["shape"], r["candidate"]), {})[r["timer"]] = r["speedup"]
    lines.append(f"{'shape':22s} {'candidate':16s} " + " ".join(f"{t[:12]:>12s}" for t in ALL_TIMERS))
    for (shape, cand), d in sorted(cells.items()):
        lines.append(f"{shape:22s} {cand:16s} " + " ".join(
            f"{d[t]:12.3f}" if t in d else f"{'-':>12s}" for t in ALL_TIMERS))
    flagged = [d for d in disagreements(sp, threshold, reference=reference)
               if d["verdict"] == "exceeds"]
    lines.append(f"disagreements beyond {threshold:.0%} (interval wholly outside): {len(flagged)}")
    for d in flagged:
        lines.append(f"  {d['shape']} {d['candidate']}: {d['timer_a']} vs {d['timer_b']} "
                     f"{d['difference']:+.1%} [{d['low']:+.1%}, {d['high']:+.1%}]")
    return "\n".join(lines)
