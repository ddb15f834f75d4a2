# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Audit: calibrating the protocols, and every claim checked
#
# This section measures how often two comparison protocols call identical code different
# and how often they detect slowdowns of known size, then checks each claim of the
# original reports against recorded data, the L4 datasheet or the reports' own
# arithmetic. The reports' protocol takes N samples of each arm in one process and applies
# a two-sided Mann-Whitney U test; ours compares `k` independent processes per arm with a
# hierarchical bootstrap of the speedup and an equivalence test (`stats.compare`). The
# controls are an A/A pair (the default SDPA call timed twice as two candidates: any
# difference found is false) and SDPA followed by a spin kernel of known length.
#
# The runs this chapter reads are protocol 1 (H100, one memory placement per candidate per
# process): it is the protocol's history, kept because it shows what the earlier instrument
# could and could not resolve. The calibration of the design the paper now uses (protocol 2,
# H200) is {ref}`calibration-v2`.

# %% tags=["parameters", "hide-input"]
runs_dir = "data/runs"                           # recorded runs, relative to the repository root
calibration_run = "h100-calibration-v1,h100-calibration-v2"  # runs with sdpa, sdpa_twin and
                                                 # sdpa_spin<N>, comma-separated, pooled
lead_run = "h100-reports-v1"                     # the reports matrix in three timing modes
triton_run = "h100-triton-v2"                    # our Triton kernel against the SDPA backends
extras = "data/checks/audit_extras_h100.json"    # scripts/audit_extras.py output
anatomy = "data/checks/graph_anatomy_h100.json"  # scripts/graph_anatomy.py output
ks = "3,4,5"                                     # processes per replication of protocol (b)
margin = 0.02                                    # equivalence margin on the speedup ratio
alpha = 0.05                                     # level of the Mann-Whitney test of the reports
n_resamples = 1000                               # bootstrap resamples per comparison

# %% tags=["remove-cell"]
_given = dict(globals())  # the parameters as papermill left them, checked below
from pathlib import Path
import json
import math
import sys

here = Path.cwd().resolve()
root = next(p for p in (here, *here.parents) if (p / "attn_analysis").is_dir())
sys.path.insert(0, str(root))

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown
from myst_nb import glue

from attn_analysis import calibration as cal
from attn_analysis import notebook_support as nbs
from attn_analysis import plots, records, reference, stats, summaries, tables, workload
from attn_analysis import replay_cost as rc
from attn_analysis.configs import TARGET, Config


def _run_iv(name, value):
    """A recorded, verified run under runs_dir, else a ValueError naming the parameter."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"`{name}` must be a run folder name; got {value!r}.")
    path = root / runs_dir / value
    if not (path / "manifest.json").is_file():
        raise ValueError(f"`{name}` must name a finalized run under {runs_dir}/; "
                         f"{path} has no manifest.json (not recorded yet?).")
    return records.load(path)


nbs.unknown_parameters_iv(nbs.given_parameters(_given), (
    "runs_dir", "calibration_run", "lead_run", "triton_run", "extras", "anatomy", "ks", "margin",
    "alpha", "n_resamples"))
if not isinstance(runs_dir, str) or not (root / runs_dir).is_dir():
    raise ValueError(f"`runs_dir` must be an existing folder; got {runs_dir!r}.")
if not isinstance(calibration_run, str) or not calibration_run.strip():
    raise ValueError(f"`calibration_run` must name one or more runs, comma-separated; "
                     f"got {calibration_run!r}.")
CR = [_run_iv("calibration_run", name.strip()) for name in calibration_run.split(",")]
C = CR[0]  # the first run also gives the protocol's cost (its unit times and wall time)
CS, CK = cal.pool_runs({r.run_id: (r.samples, r.kernels) for r in CR})
L = _run_iv("lead_run", lead_run)
T = _run_iv("triton_run", triton_run)
if not isinstance(extras, str) or not (root / extras).is_file():
    raise ValueError(f"`extras` must be an existing JSON file from scripts/audit_extras.py; "
                     f"got {extras!r}.")
X = json.loads((root / extras).read_text())
if not isinstance(anatomy, str) or not (root / anatomy).is_file():
    raise ValueError(f"`anatomy` must be an existing JSON file from scripts/graph_anatomy.py; "
                     f"got {anatomy!r}.")
A = json.loads((root / anatomy).read_text())
missing = [k for k in ("tf32", "chunking", "warmup", "fingerprint") if k not in X]
if missing:
    raise ValueError(f"`extras` must hold tf32, chunking, warmup and fingerprint; "
                     f"missing {missing}.")
try:
    K = sorted({int(k) for k in str(ks).split(",") if k.strip()})
except ValueError:
    K = []
if not K or min(K) < 2:
    raise ValueError(f"`ks` must be a comma-separated list of integers >= 2; got {ks!r}.")
for name, value, high in (("margin", margin, 0.5), ("alpha", alpha, 0.5)):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < high:
        raise ValueError(f"`{name}` must be a number in (0, {high}); got {value!r}.")
if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 100:
    raise ValueError(f"`n_resamples` must be an integer >= 100; got {n_resamples!r}.")

g = nbs.glue_text
label_c = "; ".join(dict.fromkeys(summaries.run_label(r) for r in CR))
label_l, label_t = (summaries.run_label(r) for r in (L, T))
fp_x = X["fingerprint"]
label_x = f"{fp_x['gpu_name']}, torch {fp_x['torch_version']}"
cfg_c = sorted(set(CS["config"]))[0]
controls = sorted(set(CS["candidate"]) - {"sdpa"})
aa = [c for c in controls if c in cal.AA_CONTROLS]
spins = sorted([c for c in controls if c not in aa], key=lambda c: int(c.replace("sdpa_spin", "")))
if not aa or not spins:
    raise ValueError(f"`calibration_run` must hold an A/A control {cal.AA_CONTROLS} and "
                     f"spin controls; it holds {controls}.")
n_trials_c = int(CS["trial"].nunique())
n_per_unit = int(pd.concat([r.units for r in CR]).query("status == 'ok'")["n_samples"].median())
for key, value in (("au_label_c", label_c), ("au_label_l", label_l), ("au_label_t", label_t),
                   ("au_label_x", label_x), ("au_run_c", " and ".join(r.run_id for r in CR)), ("au_run_l", L.run_id),
                   ("au_run_t", T.run_id), ("au_cfg", cfg_c)):
    g(key, value)
g("au_n_trials", n_trials_c)
g("au_n_runs_c", len(CR))
g("au_n_per_unit", n_per_unit)
g("au_margin", float(margin))
g("au_alpha", float(alpha))
g("au_n_controls", len(spins))

# %% [markdown]
# (audit-calibration)=
# ## Calibration: false positives and power of the two protocols
#
# Runs {glue:text}`au_run_c:s` ({glue:text}`au_label_c:s`; {glue:text}`au_n_runs_c:d` runs) hold
# {glue:text}`au_n_trials:d` fresh processes between them at {glue:text}`au_cfg:s`, each timing every arm for
# {glue:text}`au_n_per_unit:d` samples per mode in shuffled order. Protocol (a) repeats the
# reports' test once per process (per-call timing, Mann-Whitney U at
# α = {glue:text}`au_alpha:.2f`). Protocol (b) runs `stats.compare` (graph mode, margin
# ±{glue:text}`au_margin:.0%`) on disjoint groups of `k` consecutive processes of one run,
# so no two replications share a process and none mixes machines. For the A/A pair a false positive is any claimed
# difference: p < α under (a), a verdict of *faster* or *slower* under (b). For a spin
# control a detection is a significant slowdown under (a), the verdict *slower* under (b).
# Every rate carries a 95 % Clopper-Pearson interval.

# %% tags=["remove-cell"]
dec_a = cal.protocol_a_decisions(CS, mode="per_call", alpha=float(alpha), config=cfg_c)
dec_b = pd.concat([cal.protocol_b_decisions(CS, mode="graph", k=k, margin=float(margin),
                                            n_resamples=n_resamples, config=cfg_c) for k in K],
                  ignore_index=True)
rates = cal.outcome_rates(dec_a, dec_b)
head = cal.headline_rates(rates)
effects = cal.true_effects(CS, CK, mode="graph", n_resamples=n_resamples,
                           config=cfg_c)
effects_pc = cal.true_effects(CS, CK, mode="per_call", n_resamples=n_resamples,
                              config=cfg_c)


def hrow(protocol, k, cand):
    sel = head[(head["protocol"] == protocol) & (head["k"] == k) & (head["candidate"] == cand)]
    return sel.iloc[0]


def glue_rate(key, row):
    g(key, row["rate"])
    g(key + "_lo", row["ci_low"])
    g(key + "_hi", row["ci_high"])
    g(key + "_n", int(row["n"]))
    g(key + "_events", int(row["events"]))


A_AA = hrow(cal.PROTOCOL_A, 1, aa[0])
glue_rate("au_a_fp", A_AA)
for k in K:
    glue_rate(f"au_b{k}_fp", hrow(cal.PROTOCOL_B, k, aa[0]))
    r = rates[(rates["protocol"] == cal.PROTOCOL_B) & (rates["k"] == k)
              & (rates["candidate"] == aa[0])].set_index("outcome")
    for outcome in ("equivalent", "inconclusive", "faster", "slower"):
        g(f"au_b{k}_aa_{outcome}", r.loc[outcome, "rate"])
for c in spins:
    n = c.replace("sdpa_", "")
    glue_rate(f"au_a_pow_{n}", hrow(cal.PROTOCOL_A, 1, c))
    for k in K:
        glue_rate(f"au_b{k}_pow_{n}", hrow(cal.PROTOCOL_B, k, c))
        r = rates[(rates["protocol"] == cal.PROTOCOL_B) & (rates["k"] == k)
                  & (rates["candidate"] == c)].set_index("outcome")
        g(f"au_b{k}_eq_{n}", r.loc["equivalent", "rate"])
    e = effects.set_index("candidate").loc[c]
    g(f"au_eff_{n}", e["slowdown_pct"])
    g(f"au_eff_{n}_lo", e["slowdown_low"] - 1)
    g(f"au_eff_{n}_hi", e["slowdown_high"] - 1)
    g(f"au_prof_{n}", e["extra_share"])
    g(f"au_prof_{n}_us", e["extra_device_ms"] * 1e3)
e = effects.set_index("candidate").loc[aa[0]]
g("au_eff_twin", e["slowdown_pct"])
g("au_eff_twin_lo", e["slowdown_low"] - 1)
g("au_eff_twin_hi", e["slowdown_high"] - 1)
k0 = K[0]
g("au_k0", k0)
g("au_k1", K[-1])
g("au_sdpa_dev_us", effects["baseline_device_ms"].iloc[0] * 1e3)
# The smallest spin whose true slowdown's interval lies wholly above the margin.
above = effects[effects["candidate"].isin(spins) & (effects["slowdown_low"] - 1 > margin)]
g("au_first_above", above["candidate"].iloc[0] if len(above) else "none")

# Coverage of one process's interval of the median (what a one-process protocol reports).
cov_pc = cal.within_process_coverage(summaries.trial_arrays(CS, cfg_c, "sdpa", "per_call"))
cov_gr = cal.within_process_coverage(summaries.trial_arrays(CS, cfg_c, "sdpa", "graph"))
for key, ci in (("au_cov_pc", cov_pc), ("au_cov_gr", cov_gr)):
    g(key, ci.estimate)
    g(key + "_lo", ci.low)
    g(key + "_hi", ci.high)

# Figure: headline rates with intervals.
rows = [(cal.PROTOCOL_A, 1, "(a) Mann-Whitney, 1 process")] + \
       [(cal.PROTOCOL_B, k, f"(b) compare, k={k}") for k in K]
fig = plots.calibration_rates(head, aa, spins, rows, float(alpha), label_c, cfg_c, n_trials_c)
nbs.glue_figure("au_fig_rates", fig)

# %% [markdown]
# ```{glue:figure} au_fig_rates
# :name: fig-audit-rates
#
# False-positive rate of the A/A pair (left; dashed line: α = {glue:text}`au_alpha:.2f`)
# and power against the spin controls (right), with 95 % Clopper-Pearson intervals, for
# the reports' protocol (one process, Mann-Whitney U) and ours (`stats.compare` over `k`
# processes). Run {glue:text}`au_run_c:s`, {glue:text}`au_label_c:s`.
# ```
#
# Under the reports' protocol the A/A pair differs "significantly" in
# {glue:text}`au_a_fp_events:d` of {glue:text}`au_a_fp_n:d` processes, a false-positive
# rate of {glue:text}`au_a_fp:.0%` (95 % CI {glue:text}`au_a_fp_lo:.0%`–{glue:text}`au_a_fp_hi:.0%`)
# where the test promises {glue:text}`au_alpha:.0%`. Its p-values are not valid for this
# data. The test assumes independent draws from one distribution per arm; samples taken
# back to back in one process are not that, and (our reading) the state of a process,
# such as clocks, memory placement or which arm ran first, shifts one arm against the
# other.
#
# Our protocol claims a difference between identical code in
# {glue:text}`au_b3_fp:.0%` of replications with k = 3 processes per arm (95 % CI
# {glue:text}`au_b3_fp_lo:.0%`–{glue:text}`au_b3_fp_hi:.0%`, {glue:text}`au_b3_fp_n:d`
# replications), {glue:text}`au_b4_fp:.0%` with k = 4
# ({glue:text}`au_b4_fp_lo:.0%`–{glue:text}`au_b4_fp_hi:.0%`, {glue:text}`au_b4_fp_n:d`)
# and {glue:text}`au_b5_fp:.0%` with k = 5
# ({glue:text}`au_b5_fp_lo:.0%`–{glue:text}`au_b5_fp_hi:.0%`, {glue:text}`au_b5_fp_n:d`).
# A bootstrap over a handful of processes sees too little of the spread between them, so
# its intervals come out too narrow; how far the rate exceeds the nominal 5 % at each k is
# what these intervals bound. The equivalence verdict, which needs the interval inside
# ±{glue:text}`au_margin:.0%`, is reached for identical code in
# {glue:text}`au_b3_aa_equivalent:.0%`, {glue:text}`au_b4_aa_equivalent:.0%` and
# {glue:text}`au_b5_aa_equivalent:.0%` of replications (k = 3, 4, 5); the rest end
# *inconclusive* ({glue:text}`au_b3_aa_inconclusive:.0%`,
# {glue:text}`au_b4_aa_inconclusive:.0%`, {glue:text}`au_b5_aa_inconclusive:.0%`) or in a
# false claim. At these sizes neither protocol can certify "no difference within the
# margin"; ours says so instead of claiming it, and the fixed-shape run uses many more
# processes for that reason.
#
# A single process's 95 % interval of the median contains the median over all
# processes in only {glue:text}`au_cov_pc:.0%` of processes in per-call mode
# ({glue:text}`au_cov_pc_lo:.0%`–{glue:text}`au_cov_pc_hi:.0%`) and
# {glue:text}`au_cov_gr:.0%` in graph mode
# ({glue:text}`au_cov_gr_lo:.0%`–{glue:text}`au_cov_gr_hi:.0%`): a per-process interval
# describes that process, not the kernel.

# %% tags=["remove-input"]
cell = rates.assign(text=[f"{r:.0%} ({lo * 100:.0f}–{hi * 100:.0f})" for r, lo, hi in
                          zip(rates["rate"], rates["ci_low"], rates["ci_high"])])
tab = cell.pivot(index=["protocol", "k", "candidate"], columns="outcome", values="text")
tab.insert(0, "replications", rates.groupby(["protocol", "k", "candidate"])["n"].first())
tab = tab.fillna("").reset_index()
for proto, cols, name, what in (
        (cal.PROTOCOL_A, ["significant", "significant, faster", "significant, slower"],
         "tbl-audit-outcomes-a", "the reports' protocol (Mann-Whitney U in one process, "
         "per call)"),
        (cal.PROTOCOL_B, ["equivalent", "inconclusive", "faster", "slower"],
         "tbl-audit-outcomes-b", "our protocol (stats.compare over k processes per arm, "
         "graph mode)")):
    part = tab[tab["protocol"] == proto]
    keep = (["k"] if proto == cal.PROTOCOL_B else []) + ["candidate", "replications"] + \
        [c for c in cols if c in part.columns]
    tables.show(part[keep], f"Rate of each outcome of {what} per control at {cfg_c}, with "
                f"95 % Clopper-Pearson intervals (%) in parentheses. Runs "
                f"{', '.join(r.run_id for r in CR)}; {label_c}.", name=name,
                labels={"candidate": "control", "replications": "replications"},
                formats={"k": ".0f", "replications": ".0f"},
                csv=f"audit_outcome_rates_{'a' if proto == cal.PROTOCOL_A else 'b'}.csv",
                full=rates[rates["protocol"] == proto])

# %% [markdown]
# (audit-effects)=
# ### How large the controls really are
#
# Pooling all {glue:text}`au_n_trials:d` processes, graph mode, the spin controls are
# slower than `sdpa` by {glue:text}`au_eff_spin0:.1%`
# ({glue:text}`au_eff_spin0_lo:.1%`–{glue:text}`au_eff_spin0_hi:.1%`; the spin of zero
# cycles costs one extra kernel launch), {glue:text}`au_eff_spin1000:.1%`
# ({glue:text}`au_eff_spin1000_lo:.1%`–{glue:text}`au_eff_spin1000_hi:.1%`),
# {glue:text}`au_eff_spin2500:.1%`
# ({glue:text}`au_eff_spin2500_lo:.1%`–{glue:text}`au_eff_spin2500_hi:.1%`) and
# {glue:text}`au_eff_spin6000:.1%`
# ({glue:text}`au_eff_spin6000_lo:.1%`–{glue:text}`au_eff_spin6000_hi:.1%`); the A/A
# twin by {glue:text}`au_eff_twin:.2%`
# ({glue:text}`au_eff_twin_lo:.2%`–{glue:text}`au_eff_twin_hi:.2%`). The profiler's time
# for the spin kernel alone, over SDPA's {glue:text}`au_sdpa_dev_us:.1f` µs of kernel time
# per call, predicts {glue:text}`au_prof_spin0:.1%`, {glue:text}`au_prof_spin1000:.1%`,
# {glue:text}`au_prof_spin2500:.1%` and {glue:text}`au_prof_spin6000:.1%`. Power rises
# with the effect: at k = 4 our protocol calls the controls slower in
# {glue:text}`au_b4_pow_spin0:.0%`, {glue:text}`au_b4_pow_spin1000:.0%`,
# {glue:text}`au_b4_pow_spin2500:.0%` and {glue:text}`au_b4_pow_spin6000:.0%` of
# replications. The first control whose whole interval lies beyond the margin is
# {glue:text}`au_first_above:s`.

# %% tags=["remove-cell"]
fig = plots.control_effects(effects, effects_pc, spins + aa, float(margin), label_c, cfg_c)
nbs.glue_figure("au_fig_effects", fig)

# %% [markdown]
# ```{glue:figure} au_fig_effects
# :name: fig-audit-effects
#
# Measured slowdown of each control (pooled median over all processes, 95 %
# hierarchical-bootstrap interval) against the slowdown the profiler's kernel times
# predict; shaded: the ±{glue:text}`au_margin:.0%` equivalence margin. Run
# {glue:text}`au_run_c:s`, {glue:text}`au_label_c:s`.
# ```
#
# (audit-fidelity)=
# ## Timing fidelity: what each mode reads
#
# For the ten configurations of run {glue:text}`au_run_l:s` ({glue:text}`au_label_l:s`),
# the default dispatch's median per timing mode beside the profiler's device time per call.
# Per-call timing (an event pair and a synchronise around each call, the reports' way) at
# S = 128 is {glue:text}`au_fid_s128_pc_over_dev:.1f` times the kernel time: about
# {glue:text}`au_fid_s128_host:.0%` of that figure is host launch and synchronisation, not
# attention. Graph replay reads {glue:text}`au_fid_s128_gr_over_dev:.2f` times the kernel
# time there, and {glue:text}`au_fid_s512_gr_over_dev:.2f` times at S = 512.

# %% tags=["remove-cell"]
fid = cal.timing_fidelity(L.samples, L.kernels)
f = fid.set_index("config")
s128, s512 = Config(32, 8, 128).key, TARGET.key
g("au_fid_s128_pc_over_dev", f.loc[s128, "per_call_over_device"])
g("au_fid_s128_host", f.loc[s128, "host_share"])
g("au_fid_s128_host_graph", f.loc[s128, "host_share_graph"])
g("au_fid_s128_gr_over_dev", f.loc[s128, "graph_over_device"])
g("au_fid_s512_gr_over_dev", f.loc[s512, "graph_over_device"])
g("au_fid_s512_host", f.loc[s512, "host_share"])
small = fid[fid["device_ms"] < 0.03]
g("au_fid_small_host_min", small["host_share"].min())
g("au_fid_small_host_max", small["host_share"].max())
g("au_fid_n_small", len(small))

# %% tags=["remove-input"]
cols = ["per_call", "cold_l2", "graph", "device_ms", "per_call_over_device",
        "cold_l2_over_device", "graph_over_device", "host_share"]
tables.show(fid[["config", "per_call", "graph", "device_ms", "per_call_over_device",
                 "graph_over_device", "host_share"]],
            f"Default SDPA: pooled median per timing mode, the profiler's kernel time per "
            f"call, their ratios, and the host share (1 − kernel / per_call); cold_l2 is in "
            f"the CSV. {label_l}, run {L.run_id}.", name="tbl-audit-fidelity",
            labels={"device_ms": "kernel time (ms)"}, csv="audit_timing_fidelity.csv",
            full=fid)

# %% [markdown]
# (audit-replay)=
# ### Calls per graph replay
#
# Graph mode times a replay of k captured calls and divides by k, so whatever one replay
# costs beyond its kernels reaches each call as a k-th share. `scripts/graph_anatomy.py`
# measured that share on {glue:text}`au_label_rp:s`: in one process it captured graphs of
# k = {glue:text}`au_rp_ks:s` calls for four candidates, timed
# {glue:text}`au_rp_replays:d` replays of each in {glue:text}`au_rp_rounds:d` interleaved
# rounds, and replayed each graph again under the profiler
# (`data/checks/graph_anatomy_h100.json`).

# %% tags=["remove-cell"]
fp_a = A["fingerprint"]
g("au_label_rp", f"{fp_a['gpu_name']}, torch {fp_a['torch_version']}")
AT = rc.anatomy_table(A)
AA = rc.auto_table(A).set_index(["config", "candidate"])
a_ks = sorted(AT["k"].unique())
g("au_rp_ks", ", ".join(str(k) for k in a_ks))
g("au_rp_replays", int(A["replays"]))
g("au_rp_rounds", int(A["rounds"]))
g("au_rp_kmax", int(max(a_ks)))
for k in (4, 8, 16):
    lo, hi = rc.excess_range(AT, s128, k)
    g(f"au_rp_s128_k{k}_lo", lo)
    g(f"au_rp_s128_k{k}_hi", hi)
k1 = AT[(AT["config"] == s128) & (AT["k"] == 1)]
g("au_rp_s128_k1_lo", k1["excess"].min())
g("au_rp_s128_k1_hi", k1["excess"].max())
at512 = AT[AT["config"] == s512]
g("au_rp_s512_lo", at512["excess"].min())
g("au_rp_s512_hi", at512["excess"].max())
auto128 = AA.loc[s128]
g("au_rp_auto_k128", ", ".join(sorted({str(k) for k in auto128["k"]})))
g("au_rp_auto_k512", "–".join(str(k) for k in sorted({int(AA.loc[s512, "k"].min()),
                                                      int(AA.loc[s512, "k"].max())})))
g("au_rp_auto128_max", auto128["excess"].abs().max())
g("au_rp_target_ms", float(A["graph_target_ms"]))
# Beyond the kernels, per call: event time at the largest k minus the profiler's kernel sum
# in the same graph; calls of one kernel against calls of two (a memset and the kernel).
big = AT[(AT["config"] == s128) & (AT["k"] == max(a_ks))].set_index("candidate")
beyond = (big["per_call_ms"] - big["busy_ms"]) * 1e3
one, two = beyond[big["kernels_per_call"] == 1], beyond[big["kernels_per_call"] == 2]
g("au_rp_beyond1", "; ".join(f"{c} {v:.2f} µs" for c, v in one.items()))
g("au_rp_beyond2", "; ".join(f"{c} {v:.2f} µs" for c, v in two.items()))
stretch = ((big["span_ms"] - big["per_call_ms"]) * 1e3)[big["kernels_per_call"] == 2]
g("au_rp_stretch", "; ".join(f"{c} {v:.2f} µs" for c, v in stretch.items()))
recorded_k = rc.graph_calls(L.units).query("candidate in @AT.candidate.unique()")
recorded_k = recorded_k.set_index("config")
rk128 = recorded_k.loc[s128]
g("au_rp_rec_k128", f"{int(rk128['k_min'].min())}–{int(rk128['k_max'].max())}")
rk512 = recorded_k.loc[s512]
g("au_rp_rec_k512", f"{int(rk512['k_min'].min())}–{int(rk512['k_max'].max())}")
nbs.glue_figure("au_fig_replay", plots.replay_curves(AT, f"{fp_a['gpu_name']}, torch "
                                                         f"{fp_a['torch_version']}"))

# %% [markdown]
# ```{glue:figure} au_fig_replay
# :name: fig-audit-replay
#
# Event time per call against the number of calls captured in one graph, per candidate,
# at two configurations; each point is the median of the replays of one graph. Measured
# on {glue:text}`au_label_rp:s` (`data/checks/graph_anatomy_h100.json`).
# ```
#
# At S = 128, where a call lasts a few microseconds, the replay's own cost dominates small
# graphs: one call per replay reads {glue:text}`au_rp_s128_k1_lo:.0%` to
# {glue:text}`au_rp_s128_k1_hi:.0%` above the time at k = {glue:text}`au_rp_kmax:d`, four
# calls {glue:text}`au_rp_s128_k4_lo:.0%` to {glue:text}`au_rp_s128_k4_hi:.0%`, eight
# {glue:text}`au_rp_s128_k8_lo:.1%` to {glue:text}`au_rp_s128_k8_hi:.1%` and sixteen
# {glue:text}`au_rp_s128_k16_lo:.1%` to {glue:text}`au_rp_s128_k16_hi:.1%` (the range is
# over the four candidates). The matrix run {glue:text}`au_run_l:s`, like every run
# recorded before this check, sized its graphs by the earlier rule (k from an eager
# estimate, checked against the slow uploading replay), which gave
# k = {glue:text}`au_rp_rec_k128:s` at S = 128 and k = {glue:text}`au_rp_rec_k512:s` at
# S = 512 for the four candidates of this check. Where k was eight or more the check
# above bounds the share at {glue:text}`au_rp_s128_k8_hi:.1%`; a candidate that ran with fewer calls per replay than
# its rival carries the larger share, a bias that can reach the equivalence margin at the
# smallest shapes.
# At S = 512 the curves do not level off monotonically: within this one process the times
# moved by {glue:text}`au_rp_s512_lo:+.1%` to {glue:text}`au_rp_s512_hi:+.1%` around the
# value at the largest k, with no order in k, a drift as large as the replay cost itself.
# The timer now sizes a graph on a timed replay after the upload (the first replay of a
# graph uploads it and is slow) and to at least {glue:text}`au_rp_target_ms:.1f` ms: in
# this check it chose k = {glue:text}`au_rp_auto_k128:s` at S = 128, within
# {glue:text}`au_rp_auto128_max:.1%` of the time at the largest fixed k, and
# k = {glue:text}`au_rp_auto_k512:s` at S = 512. The fixed-shape chapter repeats its
# comparison under this sizing.
#
# The same graphs also show what a replay costs per call beyond the kernels at S = 128:
# for candidates of one kernel per call, {glue:text}`au_rp_beyond1:s`; for those of two (a
# memset, then the cuDNN kernel that waits for it), {glue:text}`au_rp_beyond2:s`. That
# wait between dependent nodes is why the default dispatch's graph time exceeds the
# profiler's kernel sum at small shapes. The profiler cannot measure the wait itself:
# under it, the span from the first kernel's start to the last kernel's end of a call of
# two kernels exceeded the un-profiled event time per call by {glue:text}`au_rp_stretch:s`,
# so tracing stretches the replay it observes.

# %% [markdown]
# (audit-cache)=
# ## Cache: hot against cold, and what "effective bandwidth" means
#
# Graph replay re-runs the call on the same tensors, so inputs that fit in L2 stay there
# (hot); the cold-L2 mode flushes L2 before each call. Dividing the minimum traffic
# (Q, K, V read once, O written once) by each time gives an effective rate. At S = 256
# the working set is {glue:text}`au_ws_s256:.2f` of this GPU's L2, and hot it runs at
# {glue:text}`au_hot_gbs_s256:.0f` GB/s ({glue:text}`au_hot_copy_s256:.0%` of the measured
# copy ceiling, {glue:text}`au_copy_gbs:.0f` GB/s), cold at {glue:text}`au_cold_gbs_s256:.0f`
# GB/s; the cold call takes {glue:text}`au_coldhot_s256:.2f` times as long. At S = 512 the
# working set is {glue:text}`au_ws_s512:.2f` of L2 and cold/hot is
# {glue:text}`au_coldhot_s512:.2f`. These are rates of useful bytes, not DRAM bandwidths;
# where they stay below the copy ceiling they say nothing about L2 at all.

# %% tags=["remove-cell"]
fp_l = next(iter(L.fingerprint["trials"].values()))
copy_gbs = float(L.ceilings["copy"]["gbs"])
cache = cal.cache_table(L.samples, copy_gbs=copy_gbs, l2_bytes=float(fp_l["l2_bytes"]))
cc = cache.set_index("config")
s256 = Config(32, 8, 256).key
g("au_copy_gbs", copy_gbs)
g("au_l2_mib", fp_l["l2_bytes"] / 2**20)
for key, cfg in (("s256", s256), ("s512", s512), ("s128", s128)):
    g(f"au_ws_{key}", cc.loc[cfg, "working_set_over_l2"])
    g(f"au_hot_gbs_{key}", cc.loc[cfg, "hot_gbs"])
    g(f"au_cold_gbs_{key}", cc.loc[cfg, "cold_gbs"])
    g(f"au_hot_copy_{key}", cc.loc[cfg, "hot_over_copy"])
    g(f"au_coldhot_{key}", cc.loc[cfg, "cold_over_hot"])
g("au_max_hot_copy", cache["hot_over_copy"].max())

# %% tags=["remove-input"]
cols = ["hot_ms", "cold_ms", "cold_over_hot", "working_set_over_l2", "hot_gbs", "cold_gbs",
        "hot_over_copy", "cold_over_copy"]
tables.show(cache[["config", "hot_ms", "cold_ms", "cold_over_hot", "working_set_over_l2",
                   "hot_gbs", "hot_over_copy"]],
            f"Default SDPA hot (graph) and cold (L2 flushed): medians, working set over L2, "
            f"the hot effective rate (minimum bytes / time) and its fraction of the measured "
            f"copy ceiling ({copy_gbs:.0f} GB/s); cold rates are in the CSV. {label_l}, run "
            f"{L.run_id}.", name="tbl-audit-cache",
            labels={"hot_ms": "hot (ms)", "cold_ms": "cold (ms)"}, csv="audit_cache.csv",
            full=cache)

# %% [markdown]
# (audit-cost)=
# ## What a calibrated protocol costs in GPU time
#
# A timing unit of {glue:text}`au_n_per_unit:d` graph-mode samples took a median of
# {glue:text}`au_unit_ms:.0f` ms of wall time (warm-up included); each fresh process
# added {glue:text}`au_overhead_s:.2f` s outside its timing units (start-up, CUDA context,
# building and checking candidates, profiling, teardown), the median over the processes
# of run {glue:text}`au_run_cost:s` by the units' own clocks. One comparison
# with k = {glue:text}`au_k1:d` processes per arm therefore costs about
# {glue:text}`au_cost_k1_s:.1f` s of GPU time if each process times both arms, almost all
# of it process overhead; calibrating it on one shape with one A/A and
# {glue:text}`au_n_controls:d` positive controls at {glue:text}`au_k1_reps:d` replications
# each costs about {glue:text}`au_calib_min:.1f` min of GPU time. The reports'
# whole matrix in our run {glue:text}`au_run_l:s` used {glue:text}`au_lead_units_s:.0f` s
# of timing units.

# %% tags=["remove-cell"]
uc = cal.unit_costs(C.units)
unit_s = float(uc.loc[uc["mode"] == "graph", "median_unit_s"].median())
n_trials_first = int(C.samples["trial"].nunique())
overhead = cal.process_overhead_s(C.units)
cost_k1 = cal.protocol_cost(unit_s, K[-1], arms=2, process_overhead_s=overhead,
                            replications=n_trials_first // K[-1])
g("au_unit_ms", unit_s * 1e3)
g("au_overhead_s", overhead)
g("au_cost_k1_s", cost_k1.comparison_s)
g("au_k1_reps", n_trials_first // K[-1])
g("au_run_cost", C.run_id)
# Every process times the baseline, the A/A twin and each spin control once.
g("au_calib_min", cal.protocol_cost(unit_s, K[-1], arms=2 + len(spins),
                                    process_overhead_s=overhead,
                                    replications=n_trials_first // K[-1]).calibration_s / 60)
g("au_lead_units_s", float(L.units["elapsed_s"].sum()))
costs = pd.DataFrame([vars(cal.protocol_cost(unit_s, k, 2, overhead, n_trials_first // k))
                      for k in [1] + K])

# %% tags=["remove-input"]
tables.show(costs[["k", "unit_s", "process_overhead_s", "comparison_s", "replications",
                   "calibration_s"]],
            f"GPU wall time of one two-arm comparison over k processes, and of "
            f"calibrating it (replications of one control), from run {C.run_id}'s unit "
            f"times and wall time. {label_c}.", name="tbl-audit-cost")

# %% [markdown]
# ## Checking the claims
#
# The subsections below take the reports' claims one by one; the table of all verdicts
# is in the audit chapter ({ref}`audit-claims`). L4 values are the reports' own,
# **as reported** (we had no L4); L4 peaks come from the datasheet figures in
# `workload.HARDWARE`.

# %% tags=["remove-cell"]
REP = reference.load_reported()


def rep(file3, quantity, section, seq_len=None, batch=32, heads=8, backend=None):
    """One value of the reports' table (as reported), found by report, quantity, section."""
    d = REP[REP["source_file"].str.startswith(file3) & (REP["quantity"] == quantity)
            & REP["source_section"].str.startswith(section)]
    if seq_len is not None:
        d = d[(d["seq_len"] == seq_len) & (d["batch"] == batch) & (d["heads"] == heads)]
    if backend is not None:
        d = d[d["backend"] == backend]
    if len(d) != 1:
        raise ValueError(f"expected one reported value for {file3} {quantity} {section} "
                         f"S={seq_len}; found {len(d)}.")
    return float(d["value"].iloc[0])


def src(file3, section):
    name = next(f for f in reference.SEED_FILES if f.startswith(file3))
    return f"{name}, '{section}'"


L4 = workload.HARDWARE["NVIDIA L4"]
A100 = workload.HARDWARE["NVIDIA A100 SXM4 80GB"]
claims = []

# %% [markdown]
# (audit-tf32)=
# ### TF32 and fp16 attention
#
# With TF32 re-enabled the reports' way and left off, alternating fresh processes
# ({glue:text}`au_label_x:s`), the default dispatch ran {glue:text}`au_tf32_same:s` and the
# speedup of "off" over "on" is {glue:text}`au_tf32_speedup:.3f` (95 % CI
# {glue:text}`au_tf32_lo:.3f`–{glue:text}`au_tf32_hi:.3f`, verdict
# *{glue:text}`au_tf32_verdict:s`* at ±{glue:text}`au_margin:.0%` over
# {glue:text}`au_tf32_n:d` processes per setting). TF32 is a mode of fp32 matrix products;
# fp16 inputs never use it.

# %% tags=["remove-cell"]
tf = X["tf32"]
on = [np.asarray(s["times_ms"]) for s in tf["samples"]["on"]]
off = [np.asarray(s["times_ms"]) for s in tf["samples"]["off"]]
cmp_tf = stats.compare(on, off, margin=float(margin), n_resamples=n_resamples)
names_on = sorted(k["name"] for k in tf["kernels"]["on"])
names_off = sorted(k["name"] for k in tf["kernels"]["off"])
same_kernels = names_on == names_off
g("au_tf32_same", "the same kernels with either setting" if same_kernels
  else "different kernels under the two settings")
g("au_tf32_speedup", cmp_tf.ratio_ci.ratio)
g("au_tf32_lo", cmp_tf.ratio_ci.low)
g("au_tf32_hi", cmp_tf.ratio_ci.high)
g("au_tf32_verdict", cmp_tf.verdict.value)
g("au_tf32_n", len(on))
tf_before = rep("000", "median_latency_ms", "Impact Assessment", 512)
tf_after = rep("000", "median_latency_ms", "Step 2", 512)
claims.append(cal.Claim(
    f"Disabling TF32 made fp16 SDPA {rep('000', 'improvement_percent', 'Impact'):.1f}% faster",
    src("000", "Impact Assessment"),
    f"Reports' own numbers: {tf_before:.3f} vs {tf_after:.4f} ms from different sessions, "
    f"N=100 each (as reported). H100: same kernels = {same_kernels}; off/on speedup "
    f"{cmp_tf.ratio_ci.ratio:.3f} [{cmp_tf.ratio_ci.low:.3f}, {cmp_tf.ratio_ci.high:.3f}], "
    f"verdict {cmp_tf.verdict.value}",
    "fails",
    "the evidence does not support it: the 2.3% compares two one-process sessions, and "
    f"one-process comparisons of identical code differ 'significantly' {A_AA['rate']:.0%} "
    "of the time (calibration); TF32 is a mode of fp32 matrix products. We did not show "
    "'no effect' (H100 timing inconclusive at the margin), and the L4 was not re-measured",
    "audit-tf32"))

# %% [markdown]
# (audit-backends)=
# ### Which backend the default dispatch runs, and how the backends compare now
#
# On {glue:text}`au_label_l:s` the default dispatch at the target shape ran
# {glue:text}`au_sdpa_family:s` (kernel {glue:text}`au_sdpa_kernel:s`), not
# FlashAttention-2. Against it, the forced flash backend has speedup
# {glue:text}`au_flash_speedup:.3f` ({glue:text}`au_flash_lo:.3f`–{glue:text}`au_flash_hi:.3f`,
# *{glue:text}`au_flash_verdict:s`*) and the memory-efficient backend
# {glue:text}`au_eff_speedup:.3f` ({glue:text}`au_eff_lo:.3f`–{glue:text}`au_eff_hi:.3f`,
# *{glue:text}`au_eff_verdict:s`*), graph mode, {glue:text}`au_lead_trials:d` processes.

# %% tags=["remove-cell"]
sp = summaries.speedup_table(L.samples, modes=("graph",), margin=float(margin),
                             n_resamples=n_resamples, configs=TARGET.key).set_index("candidate")
kt = summaries.kernel_table(L.kernels).set_index("config")
g("au_sdpa_family", kt.loc[TARGET.key, "family"])
g("au_sdpa_kernel", kt.loc[TARGET.key, "main_kernel"][:60])
g("au_lead_trials", int(sp.loc["sdpa", "n_trials_baseline"]))
for key, cand in (("flash", "sdpa_flash"), ("eff", "sdpa_efficient"), ("cudnn", "sdpa_cudnn")):
    g(f"au_{key}_speedup", sp.loc[cand, "speedup"])
    g(f"au_{key}_lo", sp.loc[cand, "ci_low"])
    g(f"au_{key}_hi", sp.loc[cand, "ci_high"])
    g(f"au_{key}_verdict", sp.loc[cand, "verdict"])
claims.append(cal.Claim(
    "The 'auto' dispatch equals the flash backend; memory-efficient is "
    f"{rep('000', 'slowdown_percent', 'Fixed-Shape', 512, backend='memory_efficient'):.0f}% "
    "slower",
    src("002", "Phase 2: Optimization Loop"),
    f"H100: default dispatch runs {kt.loc[TARGET.key, 'family']}; flash speedup "
    f"{sp.loc['sdpa_flash', 'speedup']:.3f} [{sp.loc['sdpa_flash', 'ci_low']:.3f}, "
    f"{sp.loc['sdpa_flash', 'ci_high']:.3f}], memory-efficient "
    f"{sp.loc['sdpa_efficient', 'speedup']:.3f} [{sp.loc['sdpa_efficient', 'ci_low']:.3f}, "
    f"{sp.loc['sdpa_efficient', 'ci_high']:.3f}]",
    "cannot be tested here",
    "a statement about the L4 with PyTorch 2.2.1; it needs an L4. With our software the "
    "default dispatch is not the flash backend, so 'auto = flash' does not carry over",
    "audit-backends"))

# %% [markdown]
# (audit-self)=
# ### The reports' headline statistics
#
# `stats.reports_protocol` applied to one process's samples of `sdpa` against the same
# array gives speedup {glue:text}`au_self_speedup:.3f`, g = {glue:text}`au_self_g:.3f`,
# p = {glue:text}`au_self_p:.3f`, for any data. Applied to `sdpa` against its A/A twin in
# the same process it gives p < α in {glue:text}`au_a_fp:.0%` of processes.

# %% tags=["remove-cell"]
x0 = summaries.trial_arrays(CS, cfg_c, "sdpa", "per_call")[0]
self_rp = stats.reports_protocol(x0, x0)
g("au_self_speedup", self_rp.speedup)
g("au_self_g", self_rp.hedges_g)
g("au_self_p", self_rp.p_value)
claims.append(cal.Claim(
    "Speedup 1.000x, Hedges' g 0.000, p = 1.0000: the baseline is already optimal",
    src("000", "Step 3: Statistical Comparison & Report"),
    f"The candidate array was the baseline array; on any array the same computation gives "
    f"{self_rp.speedup:.3f}, g {self_rp.hedges_g:.3f}, p {self_rp.p_value:.3f}",
    "fails",
    "comparing data with itself carries no information about any kernel; a 'no speedup' "
    "claim needs an equivalence test with a margin against a real candidate",
    "audit-self"))

# %% [markdown]
# (audit-ci)=
# ### Non-overlapping intervals between configurations
#
# Intervals of different configurations measure different workloads; that they do not
# overlap says the workloads differ, not that a measurement is robust. What a per-process
# interval is worth is measured above: it covers the median over processes in
# {glue:text}`au_cov_pc:.0%` of processes (per call).

# %% tags=["remove-cell"]
claims.append(cal.Claim(
    "Non-overlapping 95% CIs across the ten configurations show statistically robust "
    "measurements",
    src("001", "Confidence Interval Analysis"),
    f"One process's 95% CI of the median covers the all-process median in "
    f"{cov_pc.estimate:.0%} [{cov_pc.low:.0%}, {cov_pc.high:.0%}] of {n_trials_c} processes "
    f"(H100, per call)",
    "fails",
    "non-overlap between different workloads is expected and says nothing about precision; "
    "per-process intervals miss the between-process spread",
    "audit-ci"))

# %% [markdown]
# (audit-flops)=
# ### Throughput against the L4's peak
#
# `workload.flops` counts 4·B·H·S²·D = {glue:text}`au_flops_512:.3e` FLOP at S = 512, the
# reports' count. The reported {glue:text}`au_rep_tflops_512:.1f` TFLOP/s (as reported) is
# {glue:text}`au_pct_fp32:.0%` of the {glue:text}`au_rep_peak30:.0f` TFLOP/s they divided by, which is the L4's
# CUDA-core FP32 rate ({glue:text}`au_l4_fp32:.1f` TFLOP/s), but
# {glue:text}`au_pct_dense:.0%` of its dense fp16 tensor-core peak
# ({glue:text}`au_l4_fp16:.0f` TFLOP/s, half the datasheet's {glue:text}`au_l4_sparse:.0f` with
# sparsity).

# %% tags=["remove-cell"]
fl512 = workload.flops(TARGET)
t512 = fl512 / (rep("001", "median_latency_ms", "Sequence Length Sweep", 512) * 1e-3) / 1e12
t2048 = rep("001", "tflops", "Sequence Length Sweep", 2048)
g("au_flops_512", fl512)
g("au_rep_tflops_512", t512)
g("au_pct_fp32", t512 / L4.fp32_tflops)
g("au_pct_dense", t512 / L4.fp16_tflops_dense)
g("au_pct_dense_2048", t2048 / L4.fp16_tflops_dense)
g("au_l4_fp32", L4.fp32_tflops)
g("au_l4_fp16", L4.fp16_tflops_dense)
g("au_l4_sparse", 2 * L4.fp16_tflops_dense)
g("au_rep_peak30", rep("001", "assumed_peak_tflops", "Throughput vs. Sequence Length"))
claims.append(cal.Claim(
    f"{t512:.1f} TFLOPS is {rep('001', 'pct_of_peak_tflops', 'Throughput', 512):.0f}% of the "
    f"L4 fp16 spec ({rep('001', 'assumed_peak_tflops', 'Throughput'):.0f} TFLOPS); {t2048:.0f} "
    f"TFLOPS is {rep('001', 'pct_of_peak_tflops', 'Sequence Length Sweep', 2048):.0f}%",
    src("001", "Throughput vs. Sequence Length"),
    f"FLOP count 4BHS^2D = {fl512:.3g} agrees; {t512:.1f} and {t2048:.0f} TFLOP/s (as "
    f"reported) are {t512 / L4.fp16_tflops_dense:.0%} and "
    f"{t2048 / L4.fp16_tflops_dense:.0%} of the L4's dense fp16 tensor peak "
    f"({L4.fp16_tflops_dense:.0f})",
    "fails",
    f"30 TFLOPS is the L4's non-tensor rate ({L4.fp32_tflops:.1f}); against the tensor-core "
    "peak attention runs below half of it, as expected",
    "audit-flops"))

# %% [markdown]
# (audit-bandwidth)=
# ### "Bandwidth above the L4's peak"
#
# The reports' GB/s column is {glue:text}`au_implied_bytes:.3e` bytes over the time
# (reported GB/s × reported ms at S = 256, as reported), which is
# `workload.min_bytes` = {glue:text}`au_minbytes_256:.3e` B. At S = 256 those bytes are
# {glue:text}`au_ws_l4_256:.2f` of the L4's {glue:text}`au_l4_l2:.0f` MiB L2 (at S = 512,
# {glue:text}`au_ws_l4_512:.2f`): the inputs can stay in L2 between timed calls. The L4's
# datasheet bandwidth is {glue:text}`au_l4_bw:.0f` GB/s, not {glue:text}`au_rep_bw242:.0f`. On our GPU the same rate
# reaches {glue:text}`au_max_hot_copy:.0%` of the measured copy ceiling at most, hot
# ({ref}`audit-cache`).

# %% tags=["remove-cell"]
c256, c512 = Config(32, 8, 256), TARGET
bw256 = rep("001", "bandwidth_gbs", "Sequence Length Sweep", 256)
ms256 = rep("001", "median_latency_ms", "Sequence Length Sweep", 256)
implied = bw256 * 1e9 * ms256 * 1e-3
l2_l4 = L4.l2_mb * 2**20
g("au_implied_bytes", implied)
g("au_minbytes_256", workload.min_bytes(c256))
g("au_ws_l4_256", workload.min_bytes(c256) / l2_l4)
g("au_ws_l4_512", workload.min_bytes(c512) / l2_l4)
g("au_l4_l2", L4.l2_mb)
g("au_l4_bw", L4.mem_bandwidth_gbs)
g("au_rep_bw242", rep("000", "assumed_peak_bandwidth_gbs", "Multi-Shape"))
claims.append(cal.Claim(
    "321-338 GB/s exceeds the L4's peak bandwidth (242 or 300 GB/s) because of L2 cache "
    "effects",
    src("001", "Memory Bandwidth Utilization") + "; " + src("002", "Key Observations"),
    f"Their bytes are min_bytes ({implied:.3g} B implied at S=256); working set "
    f"{workload.min_bytes(c256) / l2_l4:.2f} of the L4's {L4.l2_mb:.0f} MiB L2; datasheet "
    f"{L4.mem_bandwidth_gbs:.0f} GB/s",
    "cannot be tested here",
    "plausible (the working set fits in L2, so the rate is not DRAM traffic), but the cause "
    "on the L4 needs L4 memory counters; '242 GB/s' is not the L4's peak, and a rate above "
    "DRAM peak is not a bandwidth",
    "audit-bandwidth"))

# %% [markdown]
# (audit-roofline)=
# ### The roofline table
#
# At S = 512 the reports list {glue:text}`au_rep_bytes_512:.3g` bytes and an intensity of
# {glue:text}`au_rep_ai_512:.0f` FLOP/B (as reported). The minimum traffic is
# {glue:text}`au_minbytes_512:.3e` B, so the intensity is at most
# {glue:text}`au_ai_512:.0f` FLOP/B (S/2 for fp16). With the L4's dense tensor peak and
# datasheet bandwidth the ridge point is {glue:text}`au_l4_ridge:.0f` FLOP/B, so by the
# roofline S = 512 sits on the {glue:text}`au_l4_limiter:s` side; the "compute-bound" label
# follows only from the {glue:text}`au_rep_peak30:.0f` TFLOP/s figure (ridge {glue:text}`au_l4_ridge_30:.0f` FLOP/B).

# %% tags=["remove-cell"]
rb = workload.roofline_bound(TARGET, L4.fp16_tflops_dense, L4.mem_bandwidth_gbs)
g("au_rep_bytes_512", rep("001", "bytes", "Roofline Analysis", 512))
g("au_rep_ai_512", rep("001", "arithmetic_intensity", "Roofline Analysis", 512))
g("au_minbytes_512", workload.min_bytes(TARGET))
g("au_ai_512", workload.intensity(TARGET))
g("au_l4_ridge", rb.ridge_intensity)
g("au_l4_limiter", f"{rb.limiter}-bound")
g("au_l4_ridge_30", 30e12 / (L4.mem_bandwidth_gbs * 1e9))
claims.append(cal.Claim(
    "The roofline table's 25.6e6 bytes and intensity 671 FLOP/B at S=512 make attention "
    "compute-bound",
    src("001", "Roofline Analysis"),
    f"min_bytes {workload.min_bytes(TARGET):.3g} B, intensity {workload.intensity(TARGET):.0f} "
    f"FLOP/B; L4 ridge {rb.ridge_intensity:.0f} FLOP/B (121 TFLOP/s, 300 GB/s): "
    f"{rb.limiter}-bound",
    "fails",
    "the byte count is too small by a factor "
    f"{workload.min_bytes(TARGET) / rep('001', 'bytes', 'Roofline Analysis', 512):.2f} and "
    "matches no tensor count; with correct bytes and peaks S=512 lies below the ridge",
    "audit-roofline"))

# %% [markdown]
# (audit-seqlen)=
# ### "Speedup from sequence-length tuning"
#
# S = 128 does {glue:text}`au_work_ratio:.0f` times less work than S = 512. Per FLOP, the
# reports' own L4 figures (as reported) make S = 128 {glue:text}`au_l4_perflop:.1f` times
# *slower* than S = 512; on {glue:text}`au_label_l:s` (graph mode) the factor is
# {glue:text}`au_h100_perflop:.1f`.

# %% tags=["remove-cell"]
c128 = Config(32, 8, 128)
work_ratio = workload.flops(TARGET) / workload.flops(c128)
l4_128 = rep("001", "median_latency_ms", "Sequence Length Sweep", 128)
l4_512 = rep("001", "median_latency_ms", "Sequence Length Sweep", 512)
l4_perflop = (l4_128 / workload.flops(c128)) / (l4_512 / workload.flops(TARGET))
lat_l = L.samples[(L.samples["candidate"] == "sdpa") & (L.samples["mode"] == "graph")]
med_l = lat_l.groupby("config")["ms"].median()
h_perflop = (med_l[s128] / workload.flops(c128)) / (med_l[s512] / workload.flops(TARGET))
g("au_work_ratio", work_ratio)
g("au_l4_perflop", l4_perflop)
g("au_h100_perflop", h_perflop)
claims.append(cal.Claim(
    f"S=128 is {rep('000', 'speedup', 'Multi-Shape', 128):.1f}x "
    f"(elsewhere {rep('004', 'speedup', 'Speedup Analysis'):.1f}x) faster than S=512: a "
    "speedup from sequence-length tuning",
    src("000", "Multi-Shape Analysis - Actionable Insights") + "; "
    + src("004", "Speedup Analysis"),
    f"S=128 is {work_ratio:.0f}x less work; time per FLOP at S=128 is {l4_perflop:.1f}x that "
    f"at S=512 on the L4 (as reported) and {h_perflop:.1f}x on H100",
    "fails",
    "a shorter sequence is a different, smaller problem, not a faster way to solve the same "
    "one; per unit of work short sequences are less efficient",
    "audit-seqlen"))

# %% [markdown]
# (audit-chunking)=
# ### Chunking S = 512 into four chunks of 128
#
# Relative error against float64 attention and graph-mode time at S = 512
# ({glue:text}`au_label_x:s`): cutting only the queries into four chunks, each attending
# to all keys, is exact (error {glue:text}`au_err_q:.1e`, as full attention
# {glue:text}`au_err_full:.1e`) and takes {glue:text}`au_t_q:.2f` times as long as full
# attention ({glue:text}`au_t_q_lo:.2f`–{glue:text}`au_t_q_hi:.2f`). Cutting queries, keys
# and values into four independent blocks computes a different function (error
# {glue:text}`au_err_qkv:.2f`) and still takes {glue:text}`au_t_qkv:.2f` times as long
# ({glue:text}`au_t_qkv_lo:.2f`–{glue:text}`au_t_qkv_hi:.2f`). The reports'
# {glue:text}`au_rep_chunk_pct:.0f` % was arithmetic (four times the S = 128 time), not a
# measurement.

# %% tags=["remove-cell"]
ch = X["chunking"]["variants"]
arr = {n: [np.asarray(s["times_ms"]) for s in v["samples"]] for n, v in ch.items()}
for n in ("q_chunks", "qkv_chunks"):
    r = stats.ratio_ci(arr["full"], arr[n], n_resamples=n_resamples)
    key = "q" if n == "q_chunks" else "qkv"
    g(f"au_t_{key}", 1 / r.ratio)
    g(f"au_t_{key}_lo", 1 / r.high)
    g(f"au_t_{key}_hi", 1 / r.low)
    g(f"au_err_{key}", ch[n]["rel_error"])
g("au_err_full", ch["full"]["rel_error"])
g("au_rep_chunk_pct", rep("004", "improvement_percent", "After Optimization"))
rq = stats.ratio_ci(arr["full"], arr["q_chunks"], n_resamples=n_resamples)
claims.append(cal.Claim(
    "Chunking S=512 into four chunks of 128 gives the same attention "
    f"{rep('004', 'improvement_percent', 'After Optimization'):.0f}% faster",
    src("004", "After Optimization (S=128 chunking)"),
    f"H100: query chunks exact (rel. error {ch['q_chunks']['rel_error']:.1e}) and "
    f"{1 / rq.ratio:.2f}x the time of full attention; q/k/v blocks rel. error "
    f"{ch['qkv_chunks']['rel_error']:.2f} (a different function)",
    "fails",
    "the chunking the reports' code does (q, k and v cut together) is not attention over "
    "the sequence; the exact chunking is slower; the 37% was never measured",
    "audit-chunking"))

# %% [markdown]
# (audit-a100)=
# ### The L4 against an A100
#
# Both shapes hold B·H = {glue:text}`au_bh:d` heads of S = 512, D = 64, so "per unit of
# work" is just the ratio of the two times: {glue:text}`au_l4_a100:.2f` (as reported; the
# A100's {glue:text}`au_a100_ms:.2f` ms is attributed to a paper and was not measured by the reports). The
# "expected" {glue:text}`au_rep_expected:.1f` divides the A100's tensor-core peak by the L4's non-tensor rate; with
# dense tensor-core peaks on both sides the expected ratio is
# {glue:text}`au_peak_ratio:.2f`, and the implied fractions of peak are
# {glue:text}`au_a100_frac:.0%` (A100) and {glue:text}`au_l4_frac:.0%` (L4).

# %% tags=["remove-cell"]
a100_ms = rep("001", "median_latency_ms", "PyTorch SDPA (FlashAttention-2)", 512, 16, 16)
l4_ms = rep("001", "median_latency_ms", "PyTorch SDPA (FlashAttention-2)", 512, 32, 8)
g("au_bh", 16 * 16)
g("au_a100_ms", a100_ms)
g("au_rep_expected", rep("001", "expected_slowdown", "PyTorch SDPA"))
g("au_l4_a100", l4_ms / a100_ms)
g("au_peak_ratio", A100.fp16_tflops_dense / L4.fp16_tflops_dense)
fl_a = workload.flops(Config(16, 16, 512))
g("au_a100_frac", fl_a / (a100_ms * 1e-3) / 1e12 / A100.fp16_tflops_dense)
g("au_l4_frac", workload.flops(TARGET) / (l4_ms * 1e-3) / 1e12 / L4.fp16_tflops_dense)
claims.append(cal.Claim(
    "The L4 is only 2.13x slower than an A100 per unit of work, 4.88x better than the "
    "10.4x its peak predicts",
    src("001", "Comparison to Literature"),
    f"Same work on both shapes; {l4_ms / a100_ms:.2f}x is the time ratio (as reported). Dense "
    f"fp16 peaks give {A100.fp16_tflops_dense / L4.fp16_tflops_dense:.2f}x, not 10.4x",
    "fails",
    f"the {rep('001', 'expected_slowdown', 'PyTorch SDPA'):.1f}x mixes the A100's tensor-core "
    f"peak with the L4's CUDA-core rate; the {a100_ms:.2f} ms "
    "A100 figure is unsourced in the reports and neither GPU was measured here",
    "audit-a100"))

# %% [markdown]
# (audit-warmup)=
# ### Variance at S = 128 and warm-up
#
# Per-call samples at S = 128 with no warm-up, {glue:text}`au_wu_n:d` per process in
# {glue:text}`au_wu_procs:d` fresh processes ({glue:text}`au_label_x:s`): the first {glue:text}`au_rep_warmup:d`
# calls have a coefficient of variation of {glue:text}`au_cv_first:.0%` (median over
# processes); the next {glue:text}`au_rep_n:d`, what the reports timed after their
# warm-up, still {glue:text}`au_cv_after:.0%`; the last {glue:text}`au_late_n:d`,
# {glue:text}`au_cv_late:.0%`. The process
# medians themselves differ by a factor {glue:text}`au_wu_spread:.2f`. In graph replay the
# same shape's spread between processes is {glue:text}`au_graph_spread_128:.1%`
# ({glue:text}`au_run_l:s`).

# %% tags=["remove-cell"]
wu = [np.asarray(s["times_ms"]) for s in X["warmup"]["samples"]]


def cv(x):
    return float(np.std(x) / np.mean(x))


WU = int(rep("000", "warmup_iterations", "Step 2", 512))   # the reports' warm-up calls
NR = int(rep("000", "n_samples", "Step 2", 512))           # the reports' timed samples
LATE = int(X["warmup"]["n_samples"]) // 2                  # the second half of a process
g("au_rep_warmup", WU)
g("au_rep_n", NR)
g("au_late_n", LATE)
g("au_wu_n", int(X["warmup"]["n_samples"]))
g("au_wu_procs", len(wu))
g("au_cv_first", float(np.median([cv(w[:WU]) for w in wu])))
g("au_cv_after", float(np.median([cv(w[WU:WU + NR]) for w in wu])))
g("au_cv_late", float(np.median([cv(w[-LATE:]) for w in wu])))
pmeds = [float(np.median(w[WU:])) for w in wu]
g("au_wu_spread", max(pmeds) / min(pmeds))
lt = summaries.latency_table(L.samples[L.samples["config"] == s128], modes=("graph",),
                             ci_modes=("graph",), n_resamples=200).set_index("candidate")
g("au_graph_spread_128", lt.loc["sdpa", "trial_spread"])

fig = plots.warmup_traces(wu, WU, label_x, c128.key)
nbs.glue_figure("au_fig_warmup", fig)
claims.append(cal.Claim(
    f"The high variance at S=128 (CV {rep('001', 'cv_percent', 'Variance Control', 128):.1f}%) "
    "is warm-up noise",
    src("003", "Variance Control"),
    f"H100 per call, no warm-up: CV {np.median([cv(w[:WU]) for w in wu]):.0%} in calls 1-{WU}, "
    f"{np.median([cv(w[WU:WU + NR]) for w in wu]):.0%} in calls {WU + 1}-{WU + NR}; process medians differ "
    f"{max(pmeds) / min(pmeds):.2f}x; host share of per-call time at S=128 "
    f"{f.loc[s128, 'host_share']:.0%}",
    "fails",
    "the spread persists after warm-up and between processes; at S=128 a per-call figure is "
    "mostly host launch time, so its noise is host noise (the L4 run itself is not "
    "available to re-check)",
    "audit-warmup"))

# %% [markdown]
# ```{glue:figure} au_fig_warmup
# :name: fig-audit-warmup
#
# Every per-call sample of three fresh processes timing SDPA at S = 128 with no warm-up
# (the reports' per-call protocol); dashed: the end of the reports' warm-up. Measured on
# {glue:text}`au_label_x:s` (`data/checks/audit_extras_h100.json`).
# ```
#
# (audit-mw)=
# ### Mann-Whitney U within one process
#
# See {ref}`audit-calibration`: on identical code the reports' test is significant in
# {glue:text}`au_a_fp:.0%` of processes.

# %% tags=["remove-cell"]
claims.append(cal.Claim(
    "Mann-Whitney U on N=100 samples per arm gives valid p-values (p < 0.05 = significant)",
    src("000", "Statistical Rigor Achieved") + "; " + src("001", "Significance Testing"),
    f"A/A in one process, {int(A_AA['n'])} processes: p < {alpha:g} in {A_AA['rate']:.0%} "
    f"[{A_AA['ci_low']:.0%}, {A_AA['ci_high']:.0%}]",
    "fails",
    f"the false-positive rate is far above the nominal {alpha:.0%}: samples within one "
    "process are not independent draws of the kernel's time",
    "audit-calibration"))

# %% [markdown]
# (audit-triton)=
# ### Custom kernels against SDPA
#
# Our Triton kernel against the fastest library backend per shape, graph mode, run
# {glue:text}`au_run_t:s` ({glue:text}`au_label_t:s`): faster at
# {glue:text}`au_tr_n_faster:d` of {glue:text}`au_tr_n:d` shapes, best speedup
# {glue:text}`au_tr_best:.3f` ({glue:text}`au_tr_best_lo:.3f`–{glue:text}`au_tr_best_hi:.3f`,
# {glue:text}`au_tr_best_cfg:s`); at the target {glue:text}`au_tr_target:.3f`
# ({glue:text}`au_tr_target_lo:.3f`–{glue:text}`au_tr_target_hi:.3f`).

# %% tags=["remove-cell"]
kv = summaries.kernel_vs_library(T.samples, n_resamples=n_resamples).set_index("config")
best_cfg = kv["speedup"].idxmax()
g("au_tr_n", len(kv))
g("au_tr_n_faster", int((kv["verdict"] == "faster").sum()))
g("au_tr_best", kv.loc[best_cfg, "speedup"])
g("au_tr_best_lo", kv.loc[best_cfg, "ci_low"])
g("au_tr_best_hi", kv.loc[best_cfg, "ci_high"])
g("au_tr_best_cfg", best_cfg)
g("au_tr_target", kv.loc[TARGET.key, "speedup"])
g("au_tr_target_lo", kv.loc[TARGET.key, "ci_low"])
g("au_tr_target_hi", kv.loc[TARGET.key, "ci_high"])
reached = kv[kv["ci_low"] >= 1.10]  # the claim's lower end, reached with 95 % confidence
g("au_tr_n_reached", len(reached))
claims.append(cal.Claim(
    "Custom kernels can reach 1.1-1.5x over SDPA on same-generation hardware",
    src("001", "Custom Kernel Targets from Literature"),
    f"H100, our Triton kernel vs the fastest library backend: faster at "
    f"{int((kv['verdict'] == 'faster').sum())} of {len(kv)} shapes, best "
    f"{kv.loc[best_cfg, 'speedup']:.3f} [{kv.loc[best_cfg, 'ci_low']:.3f}, "
    f"{kv.loc[best_cfg, 'ci_high']:.3f}] ({best_cfg}); at the target "
    f"{kv.loc[TARGET.key, 'speedup']:.3f}",
    "holds" if len(reached) else "fails",
    (f"our kernel, measured under the same protocol, reached 1.1x with 95 % confidence at "
     f"{len(reached)} of {len(kv)} shapes ({', '.join(reached.index)})" if len(reached) else
     f"our kernel, measured under the same protocol, reached 1.1x with 95 % confidence at "
     f"none of {len(kv)} shapes, and 1.5x nowhere")
    + "; the claim concerns Ada (L4), which we could not measure, so this answers it for "
      "H100 and our kernel only",
    "audit-triton"))

glue("au_claims_md", Markdown(cal.claims_markdown(claims)), display=False)
# Each cell of the table on its own, for the audit chapter (cross-document glue pastes
# text roles only); the chapter's rows follow this order of evidence labels.
EVIDENCE_ORDER = ("audit-tf32", "audit-backends", "audit-self", "audit-ci", "audit-flops",
                  "audit-bandwidth", "audit-roofline", "audit-seqlen", "audit-chunking",
                  "audit-a100", "audit-warmup", "audit-calibration", "audit-triton")
if tuple(c.evidence for c in claims) != EVIDENCE_ORDER:
    raise ValueError("the claims' order changed; update EVIDENCE_ORDER and book/audit.md.")
for i, c in enumerate(claims, 1):
    for field in ("claim", "source", "measured", "verdict", "why"):
        g(f"au_c{i}_{field}", getattr(c, field))
g("au_n_claims", len(claims))
for v in cal.CLAIM_VERDICTS:
    g(f"au_n_{v.replace(' ', '_')}", sum(c.verdict == v for c in claims))

# %% [markdown]
# ## Summary
#
# Of {glue:text}`au_n_claims:d` claims checked, {glue:text}`au_n_fails:d` fail,
# {glue:text}`au_n_holds:d` hold and {glue:text}`au_n_cannot_be_tested_here:d` cannot be
# tested here (see the claims table above).
