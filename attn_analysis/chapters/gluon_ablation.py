"""Issue 43's ablation of our Gluon kernel as one table for the kernel appendix.

``scripts/gluon_ablation.py`` wrote one sealed check file per round (kind ``gluon_check``,
marked ``"ablation": true``): the quick float64 grid per variant, one process of
graph-replay timing at the target beside SDPA (its cuDNN kernel), the profiler's
attention-kernel time, Triton's ``do_bench_cudagraph`` and, where run with ``--ncu``,
Nsight Compute's pipe and stall metrics of the best two variants and SDPA. This module
turns those files into one row per (round, candidate): what the variant changes from the
default configuration, its speedups over SDPA per kernel and per call, and where recorded
the tensor-pipe and SFU (XU) utilisation and the largest stall reason.

Exploratory data: one process a round, so a call ratio's range is over placements
(rounds of the script), not an interval over processes; the kernel ratio is one profile.
Speedups follow the book's convention: SDPA's time over the variant's, above 1 the variant
is faster. The notes behind the rounds are ``notes/kernel-schedules.md``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..analyse import inventory
from ..configs import GLUON_DEFAULT_CONFIGS, TARGET
from ..present import tables
from ..record import checks

__all__ = ["DEFAULT_FILES", "REFERENCE", "STALLS", "TENSOR", "SFU", "ablation_rows",
           "ablation_table", "changes_text", "default_config", "gpu_label", "table_args"]

# Round -> check file (relative to the repository root), in the order the rounds ran.
DEFAULT_FILES = {1: "data/checks/gluon_ablation_h100.json",
                 2: "data/checks/gluon_ablation2_h200.json",
                 3: "data/checks/gluon_ablation3_h200.json",
                 4: "data/checks/gluon_ablation4_h200.json",
                 5: "data/checks/gluon_ablation5_h200.json",
                 6: "data/checks/gluon_ablation6_h200.json"}
REFERENCE = "sdpa"  # the script's base candidate: SDPA's default backend (cuDNN's kernel)
TENSOR = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
SFU = "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"
# ncu's stall metrics (warps stalled per issued instruction) -> the reason's short name.
STALLS = {f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio": r
          for r in ("long_scoreboard", "barrier", "wait", "math_pipe_throttle",
                    "short_scoreboard", "mio_throttle")}
_HEAD_DIM = 64  # the target's head dim: the configuration keys compared against


# --------------------------------------------------------------------------- checks

def _doc_iv(doc) -> dict:
    """``doc`` must be an ablation check's payload whose timing holds the reference."""
    if not isinstance(doc, dict) or not doc.get("ablation"):
        raise ValueError("`doc` must be a payload of scripts/gluon_ablation.py (a dict "
                         "with 'ablation': true).")
    timing = doc.get("timing")
    if not isinstance(timing, dict) or any(not isinstance(timing.get(k), dict) for k in
                                           ("summary", "kernel")):
        raise ValueError("`doc` must hold 'timing' with 'summary' and 'kernel' (a run whose "
                         "timing phase finished).")
    if REFERENCE not in timing["summary"] or REFERENCE not in timing["kernel"]:
        raise ValueError(f"`doc`'s timing must hold the reference candidate {REFERENCE!r}.")
    return doc


def _round_iv(round_) -> int:
    if isinstance(round_, bool) or not isinstance(round_, int) or round_ < 1:
        raise ValueError(f"`round_` must be an integer >= 1; got {round_!r}.")
    return round_


def _files_iv(files) -> dict:
    if not isinstance(files, dict) or not files:
        raise ValueError(f"`files` must be a non-empty dict of round -> check file; "
                         f"got {files!r}.")
    for r, path in files.items():
        if isinstance(r, bool) or not isinstance(r, int) or r < 1 or \
                not isinstance(path, (str, Path)) or not str(path):
            raise ValueError(f"`files` must map rounds (integers >= 1) to file paths; got "
                             f"{r!r}: {path!r}.")
    return files


# --------------------------------------------------------------------------- pure parts

def gpu_label(fingerprint: dict, labels: dict | None = None) -> str:
    """The GPU of a check file for prose: its inventory label ('H200-ad') where ``labels``
    ({uuid: label}, :func:`.inventory.gpu_labels`) knows its UUID, else its model ('H100');
    never the UUID."""
    if not isinstance(fingerprint, dict):
        raise ValueError(f"`fingerprint` must be a dict; got {type(fingerprint).__name__}.")
    uuid = str(fingerprint.get("gpu_uuid") or "").removeprefix("GPU-")
    known = (labels or {}).get(uuid)
    return known or inventory.gpu_model(fingerprint.get("gpu_name"))


def default_config(head_dim: int = _HEAD_DIM) -> dict:
    """The Gluon kernel's default configuration at ``head_dim`` (the plain variant)."""
    configs = GLUON_DEFAULT_CONFIGS
    if head_dim not in configs:
        raise ValueError(f"`head_dim` must be one of {tuple(configs)}; got {head_dim!r}.")
    return dict(configs[head_dim])


def changes_text(variant: str, info: dict | None) -> str:
    """What ``variant`` changed from the default D64 configuration, 'KEY=value, ...', from
    the configuration the file recorded for it (``info``: what ran, not what the code says
    today); '' for the reference, None where nothing was recorded."""
    if variant == REFERENCE:
        return ""
    if info is None:
        return None
    if not isinstance(info, dict):
        raise ValueError(f"`info` must be the recorded configuration (a dict) of "
                         f"{variant!r}; got {type(info).__name__}.")
    default = default_config(_HEAD_DIM)
    changed = {k: info[k] for k in default if k in info and info[k] != default[k]}
    return ", ".join(f"{k}={v}" for k, v in changed.items()) or "(the default)"


def _ncu_rows(doc: dict) -> dict:
    """Candidate -> its ncu metrics (``ncu.order`` pairs with ``ncu.kernels``); {} where
    ncu was not run or failed."""
    ncu = doc.get("ncu") or {}
    order, kernels = ncu.get("order") or [], ncu.get("kernels") or []
    if len(order) != len(kernels):
        raise ValueError(f"`doc`'s ncu names {len(order)} candidates but holds "
                         f"{len(kernels)} kernels.")
    return dict(zip(order, kernels))


def _top_stall(metrics: dict) -> tuple:
    """The largest recorded stall reason and its warps per issued instruction."""
    vals = {name: metrics.get(m) for m, name in STALLS.items()
            if isinstance(metrics.get(m), (int, float))}
    if not vals:
        return None, None
    best = max(vals, key=vals.get)
    return best, float(vals[best])


def ablation_rows(doc: dict, round_: int, gpu: str) -> pd.DataFrame:
    """One row per timed candidate of one round's payload ``doc`` (the reference
    included): round, gpu, variant, changes, grid_ok, the speedups over SDPA per attention
    kernel (``kernel_speedup``, the profiler's kernel time; SDPA's is cuDNN's kernel, named
    in ``reference_kernel``), per call (``call_speedup``, median over placements, with its
    ``call_min``/``call_max`` range) and by ``do_bench_cudagraph``, the times behind them,
    and where ncu ran the tensor-pipe %, SFU % and the top stall reason. Rows sorted by
    kernel speedup, fastest first."""
    doc, round_ = _doc_iv(doc), _round_iv(round_)
    if not isinstance(gpu, str) or not gpu:
        raise ValueError(f"`gpu` must be a non-empty label; got {gpu!r}.")
    timing = doc["timing"]
    summ, kern = timing["summary"], timing["kernel"]
    bench, info = timing.get("do_bench_cudagraph_ms") or {}, timing.get("info") or {}
    ref_kernel = kern[REFERENCE]
    ref_name = (ref_kernel.get("kernels") or [{}])[0].get("name", "")
    ncu, grid = _ncu_rows(doc), doc.get("grid") or {}
    rows = []
    for cand, s in summ.items():
        if cand not in kern:
            raise ValueError(f"`doc`'s timing has no kernel time of {cand!r}.")
        k_ms = float(kern[cand]["attention_kernel_ms"])
        metrics = ncu.get(cand, {})
        stall, stall_ratio = _top_stall(metrics)
        rows.append({
            "round": round_, "gpu": gpu, "variant": cand,
            "changes": changes_text(cand, info.get(cand)),
            "grid_ok": grid[cand]["ok"] if cand in grid else None,
            "kernel_speedup": float(ref_kernel["attention_kernel_ms"]) / k_ms,
            "call_speedup": float(s["ratio_median"]), "call_min": float(s["ratio_min"]),
            "call_max": float(s["ratio_max"]), "placements": int(s["rounds"]),
            "bench_speedup": (float(bench[REFERENCE]) / float(bench[cand])
                              if cand in bench and REFERENCE in bench else None),
            "kernel_ms": k_ms, "call_ms": float(s["median_ms"]),
            "bench_ms": float(bench[cand]) if cand in bench else None,
            "reference_kernel": ref_name,
            "tensor_pct": metrics.get(TENSOR), "sfu_pct": metrics.get(SFU),
            "top_stall": stall, "top_stall_per_issue": stall_ratio,
        })
    out = pd.DataFrame(rows)
    return out.sort_values("kernel_speedup", ascending=False, kind="stable",
                           ignore_index=True)


# --------------------------------------------------------------------------- files

def ablation_table(root, files: dict | None = None, runs_dir="data/runs") -> pd.DataFrame:
    """Every round's rows (:func:`ablation_rows`) from the sealed check files ``files``
    (round -> path relative to ``root``; default :data:`DEFAULT_FILES`), each read with
    :func:`.checks.read` as a ``gluon_check``. The GPU column is 'H200-ad, round 3': the
    inventory label among ``runs_dir``'s runs (relative to ``root``, or absolute) or the
    model."""
    files = _files_iv(DEFAULT_FILES if files is None else files)
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"`root` must be the repository root, a folder; got {root}.")
    runs = root / runs_dir
    labels = inventory.gpu_labels(runs) if runs.is_dir() else {}
    frames = []
    for r, path in sorted(files.items()):
        try:
            doc = checks.read(root / path, "gluon_check")
        except checks.CheckFileError as exc:
            raise ValueError(f"`files`: round {r}'s {path} is not a sealed gluon_check "
                             f"file; {exc}") from None
        gpu = f"{gpu_label(doc.get('fingerprint') or {}, labels)}, round {r}"
        frames.append(ablation_rows(doc, r, gpu))
    return pd.concat(frames, ignore_index=True)


# Rows per round in the book (the fastest kernels; the CSV has every row)
SHOWN_PER_ROUND = 4


def table_args(frame: pd.DataFrame) -> dict:
    """The book's short table of :func:`ablation_table`'s ``frame`` for ``tables.show``:
    ``df`` (GPU and round, variant, kernel and call speedups, ncu's tensor pipe, SFU and
    top stall; latest round first, fastest kernel first within a round), ``caption`` (the
    devices and protocol, from the frame), ``labels``, ``formats`` and ``full`` (every
    column, for the CSV)."""
    need = {"round", "gpu", "variant", "kernel_speedup", "call_speedup", "call_min",
            "call_max", "placements", "tensor_pct", "sfu_pct", "top_stall"}
    if not isinstance(frame, pd.DataFrame) or frame.empty or need - set(frame.columns):
        raise ValueError(f"`frame` must be a non-empty ablation_table() frame with "
                         f"{sorted(need)}.")
    shown = (frame.sort_values(["round", "kernel_speedup"], ascending=[False, False],
                               kind="stable").groupby("round", sort=False).head(SHOWN_PER_ROUND)
             .assign(call=lambda d: tables.with_interval(d["call_speedup"], d["call_min"],
                                                         d["call_max"])))
    lo, hi = int(frame["placements"].min()), int(frame["placements"].max())
    caption = (f"The ablation of our Gluon kernel at {TARGET.key} on "
               f"{'; '.join(frame['gpu'].unique())}. Exploratory ablations (few processes), "
               f"each with its file's own protocol (`scripts/gluon_ablation.py`; "
               f"{lo}–{hi} placements), not the sweep's. Speedup is SDPA's time over the "
               f"variant's, above 1 ours is faster. Kernel: the profiler's attention kernel "
               f"against SDPA's cuDNN kernel, one profile of eager calls in one process; the "
               f"confirmatory runs' kernel and attention levels supersede it. Call: CUDA-graph "
               f"replay, median "
               f"over placements (min–max). Tensor pipe, SFU (XU) and top stall: Nsight "
               f"Compute, where it ran; in our warp-specialised variants its barrier stall "
               f"counts the warps Triton adds to fill a warpgroup, which wait at a barrier "
               f"all kernel long (notes/kernel-schedules.md). Latest round first, at most "
               f"its {SHOWN_PER_ROUND} fastest "
               f"kernels each; every row and each variant's changes are in the CSV.")
    return {"df": shown[["gpu", "variant", "kernel_speedup", "call", "tensor_pct", "sfu_pct",
                         "top_stall"]].reset_index(drop=True),
            "caption": caption,
            "labels": {"gpu": "GPU, round", "variant": "variant",
                       "kernel_speedup": "kernel (×)", "call": "call (×)",
                       "tensor_pct": "tensor pipe (%)", "sfu_pct": "SFU (%)",
                       "top_stall": "top stall"},
            "formats": {"kernel_speedup": ".3f", "tensor_pct": ".1f", "sfu_pct": ".1f"},
            "full": frame}
