"""Sentence pieces the results chapters glue, grammatical for every outcome: counts that are
zero or all of a total ("3 of 80 ... are slower and 77 inconclusive; none is faster",
"all 16 are undecided", never "faster at 0, slower at 0"), counts per GPU model and
verdicts per level said once where they agree ("at none of the 16 shapes on either ...",
"equivalent per call and per kernel"). Verdicts per machine: state_of_the_art.verdicts_phrase."""

from __future__ import annotations

__all__ = ["join", "tally", "per_level", "count_by_model", "processes_by_run"]


def join(items) -> str:
    """'a', 'a and b', 'a, b and c'."""
    items = [str(i) for i in items]
    if not items:
        raise ValueError("`items` must not be empty.")
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _counts_iv(counts) -> dict:
    if (not isinstance(counts, dict) or not counts
            or not all(isinstance(k, str) and k for k in counts)
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                       for v in counts.values())):
        raise ValueError(f"`counts` must be a non-empty dict of label -> count >= 0; got "
                         f"{counts!r}.")
    return counts


def tally(counts: dict, noun: str) -> str:
    """How ``counts`` (label -> count, in the order to say them) split their total of
    ``noun`` (plural): the non-zero labels with their counts, then the zero ones as
    "none is ...". Every outcome reads as one clause:

    >>> tally({"faster": 0, "slower": 3, "inconclusive": 77}, "comparisons")
    '3 of 80 comparisons are slower and 77 inconclusive; none is faster'
    >>> tally({"faster": 0, "undecided": 16}, "comparisons")
    'all 16 comparisons are undecided; none is faster'
    """
    counts = _counts_iv(counts)
    if not isinstance(noun, str) or not noun:
        raise ValueError(f"`noun` must be a non-empty string; got {noun!r}.")
    total = sum(counts.values())
    if total == 0:
        return f"there are no {noun}"
    some = [(k, v) for k, v in counts.items() if v]
    zero = [k for k, v in counts.items() if not v]
    if len(some) == 1:
        head = (f"the only one of the {noun} is {some[0][0]}" if total == 1
                else f"all {total} {noun} are {some[0][0]}")
    else:
        (k0, v0), rest = some[0], some[1:]
        head = join([f"{v0} of {total} {noun} {'is' if v0 == 1 else 'are'} {k0}"]
                    + [f"{v} {k}" for k, v in rest])
    if not zero:
        return head
    return head + "; none is " + (" or ".join(zero) if len(zero) <= 2
                                  else ", ".join(zero[:-1]) + " or " + zero[-1])


def count_by_model(counts: dict, noun: str) -> str:
    """'at k of n ``noun``' per GPU model (model -> (k, n)), said once where the models
    agree: "at none of the 16 shapes on either the H100 or the H200", "at all 8 shapes on
    both ...", "at 2 of 16 shapes on the H100 and 0 of 16 on the H200"."""
    if (not isinstance(counts, dict) or not counts or not all(
            isinstance(v, tuple) and len(v) == 2 and all(isinstance(x, int) and x >= 0
                                                        for x in v) and v[0] <= v[1]
            for v in counts.values())):
        raise ValueError(f"`counts` must be a non-empty dict of model -> (k, n), k <= n; got "
                         f"{counts!r}.")
    if not isinstance(noun, str) or not noun:
        raise ValueError(f"`noun` must be a non-empty string; got {noun!r}.")
    models = [f"the {m}" for m in counts]
    if len(set(counts.values())) == 1:
        k, n = next(iter(counts.values()))
        if n == 0:
            return f"at no {noun} (none measured)"
        one = len(models) == 1
        if k == 0:
            where = f"on {models[0]}" if one else (
                f"on either {models[0]} or {models[1]}" if len(models) == 2
                else f"on any of {join(models)}")
            return f"at none of the {n} {noun} {where}"
        where = f"on {models[0]}" if one else (
            f"on both {join(models)}" if len(models) == 2 else f"on each of {join(models)}")
        return f"at all {n} {noun} {where}" if k == n else f"at {k} of {n} {noun} {where}"
    parts = [f"{k} of {n}" + (f" {noun}" if i == 0 else "") + f" on {m}"
             for i, (m, (k, n)) in enumerate(zip(models, counts.values()))]
    return "at " + join(parts)


def per_level(call: str, kernel: str) -> str:
    """A candidate's verdicts per call and per kernel, said once where they agree:
    "equivalent per call and per kernel", "slower per call and inconclusive per kernel"."""
    for name, v in (("call", call), ("kernel", kernel)):
        if not isinstance(v, str) or not v:
            raise ValueError(f"`{name}` must be a non-empty verdict; got {v!r}.")
    return (f"{call} per call and per kernel" if call == kernel
            else f"{call} per call and {kernel} per kernel")


def processes_by_run(runs) -> str:
    """'6 in a and b; 24 in c': the processes of each run, runs of the same count together,
    fewest first, from ``(run, processes)`` pairs (e.g. the inventory's confirmatory rows)."""
    by = {}
    for run, n in runs:
        if isinstance(n, bool) or not isinstance(n, (int, float)) or n != n or n < 1:
            raise ValueError(f"`runs` must pair run ids with process counts; got {n!r} for "
                             f"{run!r}.")
        by.setdefault(int(n), []).append(str(run))
    if not by:
        raise ValueError("`runs` must not be empty.")
    return "; ".join(f"{n} in {join(sorted(rs))}" for n, rs in sorted(by.items()))
