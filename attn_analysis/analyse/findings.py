"""Sentences computed from verdict tables, so the book's prose follows the data it is built from.

A chapter that types "no candidate was faster" is wrong the day a run shows one. These
functions turn a :func:`comparisons.speedup_table` (and the profiler's kernel table) into
plain text that the notebooks glue into the prose; rebuilt from other runs, the sentences
change with the numbers.
"""

from __future__ import annotations

import pandas as pd

from ..configs import BASELINE
from .stats import DEFAULT_MARGIN, VERDICT_ORDER, Verdict, margin_iv

__all__ = ["OPEN", "describe", "verdict_sentence", "negative_result_verdict",
           "kernel_answer"]

# Verdicts that leave the claim open: the interval could not tell, or sat on a boundary.
OPEN = (Verdict.INCONCLUSIVE.value, Verdict.UNDECIDED.value)
_COLUMNS = ("candidate", "speedup", "ci_low", "ci_high", "verdict")


def _table_iv(speedups) -> pd.DataFrame:
    """Check the table has one row per candidate with the columns the sentences need."""
    if not isinstance(speedups, pd.DataFrame):
        raise ValueError(f"`speedups` must be a pandas DataFrame; got {type(speedups).__name__}.")
    missing = [c for c in _COLUMNS if c not in speedups.columns]
    if missing:
        raise ValueError(f"`speedups` lacks columns {missing}; it needs {list(_COLUMNS)}.")
    if speedups["candidate"].duplicated().any():
        raise ValueError("`speedups` must hold one row per candidate (filter one mode and "
                         "configuration first).")
    bad = set(speedups["verdict"]) - set(VERDICT_ORDER)
    if bad:
        raise ValueError(f"`verdict` values must be drawn from {VERDICT_ORDER}; got {sorted(bad)}.")
    return speedups


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def describe(row) -> str:
    """``name (speedup x.xxx, CI a.aaa-b.bbb)`` for one comparison."""
    return (f"{row['candidate']} (speedup {row['speedup']:.3f}, CI "
            f"{row['ci_low']:.3f}–{row['ci_high']:.3f})")


def verdict_sentence(speedups: pd.DataFrame, baseline: str = BASELINE,
                     margin: float = DEFAULT_MARGIN) -> str:
    """One sentence: which candidates were faster than, equivalent to, slower than
    ``baseline`` or inconclusive, naming the faster and equivalent ones with their intervals.

    ``speedups`` holds one row per candidate (one mode, one configuration); the baseline's
    own row, if present, is left out.
    """
    df = _table_iv(speedups)
    margin = margin_iv(margin)
    df = df[df["candidate"] != baseline].sort_values("speedup", ascending=False)
    if df.empty:
        return f"No candidate other than {baseline} was measured."
    parts = []
    for verdict in VERDICT_ORDER:
        rows = df[df["verdict"] == verdict]
        if rows.empty:
            continue
        n = len(rows)
        if verdict in (Verdict.SLOWER_WITHIN_MARGIN.value, Verdict.SLOWER.value):
            names = _join(list(rows["candidate"]))
        else:
            names = _join([describe(r) for _, r in rows.iterrows()])
        what = {Verdict.FASTER.value: f"faster than {baseline} by more than {margin:.0%}",
                Verdict.FASTER_WITHIN_MARGIN.value:
                    f"faster than {baseline} by less than {margin:.0%}",
                Verdict.EQUIVALENT.value: f"equivalent to {baseline} within ±{margin:.0%}",
                Verdict.SLOWER_WITHIN_MARGIN.value: f"slower by less than {margin:.0%}",
                Verdict.SLOWER.value: f"slower by more than {margin:.0%}",
                Verdict.INCONCLUSIVE.value:
                    "inconclusive (the interval reaches past the margin)",
                Verdict.UNDECIDED.value: "undecided at this precision (an interval end on a "
                                         "boundary)"}[verdict]
        parts.append(f"{n} {what}: {names}")
    return f"Of {len(df)} candidates, " + "; ".join(parts) + "."


def negative_result_verdict(speedups: pd.DataFrame, same_kernel_candidates=(),
                            baseline: str = BASELINE) -> str:
    """The claim "nothing beats ``baseline`` here", judged from one configuration's table.

    Refuted when a candidate's interval lies above one; when every candidate that did so
    runs the baseline's own kernels (``same_kernel_candidates``), the sentence says that
    no faster *kernel* was found. Supported only when every candidate is slower or
    equivalent; otherwise it stays open, naming what is inconclusive.
    """
    df = _table_iv(speedups)
    df = df[df["candidate"] != baseline]
    faster = list(df.loc[df["verdict"] == Verdict.FASTER.value, "candidate"])
    open_ = list(df.loc[df["verdict"].isin(OPEN), "candidate"])
    same = set(same_kernel_candidates)
    if faster:
        text = f"refuted: {_join(faster)} {'was' if len(faster) == 1 else 'were'} faster than {baseline}"
        if set(faster) <= same:
            text += (f", but {'it runs' if len(faster) == 1 else 'they run'} {baseline}'s own "
                     "kernels, so the gain lies outside the kernels and no faster kernel was found")
        return text
    if not open_:
        return f"supported: every candidate was slower than or equivalent to {baseline}"
    return (f"open: no candidate was shown faster, but {_join(open_)} could be neither told "
            f"apart from {baseline} nor shown equivalent")


def kernel_answer(table: pd.DataFrame, baseline: str = BASELINE,
                  margin: float = DEFAULT_MARGIN) -> str:
    """The title question at one configuration, from a :func:`comparisons.speedup_table`
    holding both levels: does any candidate run a faster kernel *and* a faster call?

    "Faster" means the verdict "faster" (interval beyond 1 + margin) at that level.
    """
    need = {"candidate", "level", "verdict"}
    if not isinstance(table, pd.DataFrame) or not need <= set(table.columns):
        raise ValueError(f"`table` must be a DataFrame with columns {sorted(need)}.")
    verdicts = table.pivot_table(index="candidate", columns="level", values="verdict",
                                 aggfunc="first")
    kernel = verdicts["kernel"] if "kernel" in verdicts else pd.Series(dtype=object)
    call = verdicts["call"] if "call" in verdicts else pd.Series(dtype=object)
    fast = Verdict.FASTER.value
    both = sorted(c for c in verdicts.index if kernel.get(c) == fast and call.get(c) == fast)
    if both:
        return (f"yes: {_join(both)} {'is' if len(both) == 1 else 'are'} faster than {baseline} "
                f"by more than {margin:.0%} at both the kernel and the call level")
    call_only = sorted(c for c in verdicts.index if call.get(c) == fast)
    if call_only:
        return (f"not as a kernel: {_join(call_only)} {'is' if len(call_only) == 1 else 'are'} "
                f"faster per call but not per kernel")
    if kernel.empty:
        return "not answerable from this run: it recorded no kernel times"
    return (f"no: no candidate is faster than {baseline} by more than {margin:.0%}, at the "
            "kernel or the call level")
