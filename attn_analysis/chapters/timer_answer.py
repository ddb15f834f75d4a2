"""The answer at one shape under each timer, and why two timers give two answers (issue 46).

The methods chapter and the abstract give the answer at the reports' shape for each user:
an eager PyTorch call, CUDA-graph replay (the protocol), sustained back-to-back replay
(Triton's ``do_bench_cudagraph``) and the kernel alone. :func:`answer_values` reduces one
timer cross-check (``data/checks/timers_*.json``) to gluable numbers: the fastest custom
kernel under each timer with its interval over processes, the host's share of SDPA's
eager call, the SM clock after each timer (read, never set) for SDPA and for that kernel,
and how much sustained replay moves that kernel's speedup against the protocol's.

A custom kernel is ours or a peer's (``state_of_the_art.CUSTOM_ORIGINS``) whose main kernel
is not SDPA's; cuDNN called directly runs SDPA's own kernel and is left out, as in the
results chapter (``state_of_the_art.is_custom``).
"""

from __future__ import annotations

import math

from ..analyse import robustness, timer_agreement as ta
from ..analyse.stats import interval_verdict, margin_iv
from ..configs import TARGET
from .state_of_the_art import CUSTOM_ORIGINS
from .phrases import join

__all__ = ["ANSWER_TIMERS", "ANSWER_LABELS", "custom_candidates", "answer_values",
           "eager_clause", "direction_sentence", "not_answered_sentence", "clock_table",
           "clock_sentence", "agreement_sentence", "further_check_sentence"]

# The timers that answer a user's question, and the key each gets in answer_values.
ANSWER_TIMERS = {"per_call": "eager", "graph": "graph", "do_bench_cudagraph": "sustained",
                 ta.KERNEL: "kernel"}

ANSWER_LABELS = {"eager": "eager calls", "graph": "graph replay",
                 "sustained": "sustained replay", "kernel": "kernel time"}


def custom_candidates(doc, shape=TARGET.key, reference="sdpa") -> list[str]:
    """The candidates of ``doc`` at ``shape`` that are custom kernels: origin ours or peer as
    their build recorded it, and a main kernel other than ``reference``'s."""
    meta, kernels = ta.build_meta(doc, shape), ta.main_kernels(doc, shape)
    ref_kernel = kernels.get(reference)
    return sorted(c for c, m in meta.items()
                  if m.get("origin") in CUSTOM_ORIGINS and c != reference
                  and (ref_kernel is None or kernels.get(c) != ref_kernel))


def _sustained_shifts(doc, shape, reference) -> dict:
    """Candidate -> its speedup under sustained replay over that under graph replay, paired
    by process (``ta.disagreements``' row: ``difference``, ``low``, ``high``), at ``shape``."""
    return {d["candidate"]: d for d in ta.disagreements(
        ta.speedups(ta.unit_rows(doc), reference), timers=("do_bench_cudagraph", "graph"),
        reference=reference) if d["shape"] == shape}


def _clocks(doc, shape) -> dict:
    """(candidate, timer) -> the median SM clock (MHz) right after that timer at ``shape``."""
    return {(c["candidate"], c["timer"]): c["median_mhz"] for c in ta.clock_after(doc, shape)}


def answer_values(doc, shape=TARGET.key, reference="sdpa") -> dict:
    """Gluable numbers of one cross-check at ``shape`` (main processes only):

    - ``n_processes``: processes that timed ``reference`` there;
    - per timer key ``K`` of :data:`ANSWER_TIMERS`: ``K_best`` (the custom kernel with the
      largest speedup over ``reference``), ``K_speedup``, ``K_low``, ``K_high`` (95 %
      t-interval over processes);
    - ``ref_call_us``, ``ref_kernel_us``, ``ref_host_share``: ``reference``'s eager call,
      its kernel time and the host's share of the call; ``eager_best_host_share``;
    - ``ref_clock_graph``, ``ref_clock_sustained``, ``best_clock_sustained``: the median SM
      clock (MHz) right after the protocol's graph and after ``do_bench_cudagraph`` for
      ``reference`` and for ``graph_best``;
    - ``sustained_shift``, ``_low``, ``_high``: ``graph_best``'s speedup under sustained
      replay over its speedup under the protocol's graph, minus one (paired by process).

    Raises ``ValueError`` when ``doc`` holds no custom kernel timed beside ``reference``."""
    custom = set(custom_candidates(doc, shape, reference))
    rows = [r for r in ta.speedups(ta.unit_rows(doc), reference)
            if r["shape"] == shape and r["candidate"] in custom]
    out: dict = {}
    for timer, key in ANSWER_TIMERS.items():
        timed = [r for r in rows if r["timer"] == timer]
        if not timed:
            raise ValueError(f"`doc` holds no custom kernel timed under {timer!r} at "
                             f"`shape` {shape!r}.")
        best = max(timed, key=lambda r: r["speedup"])
        out.update({f"{key}_best": best["candidate"], f"{key}_speedup": best["speedup"],
                    f"{key}_low": best["low"], f"{key}_high": best["high"]})
    eager = {r["candidate"]: r for r in ta.eager_answer(ta.unit_rows(doc), shape, reference)}
    ref = eager[reference]
    out.update(ref_call_us=1e3 * ref["per_call_ms"], ref_kernel_us=1e3 * ref["kernel_ms"],
               ref_host_share=ref["host_share"],
               eager_best_host_share=eager[out["eager_best"]]["host_share"],
               n_processes=len({r["process"] for r in ta.unit_rows(doc)
                                if r["shape"] == shape and r["candidate"] == reference}))
    clocks = _clocks(doc, shape)
    out.update(ref_clock_graph=clocks.get((reference, "graph"), math.nan),
               ref_clock_sustained=clocks.get((reference, "do_bench_cudagraph"), math.nan),
               best_clock_sustained=clocks.get((out["graph_best"], "do_bench_cudagraph"),
                                               math.nan))
    d = _sustained_shifts(doc, shape, reference).get(
        out["graph_best"], dict(difference=math.nan, low=math.nan, high=math.nan))
    out.update(sustained_shift=d["difference"], sustained_shift_low=d["low"],
               sustained_shift_high=d["high"])
    return out


def _speedup(v, key) -> str:
    """'0.95× (0.84–1.08; triton)': the fastest custom kernel under a timer key."""
    text = f"{v[key + '_speedup']:.2f}× ("
    if math.isfinite(v[key + "_low"]):
        text += f"{v[key + '_low']:.2f}–{v[key + '_high']:.2f}; "
    return text + f"{v[key + '_best']})"


def _variants(doc, shape) -> dict:
    """Candidate -> the variant its build recorded at ``shape`` (our Gluon kernel's tuning)."""
    out = {}
    for build in doc.get("build_process") or []:
        for cand, b in ((build.get("builds") or {}).get(shape) or {}).items():
            variant = (((b or {}).get("info") or {}).get("config") or {}).get("variant")
            if variant:
                out[cand] = str(variant)
    return out


def further_check_sentence(doc, name: str, shape=TARGET.key, reference="sdpa",
                           main=None) -> str:
    """Sentences for a further cross-check of the same GPU model at ``shape`` (``doc``,
    file ``name``), beside the one the section reads (``main``): its processes, what it
    timed (with the variant each build chose, and the main check's where it differs) and
    the fastest custom kernel under each timer (95 % intervals over processes)."""
    v = answer_values(doc, shape, reference)
    mine, before = _variants(doc, shape), _variants(main or {}, shape)
    timed = [c + (f" (variant {mine[c]}"
                  + (f"; {before[c]} in the main check" if before.get(c, mine[c]) != mine[c]
                     else "") + ")" if c in mine else "")
             for c in sorted(custom_candidates(doc, shape, reference))]
    return (f"A further cross-check ({name}, {int(v['n_processes'])} processes) timed "
            f"{join(timed)} beside {reference}. Its fastest custom kernel runs at "
            f"{_speedup(v, 'graph')} under graph replay and {_speedup(v, 'sustained')} under "
            f"sustained replay. Under kernel time it runs at {_speedup(v, 'kernel')}; per "
            f"eager call, at {_speedup(v, 'eager')}.")


def eager_clause(answers: dict, models, margin: float) -> str:
    """The abstract's eager answer at the shape: the fastest custom kernel's verdict per
    eager call on each GPU model of ``models`` (its 95 % interval over processes against
    ``margin``, the rule of ``stats.decide`` folded into the four headline categories), and
    the models without an answer: 'per eager call, the fastest custom kernel's verdict is
    inconclusive on the H200; not recorded on the H100'. ``answers`` maps a model to its :func:`answer_values`."""
    margin = margin_iv(margin)
    said, missing = [], []
    for model in models:
        v = answers.get(model)
        if v is None or not (math.isfinite(v["eager_low"]) and math.isfinite(v["eager_high"])):
            missing.append(f"the {model}")
            continue
        verdict = interval_verdict(v["eager_low"], v["eager_high"], 1 - margin, 1 + margin)
        said.append(f"{robustness.category(verdict.value)} on the {model}")
    if not said and not missing:
        raise ValueError("`models` must name at least one GPU model.")
    text = ("per eager call, the fastest custom kernel's verdict is " + join(said) if said
            else "per eager call, no answer")
    return text + (f"; not recorded on {join(missing)}" if missing else "")


def direction_sentence(v: dict) -> str:
    """Under which timers every custom kernel is slower than SDPA (the fastest one's interval
    lies below 1), under which the fastest is not told apart from SDPA (its interval spans
    1), and under which it is faster (``v``: :func:`answer_values`)."""
    below, spans, above = [], [], []
    for key, label in ANSWER_LABELS.items():
        low, high = v[f"{key}_low"], v[f"{key}_high"]
        if not (math.isfinite(low) and math.isfinite(high)):
            spans.append((key, label))
        elif high < 1:
            below.append((key, label))
        elif low > 1:
            above.append((key, label))
        else:
            spans.append((key, label))
    parts = []
    if below:
        parts.append(f"Under {join([lb for _, lb in below])}, SDPA is faster than every custom "
                     f"kernel (95 % intervals below 1, not family-wise).")
    for key, label in spans:
        parts.append(f"Under {label}, {v[key + '_best']} is not told apart from SDPA "
                     f"(its interval spans 1).")
    for key, label in above:
        parts.append(f"Under {label}, {v[key + '_best']} is faster than SDPA.")
    return " ".join(parts)


def not_answered_sentence(model: str, doc=None, shape=TARGET.key, reference="sdpa") -> str:
    """For a GPU model whose cross-check never timed ``reference`` at ``shape`` in a main
    process: that no eager answer is recorded, and why, from the check's coverage (e.g. the
    run's deadline skipped it) where ``doc`` is given."""
    why = ""
    if doc is not None:
        cov = {r["candidate"]: r for r in ta.coverage(doc, shape)}.get(reference)
        if cov and cov["skipped"]:
            why = ": its cross-check skipped SDPA here (" + ", ".join(
                f"{k} in {v} of {cov['n_processes']} processes"
                for k, v in sorted(cov["skipped"].items())) + ")"
    return f"No eager answer is recorded for the {model}{why or ''}."


def _pct(x: float) -> str:
    """A signed percentage with one decimal, never '-0.0'."""
    text = f"{100 * x:+.1f}"
    return "+0.0" if text == "-0.0" else text


def _same_kernel(doc, shape, reference) -> list[str]:
    """Candidates other than ``reference`` whose main kernel at ``shape`` is its kernel."""
    kernels = ta.main_kernels(doc, shape)
    ref = kernels.get(reference)
    return sorted(c for c, k in kernels.items() if c != reference and ref is not None and k == ref)


def clock_table(doc, shape=TARGET.key, reference="sdpa"):
    """One row per candidate at ``shape``: ``reference``, the candidates running its kernel,
    then the custom kernels. Columns: the speedup over ``reference`` under each timer that
    answers a user (eager call, graph replay, sustained replay, kernel time), the shift of
    sustained over graph replay with its 95 % interval (paired by process), and the median
    SM clock right after graph and after sustained replay (MHz, "graph / sustained"). A
    pandas DataFrame, rounded for display."""
    import pandas as pd
    sp = {(r["candidate"], r["timer"]): r for r in ta.speedups(ta.unit_rows(doc), reference)
          if r["shape"] == shape}
    shifts = _sustained_shifts(doc, shape, reference)
    clocks = _clocks(doc, shape)
    rows = []
    for cand in dict.fromkeys([reference] + _same_kernel(doc, shape, reference)
                              + custom_candidates(doc, shape, reference)):
        d = shifts.get(cand)
        row = {"candidate": cand}
        for timer, key in ANSWER_TIMERS.items():
            row[ANSWER_LABELS[key]] = (sp.get((cand, timer)) or {}).get("speedup")
        g, su = clocks.get((cand, "graph")), clocks.get((cand, "do_bench_cudagraph"))
        row.update({"shift (%)": f"{_pct(d['difference'])} [{_pct(d['low'])}, "
                                 f"{_pct(d['high'])}]" if d else "",
                    "SM clock (MHz)": f"{g:.0f} / {su:.0f}" if g and su else ""})
        rows.append(row)
    return pd.DataFrame(rows).round(3)


def clock_sentence(doc, shape=TARGET.key, reference="sdpa") -> str:
    """Why sustained replay and the protocol's short replays disagree at ``shape``, as the
    data show it: the SM clock after each for ``reference``; the custom kernels that keep
    their clock and the range of their speedups' shift (paired by process, as
    :func:`clock_table`); those whose clock falls too; and the clock of the candidates that
    run ``reference``'s own kernel: one that keeps its clock shows the drop comes from how
    ``reference`` is called, not from the kernel alone."""
    clocks = _clocks(doc, shape)
    after_sustained = {c: mhz for (c, t), mhz in clocks.items() if t == "do_bench_cudagraph"}
    after_graph = {c: mhz for (c, t), mhz in clocks.items() if t == "graph"}
    if reference not in after_sustained or reference not in after_graph:
        raise ValueError(f"`doc` holds no clock reading of {reference!r} at `shape` {shape!r}.")
    shifts = {c: d["difference"] for c, d in _sustained_shifts(doc, shape, reference).items()}
    custom = [c for c in custom_candidates(doc, shape, reference)
              if c in after_sustained and c in shifts]
    held = [c for c in custom if after_sustained[c] >= after_graph.get(c, math.inf)]
    fell = [c for c in custom if c not in held]
    text = (f"Sustained replay lowers {reference}'s SM clock to "
            f"{after_sustained[reference]:.0f} MHz, against {after_graph[reference]:.0f} MHz "
            f"after graph replay (medians over processes; clocks are read, never set).")
    if held:
        lo, hi = min(shifts[c] for c in held), max(shifts[c] for c in held)
        text += (f" {join(held)} keep {min(after_sustained[c] for c in held):.0f} MHz; "
                 f"their speedups rise by {100 * lo:.1f}–{100 * hi:.1f}%.")
    for cand in fell:
        text += (f" {cand}'s clock falls too ({after_sustained[cand]:.0f} MHz); its speedup "
                 f"moves by {_pct(shifts[cand])}%.")
    same = [c for c in _same_kernel(doc, shape, reference) if c in after_sustained]
    keepers = [c for c in same if after_sustained[c] >= after_graph.get(c, math.inf)]
    if keepers:
        verbs = ("runs", "keeps") if len(keepers) == 1 else ("run", "keep")
        text += (f" {join(keepers)} {verbs[0]} {reference}'s own kernel yet {verbs[1]} "
                 f"{min(after_sustained[c] for c in keepers):.0f} MHz under sustained replay, "
                 f"so the drop comes from how {reference} is called, not from the kernel alone.")
    elif same:
        text += (f" Candidates that run {reference}'s own kernel read "
                 + join([f"{after_sustained[c]:.0f} MHz ({c})" for c in same])
                 + ": the kernel's clock falls wherever it runs.")
    return text


def agreement_sentence(doc, reference="sdpa", timers=("graph", "do_bench_cudagraph", ta.KERNEL),
                       threshold=ta.DEFAULT_THRESHOLD) -> str:
    """How well ``timers`` (by default those that leave the host's launch path out: graph
    replay, sustained replay, kernel time; ``do_bench`` and eager calls launch each call from
    Python) agree on the
    custom kernels' speedups at every shape of ``doc``: how many (shape, kernel, pair of
    timers) differ beyond ``threshold`` with the interval wholly outside, of how many."""
    rows = ta.speedups(ta.unit_rows(doc), reference)
    shapes = sorted({r["shape"] for r in rows})
    custom = {s: set(custom_candidates(doc, s, reference)) for s in shapes}
    pairs = [d for d in ta.disagreements(rows, threshold, timers=timers, reference=reference)
             if d["candidate"] in custom[d["shape"]]]
    if not pairs:
        raise ValueError("`doc` holds no custom kernel timed under two of `timers`.")
    bad = sum(d["verdict"] == "exceeds" for d in pairs)
    n_proc = max(d["n_processes"] for d in pairs)
    return (f"At {join(shapes)} ({n_proc} processes), {bad} of {len(pairs)} pairs of timers "
            f"that leave the host out differ on a custom kernel's speedup by more "
            f"than {threshold:.0%}.")
