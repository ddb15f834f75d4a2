"""The powered page (notebooks/08_powered.py): the pre-registered powered campaigns'
verdicts at their own family, when their plans were committed, and the neighbours control
that licenses spreading processes over a host's GPUs. Pure: tables and text from
comparison tables, the run inventory and the neighbours table.

Runs are chosen by campaign (``configs.POWERED_PLANS``), never by GPU, so runs of the same
campaigns on another GPU model join the page when recorded.
"""

from __future__ import annotations

import pandas as pd

from ..analyse import comparisons, inventory, power, robustness
from ..analyse.stats import Verdict
from ..configs import BASELINE

__all__ = ["LEVELS", "MARKS", "family_table", "verdict_counts", "headline_counts",
           "headline_phrase", "counts_sentence", "inconclusive_share", "decidability_sentence",
           "design_sentence", "placements_need_sentence", "unrun_plan_sentence",
           "merge_sentence", "plan_sentence", "speedup_display", "neighbours_sentence", "lever_sentence",
           "MATRIX_NAMES", "family_clause", "run_texts"]

LEVELS = ("call", "kernel")
# What each powered campaign's matrix is, in the page's words (configs.POWERED_PLANS' matrix)
MATRIX_NAMES = {"reports-v1": "the reports' matrix",
                "long-v2": "the long grid's rows at S = 2048 and 8192"}
# A verdict as a mark beside its speedup in the page's compact table (legend in its caption)
MARKS = {Verdict.FASTER.value: "▲", Verdict.FASTER_WITHIN_MARGIN.value: "△",
         Verdict.EQUIVALENT.value: "≈", Verdict.SLOWER_WITHIN_MARGIN.value: "▽",
         Verdict.SLOWER.value: "▼", Verdict.INCONCLUSIVE.value: "?",
         Verdict.UNDECIDED.value: "~"}


def family_table(run, campaign: dict, *, margin: float, n_resamples: int = 20_000,
                 mode: str = "graph") -> pd.DataFrame:
    """The comparisons of a powered ``run`` at its pre-registered family: the table that
    ``python -m attn_analysis compare <run>`` prints (the same call of
    :func:`comparisons.speedup_table`: every candidate against SDPA at the call and kernel
    levels, the attention level only where the ``campaign``'s ``levels`` name it), with
    ``m`` the campaign's ``family_size`` where it names one. Adding the attention level
    would widen every interval (m from 120 to 180 on the reports' matrix) and move
    verdicts, so the page and the command would disagree."""
    if not isinstance(campaign, dict) or "levels" not in campaign:
        raise ValueError(f"`campaign` must be a configs.POWERED_PLANS entry with 'levels'; "
                         f"got {campaign!r}.")
    kernels = run.kernels if "attention" in campaign["levels"] else None
    table = comparisons.speedup_table(run.samples, run.placements, baseline=BASELINE,
                                      mode=mode, margin=margin, n_resamples=n_resamples,
                                      kernels=kernels, n_comparisons=campaign.get("family_size"))
    return table[table["level"].isin(campaign["levels"])].reset_index(drop=True)


def _levels(table: pd.DataFrame) -> pd.DataFrame:
    t = table[table["level"].isin(LEVELS)]
    if t.empty:
        raise ValueError(f"`table` must hold comparisons at the levels {LEVELS}.")
    return t


def verdict_counts(table: pd.DataFrame, candidates=None) -> dict:
    """Comparisons per verdict at the call and kernel levels (of ``candidates`` only, e.g.
    the family's, where given), most frequent first, and their total under 'total'."""
    t = _levels(table)
    if candidates is not None:
        t = t[t["candidate"].isin(list(candidates))]
    counts = t["verdict"].value_counts()
    out = {str(k): int(v) for k, v in counts.items()}
    out["total"] = int(len(t))
    return out


def headline_counts(counts: dict) -> dict:
    """:func:`verdict_counts` folded into the four headline categories of
    :data:`robustness.CATEGORIES` (a verdict within the margin is equivalent, one undecided
    at the precision inconclusive), which sum to the total: what the abstract states."""
    if "total" not in counts:
        raise ValueError("`counts` must hold 'total' (from verdict_counts).")
    heads = {c: 0 for c in robustness.CATEGORIES}
    for verdict, n in counts.items():
        if verdict != "total":
            heads[robustness.category(verdict)] += int(n)
    if sum(heads.values()) != counts["total"]:
        raise ValueError(f"`counts` do not sum to their total: {counts!r}.")
    return heads


def headline_phrase(counts: dict, within: bool = True) -> str:
    """The four :func:`headline_counts` of a family in one phrase, the within-margin
    verdicts (methods' *faster* or *slower within margin*) named inside "equivalent":
    '10 faster, 21 equivalent (3 of them faster or slower within the margin), 63 slower
    and 6 inconclusive'. The one statement of a powered run's counts, in the abstract and
    on its page alike; the abstract leaves the within-margin detail to the page
    (``within`` false), the four counts stay the same."""
    heads = headline_counts(counts)
    if not within:
        return (f"{heads['faster']} faster, {heads['equivalent']} equivalent, "
                f"{heads['slower']} slower and {heads['inconclusive']} inconclusive")
    n_within = sum(int(n) for v, n in counts.items() if v in
                   (Verdict.FASTER_WITHIN_MARGIN.value, Verdict.SLOWER_WITHIN_MARGIN.value))
    which = "all" if n_within == heads["equivalent"] else f"{n_within} of them"
    eq = f"{heads['equivalent']} equivalent" + (
        f" ({which} faster or slower within the margin)" if n_within else "")
    return (f"{heads['faster']} faster, {eq}, {heads['slower']} slower and "
            f"{heads['inconclusive']} inconclusive")


def counts_sentence(counts: dict) -> str:
    """'a are slower, b equivalent, ...' in the order of ``counts`` (a clause to follow
    "Of the N comparisons, ")."""
    total = counts.get("total", 0)
    if total <= 0:
        raise ValueError("`counts` must hold a positive 'total'.")
    parts = [f"{n} {v}" for v, n in counts.items() if v != "total"]
    first, _, rest = parts[0].partition(" ")
    parts[0] = f"{first} {'is' if first == '1' else 'are'} {rest}"
    return ", ".join(parts)


def inconclusive_share(counts: dict) -> float:
    """The share of comparisons left inconclusive (or undecided at the precision)."""
    undecided = sum(n for v, n in counts.items()
                    if v != "total" and (v.startswith("inconclusive") or v.startswith("undecided")))
    return undecided / counts["total"]


def _per_level(level: str) -> str:
    """'per call' or 'per kernel', else 'at the <level> level'."""
    return {"call": "per call", "kernel": "per kernel"}.get(level, f"at the {level} level")


def _need_phrase(rows: list, unknown: str) -> str:
    """'14 processes per call and 11 per kernel': the processes each level of
    :func:`power.design_report`'s ``rows`` needs, ``unknown`` where no number suffices."""
    return " and ".join(f"{unknown if r.needed is None else r.needed}"
                        f"{' processes' if i == 0 else ''} {_per_level(r.level)}"
                        for i, r in enumerate(rows))


def decidability_sentence(report, processes: int, model: str | None = None) -> str:
    """Whether ``processes`` decide at the family, in one sentence, from
    :func:`power.design_report`'s rows (one per level): the processes each level needs
    for 80 % power and a 90 % A/A equivalence rate, and its per-process SD (pooled over
    the runs of GPU model ``model``, named where given)."""
    rows = list(report)
    if not rows:
        raise ValueError("`report` must hold at least one level.")
    need = _need_phrase(rows, "?")
    sds = " and ".join(f"{r.sigma:.4f} {_per_level(r.level)}" for r in rows)
    decides = all(r.decides for r in rows)
    lead = (f"{processes} processes decide at m = {rows[0].family}." if decides else
            f"{processes} processes do not decide at every level at m = {rows[0].family}.")
    whose = f"the {model}'s" if model else "this GPU model's"
    return (f"{lead} 80 % power and 90 % A/A equivalence need {need}. That is at {whose} "
            f"per-process SDs, pooled over its runs: {sds}.")


def design_sentence(sigmas: dict | None, campaign: dict, processes: int, family: int,
                    model: str | None, margin: float) -> str:
    """:func:`decidability_sentence` of a powered run from its GPU model's design SDs
    (``power.load_design_sigmas`` at the run's placements; None where none are recorded),
    judged at the levels of its ``campaign`` (a ``configs.POWERED_PLANS`` entry) and at
    its ``family`` m."""
    if not isinstance(campaign, dict) or "levels" not in campaign:
        raise ValueError(f"`campaign` must be a configs.POWERED_PLANS entry; got {campaign!r}.")
    levels = {lv: sd for lv, sd in (sigmas or {}).items() if lv in campaign["levels"]}
    if not levels:
        return ("No design SDs are recorded for this GPU model, so whether the run decides "
                "is not said.")
    return decidability_sentence(power.design_report(processes, family, levels, margin),
                                 processes, model)


def placements_need_sentence(report, placements: int) -> str:
    """What the same family would need at fewer ``placements`` per process, from
    :func:`power.design_report`'s rows at those placements: the counterpart of
    :func:`decidability_sentence`, which says what the run's own placements need."""
    rows = list(report)
    if not rows:
        raise ValueError("`report` must hold at least one level.")
    return (f"At {placements} placements per process the same family would need "
            f"{_need_phrase(rows, 'no number of')}.")


def unrun_plan_sentence(name: str, campaign: dict, report, model: str) -> str:
    """Why pre-registered plan ``name`` (its ``configs.POWERED_PLANS`` entry ``campaign``)
    has no run: its processes do not decide at its family, by :func:`power.design_report`'s
    rows (``report``) at the ``model``'s design SDs as recorded now. For the appendix: an
    unrun plan is history."""
    rows = list(report)
    if not rows:
        raise ValueError("`report` must hold at least one level.")
    placements = campaign.get("placements", 8)
    need = " and ".join(f"{'no number of' if r.needed is None else r.needed} processes at "
                        f"the {r.level} level" for r in rows)
    verdict = ("could not decide" if not all(r.decides for r in rows) else "could decide")
    return (f"Plan {name} (configs.POWERED_PLANS) asked {campaign['trials']} processes at "
            f"{placements} placements each, family m = {rows[0].family}. It {verdict}: at the "
            f"{model}'s design SDs as recorded now, it needs {need}. It was never run, so no "
            f"data of it exist.")


def _ranges(numbers) -> str:
    """'1-3, 5' for [1, 2, 3, 5]."""
    nums, out = sorted(set(int(n) for n in numbers)), []
    for n in nums:
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in out)


def merge_sentence(info: dict) -> str:
    """How a run was merged from shards, from its run.json ``info`` (``merged_from``):
    the shard count, the package version of each shard when they differ (merged with
    ``merge --across-versions``), and the shards whose recorded code was not clean
    (``code_dirty``). Empty for a run recorded in one piece."""
    shards = (info or {}).get("merged_from") or []
    if not shards:
        return ""
    run = info.get("run_id", "this run")
    number = {i: (s.get("shard") or [i + 1])[0] for i, s in enumerate(shards)}
    versions: dict = {}
    for i, s in enumerate(shards):
        versions.setdefault(str(s.get("attn_analysis_version")), []).append(number[i])
    text = f"Run {run} merges {len(shards)} shards"
    if len(versions) > 1:
        text += (", recorded by package versions " + " and ".join(
            f"{v} (shards {_ranges(n)})" for v, n in versions.items())
            + ", with merge --across-versions.")
    else:
        text += f" of one package version ({next(iter(versions))})."
    dirty = [number[i] for i, s in enumerate(shards) if s.get("code_dirty")]
    if dirty:
        text += (f" Shards {_ranges(dirty)} record code_dirty, so their recorded commit "
                 f"does not by itself show the code that ran.")
    return text


def plan_sentence(inventory_row) -> str:
    """Whether the plan was committed before the run's first journal entry (inventory row),
    one clause without times: the times are history (App. C)."""
    committed, first = inventory_row["plan_committed_utc"], inventory_row["first_entry_utc"]
    if committed is None or pd.isna(committed):
        return (f"Git holds no commit time of the plan of {inventory_row['run']}, so this "
                f"page does not claim it came first.")
    c, f = pd.Timestamp(committed), pd.Timestamp(first)
    if c < f:
        return "Pre-registered: its plan was committed before its first process."
    return "Not pre-registered: its plan was committed after its first process started."


def speedup_display(table: pd.DataFrame) -> pd.DataFrame:
    """One row per shape, one column per candidate: the call- and kernel-level speedups
    over SDPA, each with its verdict's mark (:data:`MARKS`), '1.111▲ 1.021?'; the
    intervals stay in the table behind it."""
    t = _levels(table)
    unknown = sorted(set(t["verdict"]) - set(MARKS))
    if unknown:
        raise ValueError(f"`table` holds verdicts without a mark: {unknown}.")
    t = t.assign(cell=[f"{s:.3f}{MARKS[v]}" for s, v in zip(t["speedup"], t["verdict"])])
    cells = t.pivot_table(index=["config", "candidate"], columns="level", values="cell",
                          aggfunc="first")
    both = cells[[lv for lv in LEVELS if lv in cells.columns]].fillna("-").agg(" ".join, axis=1)
    out = both.unstack("candidate").fillna("")
    out.columns.name = None
    return out.reset_index()


def neighbours_sentence(effects: dict, margin: float) -> str:
    """The neighbours control of every host in one sentence. ``effects`` maps a host's
    description (its runs and GPUs) to its ``neighbours.neighbour_effect`` table (each
    control's ratio, a process on every GPU over one at a time, with interval and verdict
    against ``margin``). All equivalent: the range of every interval; else each ratio that
    is not equivalent, named."""
    if not effects or any(e.empty for e in effects.values()):
        raise ValueError("`effects` must hold at least one host, each with a control.")
    allrows = pd.concat([e.assign(host=h) for h, e in effects.items()], ignore_index=True)
    hosts = "; ".join(effects)
    if set(allrows["verdict"]) == {"equivalent"}:
        return (f"Hosts tested: {hosts}. On each, neighbours move no control beyond the "
                f"margin (±{100 * margin:g}%): all {len(allrows)} ratios of concurrent over "
                f"one-at-a-time are equivalent, within [{allrows['ci_low'].min():.4f}, "
                f"{allrows['ci_high'].max():.4f}].")
    bad = allrows[allrows["verdict"] != "equivalent"]
    return ("Neighbours are not shown to leave the controls within the margin "
            f"(±{100 * margin:g}%): " + "; ".join(
                f"{r.candidate} at the {r.level} level on {r.host} {r.ratio:.4f} "
                f"[{r.ci_low:.4f}, {r.ci_high:.4f}], {r.verdict}" for r in bad.itertuples())
            + ".")


def lever_sentence(summaries: dict, tolerance: float = 0.1) -> str:
    """What the runs with many placements per process say about the placements lever:
    ``summaries`` maps a run id to its ``placement_lever.lever_summary``. Each run gives
    the ratio of its per-process SD to that at a quarter of its placements; the sentence
    calls the spread placement noise only where every ratio lies within ``tolerance`` of
    what pure placement noise gives."""
    if not summaries:
        return "No run holds enough placements per process to test the placements lever."
    parts = [f"In run {rid}, {s.placements} placements per process instead of {s.subset} "
             f"cut the per-process SD to {s.median_ratio:.2f} of its value (median of "
             f"{s.comparisons} comparisons)." for rid, s in sorted(summaries.items())]
    noise = next(iter(summaries.values())).noise_ratio
    text = " ".join(parts) + f" Pure placement noise gives {noise:.2f}"
    if all(abs(s.median_ratio - s.noise_ratio) <= tolerance for s in summaries.values()):
        return text + ", so the spread is placement noise and placements are the lever."
    return text + ", so more placements alone do not remove the spread."


def family_clause(campaign: dict, name: str, m: int, n_configs: int) -> str:
    """Where a powered run's family is fixed and what it is: the plan ``name`` in
    ``configs.POWERED_PLANS`` (``campaign``), its candidates against SDPA at ``n_configs``
    configurations and its levels, m = their product (the A/A twin is no member). Raises
    where the plan's ``family_size`` and that product disagree."""
    k, n_levels = len(campaign["family_candidates"]), len(campaign["levels"])
    if k * n_configs * n_levels != m:
        raise ValueError(f"`m` {m} is not {k} candidates x {n_configs} configurations x "
                         f"{n_levels} levels of plan {name!r}.")
    return (f"Its family, fixed in attn_analysis/configs.py (plan {name}), is {k} custom "
            f"kernels against SDPA at {n_configs} configurations and {n_levels} levels "
            f"({', '.join(campaign['levels'])}): m = {m}.")


def run_texts(row, table: pd.DataFrame, campaign: dict, untimed: pd.DataFrame | None = None
              ) -> dict:
    """The texts of one powered run's section, keyed as the page glues them (under a
    prefix per campaign): ``row`` is the run's inventory row (its ``campaign`` names the
    plan, its ``gpus`` the GPU labels, shown compact), ``table`` its :func:`family_table`,
    ``campaign`` its ``configs.POWERED_PLANS`` entry and ``untimed`` the
    ``state_of_the_art.untimed`` rows of the run (planned units that were not timed). The
    family's counts and the A/A twin's (every candidate outside the family) are stated
    apart."""
    if not isinstance(campaign, dict) or "family_candidates" not in campaign:
        raise ValueError(f"`campaign` must be a configs.POWERED_PLANS entry; got {campaign!r}.")
    if table.empty:
        raise ValueError("`table` must hold the run's comparisons.")
    m = int(table["n_comparisons"].iloc[0])
    family = list(campaign["family_candidates"])
    counts = verdict_counts(table, family)
    others = sorted(set(table["candidate"]) - set(family))
    controls = verdict_counts(table, others) if others else None
    what = MATRIX_NAMES.get(campaign.get("matrix"), f"matrix {campaign.get('matrix')}")
    gpus = inventory.compact_labels(list(row["gpus"]))
    timed = "" if counts["total"] == m else f", {counts['total']} were timed"
    sentence = (f"Run {row['run']} measured {what} with {int(row['processes'])} processes on "
                f"{gpus} ({row['model']}). "
                + family_clause(campaign, str(row["campaign"]), m, table["config"].nunique())
                + f" Of its {m} comparisons{timed}: {headline_phrase(counts)}."
                + (f" Of the A/A twin's {controls['total']}, judged at the same m, "
                   f"{counts_sentence(controls)}." if controls else ""))
    missing = (untimed[untimed["candidate"].isin(family)] if untimed is not None
               else pd.DataFrame(columns=["candidate", "status", "reason"]))
    return {"counts_sentence": sentence, "headline": headline_phrase(counts),
            "headline_short": headline_phrase(counts, within=False),
            "total": str(counts["total"]), "model": str(row["model"]), "run": str(row["run"]),
            "processes": str(int(row["processes"])), "gpus": gpus, "m": str(m),
            "inconclusive_share": f"{inconclusive_share(counts):.0%}",
            "plan_sentence": plan_sentence(row),
            "untimed_sentence": " ".join(
                f"Candidate {r.candidate} was planned but not timed ({r.status}: "
                f"{str(r.reason).split(' (')[0]})." for r in missing.itertuples())}
