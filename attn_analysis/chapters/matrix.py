"""The matrix chapter (``notebooks/03_matrix.py``): what it computes beyond the analysis'
tables, so the notebook only calls, glues and shows.

The "faster per call only" classification of the lead run's two-level family
(:func:`level_split`), our kernel's results against the fastest library backend and
against SDPA (:func:`triton_levels`, :func:`triton_values`, :func:`triton_table`), the
answer on attention kernels (:func:`attention_answer`), the kernel's tuning across runs
(:func:`tuning_values`, :func:`tuning_per_run`), the latest kernel runs at the target
(:func:`latest_values`) and the FlashAttention-3 shapes (:func:`fa3_table`). Each returns a
dict of values keyed as the notebook glues them (after its prefix), a sentence or a table.
Torch-free.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..present import tables
from ..analyse import comparisons, workload
from ..analyse.stats import VERDICT_ORDER, Verdict
from .phrases import tally
from ..configs import Config

__all__ = ["TUNING_PICK", "verdict_tally", "attention_sentence", "level_split", "leads_sentence", "triton_levels", "triton_values", "triton_table",
           "attention_answer", "tuning_values", "tuning_per_run", "latest_values",
           "fa3_table"]

_FASTER, _SLOWER = Verdict.FASTER.value, Verdict.SLOWER.value
# The tuning parameters that make one pick of our kernel's autotuner.
TUNING_PICK = ["BLOCK_M", "BLOCK_N", "num_warps", "num_stages"]


def level_split(two: pd.DataFrame) -> dict:
    """Which comparisons of a run's two-level family (``comparisons.speedup_table`` with
    placements: call, kernel and attention levels) are faster per call only, faster per
    call and per kernel, faster per kernel (and what the attention level says of those),
    and how many attention-level comparisons are faster. ``two`` must not be empty."""
    wide = two.pivot_table(index=["config", "candidate"], columns="level", values="verdict",
                           aggfunc="first")
    call_fast = wide[wide["call"] == _FASTER] if "call" in wide else wide.iloc[:0]
    both_fast = (call_fast[call_fast["kernel"] == _FASTER] if "kernel" in call_fast
                 else call_fast.iloc[:0])
    only_call = call_fast.drop(index=both_fast.index)
    kernel_fast = wide[wide["kernel"] == _FASTER] if "kernel" in wide else wide.iloc[:0]
    att = two[two["level"] == "attention"]
    return {
        "m": int(two["n_comparisons"].iloc[0]),
        "n_call_faster": len(call_fast), "n_kernel_faster": len(both_fast),
        "only_call": "; ".join(
            f"{c} at {cfg} (kernel level: {wide.loc[(cfg, c)].get('kernel', 'not recorded')})"
            for cfg, c in only_call.index) or "none",
        "both": "; ".join(f"{c} at {cfg}" for cfg, c in both_fast.index) or "none",
        "n_kernel_fast_all": len(kernel_fast),
        "split": "; ".join(
            f"{c} at {cfg} is {wide.loc[(cfg, c)].get('attention', 'not compared')}"
            for cfg, c in kernel_fast.index) or "none",
        "n_attention": len(att), "n_attention_faster": int((att["verdict"] == _FASTER).sum()),
        "att_sentence": attention_sentence(int((att["verdict"] == _FASTER).sum()), len(att))}


def attention_sentence(k: int, n: int) -> str:
    """How many of ``n`` attention-level comparisons (each side's attention kernel alone,
    without the memset cuDNN's engine runs beside it, whether SDPA or a user calls cuDNN)
    show an attention kernel faster than cuDNN's beyond the margin, worded for each outcome
    (never "0 of 0")."""
    if not (isinstance(k, int) and isinstance(n, int) and 0 <= k <= n):
        raise ValueError(f"`k` and `n` must be counts with k <= n; got {k!r} and {n!r}.")
    what = "an attention kernel faster than cuDNN's beyond the margin"
    head = ("The attention level compares each side's attention kernel alone, without the "
            "memset cuDNN's engine runs beside it. ")
    if n == 0:
        return "No attention kernel was compared alone."
    if k == 0:
        return head + f"None of its {n} comparisons shows {what}."
    if k == n:
        return head + (f"Its one comparison shows {what}." if n == 1
                       else f"All {n} of its comparisons show {what}.")
    return head + f"{k} of its {n} comparisons {'shows' if k == 1 else 'show'} {what}."


def leads_sentence(split: dict) -> str:
    """One sentence on the per-call leads of :func:`level_split`'s ``split`` and how many
    are faster kernels too, worded for each outcome (no lead, all, none, some), so the book
    never reads "0 of the 0 per-call leads"."""
    try:
        n, k = int(split["n_call_faster"]), int(split["n_kernel_faster"])
        both, only = str(split["both"]), str(split["only_call"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"`split` must be a level_split() dict; got {split!r}.") from None
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"`split` must have 0 <= n_kernel_faster <= n_call_faster; got "
                         f"{k} and {n}.")
    if n == 0:
        return ("No comparison is faster per call beyond the margin, so none is a faster "
                "kernel either.")
    if k == n:
        return (f"{'The one per-call lead is' if n == 1 else f'All {n} per-call leads are'} "
                f"faster per kernel too ({both}).")
    if k == 0:
        return (f"{'The one per-call lead is' if n == 1 else f'None of the {n} per-call leads is'}"
                f"{' not' if n == 1 else ''} a faster kernel ({only}). Such a lead lies "
                f"outside the kernels: the memset cuDNN's engine runs in SDPA's call and "
                f"the wait between the call's two kernels.")
    return (f"{k} of the {n} per-call leads are faster per kernel too ({both}). Faster per "
            f"call only: {only}.")


def triton_levels(tr_two: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Our kernel's kernel-level and attention-level rows against SDPA, by configuration
    (empty frames with a ``verdict`` column where the run has none)."""
    def level(name):
        return (tr_two[tr_two["level"] == name].set_index("config") if len(tr_two)
                else pd.DataFrame(columns=["verdict"]))
    return level("kernel"), level("attention")


def verdict_tally(verdicts, noun: str = "comparisons",
                  say=(Verdict.FASTER.value, Verdict.SLOWER.value, Verdict.EQUIVALENT.value)) -> str:
    """How ``verdicts`` (a Series of verdict strings) split, in one clause that reads right
    for every outcome (:func:`phrases.tally`): each verdict that occurs, in
    :data:`VERDICT_ORDER`, with its count, then "none is ..." for those of ``say`` that do
    not ("3 of 80 comparisons are slower and 77 inconclusive; none is faster or
    equivalent"; never "faster at 0, slower at 0")."""
    v = pd.Series(verdicts, dtype=object)
    unknown = set(v) - set(VERDICT_ORDER)
    if unknown:
        raise ValueError(f"`verdicts` must hold verdicts of {VERDICT_ORDER}; got {sorted(unknown)}.")
    counts = v.value_counts()
    order = [x for x in VERDICT_ORDER if counts.get(x, 0) or x in say]
    return tally({x: int(counts.get(x, 0)) for x in order}, noun)


def triton_values(tr_two: pd.DataFrame, vs_lib: pd.DataFrame, target: str) -> dict:
    """The numbers the chapter quotes of our kernel: its verdicts per kernel and per
    attention kernel against SDPA (``tr_two``), its verdicts against the fastest library
    backend (``vs_lib``, ``comparisons.kernel_vs_library``), each at ``target`` too."""
    tr_kernel, tr_att = triton_levels(tr_two)
    kcounts = tr_kernel["verdict"].value_counts()
    alone = sorted(tr_att.index[tr_att["verdict"] == _FASTER])
    tk = tr_kernel.loc[target] if target in tr_kernel.index else None
    counts = vs_lib["verdict"].value_counts() if len(vs_lib) else pd.Series(dtype=int)
    at = vs_lib[vs_lib["config"] == target] if len(vs_lib) else vs_lib

    def pick(col):
        return float(at[col].iloc[0]) if len(at) else float("nan")
    out = {"k_m": int(tr_two["n_comparisons"].iloc[0]) if len(tr_two) else 0,
           "k_n_faster": int(kcounts.get(_FASTER, 0)), "k_n_slower": int(kcounts.get(_SLOWER, 0)),
           "k_n": len(tr_kernel), "n_beats_attention_kernel": len(alone),
           "k_n_attention": len(tr_att), "beats_attention_kernel": ", ".join(alone) or "none"}
    for key, col in (("k_target", "speedup"), ("k_target_lo", "ci_low"),
                     ("k_target_hi", "ci_high")):
        out[key] = float(tk[col]) if tk is not None else float("nan")
    out["n_configs"] = len(vs_lib)
    for v in (Verdict.FASTER, Verdict.SLOWER, Verdict.INCONCLUSIVE, Verdict.EQUIVALENT):
        out[f"n_{v.value}"] = int(counts.get(v.value, 0))
    out["lib_tally"] = (verdict_tally(vs_lib["verdict"], "shapes") if len(vs_lib)
                        else "no shape was compared")
    k, n = len(alone), len(tr_att)
    where = ({(0, 1): "not at its one shape", (1, 1): "at its one shape"}.get((k, n))
             or (f"at none of the {n} shapes" if k == 0 else f"at all {n} shapes" if k == n
                 else f"at {k} of {n} shapes"))
    out["att_sentence"] = (
        "It was not compared with cuDNN's attention kernel alone." if n == 0 else
        f"Against cuDNN's attention kernel alone it is faster beyond the margin {where}.")
    out |= {"target_ratio": pick("ratio"), "target_lo": pick("ci_low"),
            "target_hi": pick("ci_high"),
            "target_lib": str(at["library"].iloc[0]) if len(at) else "none"}
    return out


def attention_answer(two: pd.DataFrame, lead: str, tr_two: pd.DataFrame, tr_id: str) -> str:
    """Whether any candidate's attention kernel was faster than the default dispatch's, in
    the lead run's family (``two``) or our kernel's run (``tr_two``), and where."""
    found = ([f"{c} at {cfg} (run {lead})" for cfg, c in
              two.loc[(two["level"] == "attention") & (two["verdict"] == _FASTER),
                      ["config", "candidate"]].itertuples(index=False)] if len(two) else [])
    _, tr_att = triton_levels(tr_two)
    found += [f"triton at {cfg} (run {tr_id})"
              for cfg in sorted(tr_att.index[tr_att["verdict"] == _FASTER])]
    if found:
        return ("an attention kernel faster than the default dispatch's by more than the "
                "margin was found: " + "; ".join(found))
    return ("no candidate's attention kernel was faster than the default dispatch's by more "
            "than the margin, at any shape of either run")


def triton_table(vs_lib: pd.DataFrame, tuning, tr_two: pd.DataFrame) -> tuple[pd.DataFrame,
                                                                                list[str]]:
    """Our kernel against the fastest library backend per configuration, with its tuning
    and its verdicts against SDPA per kernel and per attention kernel; returns the full
    table (by configuration) and the columns the book shows."""
    tr_kernel, tr_att = triton_levels(tr_two)
    cols = ["library", "kernel_ms", "library_ms", "ratio", "speedup", "ci_low", "ci_high",
            "verdict"]
    table = vs_lib.set_index("config")[cols]
    if tuning is not None and len(tuning):
        keep = [c for c in ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages", "TMA", "EXP_F16")
                if c in tuning.columns]
        table = table.join(tuning.set_index("config")[keep])
    for frame, level in ((tr_kernel, "kernel"), (tr_att, "attention")):
        if len(frame):
            table = table.join(frame[["speedup", "ci_low", "ci_high", "verdict"]].rename(
                columns={"speedup": f"{level}_speedup_vs_sdpa", "ci_low": f"{level}_ci_low",
                         "ci_high": f"{level}_ci_high", "verdict": f"{level}_verdict"}))
    shown = ["config", "library", "speedup", "verdict"] + (
        ["kernel_verdict"] if len(tr_kernel) else []) + (
        ["attention_verdict"] if len(tr_att) else [])
    return table, shown


def tuning_values(tune: pd.DataFrame) -> dict:
    """How our kernel's autotuner picked across runs (``provenance.tuning_by_run``): runs,
    cells, cells where every later process reused the first one's pick, cells with one pick
    everywhere, and the shapes where runs picked differently."""
    if not len(tune):
        return {"n_runs": 0, "n_cells": 0, "n_reused": 0, "n_same": 0, "differ": "none"}
    differ = []
    for cfg, g in tune.groupby("config", sort=False):
        picks = g.drop_duplicates(TUNING_PICK)
        if len(picks) > 1:
            differ.append(f"{tables.short_config(cfg)} (" + "; ".join(
                f"{r.run}: {r.num_warps} warps, {r.BLOCK_M}×{r.BLOCK_N}, {r.num_stages} stages"
                for r in picks.itertuples()) + ")")
    return {"n_runs": tune["run"].nunique(), "n_cells": len(tune),
            "n_reused": int((tune["n_reused"] == tune["n_processes"] - 1).sum()),
            "n_same": int(tune["same_everywhere"].sum()), "differ": "; ".join(differ) or "none"}


def tuning_per_run(tune: pd.DataFrame) -> pd.DataFrame:
    """One row per run of :func:`tuning_values`' table: shapes, processes, the fewest that
    reused the pick, one configuration everywhere, and the warps and BLOCK_N picked."""
    if not len(tune):
        return pd.DataFrame()
    return (tune.groupby("run", sort=True)
            .agg(n_configs=("config", "size"), processes=("n_processes", "max"),
                 reused=("n_reused", "min"), same=("same_everywhere", "all"),
                 warps=("num_warps", lambda x: ", ".join(str(v) for v in sorted(set(x)))),
                 blocks=("BLOCK_N", lambda x: ", ".join(str(v) for v in sorted(set(x)))))
            .reset_index())


def latest_values(latest: pd.DataFrame, target: str, run_ids) -> dict:
    """Our kernel's latest runs against SDPA (rows of ``speedup_table`` with ``run`` and
    ``device``): speedup, interval and verdict at ``target`` per level, how many are faster
    and which runs and devices."""
    out = {}
    tgt = latest[latest["config"] == target].set_index("level") if len(latest) else None
    for level in ("call", "kernel", "attention"):
        ok = tgt is not None and level in tgt.index
        out[level] = float(tgt.loc[level, "speedup"]) if ok else np.nan
        out[f"{level}_lo"] = float(tgt.loc[level, "ci_low"]) if ok else np.nan
        out[f"{level}_hi"] = float(tgt.loc[level, "ci_high"]) if ok else np.nan
        out[f"{level}_v"] = str(tgt.loc[level, "verdict"]) if ok else "not measured"
    if not len(latest):
        return out | {"n_faster": 0, "n": 0, "runs": "none", "label": "no run"}
    return out | {"n_faster": int((latest["verdict"] == _FASTER).sum()), "n": len(latest),
                  "runs": ", ".join(run_ids), "label": "; ".join(sorted(set(latest["device"])))}


def fa3_table(run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """TFLOP/s per call (graph mode, median) of every candidate of ``run`` at each shape,
    with our kernel's verdicts against SDPA per level; returns the table, in shape order,
    and the verdict rows (``comparisons.speedup_table`` with placements)."""
    med = (run.samples[run.samples["mode"] == "graph"].groupby(["config", "candidate"])["ms"]
           .median().unstack())
    fl = pd.Series({c: workload.flops(Config.from_key(c)) for c in med.index})
    rate = workload.tflops_rate(fl.to_numpy()[:, None], med).add_suffix("_tflops")
    fv = comparisons.speedup_table(run.samples, run.placements, candidates=["triton"],
                                   kernels=run.kernels)
    verdicts = fv.pivot_table(index="config", columns="level", values="verdict",
                              aggfunc="first")
    fa3 = rate.join(verdicts[[c for c in comparisons.LEVELS if c in verdicts]]
                    .add_prefix("triton_"))
    return fa3.loc[sorted(fa3.index, key=Config.from_key)], fv
