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
# (audit-claims)=
# # 4 The reports' claims audited
#
# Of {glue:text}`au_n_claims:d` claims of the original reports, {glue:text}`au_n_fails:d`
# fail, {glue:text}`au_n_holds:d` hold and {glue:text}`au_n_cannot_be_tested_here:d`
# cannot be tested here ({numref}`tbl-audit-claims`). These verdicts judge the reports'
# argument, not their conclusion; {ref}`sota-target` decides that per GPU model.
#
# A claim *fails* when our measurement or its own arithmetic (marked "arithmetic": no L4
# needed) refutes it, and *holds* when our evidence supports it. It *cannot be tested here*
# when deciding it needs a measurement we lack: on an L4, or the cited A100 figure.
#
# ```{list-table} The reports' claims, our verdicts and the section that decides each.
# :header-rows: 1
# :widths: 6 64 14 16
# :name: tbl-audit-claims
#
# * - #
#   - claim
#   - verdict
#   - evidence
# * - 1
#   - {glue:text}`au_c1_claim:s`
#   - {glue:text}`au_c1_verdict:s`
#   - {ref}`audit-tf32`
# * - 2
#   - {glue:text}`au_c2_claim:s`
#   - {glue:text}`au_c2_verdict:s`
#   - {ref}`audit-backends`
# * - 3
#   - {glue:text}`au_c3_claim:s`
#   - {glue:text}`au_c3_verdict:s`
#   - {ref}`audit-self`
# * - 4
#   - {glue:text}`au_c4_claim:s`
#   - {glue:text}`au_c4_verdict:s`
#   - {ref}`audit-ci`
# * - 5
#   - {glue:text}`au_c5_claim:s`
#   - {glue:text}`au_c5_verdict:s`
#   - {ref}`audit-flops`
# * - 6
#   - {glue:text}`au_c6_claim:s`
#   - {glue:text}`au_c6_verdict:s`
#   - {ref}`audit-bandwidth`
# * - 7
#   - {glue:text}`au_c7_claim:s`
#   - {glue:text}`au_c7_verdict:s`
#   - {ref}`audit-roofline`
# * - 8
#   - {glue:text}`au_c8_claim:s`
#   - {glue:text}`au_c8_verdict:s`
#   - {ref}`audit-seqlen`
# * - 9
#   - {glue:text}`au_c9_claim:s`
#   - {glue:text}`au_c9_verdict:s`
#   - {ref}`audit-chunking`
# * - 10
#   - {glue:text}`au_c10_claim:s`
#   - {glue:text}`au_c10_verdict:s`
#   - {ref}`audit-a100`
# * - 11
#   - {glue:text}`au_c11_claim:s`
#   - {glue:text}`au_c11_verdict:s`
#   - {ref}`audit-warmup`
# * - 12
#   - {glue:text}`au_c12_claim:s`
#   - {glue:text}`au_c12_verdict:s`
#   - {ref}`audit-calibration`
# * - 13
#   - {glue:text}`au_c13_claim:s`
#   - {glue:text}`au_c13_verdict:s`
#   - {ref}`audit-triton`
# * - 14
#   - {glue:text}`au_c14_claim:s`
#   - {glue:text}`au_c14_verdict:s`
#   - {ref}`audit-peers`
# ```

# %% tags=["parameters", "hide-input"]
runs_dir = "data/runs"                           # recorded runs, relative to the repository root
calibration_run = "h100-calibration-v1,h100-calibration-v2"  # runs with sdpa, sdpa_twin and
                                                 # sdpa_spin<N>, comma-separated, pooled
lead_run = "h200-reports-p2-all"                 # the reports matrix in three timing modes
target_run = "h200-target-p2-m1"                 # 3.1's lead run: the forced backends at
                                                 # the target, at least 3 processes
triton_run = "h200-triton-p2"                    # our Triton kernel against the SDPA backends
sota_runs = "h100-sota-target,h200-sota-target,h100-sota-reports,h200-sota-reports,h100-sota-long,h200-sota-long,h100-sota-confirm,h200-sota-confirm"  # noqa: E501
                                                 # state-of-the-art runs (peers), those of
                                                 # 06_state_of_the_art; empty takes every one
extras = "data/checks/audit_extras_h100.json"    # scripts/audit_extras.py output
anatomy = "data/checks/graph_anatomy_h100.json"  # scripts/graph_anatomy.py output
ks = "3,4,5"                                     # processes per replication of protocol (b)
margin = 0.02                                    # equivalence margin on the speedup ratio
alpha = 0.05                                     # level of the Mann-Whitney test of the reports
n_resamples = 1000                               # bootstrap resamples per comparison

# %% tags=["remove-cell"]
import pathlib, sys  # this repository's package first, whichever copy is installed
sys.path.insert(0, str(next(p for p in pathlib.Path("_").resolve().parents if (p / "attn_analysis").is_dir())))
from attn_analysis.chapters import audit
from attn_analysis.cli import notebook_support as nbs

root, params = nbs.parameters(
    globals(), ks=audit.ks_iv, margin=nbs.margin_iv, alpha=nbs.small_fraction_iv,
    n_resamples=nbs.resamples_iv, extras=audit.extras_iv,
    anatomy=nbs.check_file_iv("graph_anatomy"), calibration_run=audit.calibration_runs_iv,
    lead_run=nbs.run_iv, target_run=nbs.run_iv, triton_run=nbs.run_iv, sota_runs=nbs.names_iv)
CR, L, T = params["calibration_run"], params["lead_run"], params["triton_run"]
X, A, K = params["extras"], params["anatomy"], params["ks"]

import matplotlib
matplotlib.use("Agg")
from IPython.display import Markdown
from myst_nb import glue

from attn_analysis.analyse import protocols
from attn_analysis.chapters import claim_table, claims, kernel_claims
from attn_analysis import configs
from attn_analysis.present import audit_plots, tables

claim_rows = []  # the claims table, in the order of the subsections below


def found(finding):
    """Glue what a check found (its values, prefixed au_), keep its claim for the table and
    return the data its figure or table needs."""
    nbs.glue_values("au_", finding.values)
    if finding.claim is not None:
        claim_rows.append(finding.claim)
    return finding.data


H = audit.header_values(CR, L, T, X, margin=margin, alpha=alpha, extras_file=extras)
nbs.glue_values("au_", H)

# %% [markdown]
# ## Instrument checks
#
# (audit-calibration)=
# ### The reports' test on identical code
#
# The reports apply a Mann-Whitney U test (α = {glue:text}`au_alpha:.2f`) to both arms
# timed in one process. We repeated it, beside our comparison over k processes, on runs
# {glue:text}`au_run_c:s` ({glue:text}`au_label_c:s`, {glue:text}`au_n_trials:d` processes):
# an A/A pair, and spin controls {glue:text}`au_eff_spin0:.1%` to
# {glue:text}`au_eff_spin6000:.1%` slower than `sdpa`.

# %% tags=["remove-cell"]
cb = audit.calibrate(CR, K, margin=margin, alpha=alpha, n_resamples=n_resamples)
A_AA = cb.a_fp(CR.aa)
cal_values = audit.calibration_values(cb, CR, K, margin=margin)
nbs.glue_values("au_", cal_values)
from attn_analysis.chapters.phrases import join
nbs.glue_text("au_ks", join(K))
nbs.glue_text("au_b_fps", join(f"{cal_values[f'b{k}_fp']:.0%}" for k in K))
rows = [(protocols.PROTOCOL_A, 1, "(a) Mann-Whitney, 1 process")] + \
       [(protocols.PROTOCOL_B, k, f"(b) compare, k={k}") for k in K]
nbs.glue_figure("au_fig_rates", audit_plots.calibration_rates(
    cb.head, CR.aa, CR.spins, rows, float(alpha), CR.label, CR.config, CR.n_trials))

# %% [markdown]
# ```{glue:figure} au_fig_rates
# :name: fig-audit-rates
#
# False-positive rate of the A/A pair (left; dashed: α = {glue:text}`au_alpha:.2f`) and
# power against the spin controls (right), 95 % Clopper-Pearson intervals, for the
# reports' protocol and ours over k processes ({glue:text}`au_label_c:s`, runs
# {glue:text}`au_run_c:s`).
# ```
#
# On these runs the reports' test called the identical pair different in
# {glue:text}`au_a_fp_events:d` of {glue:text}`au_a_fp_n:d` processes
# ({glue:text}`au_a_fp:.0%`, 95 % CI {glue:text}`au_a_fp_lo:.0%`–{glue:text}`au_a_fp_hi:.0%`),
# where it promises {glue:text}`au_alpha:.0%`: samples taken back to back in one process are
# not independent draws. With randomized placements it still errs often
# ({ref}`calibration-v2`). Our comparison claimed a difference in {glue:text}`au_b_fps:s` of
# replications with k = {glue:text}`au_ks:s` processes.

# %% tags=["remove-cell"]
for proto, name, what in (
        (protocols.PROTOCOL_A, "a", "the reports' protocol (Mann-Whitney U in one process, per call)"),
        (protocols.PROTOCOL_B, "b", "our protocol (stats.compare over k processes per arm, graph "
         "mode)")):
    tables.show(audit.outcome_table(cb.rates, proto),
                f"Rate of each outcome of {what} per control at {CR.config}, with "
                f"95 % Clopper-Pearson intervals (%) in parentheses. Runs "
                f"{', '.join(r.run_id for r in CR.runs)}; {CR.label}.",
                name=f"tbl-audit-outcomes-{name}",
                labels={"candidate": "control", "replications": "replications"},
                formats={"k": ".0f", "replications": ".0f"},
                csv=f"audit_outcome_rates_{name}.csv", full=cb.rates[cb.rates["protocol"] == proto])

# %% [markdown]
# (audit-fidelity)=
# ### What each timer reads
#
# Per-call timing (the reports' way) at S = 128 reads
# {glue:text}`au_fid_s128_pc_over_dev:.1f` times the kernel time: about
# {glue:text}`au_fid_s128_host:.0%` of it is the host, not attention. Graph replay reads
# {glue:text}`au_fid_s128_gr_over_dev:.2f` times the kernel time there, and
# {glue:text}`au_fid_s512_gr_over_dev:.2f` times at S = 512 (run {glue:text}`au_run_l:s`).

# %% tags=["remove-cell"]
fid = found(audit.fidelity(L))

# %% tags=["remove-cell"]
tables.show(fid[["config", "per_call", "graph", "device_ms", "per_call_over_device",
                 "graph_over_device", "host_share"]],
            f"Default SDPA: pooled median per timing mode, the profiler's kernel time per "
            f"call, their ratios, and the host share (1 − kernel / per_call); cold_l2 is in "
            f"the CSV. {H['label_l']}, run {L.run_id}.", name="tbl-audit-fidelity",
            labels={"device_ms": "kernel time (ms)"}, csv="audit_timing_fidelity.csv",
            full=fid)

# %% [markdown]
# (audit-replay)=
# ### Calls per graph replay
#
# A replay's fixed cost reaches each of its k calls as a k-th share
# (`scripts/graph_anatomy.py`, {glue:text}`au_label_rp:s`).

# %% tags=["remove-cell"]
AT = found(audit.replay(A, L, anatomy))
nbs.glue_figure("au_fig_replay", audit_plots.replay_curves(AT, audit.check_label(A)))

# %% [markdown]
# ```{glue:figure} au_fig_replay
# :name: fig-audit-replay
#
# Event time per call against calls per graph, per candidate, at two configurations
# ({glue:text}`au_label_rp:s`).
# ```
#
# At S = 128 one call per replay reads {glue:text}`au_rp_s128_k1_lo:.0%` to
# {glue:text}`au_rp_s128_k1_hi:.0%` above the time at k = {glue:text}`au_rp_kmax:d`; eight
# calls, {glue:text}`au_rp_s128_k8_lo:.1%` to {glue:text}`au_rp_s128_k8_hi:.1%`. So at the
# smallest shapes a candidate with fewer calls per replay can lose up to the margin. The
# timer aims at {glue:text}`au_rp_target_ms:.1f` ms per replay; at S = 128 its cap on calls
# binds: k = {glue:text}`au_rp_auto_k128:s` gives {glue:text}`au_rp_auto128_ms:.2f` ms.

# %% [markdown]
# (audit-cache)=
# ### Hot and cold cache
#
# Graph replay keeps inputs that fit in L2 hot; the cold-L2 mode flushes L2 before each
# call. On {glue:text}`au_label_l:s` (run {glue:text}`au_run_l:s`), at S = 256 the working
# set is {glue:text}`au_ws_s256:.2f` of the L2. The cold call takes {glue:text}`au_coldhot_s256:.2f` times as long as the hot one; at S = 512,
# {glue:text}`au_coldhot_s512:.2f` times. Minimum traffic over time is a rate of useful
# bytes, not a DRAM bandwidth.

# %% tags=["remove-cell"]
cache, copy_gbs = found(audit.cache(L))

# %% tags=["remove-cell"]
tables.show(cache[["config", "hot_ms", "cold_ms", "cold_over_hot", "working_set_over_l2",
                   "hot_gbs", "hot_over_copy"]],
            f"Default SDPA hot (graph) and cold (L2 flushed): medians, working set over L2, "
            f"the hot effective rate (minimum bytes / time) and its fraction of the measured "
            f"copy ceiling ({copy_gbs:.0f} GB/s); cold rates are in the CSV. "
            f"{H['label_l']}, run {L.run_id}.", name="tbl-audit-cache",
            labels={"hot_ms": "hot (ms)", "cold_ms": "cold (ms)"}, csv="audit_cache.csv",
            full=cache)

# %% tags=["remove-cell"]
costs = found(audit.cost(CR, L, K))

# %% tags=["remove-cell"]
tables.show(costs[["k", "unit_s", "process_overhead_s", "comparison_s", "replications",
                   "calibration_s"]],
            f"GPU wall time of one two-arm comparison over k processes, and of "
            f"calibrating it (replications of one control), from run {CR.first.run_id}'s unit "
            f"times and wall time. {CR.label}.", name="tbl-audit-cost")

# %% [markdown]
# ## The claims, one by one

# %% tags=["remove-cell"]
rep = claims.Reported()  # the reports' values, as reported

# %% [markdown]
# (audit-tf32)=
# ### TF32 and fp16 attention
#
# With TF32 re-enabled the reports' way and left off, in alternating processes
# ({glue:text}`au_label_x:s`), the default dispatch ran {glue:text}`au_tf32_same:s`. The
# speedup of "off" over "on" is {glue:text}`au_tf32_speedup:.3f`
# ({glue:text}`au_tf32_lo:.3f`–{glue:text}`au_tf32_hi:.3f`, *{glue:text}`au_tf32_verdict:s`*).
# TF32 is a mode of fp32 matrix products; fp16 inputs never use it.

# %% tags=["remove-cell"]
found(claims.tf32_claim(X, rep, A_AA, margin=margin, n_resamples=n_resamples))

# %% [markdown]
# (audit-backends)=
# ### The default dispatch's backend
#
# The default dispatch ran {glue:text}`au_sdpa_family:s` at the target, not
# FlashAttention-2. {glue:text}`au_backends_sentence:s` Their speedups are in
# {numref}`tbl-fixed-two-levels`.

# %% tags=["remove-cell"]
# 3.1's lead run and family (comparisons.target_family): the same intervals as 3.1's table
from attn_analysis.chapters.fixed_shape import gpu_label
backends = claims.backends_claim(params["target_run"], rep, margin=margin)
found(backends)
nbs.glue_text("au_backends_sentence",
              claims.backends_sentence(backends.values, gpu_label(params["target_run"])))

# %% [markdown]
# (audit-self)=
# ### The reports' headline statistics
#
# One array against itself gives speedup {glue:text}`au_self_speedup:.3f`,
# g = {glue:text}`au_self_g:.3f` and p = {glue:text}`au_self_p:.3f`, for any data.

# %% tags=["remove-cell"]
found(claims.self_claim(CR, rep))

# %% [markdown]
# (audit-ci)=
# ### Non-overlapping intervals
#
# Intervals of different configurations measure different workloads. That they do not
# overlap says the workloads differ. On runs {glue:text}`au_run_c:s` ({glue:text}`au_label_c:s`),
# one process's interval covers the median over processes in only {glue:text}`au_cov_pc:.0%` of them.

# %% tags=["remove-cell"]
found(claims.ci_claim(cb, CR, rep))

# %% [markdown]
# (audit-flops)=
# ### Throughput against the L4's peak
#
# The reported {glue:text}`au_rep_tflops_512:.1f` TFLOP/s (as reported) is
# {glue:text}`au_pct_fp32:.0%` of the {glue:text}`au_rep_peak30:.0f` TFLOP/s they divided by:
# the L4's CUDA-core FP32 rate. It is {glue:text}`au_pct_dense:.0%` of the L4's dense fp16
# tensor-core peak ({glue:text}`au_l4_fp16:.0f` TFLOP/s).

# %% tags=["remove-cell"]
found(claims.flops_claim(rep))

# %% [markdown]
# (audit-bandwidth)=
# ### "Bandwidth above the L4's peak"
#
# The reports' bytes are the minimum traffic. At S = 256 they are
# {glue:text}`au_ws_l4_256:.2f` of the L4's L2, so inputs can stay in L2 between timed calls.
# The L4's datasheet bandwidth is {glue:text}`au_l4_bw:.0f` GB/s, not
# {glue:text}`au_rep_bw242:.0f` ({ref}`audit-cache`).

# %% tags=["remove-cell"]
found(claims.bandwidth_claim(rep))

# %% [markdown]
# (audit-roofline)=
# ### The roofline table
#
# At S = 512 the reports list {glue:text}`au_rep_bytes_512:.3g` bytes (as reported). The
# minimum traffic is {glue:text}`au_minbytes_512:.3e` B, so the intensity is at most
# {glue:text}`au_ai_512:.0f` FLOP/B. With the L4's dense peak the ridge is at
# {glue:text}`au_l4_ridge:.0f` FLOP/B: S = 512 is {glue:text}`au_l4_limiter:s`.

# %% tags=["remove-cell"]
found(claims.roofline_claim(rep))

# %% [markdown]
# (audit-seqlen)=
# ### "Speedup from sequence-length tuning"
#
# S = 128 does {glue:text}`au_work_ratio:.0f` times less work than S = 512. Per FLOP it is
# {glue:text}`au_l4_perflop:.1f` times *slower* on the L4 (as reported) and
# {glue:text}`au_lead_perflop:.1f` times on {glue:text}`au_label_l:s`.

# %% tags=["remove-cell"]
found(claims.seqlen_claim(L, rep))

# %% [markdown]
# (audit-chunking)=
# ### Chunking into four pieces
#
# Cutting only the queries into chunks is exact (error {glue:text}`au_err_q:.1e`) and takes
# {glue:text}`au_t_q:.2f` times as long as full attention ({glue:text}`au_label_x:s`).
# Cutting queries, keys and values together computes another function (error
# {glue:text}`au_err_qkv:.2f`). The reports' {glue:text}`au_rep_chunk_pct:.0f` % was
# arithmetic, not a measurement.

# %% tags=["remove-cell"]
found(claims.chunking_claim(X, rep, n_resamples=n_resamples))

# %% [markdown]
# (audit-a100)=
# ### The L4 against an A100
#
# The time ratio is {glue:text}`au_l4_a100:.2f` (as reported; the A100 figure is cited, not
# measured). The "expected" {glue:text}`au_rep_expected:.1f` divides a tensor-core peak by a
# CUDA-core rate. Dense tensor peaks give {glue:text}`au_peak_ratio:.2f`.

# %% tags=["remove-cell"]
found(claims.a100_claim(rep))

# %% [markdown]
# (audit-warmup)=
# ### Warm-up and variance
#
# Per call at S = 128 without warm-up ({glue:text}`au_label_x:s`), the first
# {glue:text}`au_rep_warmup:d` calls vary by {glue:text}`au_cv_first:.0%` (coefficient of
# variation). The next {glue:text}`au_rep_n:d`, what the reports timed, still vary by
# {glue:text}`au_cv_after:.0%`. Process medians differ by a factor
# {glue:text}`au_wu_spread:.2f`.

# %% tags=["remove-cell"]
wu, n_warmup = found(claims.warmup_claim(X, L, fid, rep))
nbs.glue_figure("au_fig_warmup", audit_plots.warmup_traces(wu, n_warmup, H["label_x"],
                                                     audit.S128.key))

# %% [markdown]
# ```{glue:figure} au_fig_warmup
# :name: fig-audit-warmup
#
# Every per-call sample of {glue:text}`au_wu_procs:d` fresh processes timing SDPA at
# S = 128 with no warm-up ({glue:text}`au_label_x:s`); dashed: the end of the reports'
# warm-up.
# ```

# %% tags=["remove-cell"]
# claim 12, Mann-Whitney within one process: decided in "The reports' test on identical code"
found(claims.mann_whitney_claim(A_AA, rep, alpha=alpha))

# %% tags=["remove-cell"]
from attn_analysis.chapters import state_of_the_art as sota
all_runs = nbs.load_runs(params["runs_dir"])
sota_by_campaign = sota.campaigns_of(all_runs, params["sota_runs"])
sota_tables = {c: [sota.comparison_table(run, margin=margin, n_resamples=n_resamples)
                   for run in rs.values()] for c, rs in sota_by_campaign.items()}
every_sota = [t for ts in sota_tables.values() for t in ts]

# %% [markdown]
# (audit-triton)=
# ### Custom kernels against SDPA
#
# Per call, {glue:text}`au_ck_n_reached:d` of the {glue:text}`au_ck_n:d` custom-kernel
# comparisons in confirmatory runs reach 1.1× (family-wise lower bound; leads in
# {numref}`fig-sota-seq`). They cover {glue:text}`au_ck_kernels:s`. Runs:
# {glue:text}`au_ck_runs:s`. The answer at the reports' shape, per GPU model, is in
# {ref}`sota-target`. The claim concerns the L4.

# %% tags=["remove-cell"]
# every confirmatory run decides, each at its registered family (the state-of-the-art,
# powered and Gluon campaigns alike); the exploratory ones only pointed to the shapes
found(kernel_claims.custom_kernels_claim(kernel_claims.confirmatory_tables(
    all_runs, margin=margin, n_resamples=n_resamples) or every_sota, rep))

# %% [markdown]
# (audit-peers)=
# ### flash-attn and xFormers
#
# Report 004 expected flash-attn at {glue:text}`au_pe_flash_l4:.3f` ms and xFormers at
# {glue:text}`au_pe_xformers_l4:.3f` ms on the L4, without running either (as reported).
# Measured as shipped at the target, FlashAttention-4 is {glue:text}`au_pe_fa4_verdicts:s`
# per call ({ref}`sota-target`). xFormers did not run.

# %% tags=["remove-cell"]
target_tables = {sota.machine_label(run): t for run, t in
                 zip(sota_by_campaign["target"].values(), sota_tables["target"])}
not_run = {r["candidate"]: f"{r['status']}: {r['reason']}"
           for run in sota_by_campaign["target"].values()
           for _, r in sota.untimed(run).iterrows()}
found(kernel_claims.peers_claim(target_tables, not_run, rep))
fa4_by = {}
for machine, t in target_tables.items():
    r = t[(t["candidate"] == "fa4") & (t["level"] == "call") & (t["config"] == configs.TARGET.key)]
    fa4_by.setdefault(r["verdict"].iloc[0] if len(r) else "not measured", []).append(
        machine)
nbs.glue_text("au_pe_fa4_verdicts", sota.verdicts_phrase(fa4_by))
nbs.glue_values("au_", claims.claims_values(claim_rows))

