"""The title question against the state of the art: the chapter's logic (pure).

The runs that measured the peer kernels (:mod:`attn_analysis.measure.peers`) are found by
their plan: a campaign's matrix (``configs.CAMPAIGN_PLANS``) with at least one peer, so a
new run of ``scripts/sota_campaign.sh`` on another GPU joins the chapter unchanged. Each
run is compared with SDPA's default dispatch at the call, kernel and attention level by
:func:`comparisons.speedup_table`, one Bonferroni family per run; every row carries what
the candidate is (from the metadata the run recorded, :mod:`attn_analysis.analyse.catalog`)
and the configuration's fields.

A "custom kernel" is a candidate of origin "ours" or "peer" whose attention kernel is not
the one SDPA's default dispatch ran at that configuration: cuDNN called directly runs
SDPA's own kernel on Hopper, so it shows the cost of SDPA's dispatch, not a faster kernel.
A finding needs a faster verdict in a run of at least :data:`MIN_PROCESSES` processes;
rows of a smaller run are kept and labelled, as corroboration of direction only.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from .. import _validate
from ..analyse import catalog, comparisons, provenance
from ..analyse.provenance import machine_label  # re-exported: the chapters' GPU label
from ..analyse.stats import DEFAULT_MARGIN, Verdict
from ..configs import (BASELINE, CAMPAIGNS, CONFIG_FIELDS, FA3_HIDDEN, FA3_TOKENS, TARGET,
                      Config)

__all__ = ["CUSTOM_ORIGINS", "MIN_PROCESSES", "campaign_runs",
           "campaigns_of", "claim_sentences", "comparison_table", "controls_sentence",
           "custom_faster", "fa3_geometry", "fastest", "is_custom", "kernel_sentence",
           "level_cells", "machine_label", "machine_slug", "matrix_of", "peer_versions",
           "recorded_meta", "select_runs", "target_sentence", "untimed", "where_text",
           "wins_summary", "wins_table"]

CUSTOM_ORIGINS = ("ours", "peer")
MIN_PROCESSES = 2  # a verdict from fewer independent processes is not a finding


def recorded_meta(units: pd.DataFrame) -> dict:
    """Candidate -> the :class:`catalog.Meta` its units recorded (``info["meta"]``); a
    candidate that recorded none (an unsupported one, or a run from before metadata was
    recorded) is absent, and :func:`catalog.meta_for` falls back to the catalog."""
    df = _validate.frame("units", units, ("candidate", "info"))
    out = {}
    for cand, info in zip(df["candidate"], df["info"]):
        if cand in out or not isinstance(info, str) or not info:
            continue
        meta = json.loads(info).get("meta")
        if meta:
            out[cand] = catalog.Meta.from_dict(meta)
    return out


def matrix_of(run) -> str:
    """The named matrix a run's plan measured ("" for explicit shapes or no plan)."""
    return ((run.info or {}).get("plan") or {}).get("matrix") or ""


def campaign_runs(runs: dict, campaign: str) -> dict:
    """The runs of ``campaign`` (a key of :data:`CAMPAIGNS`) that measured a peer, ordered
    by device name, then run id. A run that measured our Gluon kernel belongs to a Gluon
    campaign (``configs.GLUON_PLANS``, its own section), not to this one, whatever its
    matrix."""
    _validate.choice("campaign", campaign, sorted(CAMPAIGNS))
    if not isinstance(runs, dict):
        raise ValueError(f"`runs` must map run ids to loaded runs; got {type(runs).__name__}.")
    found = {}
    for run_id, run in runs.items():
        if matrix_of(run) != CAMPAIGNS[campaign]:
            continue
        meta = recorded_meta(run.units)
        names = set(run.units["candidate"])
        if "gluon" in names:
            continue
        if any(catalog.meta_for(n, meta.get(n)).origin == "peer" for n in names):
            found[run_id] = run
    return dict(sorted(found.items(), key=lambda kv: (kv[1].device, kv[0])))


def select_runs(runs: dict, campaign: str, named=()) -> dict:
    """The runs of ``campaign`` the chapter reads: those ``named`` (each must be in
    ``runs``), or, when none is named, :func:`campaign_runs`."""
    named = tuple(named)
    missing = [r for r in named if r not in runs]
    if missing:
        raise ValueError(f"`{campaign}_runs` must name recorded runs ({sorted(runs)}); "
                         f"got {missing}.")
    return {r: runs[r] for r in named} if named else campaign_runs(runs, campaign)


def campaigns_of(runs: dict, named=()) -> dict:
    """Campaign -> its runs, for every campaign: among the runs ``named`` (each must be a
    recorded run of some campaign that measured a peer), or, when none is named, every such
    run of ``runs``."""
    named = tuple(named)
    missing = [r for r in named if r not in runs]
    if missing:
        raise ValueError(f"`sota_runs` must name recorded runs ({sorted(runs)}); got {missing}.")
    pool = {r: runs[r] for r in named} if named else runs
    out = {c: campaign_runs(pool, c) for c in CAMPAIGNS}
    stray = [r for r in named if not any(r in rs for rs in out.values())]
    if stray:
        raise ValueError(f"`sota_runs` must name runs of a state-of-the-art campaign "
                         f"(matrices {sorted(CAMPAIGNS.values())}, with a peer); got {stray}.")
    return out


def comparison_table(run, *, margin: float = DEFAULT_MARGIN, n_resamples: int = 20_000, seed: int = 42,
                     mode: str = "graph", n_comparisons: int | None = None) -> pd.DataFrame:
    """Every candidate of ``run`` against SDPA's default dispatch, at the call, kernel and
    attention levels (:func:`comparisons.speedup_table`, one family for the run, of
    ``n_comparisons`` where its plan pre-registered one, else of every row), with the
    candidate's ``label``, ``origin`` and ``family``, the run's ``run``, ``device`` and
    ``machine``, and the configuration's fields."""
    table = comparisons.speedup_table(run.samples, run.placements, baseline=BASELINE, mode=mode,
                                      margin=margin, n_resamples=n_resamples, seed=seed,
                                      kernels=run.kernels, n_comparisons=n_comparisons)
    meta = recorded_meta(run.units)
    metas = [catalog.meta_for(c, meta.get(c)) for c in table["candidate"]]
    fields = pd.DataFrame([Config.from_key(k).as_dict() for k in table["config"]],
                          index=table.index, columns=list(CONFIG_FIELDS))
    main = comparisons.kernel_split(run.kernels).set_index(["config", "candidate"])["main_kernel"]
    kernel = [main.get((c, n), "") for c, n in zip(table["config"], table["candidate"])]
    base = [main.get((c, BASELINE), None) for c in table["config"]]
    return pd.concat([table.assign(label=[m.label for m in metas],
                                   origin=[m.origin for m in metas],
                                   family=[m.family for m in metas],
                                   main_kernel=kernel, baseline_kernel=base,
                                   same_kernel_as_baseline=[k == b for k, b in zip(kernel, base)],
                                   run=run.run_id, device=run.device,
                                   machine=machine_label(run)), fields], axis=1)


def is_custom(df: pd.DataFrame) -> pd.Series:
    """Rows of a custom kernel: ours or a peer's, running another kernel than SDPA's."""
    return df["origin"].isin(CUSTOM_ORIGINS) & ~df["same_kernel_as_baseline"].astype(bool)


def untimed(run) -> pd.DataFrame:
    """The candidates of ``run`` that were never timed: candidate, status, reason (one row
    each, the first unit's reason)."""
    units = _validate.frame("units", run.units, ("candidate", "status", "reason"))
    timed = set(units.loc[units["status"] == "ok", "candidate"])
    rest = units[~units["candidate"].isin(timed)]
    return (rest.groupby("candidate", sort=True)[["status", "reason"]].first().reset_index())


def custom_faster(table: pd.DataFrame, level: str = "call",
                  min_processes: int = MIN_PROCESSES) -> pd.DataFrame:
    """The rows where a custom kernel is faster than SDPA beyond the margin at ``level``,
    from runs of at least ``min_processes`` processes."""
    df = _validate.frame("table", table, ("level", "origin", "same_kernel_as_baseline",
                                          "verdict", "n_processes"))
    _validate.choice("level", level, comparisons.LEVELS)
    return df[(df["level"] == level) & is_custom(df) & (df["verdict"] == Verdict.FASTER.value)
              & (df["n_processes"] >= min_processes)].reset_index(drop=True)


def fastest(table: pd.DataFrame, config: str = TARGET.key, level: str = "call") -> dict:
    """Which kernel is fastest at ``config`` and ``level``. ``winner_*``: the largest
    speedup among candidates faster than SDPA beyond the margin, else SDPA's default
    dispatch (speedup 1, verdict "baseline"; ``winner_family``: its kernel's family).
    ``custom_*``: the custom kernel (:func:`is_custom`) with the largest speedup, faster or
    not, with its interval and verdict."""
    df = _validate.frame("table", table, ("config", "level", "candidate", "speedup", "verdict",
                                          "origin", "family", "same_kernel_as_baseline"))
    d = df[(df["config"] == config) & (df["level"] == level)]
    if d.empty:
        raise ValueError(f"`config` {config!r} has no {level}-level row in the table.")
    keys = ("candidate", "label", "family", "speedup", "ci_low", "ci_high", "verdict")
    faster = d[d["verdict"] == Verdict.FASTER.value]
    if len(faster):
        out = {f"winner_{k}": faster.loc[faster["speedup"].idxmax(), k] for k in keys}
    else:
        kernel = d["baseline_kernel"].dropna() if "baseline_kernel" in d else ()
        family = (catalog.kernel_family(str(kernel.iloc[0])) if len(kernel)
                  else catalog.meta_for(BASELINE).family)
        out = {"winner_candidate": BASELINE, "winner_label": catalog.meta_for(BASELINE).label,
               "winner_family": family, "winner_speedup": 1.0, "winner_ci_low": np.nan,
               "winner_ci_high": np.nan, "winner_verdict": "baseline"}
    custom = d[is_custom(d)]
    if len(custom):
        out.update({f"custom_{k}": custom.loc[custom["speedup"].idxmax(), k] for k in keys})
    return out


def where_text(rows: pd.DataFrame) -> str:
    """'<label> at S = a, b; ...': the sequence lengths of each candidate's rows."""
    df = _validate.frame("rows", rows, ("label", "seq_len"))
    return "; ".join(f"{label} at S = {', '.join(str(s) for s in sorted(set(g['seq_len'])))}"
                     for label, g in df.groupby("label", sort=True))


def peer_versions(runs: dict) -> pd.DataFrame:
    """One row per machine and peer of ``runs`` (run id -> loaded run): the package and
    version its build recorded and what it chose (FlashInfer's backend, the cuDNN
    frontend's engine, or how the inputs were handed over); a peer that never ran, with
    the status and reason its units recorded."""
    rows = []
    for run_id, run in runs.items():
        meta = recorded_meta(run.units)
        ok = run.units[run.units["status"] == "ok"].drop_duplicates("candidate")
        for cand, info in zip(ok["candidate"], ok["info"]):
            if catalog.meta_for(cand, meta.get(cand)).origin != "peer":
                continue
            d = json.loads(info) if isinstance(info, str) and info else {}
            rows.append({"machine": machine_label(run), "candidate": cand,
                         "package": f"{d.get('package', '')} {d.get('version', '')}".strip(),
                         "what ran": d.get("backend") or d.get("engine") or d.get("inputs", ""),
                         "run": run_id})
        for _, u in untimed(run).iterrows():
            rows.append({"machine": machine_label(run), "candidate": u["candidate"],
                         "package": "not run", "what ran": f"{u['status']}: {u['reason']}",
                         "run": run_id})
    cols = ["machine", "candidate", "package", "what ran", "run"]
    out = pd.DataFrame(rows, columns=cols)
    return (out.drop_duplicates(["machine", "candidate", "package", "what ran"])
            .sort_values(["candidate", "machine"]).reset_index(drop=True))


def level_cells(table: pd.DataFrame) -> pd.DataFrame:
    """One row per candidate of a one-configuration :func:`comparison_table`: label,
    origin and, per level, 'speedup (low–high) verdict' ('–' where the level is missing),
    fastest per call first."""
    df = _validate.frame("table", table, ("label", "origin", "level", "speedup", "ci_low",
                                          "ci_high", "verdict"))
    index = df[["label", "origin"]].drop_duplicates()
    out = index.copy()
    for level in comparisons.LEVELS:
        d = df[df["level"] == level].set_index(["label", "origin"])
        out[level] = [f"{d.at[k, 'speedup']:.3f} ({d.at[k, 'ci_low']:.3f}–"
                      f"{d.at[k, 'ci_high']:.3f}) {d.at[k, 'verdict']}" if k in d.index else "–"
                      for k in zip(index["label"], index["origin"])]
    call = df[df["level"] == "call"].set_index("label")["speedup"]
    out = out.assign(_order=out["label"].map(call)).sort_values("_order", ascending=False)
    return out.drop(columns="_order").rename(columns={"label": "candidate"}).reset_index(drop=True)


def wins_table(tables: list, level: str = "call") -> pd.DataFrame:
    """Every row where a custom kernel is faster than SDPA beyond the margin at ``level``,
    runs of one process included (``finding``: "yes", or "one process"), with the
    attention-kernel speedup of the same candidate and configuration beside it
    (``attention``) and its verdict (``attention_verdict``)."""
    if not tables:
        raise ValueError("`tables` must hold at least one comparison table.")
    df = pd.concat(tables, ignore_index=True)
    fast = custom_faster(df, level, min_processes=1)
    att = df[df["level"] == "attention"].set_index(["run", "config", "candidate"])
    cells = []
    for key in zip(fast["run"], fast["config"], fast["candidate"]):
        a = att.loc[key] if key in att.index else None
        cells.append(f"{a['speedup']:.3f} ({a['ci_low']:.3f}–{a['ci_high']:.3f})"
                     if a is not None else "–")
    att_verdict = [att.loc[key]["verdict"] if key in att.index else "not measured"
                   for key in zip(fast["run"], fast["config"], fast["candidate"])]
    out = fast.assign(interval=[f"{s:.3f} ({lo:.3f}–{hi:.3f})" for s, lo, hi in
                                zip(fast["speedup"], fast["ci_low"], fast["ci_high"])],
                      attention=cells, attention_verdict=att_verdict,
                      finding=np.where(fast["n_processes"] >= MIN_PROCESSES, "yes",
                                       "one process"))
    return out.sort_values(["machine", "seq_len", "config", "speedup"]).reset_index(drop=True)


def wins_summary(tables: list, level: str = "call", min_processes: int = MIN_PROCESSES,
                 margin: float = DEFAULT_MARGIN) -> pd.DataFrame:
    """Per machine: how many custom-kernel comparisons at ``level`` are faster than SDPA
    beyond the margin (:func:`custom_faster`), of how many; where (``where``: each winning
    candidate's label with the sequence lengths of its leads); the leads the interval
    cannot decide (``n_undecided``, ``undecided``: a point estimate beyond ``margin`` on the
    faster side, verdict inconclusive or undecided, in runs of enough processes); the
    faster rows of runs of fewer than ``min_processes`` processes, for direction only
    (``direction``); and the largest decided lead with its interval, candidate and
    configuration (NaN where there is none)."""
    if not tables:
        raise ValueError("`tables` must hold at least one comparison table.")
    df = pd.concat(tables, ignore_index=True)
    rows = []
    for machine, g in df.groupby("machine", sort=True):
        custom = g[(g["level"] == level) & is_custom(g)]
        wins = custom_faster(g, level, min_processes)
        top = wins.loc[wins["speedup"].idxmax()] if len(wins) else None
        where = where_text(wins)
        one = g[g["n_processes"] < min_processes]
        direction = where_text(custom_faster(one, level, min_processes=1)) if len(one) else ""
        open_ = custom[(custom["n_processes"] >= min_processes)
                       & custom["verdict"].isin([Verdict.INCONCLUSIVE.value,
                                                 Verdict.UNDECIDED.value])
                       & (custom["speedup"] > 1 + margin)]
        rows.append({"machine": machine, "device": g["device"].iloc[0],
                     "min_processes": int(g["n_processes"].min()),
                     "n_custom": len(custom), "n_faster": len(wins), "where": where,
                     "direction": direction, "n_undecided": len(open_),
                     "undecided": where_text(open_),
                     "best_speedup": float(top["speedup"]) if top is not None else np.nan,
                     "best_low": float(top["ci_low"]) if top is not None else np.nan,
                     "best_high": float(top["ci_high"]) if top is not None else np.nan,
                     "best_candidate": top["label"] if top is not None else "",
                     "best_config": top["config"] if top is not None else ""})
    return pd.DataFrame(rows)


def fa3_geometry(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``table`` at FlashAttention-3's evaluation geometry (``batch * seq_len``
    of 16k tokens, ``heads * head_dim`` of 2048), so that one line per candidate against
    sequence length compares like with like."""
    df = _validate.frame("table", table, ("batch", "heads", "seq_len", "head_dim"))
    keep = ((df["batch"] * df["seq_len"] == FA3_TOKENS)
            & (df["heads"] * df["head_dim"] == FA3_HIDDEN))
    return df[keep].reset_index(drop=True)


def kernel_sentence(wins: pd.DataFrame, machine: str = "") -> str:
    """Whether the call-level leads of ``wins`` (:func:`wins_table` rows, findings only)
    hold at the attention-kernel level: the kernels whose own attention kernel is faster
    than SDPA's beyond the margin where they lead per call, and those whose lead is per call
    only (their attention kernel is not faster there, so the lead comes from what SDPA's
    call runs besides its attention kernel). ``machine``, where given, opens the sentence."""
    df = _validate.frame("wins", wins, ("label", "seq_len", "attention_verdict", "finding"))
    df = df[df["finding"] == "yes"]
    if df.empty:
        return "No call-level lead is a finding, so none is traced to the kernel."
    held = df[df["attention_verdict"] == Verdict.FASTER.value]
    call_only = df[df["attention_verdict"] != Verdict.FASTER.value]
    parts = []
    if len(held):
        parts.append(f"the attention kernel itself is faster than SDPA's beyond the margin "
                     f"for {where_text(held)}")
    if len(call_only):
        parts.append(f"the lead is per call only for {where_text(call_only)}: there its "
                     f"attention kernel is not faster than SDPA's")
    where = f"On the {machine}, of the " if machine else "Of the "
    first = where + f"{len(df)} call-level leads, " + parts[0] + "."
    return first + "".join(f" {p[:1].upper()}{p[1:]}." for p in parts[1:])


def machine_slug(machine: str) -> str:
    """A glue-key prefix for a machine label: its GPU model, lower case ('h200' for
    'H200-c' or 'H200 73c875d3')."""
    return provenance.machine_model(machine).lower()


def target_sentence(machine: str, best: dict, run: str | None = None,
                    custom: bool = True) -> str:
    """One sentence: the fastest kernel at the target on ``machine`` (:func:`fastest`),
    naming ``run`` when given, and (``custom``) how far the fastest custom kernel is from
    it. The one builder of this sentence: the chapter's per-GPU summary
    (:func:`attn_analysis.chapters.sota_sentences.target_summary`) opens with it."""
    if not isinstance(machine, str) or not machine:
        raise ValueError(f"`machine` must be a non-empty string; got {machine!r}.")
    place = f"On the {machine}" + (f" (run {run})" if run else "")
    if best["winner_verdict"] == "baseline":
        lead = (f"{place} no candidate is faster than SDPA's default dispatch beyond "
                f"the margin at the reports' shape: its {best['winner_family']} kernel is the "
                f"fastest measured")
    else:
        lead = (f"{place} {best['winner_label']} is faster than SDPA's default "
                f"dispatch at the reports' shape ({best['winner_speedup']:.2f}×, "
                f"{best['winner_ci_low']:.2f}–{best['winner_ci_high']:.2f})")
    if not custom or "custom_label" not in best:
        return lead + "."
    return (lead + f"; the fastest custom kernel, {best['custom_label']}, runs at "
            f"{best['custom_speedup']:.2f}× ({best['custom_ci_low']:.2f}–"
            f"{best['custom_ci_high']:.2f}, {best['custom_verdict']}).")


def claim_sentences(target_best: dict, wins: pd.DataFrame, kind: str = "state-of-the-art") -> dict:
    """The answer to the title question in two bold-able clauses: ``target``, on which
    machines no candidate beats SDPA beyond the margin at the reports' shape (``target_best``:
    machine -> :func:`fastest` of the ``kind`` runs), ``general``, whether a custom kernel
    beats it elsewhere as a finding (``wins``: :func:`wins_summary`)."""
    beaten = sorted(m for m, b in target_best.items() if b["winner_verdict"] != "baseline")
    held = sorted(m for m in target_best if m not in beaten)
    where = f"every GPU that ran it in the {kind} runs"
    if not beaten:
        target = f"At the reports' own shape the claim holds on {where} ({', '.join(held)})."
    elif not held:
        target = f"At the reports' own shape the claim fails on {where} ({', '.join(beaten)})."
    else:
        target = (f"At the reports' own shape the claim holds on {', '.join(held)} and fails on "
                  f"{', '.join(beaten)}.")
    found = wins[wins["n_faster"] > 0]["machine"].tolist() if len(wins) else []
    general = (f"Claim B fails: custom kernels beat SDPA beyond the margin "
               f"elsewhere on {', '.join(found)}." if found else
               "No custom kernel beats SDPA beyond the margin at any other measured shape "
               "either.")
    return {"target": target, "general": general}


CONTROLS = {"sdpa_twin": "the A/A twin",
            "cudnn_frontend": "cuDNN called directly (SDPA's own kernel)"}


def controls_sentence(target_tables: dict, level: str = "call") -> str:
    """What the controls of known truth gave at the target per machine (``target_tables``:
    machine -> :func:`comparison_table`): the A/A twin's and cuDNN-called-directly's
    verdicts at ``level``, one sentence each."""
    parts = []
    for cand, what in CONTROLS.items():
        by_verdict = {}
        for machine, t in target_tables.items():
            r = t[(t["candidate"] == cand) & (t["level"] == level)
                  & (t["config"] == TARGET.key)]
            by_verdict.setdefault(r["verdict"].iloc[0] if len(r) else "not measured",
                                  []).append(machine)
        parts.append(f"Per {level}, {what} is " + verdicts_phrase(by_verdict) + ".")
    return " ".join(parts)


def verdicts_phrase(by_verdict: dict) -> str:
    """'equivalent on both the H100-b and the H200-g' where every machine gave one verdict,
    else 'equivalent on the H100-b and slower on the H200-g' (``by_verdict``: verdict ->
    machines), so the same word is never written twice in a row."""
    if not by_verdict or not all(by_verdict.values()):
        raise ValueError(f"`by_verdict` must map verdicts to machines; got {by_verdict!r}.")

    def on(machines):
        names = [f"the {m}" for m in machines]
        if len(names) == 1:
            return names[0]
        both = "both " if len(names) == 2 else "all of "
        return both + ", ".join(names[:-1]) + " and " + names[-1]
    return " and ".join(f"{v} on {on(ms)}" for v, ms in by_verdict.items())

