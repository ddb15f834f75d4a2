"""The peer-rates page (notebooks/07_peer_rates.py): every candidate's rate at every shape
of the peers2 and powered campaigns, the FA3 paper's published figure, the profiled
crossover (Nsight Compute) and the new peers' float64 gate. Pure: tables and text from
comparison tables and check-file payloads; the notebook reads the files.

Runs are chosen by campaign (``peers2-*``, the powered campaigns), never by GPU, so an H100
run of the same campaigns joins the tables when it is recorded.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..analyse import peer_rates

__all__ = ["RATE_CAMPAIGN", "LONG_S", "rate_campaign", "kernel_times", "rates", "rate_display",
           "crossover_frame", "crossover_sentence", "gate_frame",
           "sdpa_fa4_sentence", "xformers_sentence"]

LONG_S = 2048  # the shortest sequence the page's rate table shows (the long shapes)

RATE_CAMPAIGN = re.compile(r"^(peers2-.*|powered-v\d+-.*)$")


def rate_campaign(campaign) -> bool:
    """True for a campaign whose times the rate table converts (peers2, powered)."""
    return bool(RATE_CAMPAIGN.match(str(campaign or "")))


def kernel_times(tables) -> pd.DataFrame:
    """One row per (GPU model, config, candidate): the median over runs of each arm's
    kernel-level time (the profiler's kernel sum per call), SDPA included once per config.
    ``tables``: comparison tables (``state_of_the_art.comparison_table``)."""
    rows = []
    for t in tables:
        k = t[t["level"] == "kernel"]
        if k.empty:
            continue
        rows.append(k[["device", "config", "candidate", "candidate_ms"]]
                    .rename(columns={"candidate_ms": "ms"}))
        base = k.drop_duplicates("config")[["device", "config", "baseline_ms"]]
        rows.append(base.assign(candidate="sdpa").rename(columns={"baseline_ms": "ms"}))
    if not rows:
        raise ValueError("`tables` must hold at least one kernel-level comparison.")
    df = pd.concat(rows, ignore_index=True).dropna(subset=["ms"])
    df = df.groupby(["device", "config", "candidate"], as_index=False)["ms"].median()
    return df.rename(columns={"device": "gpu"})


def rates(tables) -> pd.DataFrame:
    """:func:`kernel_times` with TFLOP/s and the fraction of the dense peak
    (:func:`.peer_rates.rate_table`)."""
    return peer_rates.rate_table(kernel_times(tables))


def rate_display(rate: pd.DataFrame, min_seq_len: int = 0,
                 percent: bool = True, min_filled: float = 0.0) -> pd.DataFrame:
    """The visible table: one row per (GPU, shape) of sequence length at least
    ``min_seq_len``, one column per candidate, each cell 'TFLOP/s (percent of peak)', or
    TFLOP/s alone without ``percent``; only the candidates measured at a share of at least
    ``min_filled`` of the shapes shown (0.5: no column left mostly empty)."""
    if not isinstance(min_filled, (int, float)) or not 0 <= min_filled <= 1:
        raise ValueError(f"`min_filled` must be a share in [0, 1]; got {min_filled!r}.")
    r = rate[[int(re.search(r"-S(\d+)-", c).group(1)) >= min_seq_len for c in rate["config"]]]
    if r.empty:
        raise ValueError(f"`min_seq_len` leaves no shape; got {min_seq_len}.")
    r = r.copy()
    r["cell"] = [f"{t:.0f} ({100 * f:.0f}%)" if percent and np.isfinite(f) else f"{t:.0f}"
                 for t, f in zip(r["tflops"], r["fraction_of_peak"])]
    out = r.pivot_table(index=["gpu", "config"], columns="candidate", values="cell",
                        aggfunc="first").fillna("")
    out = out.loc[:, (out != "").mean(axis=0) >= min_filled]
    out.columns.name = None
    return out.reset_index().rename(columns={"gpu": "GPU", "config": "shape"})


def _split(label: str) -> tuple[str, str]:
    cand, _, config = str(label).partition("@")
    return cand, config


def crossover_frame(doc: dict) -> pd.DataFrame:
    """One row per profiled kernel of a crossover_ncu check payload: candidate, shape,
    time (µs), waves per SM, tensor-pipe and XU-pipe utilisation (%), achieved occupancy
    and the largest stall reason."""
    kernels = doc.get("kernels") or []
    if not kernels:
        raise ValueError("`doc` must hold profiled `kernels`.")
    rows = []
    for k in kernels:
        cand, config = _split(k["label"])
        stalls = k.get("top_stalls_cycles_per_issue") or {}
        top = max((s for s in stalls if s not in ("selected", "not_selected")),
                  key=lambda s: stalls[s], default="")
        scale = 1e3 if k.get("time_unit") == "ms" else 1.0
        rows.append({"gpu": doc.get("gpu"), "candidate": cand, "config": config,
                     "seq_len": int(re.search(r"-S(\d+)-", config).group(1)),
                     "time_us": float(k["time"]) * scale,
                     "waves": float(k["waves_per_sm"]),
                     "tensor_pct": float(k["tensor_pipe_pct"]["pipe_tensor_cycles_active"]),
                     "xu_pct": float(k["xu_pipe_pct"]["inst_executed_pipe_xu"]),
                     "occupancy_pct": float(k["occupancy_achieved_pct"]),
                     "top_stall": top.replace("_", " "), "top_stall_cycles": float(stalls.get(top, np.nan))})
    return pd.DataFrame(rows)


_PACKAGES = {"sdpa_fa4": "flash-attn-4", "fa4": "flash-attn-4", "fa4_bshd": "flash-attn-4",
             "flex_flash": "flash-attn-4", "fa3": "tokenspeed-fa3", "xformers": "xformers"}


def _short(reason: str) -> str:
    """A recorded reason without the package's boilerplate: xFormers' 'built for' clause,
    else the first line, at most 100 characters."""
    m = re.search(r"built for:?\s*(PyTorch \S+)", reason)
    return f"built for {m.group(1)}" if m else reason.splitlines()[0][:100]


def _waves(w: float) -> str:
    return f"{w:.3g} wave" + ("" if w == 1 else "s")


_NAMES = {"sdpa_cudnn": "cuDNN", "fa4": "FA4", "fa3": "FA3"}


def crossover_sentence(frame: pd.DataFrame) -> str:
    """Per GPU and profiled shape, the kernels fastest first with their time and the
    tensor pipe's busy share: 'On the NVIDIA H200 at B32-H8-S512-D64-fp16: cuDNN 47 µs
    (tensor pipe 41%), FA4 56 µs (40%), FA3 58 µs (43%).' Written from ``frame``."""
    if frame.empty:
        raise ValueError("`frame` must hold at least one kernel.")
    parts = []
    for (gpu, config), g in frame.groupby(["gpu", "config"], sort=False):
        g = g.sort_values("time_us")
        cells = [f"{_NAMES.get(r.candidate, r.candidate)} {r.time_us:.0f} µs "
                 + (f"(tensor pipe {r.tensor_pct:.0f}%)" if i == 0 else f"({r.tensor_pct:.0f}%)")
                 for i, r in enumerate(g.itertuples())]
        parts.append(f"On the {gpu} at {config}: " + ", ".join(cells) + ".")
    return " ".join(parts)


def gate_frame(doc: dict) -> pd.DataFrame:
    """One row per (candidate, environment) of a peers check payload: the package and
    version, the float64 gate (shapes passed of shapes tried, worst relative error) and
    the reason where unsupported."""
    rows = doc.get("rows") or []
    if not rows:
        raise ValueError("`doc` must hold `rows`.")
    envs = doc.get("environments") or {}
    out = []
    df = pd.DataFrame(rows)
    for (cand, env), g in df.groupby(["candidate", "env"], sort=False):
        pkg = _PACKAGES.get(cand)
        ver = (envs.get(env, {}).get("versions") or {}).get(pkg) if pkg else None
        passed = int((g["passed"] == True).sum())  # noqa: E712 (None where unsupported)
        reasons = sorted({r for r in g["reason"] if r})
        out.append({"candidate": cand, "environment": env,
                    "package": f"{pkg} {ver}" if pkg else "torch",
                    "gate": f"{passed} of {len(g)}",
                    "worst rel. error": (f"{g['rel_error'].max():.2g}"
                                         if g["rel_error"].notna().any() else ""),
                    "reason": _short(reasons[0]) if reasons else ""})
    return pd.DataFrame(out)


def sdpa_fa4_sentence(gate: pd.DataFrame) -> str:
    """What the gate says of SDPA with FA4 activated, per flash-attn-4 release."""
    g = gate[gate["candidate"] == "sdpa_fa4"]
    if g.empty:
        return "SDPA with FA4 activated was not checked."
    bits = []
    for r in g.itertuples():
        bits.append(f"under {r.package} it fails ({r.reason})" if r.reason else
                    f"under {r.package} it passes the gate ({r.gate} shapes)")
    return "SDPA with FA4 activated: " + "; ".join(bits) + "."


def xformers_sentence(gate: pd.DataFrame) -> str:
    """xFormers' reason, taken from the environment that holds it alone where recorded."""
    g = gate[gate["candidate"] == "xformers"]
    if g.empty:
        return "xFormers was not checked."
    alone = g[g["environment"] == "xformers"]
    row = (alone if not alone.empty else g).iloc[0]
    where = "installed alone" if not alone.empty else f"in the {row.environment} environment"
    return (f"xFormers ({row.package}, {where}) is unsupported: {row.reason}"
            if row.reason else f"xFormers ({row.package}) passes the gate ({row.gate}).")
