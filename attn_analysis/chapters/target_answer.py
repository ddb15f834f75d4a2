"""Claim A, the answer at the reports' shape, from every confirmatory run that measured it (pure).

Claim A says that no kernel beats SDPA at B32 H8 S512 D64 fp16. Any confirmatory run that
timed a custom kernel there can refute it on its GPU, whichever campaign it belongs to:
the state-of-the-art campaign's confirmatory matrix, a powered campaign over the reports'
matrix, or the pre-registered run of our Gluon kernel. Runs are found by their role
(:func:`inventory.run_role`), never by name, so a GPU owner's new confirmatory run joins the
answer unchanged. Each run is judged at its own family: the m its plan pre-registered
(:func:`power.registered_family`), else every comparison of the run, as ``compare`` does.

The answer is given per GPU model. A model fails the claim where any of its runs shows a
custom kernel (:func:`sota.is_custom`: not SDPA's own kernel called another way) faster
than SDPA beyond the margin; the sentence then says whether the
model's other runs included that kernel, since runs of different campaigns time different
candidates. Where no custom kernel wins, the sentence says what the evidence is: SDPA
faster beyond the margin (a positive result) or only no kernel faster, and which winning
kernel, or which tuned variant of it (:func:`gluon_kernel.variant_choices`), never ran on
that model.
"""

from __future__ import annotations

import pandas as pd

from . import gluon_kernel, sota_sentences
from . import state_of_the_art as sota
from .phrases import join
from ..analyse import inventory, power
from ..analyse.provenance import machine_model
from ..analyse.stats import DEFAULT_MARGIN, Verdict
from .. import configs
from ..configs import TARGET

__all__ = ["target_tables", "by_machine", "best_custom_by_model", "claim_target",
           "conclusion_sentences",
           "summaries_by_model", "section_values", "family_scope", "confirmatory_rows",
           "figure_runs_phrase", "replications"]

_FASTER = Verdict.FASTER.value
# what target_tables reads of a precomputed table, and what its check compares
_PRECOMPUTED_COLUMNS = ("config", "run", "machine", "margin", "n_comparisons", "origin",
                        "same_kernel_as_baseline")


def _precomputed_iv(precomputed, runs: dict, margin: float) -> dict:
    """``precomputed`` checked against what a table can show: a dict of run ids of ``runs``
    to comparison tables of that run, at ``margin`` and at the family its plan registered
    (:func:`power.registered_family`, where it registers one); {} for None."""
    if precomputed is None:
        return {}
    if not isinstance(precomputed, dict):
        raise ValueError(f"`precomputed` must map run ids to sota.comparison_table tables or "
                         f"be None; got {type(precomputed).__name__}.")
    for run_id, table in precomputed.items():
        if run_id not in runs:
            raise ValueError(f"`precomputed` must hold tables of runs in `runs`; got {run_id!r}.")
        if (not isinstance(table, pd.DataFrame) or table.empty
                or not set(_PRECOMPUTED_COLUMNS) <= set(table.columns)):
            raise ValueError(f"`precomputed` must map {run_id!r} to a non-empty "
                             f"sota.comparison_table with columns {_PRECOMPUTED_COLUMNS}.")
        family = power.registered_family(runs[run_id].info or {})
        if set(table["run"]) != {run_id} or set(table["margin"]) != {margin} or (
                family is not None and set(table["n_comparisons"]) != {family}):
            got = {c: sorted(set(table[c])) for c in ("run", "margin", "n_comparisons")}
            raise ValueError(f"`precomputed` must hold run {run_id!r}'s own table at margin "
                             f"{margin} and its registered family m ({family}); got {got}.")
    return precomputed


def target_tables(runs: dict, *, margin: float = DEFAULT_MARGIN, n_resamples: int = 20_000,
                  seed: int = 42, precomputed: dict | None = None) -> dict:
    """Run id -> :func:`sota.comparison_table` of every confirmatory run in ``runs`` (run id
    -> loaded run) that timed a custom kernel at the target, each at its own family; the
    tables keep every configuration (their verdicts depend on the family, not the rows
    shown). Sorted by run id.

    ``precomputed`` (run id -> that run's comparison table, default None) supplies tables a
    caller already has, so they are not computed twice; it is checked for its run, margin
    and registered family, while ``n_resamples`` and ``seed``, which a table does not
    record, are the caller's to match. Runs it lacks are computed as without it."""
    if not isinstance(runs, dict):
        raise ValueError(f"`runs` must map run ids to loaded runs; got {type(runs).__name__}.")
    known = _precomputed_iv(precomputed, runs, margin)
    out = {}
    for run_id, run in sorted(runs.items()):
        info = run.info or {}
        if inventory.run_role(run_id, info.get("plan") or {}, info) != "confirmatory":
            continue
        if TARGET.key not in set(run.samples["config"]):
            continue
        table = known[run_id] if run_id in known else sota.comparison_table(
            run, margin=margin, n_resamples=n_resamples, seed=seed,
            n_comparisons=power.registered_family(info))
        at = table[table["config"] == TARGET.key]
        if sota.is_custom(at).any():
            out[run_id] = table
    return _with_variants(out, runs)


def _with_variants(tables: dict, runs: dict) -> dict:
    """``tables`` (run id -> table), each a copy with the tuned variant of its rows
    (``variant``: what the candidate's tuning chose in that run at that configuration, ''
    where it records none) and ``variant_models``: the GPU models of every run of ``runs``
    whose tuning chose that variant at any configuration, so the answer can say where a
    winning variant never ran."""
    chosen, models = {}, {}  # (run, config) -> variants; variant -> GPU models
    for run_id, run in runs.items():
        units = run.units
        if gluon_kernel.CANDIDATE not in set(units["candidate"]) or "info" not in units:
            continue
        model = machine_model(sota.machine_label(run))
        for config, variant in zip(*(gluon_kernel.variant_choices(run)[c]
                                     for c in ("config", "variant"))):
            chosen.setdefault((run_id, config), set()).add(str(variant))
            models.setdefault(str(variant), set()).add(model)
    out = {}
    for run_id, t in tables.items():
        variant = [", ".join(sorted(chosen.get((run_id, c), ())))
                   if cand == gluon_kernel.CANDIDATE else ""
                   for c, cand in zip(t["config"], t["candidate"])]
        where = [", ".join(sorted(set().union(*(models.get(x, set()) for x in v.split(", ")))))
                 if v else "" for v in variant]
        out[run_id] = t.assign(variant=variant, variant_models=where)
    return out


def by_machine(tables: dict) -> dict:
    """Machine label -> table, from :func:`target_tables`; a label that two runs share (two
    campaigns on one GPU) raises, since the answer names GPUs."""
    out = {}
    for run_id, t in tables.items():
        machine = str(t["machine"].iloc[0])
        if machine in out:
            raise ValueError(f"`tables` must hold one run per GPU; {machine} ran "
                             f"{out[machine]['run'].iloc[0]} and {run_id}.")
        out[machine] = t
    return out


def best_custom_by_model(tables: dict) -> dict:
    """Machine -> :func:`sota.fastest` for one machine per GPU model, for the abstract's
    "the fastest custom kernel is ...": the kernel with the largest call-level speedup at
    the target on any of the model's machines, quoted from the machine where that same
    kernel with the same verdict has the smallest speedup (replications of one plan: the
    conservative one), from
    ``tables`` (machine -> table)."""
    found = {}
    for machine, t in tables.items():
        b = sota.fastest(t)
        if "custom_speedup" in b:
            found.setdefault(machine_model(machine), []).append((machine, b))
    out = {}
    for model, rows in sorted(found.items()):
        top = max(rows, key=lambda r: r[1]["custom_speedup"])[1]
        same = [r for r in rows if (r[1]["custom_candidate"], r[1]["custom_verdict"])
                == (top["custom_candidate"], top["custom_verdict"])]
        machine, best = min(same, key=lambda r: (r[1]["custom_speedup"], r[0]))
        out[machine] = best
    return out


_LEVELS = ("call", "kernel")  # the levels a confirmatory family decides


def _untried(model: str, timed: set, winners: dict) -> list[str]:
    """Sentences for a model where the claim holds: each winning kernel of another model
    (``winners``: candidate -> (label, variant, models its variant ran on, winning
    models)) that no run of this model timed (``timed``), or whose winning variant no run
    of it timed."""
    out = []
    for cand, (label, variant, ran_on, won_on) in sorted(winners.items()):
        name, won = label.split(" (")[0], join(sorted(won_on))  # no nested parentheses
        if variant and model not in ran_on:
            out.append(f"No {model} run timed {variant}, {name}'s variant that leads per "
                       f"call on the {won}.")
        elif cand not in timed:
            out.append(f"No confirmatory {model} run timed {name}, which leads per call on "
                       f"the {won}.")
    return out


def _held_answer(model: str, held: list, winners: dict, levels_said: bool = True) -> str:
    """Where no custom kernel wins on ``model``: SDPA faster than every custom kernel
    timed, beyond the margin at both levels (a positive result; the levels named with
    ``levels_said``), or only no kernel faster; then which winners of other models never
    ran on it (:func:`_untried`)."""
    custom = pd.concat([r[4] for r in held])
    custom = custom[sota.is_custom(custom) & custom["level"].isin(_LEVELS)]
    levels = [lv for lv in _LEVELS if (custom["level"] == lv).any()]
    gpus = join(sorted(r[0] for r in held))
    if len(custom) and (custom["verdict"] == Verdict.SLOWER.value).all():
        said = (f"On the {gpus}, SDPA beats every custom kernel timed beyond the margin"
                + (f", per {' and per '.join(levels)}." if levels_said else "."))
    else:
        said = f"On the {gpus}, no custom kernel timed beats SDPA beyond the margin."
    timed = set().union(*(r[3] for r in held))
    return " ".join([said] + _untried(model, timed, winners))


def _model_answer(model: str, rows: list, winners: dict,
                  detail: bool = True) -> tuple[str, str]:
    """(clause, detail) for one GPU model; ``rows``: (machine, run id, fastest, candidates,
    target rows); ``winners`` as :func:`_untried` takes them. The clause is '' where the
    claim holds; the detail then says what the evidence is (:func:`_held_answer`)."""
    beaten = [r for r in rows if r[2].get("custom_verdict") == _FASTER]
    held = [r for r in rows if r not in beaten]
    if not beaten:
        return "", _held_answer(model, held, winners, levels_said=detail)
    by_label = {}  # per winning kernel, each run where it won (a run names its GPUs)
    for m, run, b, _, _ in sorted(beaten, key=lambda r: r[1]):
        by_label.setdefault(b["custom_label"], []).append(
            f"{b['custom_speedup']:.2f}× ({b['custom_ci_low']:.2f}–{b['custom_ci_high']:.2f}) "
            f"in run {run}")
    detail = " ".join(f"On the {model}, {label} is faster per call. It runs at {join(where)}."
                      for label, where in by_label.items())
    if held:
        won = {r[2]["custom_candidate"] for r in beaten}
        absent = sorted(r[1] for r in held if not won & r[3])
        present = sorted(r[1] for r in held if won & r[3])
        if absent:
            detail += (f" Run{'s' if len(absent) > 1 else ''} {join(absent)} did not time "
                       f"{'it' if len(won) == 1 else 'them'}.")
        if present:
            detail += (f" Run{'s' if len(present) > 1 else ''} {join(present)} found no "
                       f"faster kernel.")
    return f"fails per call on the {model}", detail


def _winners(rows: dict) -> dict:
    """Candidate -> (label, variant, GPU models its variant ran on, models it won on) of
    every custom kernel faster per call on some model, from ``rows`` (model -> rows of
    :func:`claim_target`)."""
    out = {}
    for model, rs in rows.items():
        for r in rs:
            if r[2].get("custom_verdict") != _FASTER:
                continue
            cand = r[2]["custom_candidate"]
            call = r[4][(r[4]["candidate"] == cand) & (r[4]["level"] == "call")]
            variant = str(call["variant"].iloc[0]) if "variant" in call and len(call) else ""
            ran_on = (set(str(call["variant_models"].iloc[0]).split(", "))
                      if variant else set())
            label, v0, on0, won = out.get(cand, (r[2]["custom_label"], variant, set(), set()))
            out[cand] = (label, ", ".join(sorted(set(filter(None, (v0, variant))))),
                         on0 | ran_on, won | {model})
    return out


def claim_target(tables: dict, detail: bool = True) -> str:
    """The answer to claim A per GPU model, from ``tables`` (machine -> table of
    :func:`target_tables`): 'At the reports' own shape the claim fails per call on the H200.'
    then, per model where no custom kernel wins, what the evidence is and which winner
    was never timed there ('On the H100-b, SDPA beats every custom kernel timed beyond the
    margin. No H100 run timed fa3_n128_s3, our Gluon kernel's variant that leads per call
    on the H200.'; the levels only with ``detail``); with ``detail``, first, for a model where it
    fails, which kernel won on which GPU and run, and what the model's other runs timed."""
    if not tables:
        return "No confirmatory run timed a custom kernel at the reports' shape."
    rows = {}
    for machine, t in tables.items():
        at = t[t["config"] == TARGET.key]
        rows.setdefault(machine_model(machine), []).append(
            (machine, str(t["run"].iloc[0]), sota.fastest(t), set(at["candidate"]), at))
    winners = _winners(rows)
    answers = [_model_answer(model, r, winners, detail) for model, r in sorted(rows.items())]
    fails = [a for a, _ in answers if a]
    head = ("At the reports' own shape the claim " + join(fails) + "." if fails else
            "At the reports' own shape no custom kernel beats SDPA beyond the margin.")
    failed = [d for a, d in answers if a and d and detail]  # who won where, then the rest
    return " ".join([head] + failed + [d for a, d in answers if not a and d])


def conclusion_sentences(tables: dict) -> str:
    """The answer at the reports' shape per level and GPU model, for the conclusions, from
    ``tables`` (machine -> table of :func:`target_tables`): per call and per kernel, which
    custom kernels beat SDPA beyond the margin on which models (the reports' conclusion
    fails there) and where none does (it holds); then, per model where it holds at every
    level, what the evidence is and which winner was never timed there
    (:func:`_held_answer`)."""
    if not tables:
        return "No confirmatory run timed a custom kernel at the reports' shape."
    rows, won = {}, {}  # model -> claim_target's rows; (level, model) -> winning labels
    for machine, t in tables.items():
        at = t[t["config"] == TARGET.key]
        model = machine_model(machine)
        rows.setdefault(model, []).append(
            (machine, str(t["run"].iloc[0]), sota.fastest(t), set(at["candidate"]), at))
        fast = at[sota.is_custom(at) & (at["verdict"] == _FASTER)]
        for level, label in zip(fast["level"], fast["label"]):
            won.setdefault((level, model), set()).add(label)
    models = sorted(rows)
    on = lambda ms: join(f"the {m}" for m in ms)  # noqa: E731  'the H100 and the H200'
    out = []
    for level in _LEVELS:
        beaten = [m for m in models if (level, m) in won]
        held = [m for m in models if m not in beaten]
        if not beaten:
            out.append(f"Per {level}, no custom kernel beats SDPA beyond the margin on "
                       f"{on(held)}: the reports' conclusion holds.")
            continue
        labels = sorted(set().union(*(won[(level, m)] for m in beaten)))
        out.append(f"Per {level}, {join(labels)} beat{'s' if len(labels) == 1 else ''} SDPA "
                   f"beyond the margin on {on(beaten)}: the reports' conclusion fails there"
                   + (f"; it holds on {on(held)} for the kernels timed there." if held
                      else "."))
    winners = _winners(rows)
    for model in models:
        if not any((level, model) in won for level in _LEVELS):
            out.append(_held_answer(model, rows[model], winners))
    return " ".join(out)


def summaries_by_model(tables: dict, summary) -> dict:
    """GPU model (lower case, the glue prefix) -> the ``summary(machine, table)`` sentences
    of its machines in ``tables`` (machine -> table), in label order, joined."""
    out = {}
    for machine, t in sorted(tables.items()):
        out.setdefault(sota.machine_slug(machine), []).append(summary(machine, t))
    return {slug: " ".join(texts) for slug, texts in out.items()}



def section_values(tables: dict) -> dict:
    """Glue name -> text for the answer at the target, from ``tables`` (machine -> table):
    per GPU model the summary of its GPU with the fastest custom kernel
    (``sa_{model}_target_summary``, :func:`sota_sentences.target_summary`; every GPU of a
    model without a custom kernel), that kernel per model for the abstract
    (``sa_target_custom_phrase``), where a Gluon lead per call comes from on that GPU
    (``gl_lead_sentence``, empty where there is none), the runs (``sa_claim_runs``) and
    the answer per level for the conclusions (``sa_conclusion_sentences``,
    :func:`conclusion_sentences`)."""
    best = best_custom_by_model(tables)  # one GPU per model
    models = {sota.machine_slug(m) for m in best}
    shown = {m: t for m, t in tables.items() if m in best or sota.machine_slug(m) not in models}
    out = {f"sa_{slug}_target_summary": text for slug, text in
           summaries_by_model(shown, sota_sentences.target_summary).items()}
    out["sa_target_custom_phrase"] = sota_sentences.custom_target_phrase(best)
    out["gl_lead_sentence"] = " ".join(filter(None, (
        gluon_kernel.lead_sentence(tables[m], m) for m in best)))
    out["sa_claim_runs"] = ", ".join(str(t["run"].iloc[0]) for t in tables.values())
    out["sa_conclusion_sentences"] = conclusion_sentences(tables)
    return out


def family_scope(info) -> tuple:
    """(levels, candidates) of the family that the configs plan of a run's ``info`` (its
    run.json) registered (the plan's ``levels`` and ``family_candidates``); (None, None)
    where it registers no family: then, as ``compare`` does, every comparison of the run is
    a member."""
    plan = (info or {}).get("plan") or {}
    found = inventory.campaign_of(plan) if plan else None
    entry = getattr(configs, found[0])[found[1]] if found else {}
    if entry.get("family_size") is None:
        return None, None
    levels, cands = entry.get("levels"), entry.get("family_candidates")
    return (tuple(levels) if levels else None), (tuple(cands) if cands else None)


_ROW_COLUMNS = ["machine", "run", "m", "candidate", "label", "level", "speedup", "ci_low",
                "ci_high", "verdict", "in_family"]


def confirmatory_rows(tables: dict, runs: dict) -> pd.DataFrame:
    """One row per confirmatory run, custom kernel and level at the target, from
    :func:`target_tables`' ``tables`` (run id -> table) and the loaded ``runs`` (for each
    plan's family, :func:`family_scope`): machine, run, m (its family's size), candidate,
    label, level, speedup with its family-wise interval, verdict, and ``in_family``
    (whether the comparison is a member of the run's family or only judged at its m).
    Sorted by machine, run, candidate; the figure of the decisive runs draws these."""
    if not isinstance(tables, dict) or not isinstance(runs, dict):
        raise ValueError("`tables` and `runs` must map run ids to tables and loaded runs.")
    out = []
    for run_id, t in sorted(tables.items()):
        if run_id not in runs:
            raise ValueError(f"`runs` must hold every run of `tables`; {run_id!r} is missing.")
        levels, cands = family_scope(runs[run_id].info)
        at = t[t["config"] == TARGET.key]
        for _, r in at[sota.is_custom(at)].iterrows():
            out.append(dict(
                machine=str(r["machine"]), run=run_id, m=int(r["n_comparisons"]),
                candidate=r["candidate"], label=r["label"], level=r["level"],
                speedup=float(r["speedup"]), ci_low=float(r["ci_low"]),
                ci_high=float(r["ci_high"]), verdict=r["verdict"],
                in_family=bool((levels is None or r["level"] in levels)
                               and (cands is None or r["candidate"] in cands))))
    rows = pd.DataFrame(out, columns=_ROW_COLUMNS)
    return rows.sort_values(["machine", "run", "candidate"], kind="stable",
                            ignore_index=True)


def figure_runs_phrase(rows: pd.DataFrame) -> str:
    """For the caption: each run of :func:`confirmatory_rows` with its GPU and family size,
    in the figure's order, 'H100-b: h100-sota-confirm, m = 144; H200-ae:
    h200-gluon-v2-target, m = 2' (the figure's hollow markers show what is outside a
    family)."""
    if not isinstance(rows, pd.DataFrame) or rows.empty or not set(_ROW_COLUMNS) <= set(rows):
        raise ValueError("`rows` must be a non-empty confirmatory_rows() frame.")
    m = rows.groupby(["machine", "run"])["m"].first()
    return "; ".join(f"{machine}: {run}, m = {int(m[(machine, run)])}"
                     for machine, run in _run_order(rows))


def _run_order(rows: pd.DataFrame) -> list:
    """(machine, run) pairs of ``rows`` in the figure's order: GPU model, label, run."""
    pairs = rows[["machine", "run"]].drop_duplicates().itertuples(index=False)
    return sorted(pairs, key=lambda r: (machine_model(r.machine), len(r.machine),
                                        r.machine, r.run))


def replications(runs: dict) -> set:
    """The run ids of ``runs`` (run id -> loaded run) that repeat an earlier run's plan
    (the same configs campaign, :func:`inventory.campaign_of`) on a GPU of the same model,
    in run-id order; the first run of each plan and model is not one. A section can then
    state one run's values and let a figure show the replications."""
    if not isinstance(runs, dict):
        raise ValueError(f"`runs` must map run ids to loaded runs; got {type(runs).__name__}.")
    seen, out = set(), set()
    for run_id, run in sorted(runs.items()):
        plan = (run.info or {}).get("plan") or {}
        campaign = inventory.campaign_of(plan) if plan else None
        key = (campaign, machine_model(sota.machine_label(run)))
        if campaign is not None and key in seen:
            out.add(run_id)
        seen.add(key)
    return out
