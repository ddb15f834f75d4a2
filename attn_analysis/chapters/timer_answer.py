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

__all__ = ["ANSWER_TIMERS", "ANSWER_LABELS", "HOST_BOUND", "custom_candidates", "answer_values",
           "eager_clause", "direction_sentence", "not_answered_sentence", "clock_table",
           "clock_sentence", "agreement_sentence", "kernel_values", "variant_checks",
           "best_named", "variant_sentence", "variant_clauses"]

# The timers that answer a user's question, and the key each gets in answer_values.
ANSWER_TIMERS = {"per_call": "eager", "graph": "graph", "do_bench_cudagraph": "sustained",
                 ta.KERNEL: "kernel"}

ANSWER_LABELS = {"eager": "eager calls", "graph": "graph replay",
                 "sustained": "sustained replay", "kernel": "kernel time"}

# A call whose host time (eager call minus kernel time) exceeds this share is host-bound.
HOST_BOUND = 0.5


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


def kernel_values(doc, candidate: str, shape=TARGET.key, reference="sdpa") -> dict:
    """One candidate's numbers in a cross-check at ``shape`` (main processes): per timer key
    ``K`` of :data:`ANSWER_TIMERS`, ``K_speedup``, ``K_low``, ``K_high`` over ``reference``
    (95 % t-interval over processes; NaN where not timed), ``host_share`` (the host's share
    of its eager call), ``variant`` (what its build recorded, '' for none) and
    ``n_processes``. Raises ``ValueError`` where ``doc`` never timed ``candidate`` beside
    ``reference`` there."""
    rows = {r["timer"]: r for r in ta.speedups(ta.unit_rows(doc), reference)
            if r["shape"] == shape and r["candidate"] == candidate}
    if not rows:
        raise ValueError(f"`doc` holds no timing of `candidate` {candidate!r} beside "
                         f"{reference!r} at `shape` {shape!r}.")
    out: dict = {}
    for timer, key in ANSWER_TIMERS.items():
        r = rows.get(timer) or {}
        out.update({f"{key}_{f}": r.get(k, math.nan) for f, k in
                    (("speedup", "speedup"), ("low", "low"), ("high", "high"))})
    eager = {r["candidate"]: r for r in ta.eager_answer(ta.unit_rows(doc), shape, reference)}
    share = (eager.get(candidate) or {}).get("host_share")
    out.update(host_share=math.nan if share is None else share,
               variant=_variants(doc, shape).get(candidate, ""),
               n_processes=max(r["n_processes"] for r in rows.values()))
    return out


def variant_checks(docs: dict, main, candidate: str, variant: str, shape=TARGET.key) -> dict:
    """The cross-checks of ``docs`` (file stem -> document) other than ``main`` on ``main``'s
    GPU model (the name in its fingerprint) whose build of ``candidate`` at ``shape``
    recorded ``variant``, by stem in sorted order."""
    model = ta.gpu_label(main)
    return {k: d for k, d in sorted(docs.items()) if d is not main
            and ta.gpu_label(d) == model and _variants(d, shape).get(candidate) == variant}


def best_named(v: dict, doc, shape=TARGET.key) -> dict:
    """``v`` (:func:`answer_values` of ``doc``) with each ``K_best`` naming the variant its
    build recorded: 'gluon's overlap_only' for a tuned kernel, the candidate alone else."""
    variants = _variants(doc, shape)
    return {k: (f"{x}'s {variants[x]}" if k.endswith("_best") and x in variants else x)
            for k, x in v.items()}


def _cases(values: list, key: str, spec: str) -> str:
    """'1.058× (1.047–1.069) and 1.053× (1.040–1.067)': ``key`` in each check's values."""
    return join([f"{format(v[key + '_speedup'], spec)}× ({format(v[key + '_low'], spec)}–"
                 f"{format(v[key + '_high'], spec)})" for v in values])


def variant_sentence(main_variant: str, variant: str | None, checks: dict,
                     label: str = "Gluon kernel") -> str:
    """Which variant of our kernel (``label``) the main cross-check timed
    (``main_variant``), and which further ``checks`` (file stem -> :func:`kernel_values`)
    timed ``variant``, that of the confirmatory runs (None where no confirmatory run timed
    the kernel), with their processes."""
    text = f"Its {label} is variant {main_variant or 'not recorded'}"
    if variant is None:
        return text + "; no confirmatory run timed the kernel."
    if variant == main_variant:
        return text + ", that of the confirmatory target runs."
    if not checks:
        return text + f". No further check timed {variant}, that of the confirmatory runs."
    n = sorted({int(v["n_processes"]) for v in checks.values()})
    each = f"{n[0]} processes{' each' if len(checks) > 1 else ''}" if len(n) == 1 else \
        f"{join(map(str, n))} processes"
    return (text + f". {'Further checks' if len(checks) > 1 else 'A further check'} timed "
            f"{variant}, the variant of the confirmatory target runs, beside SDPA: "
            f"{join([f'{k}.json' for k in checks])}, {each}.")


def variant_clauses(values: list, candidate: str = "gluon") -> dict:
    """What each timer's bullet adds for the variant of the confirmatory runs, from the
    further checks that timed it (``values``: their :func:`kernel_values`, in the order
    :func:`variant_sentence` names them): ``eager``, a sentence with the speedup per eager
    call and the host's share of the call; per other key of :data:`ANSWER_LABELS`, a
    clause "; gluon's fa3_n128_s3 at 1.058× (1.047–1.069) and 1.053× (1.040–1.067)".
    Empty strings where ``values`` is empty."""
    if not values:
        return {key: "" for key in ANSWER_LABELS}
    variants = {v["variant"] for v in values}
    if len(variants) != 1:
        raise ValueError(f"`values` must be of one variant; got {sorted(variants)}.")
    variant = variants.pop()
    out = {key: f"; {candidate}'s {variant} at {_cases(values, key, '.3f')}"
           for key in ANSWER_LABELS}
    shares = join([f"{v['host_share']:.0%}" for v in values])
    out["eager"] = (f"Our Gluon kernel's {variant} runs at {_cases(values, 'eager', '.2f')}; "
                    f"the host takes {shares} of its call.")
    return out


def _span_x(xs) -> str:
    """'0.33–0.42×' over several checks; '0.33×' where they round alike."""
    lo, hi = f"{min(xs):.2f}", f"{max(xs):.2f}"
    return f"{lo}×" if lo == hi else f"{lo}–{hi}×"


def eager_clause(answers: dict, models, margin: float, ours: dict | None = None) -> str:
    """The abstract's eager answer at the shape: per GPU model of ``models``, the fastest
    custom kernel's verdict per eager call (its 95 % interval over processes against
    ``margin``, the rule of ``stats.decide`` folded into the four headline categories) and,
    where ``ours`` (model -> :func:`kernel_values` of the checks of our Gluon kernel's
    current variant) has them, that kernel's speedups, 'host-bound' where the host takes
    more than :data:`HOST_BOUND` of its call in every check; then the models without an
    answer: 'per eager call, H200: the fastest custom kernel inconclusive, our Gluon kernel
    0.33–0.42× (host-bound); H100 unrecorded'. ``answers`` maps a model to its
    :func:`answer_values`."""
    margin = margin_iv(margin)
    ours = ours or {}
    said, missing = [], []
    for model in models:
        v = answers.get(model)
        if v is None or not (math.isfinite(v["eager_low"]) and math.isfinite(v["eager_high"])):
            missing.append(model)
            continue
        verdict = interval_verdict(v["eager_low"], v["eager_high"], 1 - margin, 1 + margin)
        text = f"{model}: the fastest custom kernel {robustness.category(verdict.value)}"
        mine = [x for x in ours.get(model) or [] if math.isfinite(x["eager_speedup"])]
        if mine:
            bound = all(x["host_share"] > HOST_BOUND for x in mine)
            text += (f", our Gluon kernel {_span_x([x['eager_speedup'] for x in mine])}"
                     + (" (host-bound)" if bound else ""))
        said.append(text)
    if not said and not missing:
        raise ValueError("`models` must name at least one GPU model.")
    text = "per eager call, " + "; ".join(said) if said else "per eager call, no answer"
    return text + (f"; {join(missing)} unrecorded" if missing else "")


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
                 f"{min(after_sustained[c] for c in keepers):.0f} MHz under sustained replay. "
                 f"So the drop comes from how {reference} is called, not from the kernel alone.")
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
    return (f"A check of {join(shapes)} ran {n_proc} processes. Of its {len(pairs)} pairs of "
            f"timers that leave the host out, {bad} differ{'s' if bad == 1 else ''} on a "
            f"custom kernel's speedup by more than {threshold:.0%}.")
