"""Why a timer cross-check's kernel time can favour a kernel over SDPA (methods chapter,
"Which timer answers which question").

The cross-check (``scripts/timer_crosscheck.py``) profiles each unit's kernels right after
its four timers, which run in a random order per unit. Where the reference's last timer was
sustained replay (Triton's ``do_bench_cudagraph``), its kernels are profiled while its SM
clock is still lowered by that load, so its kernel time is longer and the candidate's
kernel-time speedup higher. The protocol's kernel level (``measure.sweep``) never runs
sustained replay. :func:`split_by_last_timer` groups the check's processes by the
reference's last timer; :func:`kernel_gap_sentence` says what the groups show beside the
protocol runs' kernel level. Pure: it reads check documents.
"""

from __future__ import annotations

import statistics

from ..analyse import timer_agreement as ta
from ..configs import TARGET

__all__ = ["SUSTAINED", "split_by_last_timer", "runs_kernel", "kernel_gap_sentence"]

SUSTAINED = "do_bench_cudagraph"  # the cross-check's sustained-replay timer


def split_by_last_timer(docs, candidate: str, reference: str = "sdpa",
                        shape: str = TARGET.key) -> dict:
    """Kernel-time speedups of ``candidate`` over ``reference`` at ``shape``, one per process
    of the checks ``docs`` (reference's profiled ms per call over the candidate's), split by
    whether the reference's kernel profile came right after its sustained replay:
    ``{"after": [...], "other": [...]}``. ValueError naming ``docs`` if no process profiled
    both."""
    if isinstance(docs, dict):
        docs = [docs]
    out = {"after": [], "other": []}
    for doc in docs:
        for p in ta._doc_iv(doc)["processes"]:
            if p.get("experiments"):
                continue
            units = {u["candidate"]: u for u in p.get("units") or []
                     if u.get("shape") == shape and (u.get("kernel") or {}).get(
                         "device_ms_per_call")}
            if reference not in units or candidate not in units:
                continue
            ref, cand = units[reference], units[candidate]
            speedup = ref["kernel"]["device_ms_per_call"] / cand["kernel"]["device_ms_per_call"]
            last = (ref.get("timer_order") or [None])[-1]
            out["after" if last == SUSTAINED else "other"].append(float(speedup))
    if not out["after"] and not out["other"]:
        raise ValueError(f"`docs` hold no process that profiled both {candidate!r} and "
                         f"{reference!r} at {shape!r}.")
    return out


def runs_kernel(protocol: dict, candidate: str, shape: str = TARGET.key) -> list:
    """The kernel-level speedups of ``candidate`` at ``shape`` in the protocol's runs
    (``timer_protocol.protocol_runs``: run id -> (machine, table at its family, run))."""
    out = []
    for _, table, _ in protocol.values():
        r = table[(table["config"] == shape) & (table["candidate"] == candidate)
                  & (table["level"] == "kernel")]
        out += [float(x) for x in r["speedup"]]
    return out


def kernel_gap_sentence(groups: dict, runs_kernel: list, ref_label: str = "SDPA") -> str:
    """What :func:`split_by_last_timer`'s ``groups`` show beside ``runs_kernel`` (the
    protocol runs' kernel-level speedups of the same kernel), in sentences under 25 words:
    how many processes profiled the reference right after its sustained replay, the median
    speedup there and elsewhere, and which group lies nearer the runs."""
    after, other = list(groups.get("after", [])), list(groups.get("other", []))
    if not runs_kernel or not (after or other):
        raise ValueError("`groups` and `runs_kernel` must each hold at least one speedup.")
    n = len(after) + len(other)
    lo, hi = min(runs_kernel), max(runs_kernel)
    runs = f"{lo:.3f}" if f"{lo:.3f}" == f"{hi:.3f}" else f"{lo:.3f}–{hi:.3f}"
    head = (f"The checks profiled {ref_label}'s kernel right after its sustained replay in "
            f"{len(after)} of {n} processes.")
    if not after or not other:
        return head + f" The protocol runs' kernel level is {runs}×."
    m_after, m_other = statistics.median(after), statistics.median(other)
    near = "elsewhere" if abs(m_other - (lo + hi) / 2) < abs(m_after - (lo + hi) / 2) \
        else "after it"
    return (head + f" There the median kernel-time speedup is {m_after:.3f}×; elsewhere "
            f"{m_other:.3f}×. The protocol runs give {runs}×, nearer the checks {near}. "
            f"Sustained replay lowers {ref_label}'s clock, and the protocol never runs it.")
