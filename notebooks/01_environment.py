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
# # 2.1 The environment lock and its check
#
# Every process locks the environment before it times anything, and the check catches the
# reports' TF32 ordering bug when it is replayed. Each run's software is in
# {doc}`10_reproducibility`.

# %% tags=["parameters", "hide-input"]
runs_dir = "data/runs"    # recorded runs, relative to the repository root
run = "h200-reports-p2-all"  # documented default lead run; empty picks the largest GPU run
measure = False           # True measures a new run on this machine first (see 03_matrix)
                          # with measure True also device, shapes, candidates, trials,
                          # samples and run_id, as declared in 03_matrix
n_resamples = 1000        # bootstrap resamples (unused here; shared parameter set)

# %% tags=["remove-cell"]
import pathlib, sys  # this repository's package first, whichever copy is installed
sys.path.insert(0, str(next(p for p in pathlib.Path("_").resolve().parents if (p / "attn_analysis").is_dir())))
from attn_analysis.cli import notebook_support as nbs

root, params, runs, catalog, lead, R = nbs.prelude(globals())

import pandas as pd
import torch

from attn_analysis.measure import env
from attn_analysis import configs
from attn_analysis.present import tables
from attn_analysis.analyse import provenance

from attn_analysis.analyse import inventory
for key, value in inventory.counts(root / runs_dir).items():
    nbs.glue_text(f"env_{key}", int(value))

# %% tags=["remove-cell"]
fingerprints = provenance.fingerprint_table(runs.values())
all_locked = bool(fingerprints["locked"].fillna(False).astype(bool).all())
tf32_off = bool((fingerprints["tf32_matmul"] == False).all())  # noqa: E712
nbs.glue_text("env_n_trials", len(fingerprints))
nbs.glue_text("env_all_locked", "every" if all_locked else "not every")
nbs.glue_text("env_tf32_off", "off" if tf32_off else "NOT off")
from attn_analysis.measure import candidates as cands
lock_state = (fingerprints.assign(locked=fingerprints["locked"].fillna(False).astype(bool))
              .groupby("run", as_index=False)
              .agg(trials=("trial", "size"), locked=("locked", "sum"),
                   tf32=("tf32_matmul", lambda v: ", ".join(sorted({str(x) for x in v}))),
                   precision=("fp32_precision",
                              lambda v: ", ".join(sorted({str(x) for x in v}))),
                   deterministic=("deterministic",
                                  lambda v: ", ".join(sorted({str(x) for x in v})))))
plan = (runs[lead].info or {}).get("plan", {})
timing = plan.get("timing", {})
nbs.glue_text("env_lead_trials", plan.get("trials", float("nan")))
nbs.glue_text("env_lead_placements", plan.get("placements", 1))
nbs.glue_text("env_lead_samples", timing.get("n_samples", float("nan")))
nbs.glue_text("env_warmup_ms", timing.get("warmup_ms", float("nan")))
nbs.glue_text("env_rel_threshold_fp16", cands.REL_ERROR_THRESHOLD["float16"])
corr = runs[lead].correctness
nbs.glue_text("env_corr_total", len(corr))
nbs.glue_text("env_corr_passed", int(corr["passed"].sum()))
nbs.glue_text("env_corr_max_rel", corr.loc[corr["passed"], "rel_error"].max())

# %% [markdown]
# Of {glue:text}`env_n_trials:d` trial processes, {glue:text}`env_all_locked:s` one passed
# `assert_locked()`. TF32 for matrix products was {glue:text}`env_tf32_off:s` in all of
# them. Deterministic algorithms stay off: on Hopper they rule out cuDNN attention, the
# kernel a user gets by default.
#
# The reports switched TF32 off through the legacy flag, then called
# `torch.set_float32_matmul_precision("high")`. That switches it back on: both calls write
# one setting, and the last wins. Below, the lock is applied, the reports' two lines run,
# and `assert_locked()` is asked.

# %%
from attn_analysis.measure.env import EnvironmentNotLocked

with env.preserved_state():
    env.lock(seed=0, deterministic=False)
    locked_before = env.is_locked(deterministic=False)
    torch.backends.cuda.matmul.allow_tf32 = False    # the reports' first line
    torch.set_float32_matmul_precision("high")       # their second line: TF32 is back
    tf32_after = torch.backends.cuda.matmul.allow_tf32
    try:
        env.assert_locked(deterministic=False)
        caught = ""
    except EnvironmentNotLocked as exc:
        caught = str(exc)
print("locked before the two lines:", locked_before)
print("allow_tf32 after them:      ", tf32_after)
print("assert_locked() raised:     ", caught or "nothing")

# %% tags=["remove-cell"]
if not caught or not locked_before:
    raise RuntimeError("the TF32 ordering bug was not caught: the lock check is broken")
nbs.glue_text("env_bug_caught", "raised EnvironmentNotLocked" if caught else "did not raise")
nbs.glue_text("env_bug_tf32_after", str(bool(tf32_after)))
nbs.glue_text("env_torch", torch.__version__)

# %% [markdown]
# With PyTorch {glue:text}`env_torch:s` (the build that executes this book, not the runs'),
# `allow_tf32` reads
# {glue:text}`env_bug_tf32_after:s` after the two lines, and `assert_locked()`
# {glue:text}`env_bug_caught:s`.

# %% tags=["remove-cell"]
# For the methods and threats pages: when the confirmatory plans entered git, and how many
# processes the exploratory runs have (analyse.inventory, the one source of both).
run_table = inventory.run_inventory(root / runs_dir)
confirm = run_table[run_table["role"] == "confirmatory"]
fixed_first = confirm[confirm["plan_committed_utc"].notna()
                      & (pd.to_datetime(confirm["plan_committed_utc"], utc=True)
                         < pd.to_datetime(confirm["first_entry_utc"], utc=True))]
late = confirm[~confirm["run"].isin(fixed_first["run"])]
nbs.glue_text("env_n_confirm_plan_first", len(fixed_first))
nbs.glue_text("env_n_confirm", len(confirm))
nbs.glue_text("env_confirm_plan_first_runs", ", ".join(fixed_first["run"]) or "none")
nbs.glue_text("env_confirm_plan_late_runs", ", ".join(late["run"]) or "none")
from attn_analysis.chapters.phrases import processes_by_run
nbs.glue_text("env_confirm_processes", processes_by_run(
    zip(confirm["run"], confirm["processes"])) if len(confirm) else "none")
explore = run_table[run_table["role"] == "exploratory"]
for end in ("min", "max"):  # NaN where no run is exploratory (a new run of one's own)
    nbs.glue_text(f"env_explore_{end}_processes", explore["processes"].agg(end))

# %% tags=["remove-cell"]
# The newer peers' packages: the version under which each passed the float64 gate in the
# H200 peers check (data/checks/peers2_check_h200.json; sdpa_fa4 fails under the newer FA4).
from attn_analysis.chapters import peer_rates
from attn_analysis.record import checks
gate = peer_rates.gate_frame(checks.read(root / "data/checks/peers2_check_h200.json",
                                         "peers_check"))
gate = gate[~gate["gate"].str.startswith("0 of")]
for cand in ("fa3", "flex_flash", "sdpa_fa4", "fa4_bshd"):
    nbs.glue_text(f"env_pkg_{cand}", gate.loc[gate["candidate"] == cand, "package"].iloc[0])

# %% tags=["remove-cell"]
# Which timer answers which question (issue 46): the cross-check of each GPU model whose
# main processes timed SDPA at the target (data/checks/timers_*.json). The answer at the
# target per timer, the host's share of an eager call, and the SM clock after each timer.
from attn_analysis.chapters import timers, timer_answer
from attn_analysis.analyse import timer_agreement
checks = timers.recorded(root / "data/checks")
timer_docs = timers.by_model(checks)
answers = {}
for model, doc in timer_docs.items():
    try:
        answers[model] = timer_answer.answer_values(doc)
    except ValueError:
        continue  # SDPA not timed at the target in the main processes: coverage says why
if not answers:
    raise ValueError("no timer cross-check timed SDPA at the target in its main processes.")
tm_model = "H200" if "H200" in answers else sorted(answers)[0]
tm_doc = timer_docs[tm_model]
# our Gluon kernel: the variant the main check timed, the one the confirmatory runs tuned to
# (3.5's), and the further checks of that variant on the same GPU model
from attn_analysis.chapters import timer_protocol
gap_runs = {"gluon": timer_protocol.protocol_runs(runs, "gluon")}
variant = timer_protocol.run_variant(gap_runs["gluon"])
main_variant = timer_answer.kernel_values(tm_doc, "gluon")["variant"] \
    if "gluon" in timer_answer.custom_candidates(tm_doc) else ""
v_checks = {k: timer_answer.kernel_values(d, "gluon") for k, d in timer_answer.variant_checks(
    checks, tm_doc, "gluon", variant).items()} if variant and variant != main_variant else {}
nbs.glue_values("env_ta_", timer_answer.best_named(answers[tm_model], tm_doc))
nbs.glue_text("env_tm_variant", main_variant or "not recorded")
nbs.glue_text("env_tm_variant_sentence", timer_answer.variant_sentence(main_variant, variant,
                                                                       v_checks))
nbs.glue_values("env_tv_", timer_answer.variant_clauses(list(v_checks.values())))
# why those checks' kernel time favours our kernel: SDPA profiled after sustained replay
from attn_analysis.chapters import kernel_after_replay as kar
v_docs = [checks[k] for k in v_checks]
nbs.glue_text("env_tm_kernel_gap", kar.kernel_gap_sentence(
    kar.split_by_last_timer(v_docs, "gluon"), kar.runs_kernel(gap_runs["gluon"], "gluon"))
    if v_docs else "No further check of our Gluon kernel's variant is recorded.")
nbs.glue_text("env_tm_model", tm_model)
nbs.glue_text("env_tm_file", next(f"data/checks/{k}.json" for k in sorted(checks)
                                  if timers.gpu_model(checks[k]) == tm_model))
nbs.glue_text("env_tm_clock_sentence", timer_answer.clock_sentence(tm_doc))
# the abstract's eager answer per GPU model, at the book's margin, with our Gluon kernel's
from attn_analysis.analyse.stats import DEFAULT_MARGIN
nbs.glue_text("env_tm_eager_clause", timer_answer.eager_clause(
    answers, timers.MODELS, DEFAULT_MARGIN, ours={tm_model: list(v_checks.values())}))
# the models whose cross-check gives no answer at the target, and why (methods says it)
nbs.glue_text("env_tm_missing_sentence", " ".join(
    timer_answer.not_answered_sentence(m, timer_docs.get(m))
    for m in sorted(set(timers.MODELS) - set(answers)))
    or "Every GPU model has a timer cross-check at the target.")
nbs.glue_text("env_tm_direction_sentence", timer_answer.direction_sentence(answers[tm_model]))
# each further cross-check at the target on the same model (e.g. one kernel beside SDPA)
# beside the protocol's confirmatory runs of the kernels it timed
further = [(k, d) for k, d in sorted(checks.items()) if d is not tm_doc and timers.gpu_model(d)
           == tm_model and configs.TARGET.key in d["plan"]["shapes"]]
for c in {c for _, d in further for c in timer_answer.custom_candidates(d)} - set(gap_runs):
    gap_runs[c] = timer_protocol.protocol_runs(runs, c)
gaps = [(k, d, c) for k, d in further for c in timer_answer.custom_candidates(d) if gap_runs[c]]
nbs.glue_text("env_tm_further_sentence", " ".join(timer_protocol.gap_sentence(
    timer_protocol.gap_values(d, gap_runs[c], c), check=f"{k}.json",
    about=all(c != seen for _, _, seen in gaps[:i])) for i, (k, d, c) in enumerate(gaps)))
long_docs = [d for d in checks.values()
             if timers.gpu_model(d) == tm_model and configs.TARGET.key not in d["plan"]["shapes"]]
nbs.glue_text("env_tm_long_agreement", " ".join(
    timer_answer.agreement_sentence(d) for d in long_docs)
    or f"No cross-check of the long shapes is recorded for the {tm_model}.")
fp = tm_doc["processes"][0].get("fingerprint") or {}
nbs.glue_figure("env_timers_figure", timers.speedup_figure(
    tm_doc, f"{timer_agreement.gpu_label(tm_doc)}, torch {fp.get('torch_version')}"))

# %% [markdown]
# ## Speedup under each timer, and the SM clock after graph and sustained replay
#
# Speedups over SDPA are geometric means over processes. The shift is the speedup under
# sustained replay over that under graph replay, minus one, with its 95 % interval.

# %% tags=["remove-input"]
tables.show(timer_answer.clock_table(tm_doc),
            f"Speedup over SDPA at the target under each timer, the shift of sustained over "
            f"graph replay, and the SM clock after graph / sustained replay, "
            f"{timer_agreement.gpu_label(tm_doc)} "
            f"({answers[tm_model]['n_processes']} processes; gluon is variant "
            f"{main_variant or 'not recorded'})", name="tbl-timer-clocks")
