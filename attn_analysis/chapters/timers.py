"""The methods chapter's timer figure and the reading of the cross-checks (issue 46).

Built on the cross-checks of ``scripts/timer_crosscheck.py`` (``data/checks/timers_*.json``,
kind ``timers``) through :mod:`attn_analysis.analyse.timer_agreement`:

- :func:`recorded`: the cross-checks on disk, by file stem (the only function that reads);
- :func:`gpu_model` and :func:`by_model`: one cross-check per GPU model;
- :func:`speedup_figure`: every candidate's speedup at one shape under each timer on one GPU,
  the device in the title, axis limits fitted to the points.

The answer per timer, the host's share and the clock explanation are in
:mod:`.timer_answer`.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..analyse import timer_agreement as ta
from ..configs import TARGET

__all__ = ["TIMER_LABELS", "MODELS", "recorded", "gpu_model", "by_model", "speedup_figure",
           "SOURCES"]

TIMER_LABELS = {"graph": "graph replay (protocol)", "per_call": "eager call (per_call)",
                "do_bench": "triton do_bench (L2 flushed)",
                "do_bench_cudagraph": "sustained replay (do_bench_cudagraph)",
                ta.KERNEL: "kernel time (profiler)"}
MODELS = ("H100", "H200")


def recorded(folder="data/checks") -> dict:
    """The sealed cross-checks ``timers_*.json`` in ``folder``, by file stem (checked by
    ``checks.read``); an empty dict when there are none. A file of the experiments alone
    (``--experiments-only``: no main ``processes``) answers no timer question and is left
    out."""
    from ..record import checks
    docs = {p.stem: checks.read(p, "timers") for p in sorted(Path(folder).glob("timers_*.json"))}
    return {k: d for k, d in docs.items() if isinstance(d.get("processes"), list)}


def gpu_model(doc) -> str | None:
    """'H100', 'H200', ... from the GPU name in the cross-check's fingerprint (None on CPU)."""
    name = ta.gpu_label(doc)
    m = re.search(r"\b([A-Z]+\d{2,4}[A-Z]?)\b", name or "")
    return m.group(1) if m else None


def by_model(docs: dict) -> dict:
    """One cross-check per GPU model (the first file stem of each model, sorted)."""
    out = {}
    for stem in sorted(docs):
        model = gpu_model(docs[stem])
        if model and model not in out:
            out[model] = docs[stem]
    return out


SOURCES = {"main": ta.unit_rows, "experiments": ta.experiment_unit_rows}


def _speedups(doc, shape, reference, source="main"):
    if source not in SOURCES:
        raise ValueError(f"`source` must be one of {sorted(SOURCES)}; got {source!r}.")
    return [r for r in ta.speedups(SOURCES[source](doc), reference) if r["shape"] == shape]


def speedup_figure(doc, device_label: str, shape=TARGET.key, reference="sdpa",
                   timers=ta.ALL_TIMERS, source="main"):
    """Every candidate's speedup over ``reference`` at ``shape`` under each timer on one GPU:
    one row per candidate, one marker per timer with its interval, a line at one; the
    device (``device_label``) and shape in the title, which says "no interval" where every
    point comes from one process; limits fitted to the points
    (``figure_style.interval_window``)."""
    from ..present import figure_style as fs
    label = fs._label_iv(device_label)
    rows = [r for r in _speedups(doc, shape, reference, source)
            if r["timer"] in timers and r["candidate"] != reference]
    if not rows:
        raise ValueError(f"`doc` holds no speedups at `shape` {shape!r}.")

    @fs._styled
    def draw():
        cands = sorted({r["candidate"] for r in rows})
        used = [t for t in timers if any(r["timer"] == t for r in rows)]
        fig = fs._figure(fs.PAGE_WIDTH_IN, 1.2 + 0.32 * len(cands))
        ax = fig.add_subplot()
        step = 0.8 / max(len(used), 1)
        for j, t in enumerate(used):
            pts = [r for r in rows if r["timer"] == t]
            y = [cands.index(r["candidate"]) - 0.4 + step * (j + 0.5) for r in pts]
            x = np.array([r["speedup"] for r in pts])
            lo = np.array([r["low"] for r in pts])
            hi = np.array([r["high"] for r in pts])
            err = np.vstack([np.where(np.isfinite(lo), x - lo, 0), np.where(np.isfinite(hi), hi - x, 0)])
            ax.errorbar(x, y, xerr=err, fmt="o", ms=4, capsize=2, label=TIMER_LABELS[t])
        allx = [r["speedup"] for r in rows]
        xlim = fs.interval_window(allx, [r["low"] for r in rows], [r["high"] for r in rows])
        ax.set_xlim(*fs.check_span(xlim, allx, (1.0,)))
        ax.axvline(1.0, color="0.4", lw=0.8)
        ax.set_yticks(range(len(cands)), cands)
        ax.set_ylim(len(cands) - 0.5, -0.5)
        ax.set_xlabel(f"speedup over {reference} (> 1: faster)")
        what = ("one process, no interval" if max(r["n_processes"] for r in rows) == 1
                else "geometric mean over processes, 95 % interval")
        ax.set_title(fs._title(f"{label}: speedup at {shape} under each timer ({what})"))
        fs._legend_below(fig, ax, ncol=3)
        return fig
    return draw()


