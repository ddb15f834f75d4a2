"""A timer cross-check's graph replay beside the protocol's confirmatory runs of the same
kernel (methods chapter, "Which timer answers which question").

The cross-check (``scripts/timer_crosscheck.py``) and the protocol (``measure.timing`` in
``measure.sweep``) both time CUDA-graph replay with ``timing.measure(call, "graph")``, but
in different designs: the check draws one placement per candidate in each of a few
processes, the protocol several placements in each of many. Their speedups of one kernel
over SDPA can then disagree. :func:`gap_values` puts what each recorded side by side (GPU,
per-call times, calls per replay, samples, placements, processes, SM clocks) and
:func:`gap_sentence` says what is known and that the records do not show which difference
moves the speedup. :func:`protocol_runs` picks the confirmatory runs that timed a kernel
at the shape and compares each at its family. Pure: it reads a check's document and loaded
runs.
"""

from __future__ import annotations

import math
import statistics

import pandas as pd

from ..analyse import inventory, power, timer_agreement as ta
from ..analyse.stats import DEFAULT_MARGIN
from ..configs import TARGET
from . import state_of_the_art as sota
from .phrases import join

__all__ = ["protocol_runs", "run_variant", "check_graph", "run_graph", "gap_values",
           "gap_sentence"]


def protocol_runs(runs: dict, candidate: str, shape=TARGET.key,
                  margin: float = DEFAULT_MARGIN, n_resamples: int = 5000) -> dict:
    """Run id -> (machine label, comparison table, run) of every confirmatory run in
    ``runs`` (run id -> loaded run) that timed ``candidate`` at ``shape``, each table at
    the family its plan registered (``power.registered_family``; else every comparison,
    as ``compare`` does)."""
    if not isinstance(runs, dict):
        raise ValueError(f"`runs` must map run ids to loaded runs; got {type(runs).__name__}.")
    if not isinstance(candidate, str) or not candidate:
        raise ValueError(f"`candidate` must name a candidate; got {candidate!r}.")
    out = {}
    for run_id, run in sorted(runs.items()):
        info = run.info or {}
        s = run.samples
        if (inventory.run_role(run_id, info.get("plan") or {}, info) != "confirmatory"
                or not ((s["config"] == shape) & (s["candidate"] == candidate)).any()):
            continue
        table = sota.comparison_table(run, margin=margin, n_resamples=n_resamples,
                                      n_comparisons=power.registered_family(info))
        out[run_id] = (sota.machine_label(run), table, run)
    return out


def run_variant(protocol: dict, shape=TARGET.key) -> str | None:
    """The variant of our Gluon kernel that the runs of ``protocol`` (:func:`protocol_runs`)
    tuned to at ``shape`` (``gluon_kernel.variant_choices``): the one most runs chose, ties
    by name; None where no run recorded one."""
    from collections import Counter
    from .gluon_kernel import variant_choices
    if not isinstance(protocol, dict):
        raise ValueError(f"`protocol` must map run ids to (machine, table, run); got "
                         f"{type(protocol).__name__}.")
    chosen = Counter()
    for _, _, run in protocol.values():
        c = variant_choices(run)
        chosen.update(set(c.loc[c["config"] == shape, "variant"]))
    return min(chosen, key=lambda v: (-chosen[v], v)) if chosen else None


def _med(xs) -> float:
    xs = [float(x) for x in xs if x is not None and math.isfinite(float(x))]
    return statistics.median(xs) if xs else math.nan


def check_graph(doc, shape=TARGET.key) -> dict:
    """Per candidate at ``shape``, the check's graph timer over its processes: the median
    per-call time (µs, median over processes of each unit's median), calls per replay and
    samples (medians), placements per process (units per process), the SM clock read
    before and after the timer (``clock_start_mhz``, ``clock_end_mhz``: medians, MHz) and
    ``n_processes``; key
    ``"gpu_uuid"`` holds the GPU's UUID (first process)."""
    procs = [p for p in ta._doc_iv(doc)["processes"] if p.get("role", "time") == "time"]
    acc: dict = {}
    for p in procs:
        for u in p.get("units") or []:
            g = (u.get("timers") or {}).get("graph") or {}
            if u.get("shape") != shape or not g.get("times_ms"):
                continue
            a = acc.setdefault(u["candidate"], {"med": [], "k": [], "n": [], "start": [],
                                                "end": [], "units": {}})
            a["med"].append(statistics.median(g["times_ms"]))
            a["k"].append(g.get("calls_per_sample"))
            a["n"].append(len(g["times_ms"]))
            a["start"].append((g.get("gpu_state_before") or {}).get("sm_clock_mhz"))
            a["end"].append((g.get("gpu_state_after") or {}).get("sm_clock_mhz"))
            a["units"][p.get("worker")] = a["units"].get(p.get("worker"), 0) + 1
    out = {c: dict(per_call_us=1e3 * _med(a["med"]), calls_per_replay=_med(a["k"]),
                   samples=_med(a["n"]), placements=_med(a["units"].values()),
                   clock_start_mhz=_med(a["start"]), clock_end_mhz=_med(a["end"]),
                   n_processes=len(a["units"]))
           for c, a in acc.items()}
    first = (procs[0].get("fingerprint") or {}) if procs else {}
    out["gpu_uuid"] = str(first.get("gpu_uuid") or "")
    return out


def run_graph(run, shape=TARGET.key) -> dict:
    """The same fields as :func:`check_graph` from a recorded protocol run's graph units:
    median per-call time over processes (µs), calls per replay, samples per placement
    (the unit's samples over the plan's placements), placements per process (the plan),
    the SM clock at each unit's start and end (medians, MHz), processes; ``"gpu_uuid"``."""
    units = run.units
    if not isinstance(units, pd.DataFrame) or not {"config", "candidate", "mode", "trial",
                                                   "median_ms", "calls_per_sample",
                                                   "n_samples"} <= set(units):
        raise ValueError("`run` must be a loaded run with graph units.")
    u = units[(units["config"] == shape) & (units["mode"] == "graph")]
    placements = int(((run.info or {}).get("plan") or {}).get("placements") or 1)
    out = {}
    for cand, g in u.groupby("candidate", sort=True):
        out[cand] = dict(per_call_us=1e3 * _med(g["median_ms"]),
                         calls_per_replay=_med(g["calls_per_sample"]),
                         samples=_med(g["n_samples"] / placements), placements=placements,
                         clock_start_mhz=_med(g.get("sm_clock_start_mhz", [])),
                         clock_end_mhz=_med(g.get("sm_clock_end_mhz", [])),
                         n_processes=int(g["trial"].nunique()))
    trials = (run.fingerprint or {}).get("trials") or {}
    out["gpu_uuid"] = str(next(iter(trials.values()), {}).get("gpu_uuid") or "")
    return out


def gap_values(doc, protocol: dict, candidate: str, shape=TARGET.key,
               reference: str = "sdpa") -> dict:
    """The check ``doc`` beside the protocol's runs of ``candidate`` (``protocol``: run id
    -> (machine label, comparison table at the run's family, loaded run)): ``check``
    (speedup, low, high of the graph timer, 95 % t-interval over processes, and
    :func:`check_graph`'s fields for ``reference`` and ``candidate``) and ``runs`` (per run:
    machine, m, the call-level speedup with its family-wise interval, :func:`run_graph`'s
    fields, ``overlap`` with the check's interval and ``same_gpu``)."""
    if not isinstance(protocol, dict) or not protocol:
        raise ValueError("`protocol` must map run ids to (machine, table, run); got none.")
    rows = [r for r in ta.speedups(ta.unit_rows(doc), reference)
            if r["shape"] == shape and r["candidate"] == candidate and r["timer"] == "graph"]
    cg = check_graph(doc, shape)
    if not rows or reference not in cg or candidate not in cg:
        raise ValueError(f"`doc` holds no graph timing of {candidate!r} beside {reference!r} "
                         f"at `shape` {shape!r}.")
    check = dict(speedup=rows[0]["speedup"], low=rows[0]["low"], high=rows[0]["high"],
                 ref=cg[reference], cand=cg[candidate], n_processes=rows[0]["n_processes"])
    runs = []
    for run_id, (machine, table, run) in sorted(protocol.items()):
        r = table[(table["config"] == shape) & (table["candidate"] == candidate)
                  & (table["level"] == "call")]
        rg = run_graph(run, shape)
        if r.empty or reference not in rg or candidate not in rg:
            raise ValueError(f"`protocol` run {run_id!r} did not time {candidate!r} beside "
                             f"{reference!r} at `shape` {shape!r}.")
        r = r.iloc[0]
        runs.append(dict(run=run_id, machine=machine, m=int(r["n_comparisons"]),
                         speedup=float(r["speedup"]), low=float(r["ci_low"]),
                         high=float(r["ci_high"]), ref=rg[reference], cand=rg[candidate],
                         overlap=bool(check["low"] <= r["ci_high"]
                                      and r["ci_low"] <= check["high"]),
                         same_gpu=bool(cg["gpu_uuid"]) and cg["gpu_uuid"] == rg["gpu_uuid"]))
    return dict(candidate=candidate, reference=reference, check=check, runs=runs)


def _span(values, fmt: str) -> str:
    """'48.0–48.1' for several values, '48.1' where they round alike."""
    lo, hi = format(min(values), fmt), format(max(values), fmt)
    return lo if lo == hi else f"{lo}–{hi}"


def gap_sentence(v: dict, ref_label: str = "SDPA", check: str = "Its",
                 about: bool = True) -> str:
    """What ``v`` (:func:`gap_values`) shows of the check ``check`` ('Its' after a sentence
    that names it, else its name), in sentences under 25 words: the protocol runs'
    per-call speedups of the kernel (``about``; leave it out where an earlier check's
    sentence said it), whether the check's graph-replay interval overlaps each run's;
    where it misses one, what the two designs recorded differently (GPU, per-call times,
    calls per replay, samples, placements, processes, SM clocks) and that the records do not
    say which difference moves the speedup; where it shares a GPU with a run, that run."""
    try:
        c, runs, cand = v["check"], list(v["runs"]), v["candidate"]
    except (KeyError, TypeError):
        raise ValueError(f"`v` must be a gap_values() dict; got {v!r}.") from None
    if not runs:
        raise ValueError("`v` must hold at least one protocol run.")
    ms = sorted({r["m"] for r in runs})
    head = ("Its graph-replay interval" if check == "Its"
            else f"The graph-replay interval of {check}")

    def clock(xs) -> str:
        """'1980 and 1965': start and end clocks of ``xs``' timings (spans where several
        differ), one value where both read alike."""
        ends = [_span([x[s][f"clock_{e}_mhz"] for x in xs for s in ("ref", "cand")], ".0f")
                for e in ("start", "end")]
        return ends[0] if ends[0] == ends[1] else " and ".join(ends)

    def both(key) -> str:
        return _span([x[s][key] for x in [c] + missed for s in ("ref", "cand")], ".0f")

    text = (f"The confirmatory runs of {cand} give "
            f"{_span([r['speedup'] for r in runs], '.3f')}× per call (intervals within "
            f"{min(r['low'] for r in runs):.3f}–{max(r['high'] for r in runs):.3f}, "
            f"m = {join(map(str, ms))}). " if about else "")
    missed = [r for r in runs if not r["overlap"]]
    same = [r for r in runs if r["same_gpu"]]
    home = [r for r in same if r["overlap"]]
    home_text = "".join(f" Run {r['run']} ran on the check's own GPU, the {r['machine']}, "
                        f"and overlaps it." for r in home)
    if not missed:
        return text + f"{head} overlaps each run's." + home_text
    one = len(missed) == 1
    names = join([f"run {r['run']} ({r['machine']})" for r in missed])
    where = (f"those of all {len(runs)} runs" if len(missed) == len(runs) > 1
             else f"{'that' if one else 'those'} of {names}")
    gpu = (f"the {join([r['machine'] for r in same])}" if same
           else "a GPU without a protocol run")
    runs_word, owner = ("the run", "the run's") if one else ("the runs", "the runs'")
    text += (f"{head} misses {where}. The check ran on {gpu}. "
             f"Per replayed call, {ref_label} took {c['ref']['per_call_us']:.1f} µs there "
             f"and {_span([r['ref']['per_call_us'] for r in missed], '.1f')} µs in "
             f"{runs_word}; {cand} {c['cand']['per_call_us']:.1f} and "
             f"{_span([r['cand']['per_call_us'] for r in missed], '.1f')} µs. Both replay "
             f"{both('calls_per_replay')} calls per graph, {both('samples')} samples per "
             f"placement. The check timed {c['cand']['placements']:.0f} placement"
             f"{'' if c['cand']['placements'] == 1 else 's'} per process in "
             f"{c['n_processes']} processes, {runs_word} "
             f"{_span([r['cand']['placements'] for r in missed], '.0f')} in "
             f"{_span([r['cand']['n_processes'] for r in missed], '.0f')}. The SM clock "
             f"read {clock([c])} MHz at the start and end of the check's graph timer; "
             f"{owner} units read {clock(missed)} MHz. The records do not "
             f"show which difference moves the speedup.")
    return text + home_text
