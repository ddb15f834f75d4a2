"""The methods chapter's timer section (issue 46): which timer answers which user's question.

Built on the cross-checks of ``scripts/timer_crosscheck.py`` (``data/checks/timers_*.json``,
kind ``timers``) through :mod:`attn_analysis.analyse.timer_agreement`:

- :func:`recorded`: the cross-checks on disk, by file stem (the only function that reads);
- :func:`speedup_table`: speedup over SDPA per candidate (rows) and GPU model and timer
  (columns) at one shape, as "1.05 [1.03, 1.07]" text;
- :func:`eager_table`: the eager answer at one shape on one GPU: per-call time, kernel time,
  the host's share of the call, and the speedup under per_call and under graph replay;
- :func:`experiment_table`: the controlled experiments' effects per shape and candidate;
- :func:`speedup_figure`: every candidate's speedup at one shape under each timer on one GPU,
  the device in the title, axis limits fitted to the points;
- :func:`coverage_sentence`: where the reference was timed at a shape, and why not (the run's
  deadline), so that an empty table is explained rather than silent;
- :func:`target_values`: the speedups at one shape as gluable numbers, with the largest;
- :func:`question_sentences` and :func:`disagreement_sentence`: gluable sentences that name
  the timer answering each question (eager PyTorch: per_call; CUDA graphs and serving:
  graph replay; kernel authors: the profiler's kernel time) with the numbers per GPU model,
  and say plainly where no cross-check is recorded for a model.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..analyse import timer_agreement as ta
from ..configs import TARGET

__all__ = ["QUESTIONS", "EXPERIMENT_QUESTIONS", "TIMER_LABELS", "MODELS", "recorded",
           "gpu_model", "by_model", "speedup_table", "eager_table", "experiment_table",
           "speedup_figure", "target_values",
           "question_sentences", "disagreement_sentence", "coverage_sentence", "SOURCES"]

# Which timer answers which user's question.
QUESTIONS = {"per_call": "a PyTorch user who calls attention eagerly",
             "graph": "a user who replays CUDA graphs (serving engines, torch.compile's "
                      "reduce-overhead mode)",
             ta.KERNEL: "a kernel author who compares kernels"}
TIMER_LABELS = {"graph": "graph replay (protocol)", "per_call": "eager call (per_call)",
                "do_bench": "triton do_bench (L2 flushed)",
                "do_bench_cudagraph": "sustained replay (do_bench_cudagraph)",
                ta.KERNEL: "kernel time (profiler)"}
MODELS = ("H100", "H200")


def recorded(folder="data/checks") -> dict:
    """The sealed cross-checks ``timers_*.json`` in ``folder``, by file stem (checked by
    ``checks.read``); an empty dict when there are none."""
    from ..record import checks
    return {p.stem: checks.read(p, "timers") for p in sorted(Path(folder).glob("timers_*.json"))}


def gpu_model(doc) -> str | None:
    """'H100', 'H200', ... from the GPU name in the cross-check's fingerprint (None on CPU)."""
    name = ta.gpu_label(doc)
    m = re.search(r"\b([A-Z]+\d{2,4}[A-Z]?)\b", name or "")
    return m.group(1) if m else None


def by_model(docs: dict) -> dict:
    """One cross-check per GPU model (the first file stem of each model, sorted)."""
    out = {}
    for stem in sorted(docs):
        model = gpu_model(docs[stem])
        if model and model not in out:
            out[model] = docs[stem]
    return out


NOT_RECORDED = "no timer cross-check is recorded for the {model}"


def _each_model(docs: dict, models):
    """(model, its cross-check) for each of ``models``, or (model, None) where none is
    recorded; the one loop every per-model sentence walks (:data:`NOT_RECORDED` says so)."""
    per_model = by_model(docs)
    return [(model, per_model.get(model)) for model in models]


def _fmt(r) -> str:
    if not np.isfinite(r["low"]):
        return f"{r['speedup']:.3f}"
    return f"{r['speedup']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"


SOURCES = {"main": ta.unit_rows, "experiments": ta.experiment_unit_rows}


def _speedups(doc, shape, reference, source="main"):
    if source not in SOURCES:
        raise ValueError(f"`source` must be one of {sorted(SOURCES)}; got {source!r}.")
    return [r for r in ta.speedups(SOURCES[source](doc), reference) if r["shape"] == shape]


def coverage_sentence(docs: dict, shape=TARGET.key, reference="sdpa", models=MODELS) -> str:
    """Per GPU model: in how many of the cross-check's main processes ``reference`` was timed
    at ``shape`` and why not elsewhere (e.g. the run's deadline); where none timed it, that
    the speedups at ``shape`` come from the experiment processes (``source="experiments"``,
    no per_call) and that the eager speedup is not recorded."""
    parts = []
    for model, doc in _each_model(docs, models):
        if doc is None:
            parts.append(NOT_RECORDED.format(model=model))
            continue
        cov = {r["candidate"]: r for r in ta.coverage(doc, shape)}
        r = cov.get(reference) or dict(timed=[], skipped={}, n_processes=len(doc["processes"]))
        why = ", ".join(f"{k} in {v}" for k, v in sorted(r["skipped"].items()))
        text = (f"on the {model}, {reference} was timed at {shape} in {len(r['timed'])} of "
                f"{r['n_processes']} main processes" + (f" (skipped: {why})" if why else ""))
        if not r["timed"]:
            n_x = len({x["process"] for x in ta.experiment_unit_rows(doc)
                       if x["shape"] == shape and x["candidate"] == reference})
            text += (f"; its speedups there come from {n_x} experiment process(es), without "
                     f"an eager call, so the eager speedup over {reference} is not recorded"
                     if n_x else "; no speedup over it is recorded there")
        parts.append(text)
    return "; ".join(parts)[:1].upper() + "; ".join(parts)[1:] + "."


def speedup_table(docs: dict, shape=TARGET.key, reference="sdpa",
                  timers=ta.ALL_TIMERS, source="main") -> pd.DataFrame:
    """Speedup over ``reference`` at ``shape``: one row per candidate, one column per GPU
    model and timer, text "speedup [low, high]" (95 % t-interval over processes; the point
    alone from one process); empty cells where a timer gave nothing, and an empty frame where
    no process timed ``reference`` at ``shape`` (:func:`coverage_sentence` says why).
    ``docs``: cross-checks by name (:func:`recorded`); ``source``: "main" (the timed units)
    or "experiments" (the experiment processes' timings, :func:`ta.experiment_unit_rows`)."""
    cols = {}
    for model, doc in by_model(docs).items():
        for r in _speedups(doc, shape, reference, source):
            if r["timer"] in timers:
                cols.setdefault((model, TIMER_LABELS[r["timer"]]), {})[r["candidate"]] = _fmt(r)
    frame = pd.DataFrame(cols).fillna("")
    if frame.empty:
        return frame
    frame.columns = pd.MultiIndex.from_tuples(frame.columns, names=["GPU", "timer"])
    return frame.sort_index()


def eager_table(doc, shape=TARGET.key, reference="sdpa") -> pd.DataFrame:
    """The eager answer at ``shape`` on one GPU: per candidate the eager call and its kernel
    time (microseconds, medians over processes), the host's share of the call, and the
    speedup over ``reference`` in an eager call and in graph replay."""
    rows = ta.eager_answer(ta.unit_rows(doc), shape, reference)
    frame = pd.DataFrame([{
        "candidate": r["candidate"], "eager call (us)": r["per_call_ms"] * 1e3,
        "kernel (us)": None if r["kernel_ms"] is None else r["kernel_ms"] * 1e3,
        "host share of the call": r["host_share"],
        "speedup, eager call": r["speedup_per_call"], "speedup, graph replay": r["speedup_graph"],
    } for r in rows])
    return frame.set_index("candidate") if not frame.empty else frame


EXPERIMENT_COLUMNS = {
    "l2_effect": "L2: flushed / hot kernel time - 1",
    "do_bench_flush_effect": "do_bench: with / without its flush - 1",
    "graph_k1_over_k100": "graph: 1 / 100 calls a replay - 1",
    "graph_over_dbcg_rep20": "protocol graph / do_bench_cudagraph - 1",
    "dbcg_rep100_over_rep20": "do_bench_cudagraph: rep 100 / rep 20 ms - 1",
    "placement_spread": "graph: spread over placements",
}


def experiment_table(doc) -> pd.DataFrame:
    """The controlled experiments of one cross-check (``timer_agreement.experiment_summary``):
    one row per shape and candidate, one column per effect (fractions; empty where not
    measured); an empty frame where the cross-check ran none."""
    rows = ta.experiment_summary(doc)
    frame = pd.DataFrame([{"shape": r["shape"], "candidate": r["candidate"],
                           **{label: r.get(key) for key, label in EXPERIMENT_COLUMNS.items()}}
                          for r in rows])
    return frame.set_index(["shape", "candidate"]) if not frame.empty else frame


def speedup_figure(doc, device_label: str, shape=TARGET.key, reference="sdpa",
                   timers=ta.ALL_TIMERS, source="main"):
    """Every candidate's speedup over ``reference`` at ``shape`` under each timer on one GPU:
    one row per candidate, one marker per timer with its interval, a line at one; the
    device (``device_label``) and shape in the title, which says "no interval" where every
    point comes from one process; limits fitted to the points
    (``figure_style.interval_window``)."""
    from .. import figure_style as fs
    label = fs._label_iv(device_label)
    rows = [r for r in _speedups(doc, shape, reference, source)
            if r["timer"] in timers and r["candidate"] != reference]
    if not rows:
        raise ValueError(f"`doc` holds no speedups at `shape` {shape!r}.")

    @fs._styled
    def draw():
        cands = sorted({r["candidate"] for r in rows})
        used = [t for t in timers if any(r["timer"] == t for r in rows)]
        fig = fs._figure(fs.PAGE_WIDTH_IN, 1.2 + 0.32 * len(cands))
        ax = fig.add_subplot()
        step = 0.8 / max(len(used), 1)
        for j, t in enumerate(used):
            pts = [r for r in rows if r["timer"] == t]
            y = [cands.index(r["candidate"]) - 0.4 + step * (j + 0.5) for r in pts]
            x = np.array([r["speedup"] for r in pts])
            lo = np.array([r["low"] for r in pts])
            hi = np.array([r["high"] for r in pts])
            err = np.vstack([np.where(np.isfinite(lo), x - lo, 0), np.where(np.isfinite(hi), hi - x, 0)])
            ax.errorbar(x, y, xerr=err, fmt="o", ms=4, capsize=2, label=TIMER_LABELS[t])
        allx = [r["speedup"] for r in rows]
        xlim = fs.interval_window(allx, [r["low"] for r in rows], [r["high"] for r in rows])
        ax.set_xlim(*fs.check_span(xlim, allx, (1.0,)))
        ax.axvline(1.0, color="0.4", lw=0.8)
        ax.set_yticks(range(len(cands)), cands)
        ax.set_ylim(len(cands) - 0.5, -0.5)
        ax.set_xlabel(f"speedup over {reference} (> 1: faster)")
        what = ("one process, no interval" if max(r["n_processes"] for r in rows) == 1
                else "geometric mean over processes, 95 % interval")
        ax.set_title(fs._title(f"{label}: speedup at {shape} under each timer ({what})"))
        fs._legend_below(fig, ax, ncol=3)
        return fig
    return draw()


def _pick(doc, shape, reference, cand, timer, source="main"):
    for r in _speedups(doc, shape, reference, source):
        if r["candidate"] == cand and r["timer"] == timer:
            return r
    return None


def target_values(doc, shape=TARGET.key, reference="sdpa", timers=ta.ALL_TIMERS,
                  source="main") -> dict:
    """Gluable numbers of one cross-check at ``shape``: ``"<timer>_<candidate>"`` -> the
    speedup over ``reference`` for every candidate and timer in ``timers`` recorded there;
    ``n_processes`` (the most processes behind any of them); ``largest`` with
    ``largest_candidate`` and ``largest_timer``: the largest speedup of any candidate but
    ``reference`` under any timer. Raises ``ValueError`` where ``source`` holds none."""
    rows = [r for r in _speedups(doc, shape, reference, source) if r["timer"] in timers]
    others = [r for r in rows if r["candidate"] != reference]
    if not others:
        raise ValueError(f"`doc` holds no speedups over {reference!r} at `shape` {shape!r} "
                         f"in `source` {source!r}.")
    top = max(others, key=lambda r: r["speedup"])
    return {**{f"{r['timer']}_{r['candidate']}": r["speedup"] for r in rows},
            "n_processes": max(r["n_processes"] for r in rows), "largest": top["speedup"],
            "largest_candidate": top["candidate"], "largest_timer": TIMER_LABELS[top["timer"]]}


# The experiment processes time no eager call: there Triton's do_bench, which launches
# every call from Python (L2 flushed), answers the eager user's question.
EXPERIMENT_QUESTIONS = {"do_bench": QUESTIONS["per_call"], "graph": QUESTIONS["graph"],
                        ta.KERNEL: QUESTIONS[ta.KERNEL]}


def question_sentences(docs: dict, candidates=("triton", "gluon", "fa4"), shape=TARGET.key,
                       reference="sdpa", models=MODELS, questions=QUESTIONS,
                       source="main") -> dict:
    """One sentence per user question (``questions``: timer -> who asks; default
    :data:`QUESTIONS`, :data:`EXPERIMENT_QUESTIONS` for ``source="experiments"``) naming
    its timer and, for each GPU model in ``models``, the speedup over ``reference`` of each
    of ``candidates`` at ``shape`` (with the host's share of the eager call for per_call);
    a model without a recorded cross-check is said to have none."""
    out = {}
    for timer, who in questions.items():
        parts = []
        for model, doc in _each_model(docs, models):
            if doc is None:
                parts.append(NOT_RECORDED.format(model=model))
                continue
            eager = {r["candidate"]: r for r in ta.eager_answer(ta.unit_rows(doc), shape,
                                                                reference)}
            vals = []
            for cand in candidates:
                r = _pick(doc, shape, reference, cand, timer, source)
                if r is None:
                    vals.append(f"{cand} not measured")
                    continue
                text = f"{cand} {r['speedup']:.2f}x"
                share = (eager.get(cand) or {}).get("host_share")
                if timer == "per_call" and share is not None:
                    text += f" (host {share:.0%} of the call)"
                vals.append(text)
            parts.append(f"on the {model}, " + ", ".join(vals))
        out[timer] = (f"For {who}, {TIMER_LABELS[timer]} answers: at {shape}, "
                      + "; ".join(parts) + ".")
    return out


def disagreement_sentence(docs: dict, shape=TARGET.key, reference="sdpa",
                          threshold=ta.DEFAULT_THRESHOLD, models=MODELS) -> str:
    """How many (candidate, timer pair) speedups at ``shape`` disagree beyond ``threshold``
    (interval wholly outside), per GPU model, the largest named; or that none is recorded."""
    parts = []
    for model, doc in _each_model(docs, models):
        if doc is None:
            parts.append(NOT_RECORDED.format(model=model))
            continue
        dis = [d for d in ta.disagreements(ta.speedups(ta.unit_rows(doc), reference),
                                           threshold, reference=reference)
               if d["shape"] == shape]
        bad = sorted((d for d in dis if d["verdict"] == "exceeds"),
                     key=lambda d: -abs(d["difference"]))
        if not dis:
            parts.append(f"the {model}'s cross-check holds no timer pairs at this shape")
            continue
        text = (f"on the {model}, {len(bad)} of {len(dis)} timer pairs differ by more than "
                f"{threshold:.0%}")
        if bad:
            d = bad[0]
            text += (f", the largest {d['candidate']} under {TIMER_LABELS[d['timer_a']]} against "
                     f"{TIMER_LABELS[d['timer_b']]} ({d['difference']:+.1%})")
        parts.append(text)
    return f"At {shape}, " + "; ".join(parts) + "."
