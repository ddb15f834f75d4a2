"""The fixed-shape chapter (``notebooks/02_fixed_shape.py``): what it computes beyond the
analysis' tables, so the notebook only calls, glues and shows.

Each function takes frames of loaded runs (``record.Run``) or tables of
:mod:`attn_analysis.analyse`, and returns a value, a sentence or a short table: the GPUs
of a run (:func:`gpu_label`), the family its intervals belong to (:func:`family_note`),
the two-level and replication tables (:func:`two_level_table`, :func:`replication_join`,
:func:`replication_table`), the reports' statistics beside ours
(:func:`reports_side_by_side`) and the graph-capture check (:func:`graph_check_table`).
Torch-free.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..present import tables
from ..analyse import catalog, reports_statistics
from .phrases import join
from ..configs import BASELINE

__all__ = ["REPORTS_SAME", "QUOTED", "gpu_label", "family_note", "two_level_table",
           "run_values", "twin_sentence", "k_range", "replication_join",
           "replication_table", "reports_side_by_side", "graph_check_table",
           "reports_sentence", "answer_sentence", "verdict_scope"]

# The reports' comparison of one array with itself, the first row of the side-by-side table.
REPORTS_SAME = "sdpa vs the same array (the reports' comparison)"


def gpu_label(run) -> str:
    """The GPUs a run's processes ran on, by their inventory labels ('H200-a'; a GPU the
    inventory does not know by the first 8 characters of its UUID, 'unknown' where a
    process recorded none), for captions and prose."""
    from pathlib import Path
    from ..analyse.provenance import gpu_name
    uuids = sorted({fp.get("gpu_uuid") or "unknown" for fp in
                    run.fingerprint.get("trials", {}).values()})
    path = getattr(run, "path", None)
    runs_dir = Path(path).resolve().parent if path is not None else None

    def name(u):
        if u == "unknown":
            return u
        return gpu_name(u, runs_dir) if runs_dir is not None and runs_dir.is_dir() \
            else u.replace("GPU-", "")[:8]
    return ", ".join(name(u) for u in uuids)


def family_note(families: dict, rid: str) -> str:
    """The family run ``rid``'s intervals belong to, for captions and prose (``families``:
    run id -> ``comparisons.target_family``; a run outside it has one comparison)."""
    if rid not in families:
        return "95 % interval (one comparison, no family)"
    family = families[rid]
    m = int(family["n_comparisons"].iloc[0])
    ms = list(dict.fromkeys(family.loc[family["level"] == "call", "mode"]))
    modes = ms[0] if len(ms) == 1 else ", ".join(ms[:-1]) + " and " + ms[-1]
    return (f"family-wise 95 % t-interval over processes, Bonferroni over m = {m} "
            f"(run {rid}: every candidate per call in {modes} mode and per kernel)")


def two_level_table(two_level: pd.DataFrame) -> pd.DataFrame:
    """One row per candidate: its call-level and kernel-level speedup, each with its
    interval in parentheses (``tables.with_interval``), and verdict."""
    wide = two_level.pivot(index="candidate", columns="level",
                           values=["speedup", "ci_low", "ci_high", "verdict"])
    short = pd.DataFrame({"candidate": wide.index})
    for level in ("call", "kernel"):
        if ("speedup", level) in wide.columns:
            short[f"{level} speedup (×)"] = tables.with_interval(
                wide[("speedup", level)], wide[("ci_low", level)], wide[("ci_high", level)])
            short[f"{level} verdict"] = wide[("verdict", level)].to_numpy()
    return short


def replication_join(lead: pd.DataFrame, replication: pd.DataFrame, k_lead: pd.DataFrame,
                     k_replication: pd.DataFrame, baseline: str = "sdpa") -> pd.DataFrame:
    """The candidates both runs compared, side by side: speedup, interval and verdict of
    each run (``lead`` and ``replication`` indexed by candidate) with the calls per replay
    each ran with (``k_min``, ``k_max``), the baseline left out."""
    cols = ["speedup", "ci_low", "ci_high", "verdict"]
    return (lead[cols].join(replication[cols], how="inner", lsuffix="_lead",
                            rsuffix="_replication")
            .join(k_lead.add_suffix("_lead")).join(k_replication.add_suffix("_replication"))
            .drop(index=baseline))


def replication_table(both: pd.DataFrame) -> pd.DataFrame:
    """:func:`replication_join`'s rows, short: speedup (interval), verdict and k per run."""
    short = pd.DataFrame({"candidate": both.index})
    for r in ("lead", "replication"):
        short[f"speedup_{r}"] = tables.with_interval(both[f"speedup_{r}"], both[f"ci_low_{r}"],
                                                     both[f"ci_high_{r}"])
        short[f"verdict_{r}"] = both[f"verdict_{r}"].to_numpy()
        short[f"k_{r}"] = [f"{int(a)}–{int(b)}" if a != b else f"{int(a)}" for a, b in
                           zip(both[f"k_min_{r}"], both[f"k_max_{r}"])]
    return short


def reports_side_by_side(samples: pd.DataFrame, config: str, mode: str,
                         ours: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """The reports' statistics (``reports_statistics.reports_protocol``) on pooled samples of
    ``mode`` at ``config``, sdpa against itself and against each candidate of ``ours`` (our
    verdict table, indexed by candidate), joined with our interval and verdict.

    Returns the table, indexed by comparison, and the protocols by comparison."""
    def pooled(candidate):
        sel = samples[(samples["config"] == config) & (samples["candidate"] == candidate)
                      & (samples["mode"] == mode)]
        return sel["ms"].to_numpy(dtype=float)

    protocol = {REPORTS_SAME: reports_statistics.reports_protocol(pooled("sdpa"),
                                                                  pooled("sdpa"))}
    protocol |= {f"sdpa vs {c}": reports_statistics.reports_protocol(pooled("sdpa"), pooled(c))
                 for c in ours.index}
    theirs = reports_statistics.reports_protocol_table(protocol)
    mine = ours[["ci_low", "ci_high", "verdict"]].rename(
        columns={"ci_low": "our_ci_low", "ci_high": "our_ci_high", "verdict": "our_verdict"})
    mine.index = [f"sdpa vs {c}" for c in mine.index]
    return theirs.set_index("comparison").join(mine), protocol


def graph_check_table(check: dict) -> tuple[pd.DataFrame, str]:
    """The graph-capture check of ``scripts/graph_variability.py`` as a table, one row per
    candidate: time per call over fresh captures (min, median, max, µs) and, over one
    replayed graph, the span and busy time per call and the kernels per call; with the
    check's device and torch label."""
    label = (f"{check['fingerprint'].get('gpu_name')}, torch "
             f"{check['fingerprint'].get('torch_version')}")
    rows = []
    for name, medians in check["recaptures"].items():
        us = np.array(medians) * 1e3
        tl = check["device_timeline"].get(name, {})
        rows.append({"candidate": name, "captures": len(us), "min_us": us.min(),
                     "median_us": np.median(us), "max_us": us.max(),
                     "span_us": tl.get("span_us_per_call"),
                     "busy_us": tl.get("busy_us_per_call"),
                     "kernels_per_call": (tl.get("kernels_per_replay") or 0) / 4})
    return pd.DataFrame(rows).set_index("candidate"), label


# The candidates whose call- and kernel-level results the chapter's prose quotes.
QUOTED = ("eager_compiled", "triton", "sdpa_twin", "sdpa_cudnn", "sdpa_flash")


def run_values(two_level: pd.DataFrame, suffix: str, candidates=QUOTED) -> dict:
    """The numbers the prose quotes from one run's two-level rows (call level in graph
    mode and kernel level of ``comparisons.target_family``), keyed for glue with
    ``suffix`` (the run's number): processes, placements per process, the baseline's time
    (µs) and, for each of ``candidates`` at each level, speedup, interval ends and verdict
    (``<candidate>_<level><suffix>`` and ``_lo``, ``_hi``, ``_v``), and both verdicts in
    one phrase (``levels_<candidate><suffix>``, :func:`phrases.per_level`)."""
    from .phrases import per_level
    t = two_level.set_index(["candidate", "level"])
    out = {f"procs{suffix}": int(t["n_processes"].min()),
           f"places{suffix}": int(t["n_placements"].min() / t["n_processes"].min()),
           f"sdpa_us{suffix}": float(t["baseline_ms"].iloc[0]) * 1e3}
    for cand in candidates:
        for level in ("call", "kernel"):
            if (cand, level) in t.index:
                row = t.loc[(cand, level)]
                key = f"{cand}_{level}{suffix}"
                out |= {key: row["speedup"], key + "_lo": row["ci_low"],
                        key + "_hi": row["ci_high"], key + "_v": row["verdict"]}
        if all((cand, level) in t.index for level in ("call", "kernel")):
            out[f"levels_{cand}{suffix}"] = per_level(t.loc[(cand, "call"), "verdict"],
                                                      t.loc[(cand, "kernel"), "verdict"])
    return out


def twin_sentence(speedups: pd.DataFrame, explain: bool = True) -> str:
    """What the A/A twin's row of a verdict table (indexed by candidate) says, or that the
    run has none; ``explain`` says what the twin is."""
    if "sdpa_twin" not in speedups.index:
        return "the run has no A/A twin"
    twin = speedups.loc["sdpa_twin"]
    what = (" (the default dispatch built and timed again as a separate candidate)"
            if explain else "")
    return (f"the A/A twin{what} is {twin['verdict']}, speedup {twin['speedup']:.3f} "
            f"(family-wise interval {twin['ci_low']:.3f}–{twin['ci_high']:.3f})")


def k_range(k: pd.DataFrame) -> str:
    """The calls per replay of a run's graph units (``replay_cost.graph_calls``'s ``k_min``
    and ``k_max``), as 'low–high'."""
    return f"{int(k['k_min'].min())}–{int(k['k_max'].max())}"


def k_versus(replication: str, lead: str) -> str:
    """The replication's calls per replay beside the lead run's (both :func:`k_range`
    strings), said once where they are the same range."""
    for name, v in (("replication", replication), ("lead", lead)):
        if not isinstance(v, str) or not v:
            raise ValueError(f"`{name}` must be a non-empty k range; got {v!r}.")
    return (f"k = {replication} calls per replay, as the lead run did" if replication == lead
            else f"k = {replication} calls per replay, against {lead} in the lead run")


def reports_sentence(n_significant: int, n_sig_equivalent: int, n_equivalent: int,
                     names: list | None = None) -> str:
    """What the reports' test says on real pairs, worded for each outcome: how many
    differences it calls significant, and how many of the pairs our interval shows
    equivalent within the margin it calls significant (never "0 of 0", and no "among them"
    where there is nothing among). ``names``, the equivalent candidates, are named after
    the count so a reader can match it to the verdict table (which also lists the A/A
    twin, no real pair)."""
    for name, v in (("n_significant", n_significant), ("n_sig_equivalent", n_sig_equivalent),
                    ("n_equivalent", n_equivalent)):
        if not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"`{name}` must be a count; got {v!r}.")
    if names is not None and len(names) != n_equivalent:
        raise ValueError(f"`names` must list the {n_equivalent} equivalent candidates; "
                         f"got {names!r}.")
    if n_sig_equivalent > min(n_equivalent, n_significant):
        raise ValueError("`n_sig_equivalent` must not exceed `n_equivalent` or "
                         "`n_significant`.")
    pairs = "pair" if n_significant == 1 else "pairs"
    first = ("On real pairs the reports' test calls no difference significant."
             if n_significant == 0 else
             f"On real pairs the reports' test calls {n_significant} {pairs} significantly "
             f"different.")
    if n_equivalent == 0:
        return first + " Our interval shows no pair equivalent within the margin."
    eq = "pair" if n_equivalent == 1 else "pairs"
    if names:
        eq += f" ({', '.join(map(str, names))})"
    if n_sig_equivalent == 0:
        return (first + f" None of the {n_equivalent} {eq} our interval shows equivalent "
                f"within the margin is among them." if n_equivalent > 1 else
                first + f" The one {eq} our interval shows equivalent within the margin is "
                "not among them.")
    return (first + f" {n_sig_equivalent} of the {n_equivalent} {eq} our interval shows "
            f"equivalent within the margin {'is' if n_sig_equivalent == 1 else 'are'} among "
            f"them.")


def answer_sentence(tables_by_gpu: dict, margin: float) -> str:
    """The chapter's answer per GPU in one sentence: for each GPU's two-level table
    (candidate, level, verdict; controls left out), whether a candidate is faster than the
    default dispatch beyond the margin per call and per kernel. GPUs with the same outcome
    are named together ("On H200-a and H200-b no candidate is faster ..."), so the sentence
    reads right for every outcome and never repeats itself."""
    from .phrases import join
    if not isinstance(tables_by_gpu, dict) or not tables_by_gpu:
        raise ValueError("`tables_by_gpu` must be a non-empty dict of GPU label -> table.")
    if not isinstance(margin, float) or not 0 < margin < 1:
        raise ValueError(f"`margin` must be a float in (0, 1); got {margin!r}.")
    outcomes = {}
    for gpu, t in tables_by_gpu.items():
        if not isinstance(t, pd.DataFrame) or not {"candidate", "level", "verdict"} <= set(t):
            raise ValueError(f"`tables_by_gpu[{gpu!r}]` must have columns candidate, level, "
                             f"verdict.")
        fast = t[t["verdict"] == "faster"]
        call = sorted(set(fast.loc[fast["level"] == "call", "candidate"]))
        kernel = sorted(set(fast.loc[fast["level"] == "kernel", "candidate"]))
        if not (t["level"] == "kernel").any():
            out = ("its run recorded no kernel times; per call "
                   + (f"{join(call)} {'is' if len(call) == 1 else 'are'} faster" if call
                      else "no candidate is faster"))
        elif call or kernel:
            both = sorted(set(call) & set(kernel))
            parts = []
            if both:
                parts.append(f"{join(both)} {'is' if len(both) == 1 else 'are'} faster per "
                             f"call and per kernel")
            for cands, level in ((sorted(set(call) - set(both)), "call"),
                                 (sorted(set(kernel) - set(both)), "kernel")):
                if cands:
                    parts.append(f"{join(cands)} {'is' if len(cands) == 1 else 'are'} faster "
                                 f"per {level} only")
            out = join(parts) + f" (beyond the ±{margin:.0%} margin)"
        else:
            out = (f"no candidate is faster than the default dispatch beyond the "
                   f"±{margin:.0%} margin, per call or per kernel")
        outcomes.setdefault(out, []).append(gpu)
    return " ".join(f"On {join(gpus)} {out}." for out, gpus in outcomes.items())


def verdict_scope(candidates, recorded=None) -> str:
    """What a verdict over ``candidates`` covers, for the sentence that states it:
    "PyTorch's own paths" for the library's candidates and each custom kernel (origin ours
    or a peer's) by its label, e.g. "PyTorch's own paths and our Triton kernel"; controls
    and SDPA's default dispatch, the baseline, are left out. ``recorded``: candidate ->
    the metadata a run recorded (``state_of_the_art.recorded_meta``), else the catalog's."""
    names = [c for c in candidates] if not isinstance(candidates, str) else None
    if not names or not all(isinstance(c, str) and c for c in names):
        raise ValueError(f"`candidates` must be a non-empty sequence of candidate names; "
                         f"got {candidates!r}.")
    metas = [catalog.meta_for(c, (recorded or {}).get(c)) for c in names if c != BASELINE]
    parts = (["PyTorch's own paths"] if any(m.origin == "library" for m in metas) else [])
    parts += sorted({m.label for m in metas if m.origin in ("ours", "peer")})
    if not parts:
        raise ValueError(f"`candidates` hold no library or custom candidate; got {names}.")
    return join(parts)
