"""The state-of-the-art chapter's sentences (``notebooks/06_state_of_the_art.py``), built
from its comparison tables (:func:`attn_analysis.chapters.state_of_the_art.comparison_table`) so
that each reads right for every outcome and states each value once, with its run and
level: the answer at the target per GPU (:func:`target_summary`), what the controls say
about SDPA's dispatch and FlashInfer's memory order (:func:`dispatch_sentence`,
:func:`bshd_sentence`), and from which sequence length a custom attention kernel beats
SDPA's (:func:`attention_from_s`, :func:`long_sequence_wins`, the title's "but at long
sequences"; :func:`short_sequence_wins`, its "per call at short ones")."""

from __future__ import annotations

import pandas as pd

from . import state_of_the_art as sota
from ..analyse.stats import Verdict
from ..configs import TARGET
from .phrases import join
from ..present.book_words import count_words

__all__ = ["target_summary", "custom_target_phrase", "dispatch_sentence", "memset_us",
           "memset_clause", "bshd_sentence", "attention_from_s", "from_s_sentence",
           "runs_phrase", "inconclusive_runs_sentence", "long_sequence_wins", "LONG_SEQ_LEN", "short_sequence_wins", "SHORT_SEQ_LEN",
           "wins_sentence", "MAX_SENTENCE_WORDS"]

LONG_SEQ_LEN = 2048  # "long sequences": four times the reports' S = 512 and beyond
SHORT_SEQ_LEN = 256  # "short sequences": half the reports' S = 512 and below
_EQ = Verdict.EQUIVALENT.value
MAX_SENTENCE_WORDS = 24  # the book's sentences stay under 25 words (STYLE.md)


def runs_phrase(tables) -> str:
    """Which GPU ran which run, for a figure caption: 'H100-a, run h100-sota-target; H200-f,
    run h200-sota-target' (each GPU and run pair once, sorted), from the ``machine`` and
    ``run`` columns of comparison tables."""
    tables = list(tables)
    if not tables or not all(isinstance(t, pd.DataFrame) and {"machine", "run"} <= set(t)
                             for t in tables):
        raise ValueError("`tables` must be comparison tables with `machine` and `run`.")
    pairs = sorted({(m, r) for t in tables for m, r in zip(t["machine"], t["run"])})
    return "; ".join(f"{m}, run {r}" for m, r in pairs)


def inconclusive_runs_sentence(table: pd.DataFrame, level: str = "call") -> str:
    """For a figure caption: the GPU and run pairs of ``table`` (stacked comparison tables)
    whose every comparison at ``level`` is inconclusive (or undecided at the precision), so
    that their markers are not read as findings; '' where there is none."""
    if not isinstance(table, pd.DataFrame) or not {"machine", "run", "level",
                                                   "verdict"} <= set(table):
        raise ValueError("`table` must be comparison tables with machine, run, level and "
                         "verdict.")
    open_ = {Verdict.INCONCLUSIVE.value, Verdict.UNDECIDED.value}
    t = table[table["level"] == level]
    pairs = [f"{str(m).split(chr(10))[0]} (run {r})" for (m, r), g in
             t.groupby(["machine", "run"], sort=True) if set(g["verdict"]) <= open_]
    if not pairs:
        return ""
    return f"Every verdict on {' and '.join(pairs)} is inconclusive."


def _row(t: pd.DataFrame, cand: str, level: str):
    d = t[(t["config"] == TARGET.key) & (t["candidate"] == cand) & (t["level"] == level)]
    return d.iloc[0] if len(d) else None


def target_summary(machine: str, table: pd.DataFrame, also=("fa4",)) -> str:
    """The answer at the target on ``machine`` from its target run's ``table``: the fastest
    kernel, then the fastest custom kernel and the candidates of ``also`` (FlashAttention-4)
    per call and per attention kernel, each with its interval: the one place the book
    states these values."""
    best = sota.fastest(table)
    run = table["run"].iloc[0] if "run" in table else "unnamed"
    head = sota.target_sentence(machine, best, run=run, custom=False)
    cands = [best["custom_candidate"]] if "custom_candidate" in best else []
    cands += [c for c in also if c not in cands and _row(table, c, "call") is not None]
    if not cands:
        return head
    call, att = [], []
    won = best["winner_candidate"] == best.get("custom_candidate")  # its call value is in head
    for i, c in enumerate(cands):
        r, a = _row(table, c, "call"), _row(table, c, "attention")
        name = (f"the fastest custom kernel, {r['label']}," if i == 0 and
                c == best.get("custom_candidate") else r["label"])
        if not (won and i == 0):
            call.append(f"{name} {'runs at ' if not call else 'at '}{r['speedup']:.2f}× "
                        f"({r['ci_low']:.2f}–{r['ci_high']:.2f})")
        if a is not None:
            att.append(f"{a['speedup']:.2f}× ({a['ci_low']:.2f}–{a['ci_high']:.2f})")
    text = head + (" Per call, " + join(call) + "." if call else "")
    if len(att) == len(cands):
        text += (" Per attention kernel they run at " if len(att) > 1
                 else " Per attention kernel it runs at ") + join(att) + "."
    return text


def custom_target_phrase(best: dict) -> str:
    """The fastest custom kernel per call at the target on each machine (``best``: machine
    -> :func:`sota.fastest` of its run), for the abstract's "the fastest custom kernel
    ...": 'is our Triton kernel, at 0.94× (0.93–0.94) on the H100-b and 0.97× (0.95–0.98)
    on the H200-g', the kernel named once where it is the same on every machine, else
    'is our Triton kernel on the H100-b, at 0.94× (0.93–0.94), and ... on the H200-g, at
    ...'."""
    rows = {m: b for m, b in sorted(best.items()) if "custom_label" in b}
    if not rows:
        raise ValueError(f"`best` must hold a custom kernel on some machine; got {best!r}.")
    labels = {b["custom_label"] for b in rows.values()}
    value = {m: f"{b['custom_speedup']:.2f}× ({b['custom_ci_low']:.2f}–{b['custom_ci_high']:.2f})"
             for m, b in rows.items()}
    if len(labels) == 1:
        return f"is {labels.pop()}, at " + join(f"{value[m]} on the {m}" for m in rows)
    parts = [f"{b['custom_label']} on the {m}, at {value[m]}" for m, b in rows.items()]
    return "is " + (", and ".join(parts) if len(parts) == 2 else "; ".join(parts))


def _verdicts(target_tables: dict, cand: str, level: str = "call") -> dict:
    by = {}
    for machine, t in target_tables.items():
        r = _row(t, cand, level)
        by.setdefault(r["verdict"] if r is not None else "not measured", []).append(machine)
    return by


def memset_us(kernels: pd.DataFrame, candidate: str, config: str = TARGET.key):
    """Device time per call (µs) of the memset kernels (profiler name 'Memset ...') that
    ``candidate`` runs at ``config`` in a run's profiler evidence (``kernels``: its
    ``kernels.parquet``), 0.0 where it runs none, None where it was not profiled there."""
    need = {"config", "candidate", "kernel", "calls_per_call", "device_ms_per_call"}
    if not isinstance(kernels, pd.DataFrame) or not need <= set(kernels):
        raise ValueError("`kernels` must be a run's kernel table (config, candidate, kernel, "
                         "calls_per_call, device_ms_per_call).")
    k = kernels[(kernels["config"] == config) & (kernels["candidate"] == candidate)]
    if k.empty:
        return None
    mem = k[k["kernel"].astype(str).str.startswith("Memset")]
    return float(1e3 * (mem["device_ms_per_call"] * mem["calls_per_call"]).sum())


def _us_range(values: dict) -> str:
    """'0.77–0.79 µs' over machines (one value where they round alike)."""
    lo, hi = f"{min(values.values()):.2f}", f"{max(values.values()):.2f}"
    return f"{lo} µs" if lo == hi else f"{lo}–{hi} µs"


def memset_clause(kernels: dict, reference: str = "sdpa", direct: str = "cudnn_frontend",
                  label: str = "SDPA") -> str:
    """Whose work the memset beside cuDNN's attention kernel in ``reference``'s call is, from
    each machine's profiler evidence at the target (``kernels``: machine -> kernel table):
    cuDNN's engine's where ``direct`` (cuDNN called directly, without SDPA) runs it too on
    every machine that profiled both, SDPA's own where ``direct`` runs none; '' where
    ``reference`` runs no memset or no machine profiled both. ``label`` names ``reference``
    in the text."""
    if not isinstance(kernels, dict):
        raise ValueError(f"`kernels` must map machines to kernel tables; got "
                         f"{type(kernels).__name__}.")
    ref, dir_ = {}, {}
    for machine, k in kernels.items():
        r, d = memset_us(k, reference), memset_us(k, direct)
        if r is not None and d is not None and r > 0:
            ref[machine], dir_[machine] = r, d
    if not ref:
        return ""
    head = f"{label}'s call also runs a memset of {_us_range(ref)}"
    runs_it = {m: v for m, v in dir_.items() if v > 0}
    if len(runs_it) == len(dir_):
        return (head + f"; cuDNN called directly runs it too ({_us_range(runs_it)}): "
                f"cuDNN's engine's work, not {label}'s dispatch.")
    none = sorted(m for m in dir_ if m not in runs_it)
    return (head + f". cuDNN called directly runs none on {join(['the ' + m for m in none])}, "
            f"so there the memset is {label}'s own.")


def dispatch_sentence(target_tables: dict, kernels: dict | None = None) -> str:
    """What cuDNN called directly (SDPA's own kernel without SDPA's dispatch) says about
    the dispatch's cost per call: "costs nothing measurable" only where it is equivalent
    on every machine; with ``kernels`` (machine -> the run's kernel table) followed by
    :func:`memset_clause`, whose work the memset in SDPA's call is."""
    by = _verdicts(target_tables, "cudnn_frontend")
    if set(by) == {_EQ}:
        text = "So SDPA's dispatch costs nothing measurable inside a graph replay."
    else:
        text = ("So SDPA's dispatch cost is not shown negligible: cuDNN called directly is "
                + sota.verdicts_phrase(by) + ".")
    clause = memset_clause(kernels) if kernels is not None else ""
    return f"{text} {clause}" if clause else text


def bshd_sentence(target_tables: dict) -> str:
    """SDPA on (B, S, H, D) memory against SDPA per call, with the conclusion about
    FlashInfer's memory order drawn only where it is equivalent on every machine."""
    by = _verdicts(target_tables, "sdpa_bshd")
    text = "SDPA on (B, S, H, D) memory is " + sota.verdicts_phrase(by)
    if set(by) == {_EQ}:
        return text + ": memory order does not separate FlashInfer from SDPA."
    return text + "."


def attention_from_s(tables, level: str = "attention") -> dict:
    """Per GPU model, the smallest sequence length at which a custom kernel that runs
    another kernel than SDPA's is faster than SDPA beyond the margin at ``level`` (a
    finding: enough processes), or None where there is none."""
    df = pd.concat(list(tables), ignore_index=True)
    out = {}
    for machine, g in df.groupby("machine", sort=True):
        wins = sota.custom_faster(g, level)
        model = sota.machine_slug(machine)
        found = [x for x in (out.get(model), int(wins["seq_len"].min()) if len(wins) else None)
                 if x is not None]
        out[model] = min(found) if found else None
    return out


def long_sequence_wins(tables, min_seq_len: int = LONG_SEQ_LEN) -> dict:
    """Per GPU model, the custom-kernel comparisons faster than SDPA beyond the margin at
    both the call and the attention-kernel level at ``min_seq_len`` or longer (findings
    only): the data behind the title's "but at long sequences"."""
    df = pd.concat(list(tables), ignore_index=True)
    out = {}
    for machine, g in df.groupby("machine", sort=True):
        keys = ["config", "candidate"]
        call = sota.custom_faster(g, "call")[keys + ["seq_len"]]
        att = sota.custom_faster(g, "attention")[keys]
        both = call.merge(att, on=keys)
        both = both[both["seq_len"] >= min_seq_len]
        out.setdefault(sota.machine_slug(machine), []).extend(
            both[keys].itertuples(index=False, name=None))
    return out


def short_sequence_wins(tables, max_seq_len: int = SHORT_SEQ_LEN,
                        level: str = "call") -> dict:
    """Per GPU model, the custom-kernel comparisons faster than SDPA beyond the margin at
    ``level`` at ``max_seq_len`` or shorter (findings only): the data behind the title's
    "per call at short ones"."""
    if not isinstance(max_seq_len, int) or max_seq_len < 1:
        raise ValueError(f"`max_seq_len` must be a positive integer; got {max_seq_len!r}.")
    df = pd.concat(list(tables), ignore_index=True)
    out = {}
    for machine, g in df.groupby("machine", sort=True):
        wins = sota.custom_faster(g, level)
        wins = wins[wins["seq_len"] <= max_seq_len]
        out.setdefault(sota.machine_slug(machine), []).extend(
            wins[["config", "candidate"]].itertuples(index=False, name=None))
    return out


def from_s_sentence(from_s: dict) -> str:
    """The shortest sequence at which a custom attention kernel leads, per GPU model
    (:func:`attention_from_s`), said once where the models agree."""
    if not isinstance(from_s, dict) or not from_s:
        raise ValueError(f"`from_s` must be a non-empty dict of model -> S or None; got "
                         f"{from_s!r}.")
    if all(v is None for v in from_s.values()):
        return "No custom attention kernel is faster than SDPA's beyond the margin."
    by = {}
    for model, v in from_s.items():
        by.setdefault(f"first at S = {v}" if v is not None else "nowhere", []).append(
            model.upper())
    # "first at": the smallest S with a lead, not a lead at every longer shape
    return "Per attention kernel, a custom kernel leads " + sota.verdicts_phrase(by) + "."


def _listed(first: str, more: str, where: str) -> list[str]:
    """The parts of a :func:`sota.where_text` ('A at S = 1, 2; B at S = 3') as sentences
    of at most :data:`MAX_SENTENCE_WORDS` words: '{first} A at S = 1, 2; B at S = 3.',
    then '{more} ...' for the parts that no longer fit."""
    out, parts = [], [p for p in where.split("; ") if p]
    for part in parts:
        lead = more if out else first
        if out and count_words(f"{out[-1]}; {part}") <= MAX_SENTENCE_WORDS:
            out[-1] = f"{out[-1]}; {part}"
        else:
            out.append(f"{lead} {part}")
    return [f"{t}." for t in out]


def wins_sentence(row: dict) -> str:
    """Where custom kernels beat SDPA on one machine, from a :func:`sota.wins_summary`
    row, in sentences under 25 words: how many leads of how many comparisons, where
    (each kernel with its sequence lengths), the largest lead with its interval and the
    leads the interval cannot decide; or why no finding can be drawn (too few
    processes: the direction only)."""
    machine = row["machine"]
    out = []
    if row["n_faster"]:
        out.append(f"On the {machine}, custom kernels are faster than SDPA beyond the margin "
                   f"in {row['n_faster']} of {row['n_custom']} comparisons.")
        out += _listed("Leads:", "More leads:", row["where"])
        out.append(f"The largest is {row['best_candidate']} at {row['best_config']}: "
                   f"{row['best_speedup']:.2f}× ({row['best_low']:.2f}–{row['best_high']:.2f}).")
    elif row["min_processes"] < sota.MIN_PROCESSES:
        out.append(f"On the {machine}, the runs away from the target kept "
                   f"{row['min_processes']} process, too few for a finding (at least "
                   f"{sota.MIN_PROCESSES}).")
        if row.get("direction"):
            out += _listed("For direction only, faster beyond the margin:", "Also:",
                           row["direction"])
        else:
            out.append("Even for direction, no custom kernel lies beyond the margin on the "
                       "faster side.")
        return " ".join(out)
    else:
        out.append(f"On the {machine}, no custom kernel is faster than SDPA beyond the margin "
                   f"in {row['n_custom']} comparisons.")
    if row.get("n_undecided"):
        out.append(f"{row['n_undecided']} more lead by their point estimate beyond the margin "
                   f"but cannot be decided with {row['min_processes']} processes per unit.")
        out += _listed("Undecided:", "More undecided:", row["undecided"])
    return " ".join(out)
