"""Our Gluon kernel under the protocol: the state-of-the-art chapter's section on it (pure).

The runs are found by what they measured: every recorded run with the ``gluon`` candidate
(the Gluon campaigns of ``configs.GLUON_PLANS``, or any later run of an L4 or Hopper owner
who asks for it), split by their named matrix into the target runs (``fixed-v1``) and the
long-grid runs (``long-grid-v1``). Each run is one family against SDPA's default dispatch
(:func:`state_of_the_art.comparison_table`); at long sequences a second family per run
compares the Gluon kernel with FlashAttention-4 directly (:func:`against_peer`), where both
ran in the same processes. The candidate tunes itself per shape over its variants in the
first process and the later processes reuse that choice; :func:`variant_choices` reads
the choice back from the units.
"""

from __future__ import annotations

import json

import pandas as pd

from .. import _validate
from . import state_of_the_art as sota
from ..analyse import comparisons, inventory, power
from ..analyse.kernel_evidence import kernel_split
from ..analyse.provenance import machine_model
from .phrases import count_by_model, join
from ..analyse.stats import DEFAULT_MARGIN, VERDICT_ORDER
from ..configs import BASELINE, TARGET, Config

__all__ = ["CANDIDATE", "MATRICES", "GOAL", "gluon_runs", "lead_runs", "variant_choices",
           "against_peer", "verdict_counts", "versus_sentence", "goal_sentence",
           "peer_goal_sentence", "target_sentence", "lead_sentence",
           "long_section"]

CANDIDATE = "gluon"
# Which part of the section a run of the Gluon kernel feeds, by its named matrix.
MATRICES = {"target": "fixed-v1", "long": "long-grid-v1"}
# The goal set for the kernel at the target (issue "Our kernel beats cuDNN"): a kernel-level
# family-wise interval over SDPA's default dispatch whose lower end is above this, per GPU.
GOAL = 1.02


def gluon_runs(runs: dict, named=()) -> dict:
    """``{"target": {run_id: run}, "long": {...}}``: the runs that measured the Gluon
    kernel (a unit of candidate ``gluon``), by their matrix (:data:`MATRICES`), each part
    ordered by device, then run id. ``named`` restricts them to those runs (each must be a
    recorded run that measured the kernel on one of those matrices)."""
    if not isinstance(runs, dict):
        raise ValueError(f"`runs` must map run ids to loaded runs; got {type(runs).__name__}.")
    named = tuple(named)
    missing = [r for r in named if r not in runs]
    if missing:
        raise ValueError(f"`gluon_runs` must name recorded runs ({sorted(runs)}); "
                         f"got {missing}.")
    pool = {r: runs[r] for r in named} if named else runs
    out = {part: {} for part in MATRICES}
    for run_id, run in pool.items():
        if CANDIDATE not in set(run.units["candidate"]):
            continue
        matrix = sota.matrix_of(run)
        for part, name in MATRICES.items():
            if matrix == name:
                out[part][run_id] = run
    stray = [r for r in named if not any(r in rs for rs in out.values())]
    if stray:
        raise ValueError(f"`gluon_runs` must name runs that measured the Gluon kernel on "
                         f"the matrices {sorted(MATRICES.values())}; got {stray}.")
    return {part: dict(sorted(rs.items(), key=lambda kv: (kv[1].device, kv[0])))
            for part, rs in out.items()}


def variant_choices(run) -> pd.DataFrame:
    """One row per configuration the Gluon kernel was built at in ``run``: ``config``, the
    ``variant`` its tuning chose (``gluon_config.VARIANTS``; "custom" for another
    configuration), ``tuned_ms`` (its graph-mode time in the tuning), ``n_tried``, and
    ``n_processes`` / ``n_reused`` (processes that built it, and those that reused the
    first one's choice instead of tuning). A configuration whose processes chose
    different variants has one row per variant."""
    units = _validate.frame("run.units", run.units, ("config", "candidate", "trial", "info"))
    mine = units[units["candidate"] == CANDIDATE]
    rows = {}  # (config, trial) -> the build's record: one per process, whichever unit
    for config, trial, info in zip(mine["config"], mine["trial"], mine["info"]):
        if not isinstance(info, str) or not info or (config, trial) in rows:
            continue
        cfg = json.loads(info).get("config") or {}
        if "variant" in cfg:
            rows[(config, trial)] = {"config": config, "variant": cfg["variant"],
                                     "tuned_ms": cfg.get("tuned_ms"),
                                     "n_tried": cfg.get("n_tried"),
                                     "reused": bool(cfg.get("reused"))}
    keep = list(rows.values())
    cols = ["config", "variant", "tuned_ms", "n_tried", "n_processes", "n_reused"]
    if not keep:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(keep)
    out = df.groupby(["config", "variant"], sort=False).agg(
        tuned_ms=("tuned_ms", "max"), n_tried=("n_tried", "max"),
        n_processes=("reused", "size"), n_reused=("reused", "sum")).reset_index()
    return out[cols]


def against_peer(run, peer: str = "fa4", *, min_seq_len: int = 2048,
                 margin: float = DEFAULT_MARGIN, n_resamples: int = 20_000,
                 seed: int = 42) -> pd.DataFrame:
    """The Gluon kernel against ``peer`` (the baseline of this comparison) at every
    configuration of ``run`` with ``seq_len >= min_seq_len`` where both were timed, per
    call, kernel and attention kernel: one family of its own
    (:func:`comparisons.speedup_table`), with the configuration's fields. Above 1 the Gluon
    kernel is faster than the peer."""
    min_seq_len = _validate.integer("min_seq_len", min_seq_len)
    names = set(run.samples["candidate"].unique())
    for name in (CANDIDATE, peer):
        if name not in names:
            raise ValueError(f"run {run.run_id} has no samples of {name!r}; "
                             f"it has {sorted(names)}.")
    keys = [k for k in dict.fromkeys(run.samples["config"])
            if Config.from_key(k).seq_len >= min_seq_len]
    both = [k for k in keys if {CANDIDATE, peer} <= set(
        run.samples.loc[run.samples["config"] == k, "candidate"])]
    if not both:
        raise ValueError(f"run {run.run_id} has no configuration with seq_len >= "
                         f"{min_seq_len} where both {CANDIDATE} and {peer} were timed.")
    table = comparisons.speedup_table(run.samples, run.placements, baseline=peer,
                                      configs=both, candidates=[CANDIDATE], margin=margin,
                                      n_resamples=n_resamples, seed=seed, kernels=run.kernels)
    fields = pd.DataFrame([Config.from_key(k).as_dict() for k in table["config"]],
                          index=table.index)
    return pd.concat([table, fields], axis=1).assign(run=run.run_id,
                                                     machine=sota.machine_label(run))


def verdict_counts(table: pd.DataFrame, level: str = "kernel",
                   candidate: str = CANDIDATE) -> dict:
    """Verdict -> how many configurations of ``table`` (a comparison table) have it for
    ``candidate`` at ``level``, plus ``n`` (the configurations) and the smallest and
    largest speedup (``lowest``, ``highest``)."""
    df = _validate.frame("table", table, ("candidate", "level", "verdict", "speedup"))
    level = _validate.choice("level", level, comparisons.LEVELS)
    rows = df[(df["candidate"] == candidate) & (df["level"] == level)]
    counts = {str(v): int(n) for v, n in rows["verdict"].value_counts().items()}
    return {**counts, "n": int(len(rows)),
            "lowest": float(rows["speedup"].min()) if len(rows) else float("nan"),
            "highest": float(rows["speedup"].max()) if len(rows) else float("nan")}


def versus_sentence(machine: str, counts: dict, peer_label: str, level: str = "kernel") -> str:
    """One sentence from :func:`verdict_counts` of :func:`against_peer`: at how many of
    its configurations the Gluon kernel is slower than, equivalent to or faster than the
    peer at ``level``, and its range of speedups over the peer."""
    n = int(counts.get("n", 0))
    if n == 0:
        return f"On the {machine} no configuration compares our Gluon kernel with {peer_label}."
    parts = [f"{counts[v]} {v}" for v in VERDICT_ORDER if counts.get(v)]
    return (f"On the {machine}, per {level}, our Gluon kernel against {peer_label} over "
            f"{n} configurations: {', '.join(parts)}; its speedup over {peer_label} runs "
            f"from {counts['lowest']:.2f}× to {counts['highest']:.2f}×.")


def goal_sentence(target_tables: list, goal: float = GOAL) -> str:
    """Whether the Gluon kernel reached the goal at the target on each GPU: a kernel-level
    interval over SDPA's default dispatch with its lower end above ``goal``, from the
    target runs' comparison tables; names the GPUs and the lower ends."""
    goal = _validate.number_in("goal", goal, 0.0, 10.0)
    rows = []
    for t in target_tables:
        r = t[(t["candidate"] == CANDIDATE) & (t["level"] == "kernel")]
        if len(r):
            rows.append((str(t["machine"].iloc[0]), float(r["ci_low"].iloc[0])))
    if not rows:
        return "No recorded run measured our Gluon kernel at the reports' shape."
    reached = [m for m, low in rows if low > goal]
    lows = ", ".join(f"{low:.3f} on the {m}" for m, low in rows)
    goal_text = (f"The kernel's goal was a kernel-level interval above {goal:.2f} over "
                 f"SDPA.")
    if len(reached) == len(rows):
        return f"{goal_text} It is reached on every GPU measured. Lower ends: {lows}."
    missed = [m for m, _ in rows if m not in reached]
    return f"{goal_text} It is not reached on the {join(missed)}. Lower ends: {lows}."


def peer_goal_sentence(counts_by_machine: dict, peer_label: str, where: str = "") -> str:
    """Whether the Gluon kernel is no worse than the peer at every configuration of
    :func:`against_peer` on every GPU, from ``{machine: verdict_counts(...)}``: no
    "slower" verdict anywhere. ``where`` says which configurations those are (e.g. "from
    S = 2048"), so the sentence reads on its own."""
    scope = f" {where}" if where else ""
    if not counts_by_machine:
        return f"No recorded run compares our Gluon kernel with {peer_label}{scope}."
    slower = {m: int(c.get("slower", 0)) for m, c in counts_by_machine.items()}
    total = {m: int(c.get("n", 0)) for m, c in counts_by_machine.items()}
    if not any(slower.values()):
        return (f"No configuration{scope} shows our Gluon kernel slower than {peer_label} "
                f"beyond the margin: the goal of being no worse is met where measured.")
    # the shapes counted are named with their scope ("all 8 shapes from S = 2048"), so
    # the count reads against the long grid's full count in the sentence before
    where_slower = count_by_model({m: (slower[m], total[m]) for m in counts_by_machine},
                                  f"shapes{scope}")
    return (f"The goal of being no worse than {peer_label} is not reached: ours is "
            f"slower beyond the margin {where_slower}.")


def _role(run) -> str:
    info = run.info or {}
    return inventory.run_role(run.run_id, info.get("plan") or {}, info)


def lead_runs(runs: dict) -> dict:
    """Run id -> run: per GPU model, the runs of ``runs`` (run id -> loaded run) whose
    numbers the section quotes: every confirmatory run of the model where it has one
    (replications of a plan on several GPUs), else its last run by finish time. The others
    are named as superseded. Ordered by model, then run id."""
    by_model = {}
    for run_id, run in runs.items():
        by_model.setdefault(machine_model(sota.machine_label(run)), []).append(run_id)
    out = {}
    for model, ids in sorted(by_model.items()):
        confirmatory = sorted(r for r in ids if _role(runs[r]) == "confirmatory")
        newest = max(ids, key=lambda r: (str((runs[r].info or {}).get("finished_utc", "")), r))
        out.update({r: runs[r] for r in confirmatory or [newest]})
    return out


def target_sentence(table: pd.DataFrame, run) -> str:
    """What the Gluon kernel gives at the target in one run: its speedup over SDPA per
    call, per kernel and per attention kernel with interval and verdict, the run's role,
    processes, family and the variant its tuning chose, and what SDPA's call runs besides
    its attention kernel (profiler evidence): the levels differ by exactly that."""
    df = table[(table["candidate"] == CANDIDATE) & (table["config"] == TARGET.key)]
    if df.empty:
        raise ValueError(f"`table` of run {run.run_id} has no {CANDIDATE} row at the target.")
    cells = {}
    for level in ("call", "kernel", "attention"):
        r = df[df["level"] == level]
        if len(r):
            r = r.iloc[0]
            cells[level] = (f"{r['speedup']:.3f}× ({r['ci_low']:.3f}–{r['ci_high']:.3f}, "
                            f"{r['verdict']})")
    chosen = variant_choices(run)
    text = [f"On the {sota.machine_label(run)}, the {_role(run)} run {run.run_id} has "
            f"{int(df['n_processes'].min())} processes, a family of m = "
            f"{int(df['n_comparisons'].iloc[0])} and the variant "
            f"{', '.join(chosen['variant']) or 'not recorded'}."]
    if "call" in cells:
        text.append(f"Our Gluon kernel runs at {cells['call']} of SDPA per call.")
    registered = power.registered_family(run.info) is not None  # its levels: call, kernel
    rest = [(lv, name) for lv, name in (
        ("kernel", "per kernel"), ("attention", "per attention kernel"
                                   + (" (outside the family)" if registered else "")))
        if lv in cells]
    if rest:
        said = " and ".join(f"{name}{' it runs' if i == 0 else ''} at {cells[lv]}"
                            for i, (lv, name) in enumerate(rest))
        text.append(said[:1].upper() + said[1:] + ".")
    split = kernel_split(run.kernels)
    base = split[(split["candidate"] == BASELINE) & (split["config"] == TARGET.key)]
    k = run.kernels
    others = k[(k["candidate"] == BASELINE) & (k["config"] == TARGET.key)
               & ~k["kernel"].isin(base["main_kernel"])]["kernel"]
    if len(others):
        text.append(f"SDPA's call also runs {', '.join(sorted(set(others)))} beside its "
                    f"attention kernel: {base['other_ms'].iloc[0] * 1000:.1f} µs per call in "
                    f"the profile.")
    return " ".join(text)


def lead_sentence(table: pd.DataFrame, machine: str) -> str:
    """Where the Gluon kernel's lead over SDPA per call comes from on ``machine``, for the
    abstract, right after the sentence that names the kernel ("It", "it"): empty unless
    it is faster per call beyond the margin; then whether it is also faster per attention
    kernel, or only per call because SDPA's call runs more than its attention kernel (the
    attention-level verdict, with its interval)."""
    at = table[(table["candidate"] == CANDIDATE) & (table["config"] == TARGET.key)]
    call, att = at[at["level"] == "call"], at[at["level"] == "attention"]
    if call.empty or call["verdict"].iloc[0] != "faster" or att.empty:
        return ""
    a = att.iloc[0]
    interval = f"{a['speedup']:.3f}×, {a['ci_low']:.3f}–{a['ci_high']:.3f}"
    if a["verdict"] == "faster":
        return f"It is also faster per attention kernel on the {machine} ({interval})."
    said = {"equivalent": "equivalent to SDPA's", "inconclusive": "not told apart from SDPA's",
            "slower": "slower than SDPA's"}.get(
        a["verdict"], f"{a['verdict'].split()[0]} than SDPA's only within the margin")
    return (f"Per attention kernel it is {said} on the {machine} ({interval}): the lead is "
            f"in the call.")


def long_section(tables: dict, runs: dict, peer: str = "fa4", peer_label: str = "",
                 min_seq_len: int = 2048, **compare) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """The long grid's part of the section: ``(values, versus, choices)``. ``values`` maps
    glue names to values: per GPU the configurations (``gl_{gpu}_long_n``) and how many
    are faster or slower than SDPA per kernel, the sentence and family size of the direct
    comparison with ``peer`` (:func:`against_peer`, ``gl_{gpu}_fa4_sentence``,
    ``gl_{gpu}_fa4_m``), and ``gl_fa4_goal_sentence``; ``versus`` stacks the direct
    comparisons and ``choices`` the tuning's choices (:func:`variant_choices`) with a
    ``machine`` column. ``compare`` goes to :func:`against_peer` (margin, n_resamples)."""
    label = peer_label or peer
    values, versus, choices, counts, by_model = {}, [], [], {}, {}
    for run_id, t in tables.items():
        run = runs[run_id]
        machine = sota.machine_label(run)
        slug = sota.machine_slug(machine)
        against_sdpa = verdict_counts(t)
        by_model[machine_model(machine)] = (int(against_sdpa.get("faster", 0)),
                                            int(against_sdpa["n"]))
        values.update({f"gl_{slug}_long_n": against_sdpa["n"],
                       f"gl_{slug}_long_faster": against_sdpa.get("faster", 0),
                       f"gl_{slug}_long_slower": against_sdpa.get("slower", 0)})
        vs = against_peer(run, peer, min_seq_len=min_seq_len, **compare)
        counts[machine] = verdict_counts(vs)
        values[f"gl_{slug}_fa4_sentence"] = versus_sentence(machine, counts[machine], label)
        values[f"gl_{slug}_fa4_m"] = int(vs["n_comparisons"].iloc[0])
        versus.append(vs)
        choices.append(variant_choices(run).assign(machine=machine))
    values["gl_fa4_goal_sentence"] = peer_goal_sentence(counts, label,
                                                        f"from S = {min_seq_len}")
    values["gl_long_sentence"] = (
        f"Across the long grid, in {join(sorted({_role(r) for r in runs.values()}))} runs, "
        "the Gluon kernel is faster than SDPA's kernel "
        + count_by_model(by_model, "shapes") + "." if by_model
        else "No recorded run measured our Gluon kernel on the long grid.")
    return (values, pd.concat(versus, ignore_index=True) if versus else pd.DataFrame(),
            pd.concat(choices, ignore_index=True) if choices else pd.DataFrame())
