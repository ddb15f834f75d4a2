"""The audit chapter's logic, part one: its inputs (runs and the check files of
``data/checks/``), the calibration of the two comparison protocols on the A/A and spin
controls, and the timing checks (fidelity of each mode, the cost of a graph replay, hot
against cold cache, the GPU time a calibrated protocol costs). Part two, every claim of the
original reports checked, is :mod:`attn_analysis.chapters.claims`.

``notebooks/09_audit.py`` only calls these functions, glues the values they return (a
:class:`Finding`'s ``values``: the glue key without the chapter's ``au_`` prefix, to a
number or a text) and shows the figures and tables.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pandas as pd

from ..analyse import (calibration, catalog, gpu_time, intervals, protocols, provenance,
                       replay_cost as rc, sample_groups, timing_fidelity)
from ..configs import TARGET, Config
from . import claim_table
from .inputs import check_file_iv, runs_iv

__all__ = ["EXTRAS_SECTIONS", "Finding", "ks_iv", "extras_iv", "CalibrationRuns",
           "calibration_runs_iv", "check_label", "header_values", "Calibration",
           "calibrate", "calibration_values", "outcome_table", "fidelity", "replay",
           "cache", "cost"]

EXTRAS_SECTIONS = ("tf32", "chunking", "warmup", "fingerprint")  # what the audit reads
S128, S256, S512 = Config(32, 8, 128), Config(32, 8, 256), TARGET


@dataclasses.dataclass(frozen=True)
class Finding:
    """What one check found: glue ``values`` (key without ``au_``), the ``claim`` of the
    reports it settles (None for a timing check) and ``data`` a figure or table needs."""

    values: dict
    claim: claim_table.Claim | None = None
    data: Any = None


# ------------------------------------------------------------------------- the inputs

def ks_iv(name: str, value, params=None) -> list[int]:
    """Check comma-separated processes per replication (integers >= 2); sorted, unique."""
    try:
        ks = sorted({int(k) for k in str(value).split(",") if k.strip()})
    except ValueError:
        ks = []
    if not ks or min(ks) < 2:
        raise ValueError(f"`{name}` must be a comma-separated list of integers >= 2; "
                         f"got {value!r}.")
    return ks


def extras_iv(name: str, value, params: dict) -> dict:
    """Check a sealed ``scripts/audit_extras.py`` check file holding every section the
    audit reads (:data:`EXTRAS_SECTIONS`); return its payload."""
    doc = check_file_iv("audit_extras")(name, value, params)
    missing = [k for k in EXTRAS_SECTIONS if k not in doc]
    if missing:
        raise ValueError(f"`{name}` must hold {', '.join(EXTRAS_SECTIONS)}; missing {missing}.")
    return doc


@dataclasses.dataclass(frozen=True)
class CalibrationRuns:
    """The pooled calibration runs: the baseline ``sdpa``, its A/A twin(s) ``aa`` and the
    spin controls ``spins`` (shortest spin first) at one configuration ``config``."""

    runs: tuple            # the loaded runs, in the order named
    samples: pd.DataFrame  # protocols.pool_runs of them
    kernels: pd.DataFrame
    config: str
    aa: list
    spins: list

    @property
    def first(self):
        """The first run: it gives the protocol's cost (unit times, process overhead)."""
        return self.runs[0]

    @property
    def label(self) -> str:
        return "; ".join(dict.fromkeys(provenance.run_label(r) for r in self.runs))

    @property
    def n_trials(self) -> int:
        return int(self.samples["trial"].nunique())


def calibration_runs_iv(name: str, value, params: dict) -> CalibrationRuns:
    """Check comma-separated runs holding ``sdpa``, an A/A control (``protocols.AA_CONTROLS``)
    and spin controls ``sdpa_spin<N>``; return them pooled."""
    runs = tuple(runs_iv(name, value, params).values())
    samples, kernels = protocols.pool_runs({r.run_id: (r.samples, r.kernels) for r in runs})
    controls = sorted(set(samples["candidate"].unique()) - {"sdpa"})
    aa = [c for c in controls if c in protocols.AA_CONTROLS]
    spins = sorted([c for c in controls if catalog.spin_spec(c)], key=catalog.spin_order)
    if not aa or not spins:
        raise ValueError(f"`{name}` must hold an A/A control {protocols.AA_CONTROLS} and spin "
                         f"controls; it holds {controls}.")
    return CalibrationRuns(runs, samples, kernels, sorted(set(samples["config"].unique()))[0], aa, spins)


def check_label(doc: dict, file=None) -> str:
    """GPU model of a check file's fingerprint and the file's name, short for prose: 'H100,
    audit_extras_h100.json' (check files record no GPU UUID, so no inventory label: the
    file names the check); without ``file``, the torch version instead. The full device
    name and software are in the reproducibility chapter."""
    fp = doc["fingerprint"]
    words = str(fp["gpu_name"]).replace("NVIDIA ", "").split()
    gpu = words[0] if words else "unknown GPU"
    if file is not None:
        return f"{gpu}, {Path(str(file)).name}"
    return f"{gpu}, torch {fp['torch_version']}"


def _gpu(run) -> str:
    """A run's GPUs by inventory label ('H200-c'), or its GPU model where the run recorded
    no UUID (the protocol-1 runs): short names for prose."""
    from .fixed_shape import gpu_label
    label = gpu_label(run)
    if "unknown" in label:
        words = str(run.device).replace("NVIDIA ", "").split()
        return words[0] if words else label
    return label


def header_values(cr: CalibrationRuns, lead, triton, extras: dict, *, margin: float,
                  alpha: float, extras_file=None) -> dict:
    """The labels and sizes the chapter's opening and calibration section paste
    (``extras_file``: the extras check's path, named in its label)."""
    units = pd.concat([r.units for r in cr.runs]).query("status == 'ok'")
    return {"label_c": ", ".join(dict.fromkeys(_gpu(r) for r in cr.runs)),
            "label_l": _gpu(lead),
            "label_t": provenance.run_label(triton), "label_x": check_label(extras, extras_file),
            "run_c": " and ".join(r.run_id for r in cr.runs), "run_l": lead.run_id,
            "run_t": triton.run_id, "cfg": cr.config, "n_trials": cr.n_trials,
            "n_runs_c": len(cr.runs), "n_per_unit": int(units["n_samples"].median()),
            "margin": float(margin), "alpha": float(alpha), "n_controls": len(cr.spins)}


# ---------------------------------------------------------------------- calibration

@dataclasses.dataclass(frozen=True)
class Calibration:
    """Both protocols' decisions on the controls, their rates, and the controls' sizes."""

    rates: pd.DataFrame       # calibration.outcome_rates
    head: pd.DataFrame        # calibration.headline_rates
    effects: pd.DataFrame     # calibration.true_effects, graph mode
    effects_pc: pd.DataFrame  # the same, per call
    cov_pc: intervals.ConfidenceInterval  # coverage of one process's interval, per call
    cov_gr: intervals.ConfidenceInterval  # the same, graph mode

    def headline(self, protocol: str, k: int, candidate: str) -> pd.Series:
        """The headline rate row of one protocol, k and control."""
        h = self.head
        return h[(h["protocol"] == protocol) & (h["k"] == k)
                 & (h["candidate"] == candidate)].iloc[0]

    def a_fp(self, aa: list) -> pd.Series:
        """The reports' protocol's false-positive row (A/A, one process)."""
        return self.headline(protocols.PROTOCOL_A, 1, aa[0])


def calibrate(cr: CalibrationRuns, ks, *, margin: float, alpha: float,
              n_resamples: int) -> Calibration:
    """Protocol (a) per process (per call, Mann-Whitney U at ``alpha``) and protocol (b)
    over disjoint groups of ``k`` processes (graph mode, ``margin``), on every control."""
    cs, cfg = cr.samples, cr.config
    dec_a = protocols.protocol_a_decisions(cs, mode="per_call", alpha=float(alpha), config=cfg)
    dec_b = pd.concat([protocols.protocol_b_decisions(cs, mode="graph", k=k, margin=float(margin),
                                                      n_resamples=n_resamples, config=cfg)
                       for k in ks], ignore_index=True)
    rates = calibration.outcome_rates(dec_a, dec_b)
    return Calibration(
        rates, calibration.headline_rates(rates),
        calibration.true_effects(cs, cr.kernels, mode="graph", n_resamples=n_resamples, config=cfg),
        calibration.true_effects(cs, cr.kernels, mode="per_call", n_resamples=n_resamples,
                                 config=cfg),
        calibration.within_process_coverage(
            sample_groups.trial_arrays(cs, cfg, "sdpa", "per_call")),
        calibration.within_process_coverage(sample_groups.trial_arrays(cs, cfg, "sdpa", "graph")))


def _rate_values(key: str, row) -> dict:
    return {key: row["rate"], key + "_lo": row["ci_low"], key + "_hi": row["ci_high"],
            key + "_n": int(row["n"]), key + "_events": int(row["events"])}


def calibration_values(c: Calibration, cr: CalibrationRuns, ks, *, margin: float) -> dict:
    """Every rate, effect and coverage the calibration sections paste."""
    aa, rates = cr.aa, c.rates
    out = _rate_values("a_fp", c.a_fp(aa))

    def outcomes(k, cand):
        return rates[(rates["protocol"] == protocols.PROTOCOL_B) & (rates["k"] == k)
                     & (rates["candidate"] == cand)].set_index("outcome")
    for k in ks:
        out.update(_rate_values(f"b{k}_fp", c.headline(protocols.PROTOCOL_B, k, aa[0])))
        r = outcomes(k, aa[0])
        for outcome in ("equivalent", "inconclusive", "faster", "slower"):
            out[f"b{k}_aa_{outcome}"] = r.loc[outcome, "rate"]
    effects = c.effects.set_index("candidate")
    for cand in cr.spins:
        n = cand.replace("sdpa_", "")
        out.update(_rate_values(f"a_pow_{n}", c.headline(protocols.PROTOCOL_A, 1, cand)))
        for k in ks:
            out.update(_rate_values(f"b{k}_pow_{n}", c.headline(protocols.PROTOCOL_B, k, cand)))
            out[f"b{k}_eq_{n}"] = outcomes(k, cand).loc["equivalent", "rate"]
        e = effects.loc[cand]
        out.update({f"eff_{n}": e["slowdown_pct"], f"eff_{n}_lo": e["slowdown_low"] - 1,
                    f"eff_{n}_hi": e["slowdown_high"] - 1, f"prof_{n}": e["extra_share"],
                    f"prof_{n}_us": e["extra_device_ms"] * 1e3})
    e = effects.loc[aa[0]]
    out.update({"eff_twin": e["slowdown_pct"], "eff_twin_lo": e["slowdown_low"] - 1,
                "eff_twin_hi": e["slowdown_high"] - 1, "k0": ks[0], "k1": ks[-1],
                "sdpa_dev_us": c.effects["baseline_device_ms"].iloc[0] * 1e3})
    # The smallest spin whose true slowdown's interval lies wholly above the margin.
    above = c.effects[c.effects["candidate"].isin(cr.spins)
                      & (c.effects["slowdown_low"] - 1 > margin)]
    out["first_above"] = above["candidate"].iloc[0] if len(above) else "none"
    for key, ci in (("cov_pc", c.cov_pc), ("cov_gr", c.cov_gr)):
        out.update({key: ci.estimate, key + "_lo": ci.low, key + "_hi": ci.high})
    return out


def outcome_table(rates: pd.DataFrame, protocol: str) -> pd.DataFrame:
    """One row per (k, control) of ``protocol``: replications, then each outcome's rate
    with its 95 % interval in percent, '12% (8–17)'."""
    cell = rates.assign(text=[f"{r:.0%} ({lo * 100:.0f}–{hi * 100:.0f})" for r, lo, hi in
                              zip(rates["rate"], rates["ci_low"], rates["ci_high"])])
    tab = cell.pivot(index=["protocol", "k", "candidate"], columns="outcome", values="text")
    tab.insert(0, "replications", rates.groupby(["protocol", "k", "candidate"])["n"].first())
    tab = tab.fillna("").reset_index()
    cols = (["significant", "significant, faster", "significant, slower"]
            if protocol == protocols.PROTOCOL_A
            else ["equivalent", "inconclusive", "faster", "slower"])
    part = tab[tab["protocol"] == protocol]
    keep = (["k"] if protocol == protocols.PROTOCOL_B else []) + ["candidate", "replications"] + \
        [c for c in cols if c in part.columns]
    return part[keep]


# -------------------------------------------------------------------- timing checks

def fidelity(lead) -> Finding:
    """Each timing mode's median against the profiler's kernel time (``data``: the table,
    ``timing_fidelity.timing_fidelity``) for the default dispatch of the lead run."""
    fid = timing_fidelity.timing_fidelity(lead.samples, lead.kernels)
    f = fid.set_index("config")
    small = fid[fid["device_ms"] < 0.03]
    return Finding({"fid_s128_pc_over_dev": f.loc[S128.key, "per_call_over_device"],
                    "fid_s128_host": f.loc[S128.key, "host_share"],
                    "fid_s128_host_graph": f.loc[S128.key, "host_share_graph"],
                    "fid_s128_gr_over_dev": f.loc[S128.key, "graph_over_device"],
                    "fid_s512_gr_over_dev": f.loc[S512.key, "graph_over_device"],
                    "fid_s512_host": f.loc[S512.key, "host_share"],
                    "fid_small_host_min": small["host_share"].min(),
                    "fid_small_host_max": small["host_share"].max(),
                    "fid_n_small": len(small)}, data=fid)


def replay(anatomy: dict, lead, file=None) -> Finding:
    """What one graph replay costs beyond its kernels, from the graph-anatomy check (its
    path ``file``, named in its label), and the calls per replay the lead run's units ran
    with (``data``: ``rc.anatomy_table``)."""
    s128, s512 = S128.key, S512.key
    at = rc.anatomy_table(anatomy)
    auto = rc.auto_table(anatomy).set_index(["config", "candidate"])
    ks = sorted(at["k"].unique())
    out = {"label_rp": check_label(anatomy, file), "rp_ks": ", ".join(str(k) for k in ks),
           "rp_replays": int(anatomy["replays"]), "rp_rounds": int(anatomy["rounds"]),
           "rp_kmax": int(max(ks))}
    for k in (4, 8, 16):
        out[f"rp_s128_k{k}_lo"], out[f"rp_s128_k{k}_hi"] = rc.excess_range(at, s128, k)
    k1 = at[(at["config"] == s128) & (at["k"] == 1)]
    at512 = at[at["config"] == s512]
    auto128 = auto.loc[s128]
    out.update({"rp_s128_k1_lo": k1["excess"].min(), "rp_s128_k1_hi": k1["excess"].max(),
                "rp_s512_lo": at512["excess"].min(), "rp_s512_hi": at512["excess"].max(),
                "rp_auto_k128": ", ".join(sorted({str(k) for k in auto128["k"]})),
                "rp_auto_k512": "–".join(str(k) for k in sorted(
                    {int(auto.loc[s512, "k"].min()), int(auto.loc[s512, "k"].max())})),
                "rp_auto128_max": auto128["excess"].abs().max(),
                # the longest auto-sized replay at S = 128: below the target where the cap
                # on calls binds
                "rp_auto128_ms": float((auto128["k"] * auto128["per_call_ms"]).max()),
                "rp_target_ms": float(anatomy["graph_target_ms"])})
    # Beyond the kernels, per call: event time at the largest k minus the profiler's kernel
    # sum in the same graph; calls of one kernel against calls of two (a memset and the
    # kernel).
    big = at[(at["config"] == s128) & (at["k"] == max(ks))].set_index("candidate")
    beyond = (big["per_call_ms"] - big["busy_ms"]) * 1e3
    stretch = ((big["span_ms"] - big["per_call_ms"]) * 1e3)[big["kernels_per_call"] == 2]
    for key, part in (("rp_beyond1", beyond[big["kernels_per_call"] == 1]),
                      ("rp_beyond2", beyond[big["kernels_per_call"] == 2]),
                      ("rp_stretch", stretch)):
        out[key] = "; ".join(f"{c} {v:.2f} µs" for c, v in part.items())
    recorded = rc.graph_calls(lead.units).query("candidate in @at.candidate.unique()")
    recorded = recorded.set_index("config")
    for key, cfg in (("rp_rec_k128", s128), ("rp_rec_k512", s512)):
        rk = recorded.loc[cfg]
        out[key] = f"{int(rk['k_min'].min())}–{int(rk['k_max'].max())}"
    return Finding(out, data=at)


def cache(lead) -> Finding:
    """Hot (graph) against cold (L2 flushed) medians of the default dispatch and their
    effective rates, against the run's copy ceiling (``data``:
    ``timing_fidelity.cache_table`` and the ceiling in GB/s)."""
    fp = next(iter(lead.fingerprint["trials"].values()))
    copy_gbs = float(lead.ceilings["copy"]["gbs"])
    table = timing_fidelity.cache_table(lead.samples, copy_gbs=copy_gbs,
                                        l2_bytes=float(fp["l2_bytes"]))
    cc = table.set_index("config")
    out = {"copy_gbs": copy_gbs, "l2_mib": fp["l2_bytes"] / 2**20}
    for key, cfg in (("s256", S256.key), ("s512", S512.key), ("s128", S128.key)):
        out.update({f"ws_{key}": cc.loc[cfg, "working_set_over_l2"],
                    f"hot_gbs_{key}": cc.loc[cfg, "hot_gbs"],
                    f"cold_gbs_{key}": cc.loc[cfg, "cold_gbs"],
                    f"hot_copy_{key}": cc.loc[cfg, "hot_over_copy"],
                    f"coldhot_{key}": cc.loc[cfg, "cold_over_hot"]})
    out["max_hot_copy"] = table["hot_over_copy"].max()
    return Finding(out, data=(table, copy_gbs))


def cost(cr: CalibrationRuns, lead, ks) -> Finding:
    """GPU time of one comparison over k processes and of calibrating it, from the first
    calibration run's unit times and process overhead (``data``: one row per k)."""
    first = cr.first
    uc = gpu_time.unit_costs(first.units)
    unit_s = float(uc.loc[uc["mode"] == "graph", "median_unit_s"].median())
    n_trials = int(first.samples["trial"].nunique())
    overhead = gpu_time.process_overhead_s(first.units)
    k1, reps = ks[-1], n_trials // ks[-1]
    one = gpu_time.protocol_cost(unit_s, k1, arms=2, process_overhead_s=overhead,
                                 replications=reps)
    # Every process times the baseline, the A/A twin and each spin control once.
    calib = gpu_time.protocol_cost(unit_s, k1, arms=2 + len(cr.spins), process_overhead_s=overhead,
                                   replications=reps)
    table = pd.DataFrame([vars(gpu_time.protocol_cost(unit_s, k, 2, overhead, n_trials // k))
                          for k in [1] + list(ks)])
    return Finding({"unit_ms": unit_s * 1e3, "overhead_s": overhead,
                    "cost_k1_s": one.comparison_s, "k1_reps": reps, "run_cost": first.run_id,
                    "calib_min": calib.calibration_s / 60,
                    "lead_units_s": float(lead.units["elapsed_s"].sum())}, data=table)
