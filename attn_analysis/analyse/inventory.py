"""The inventory of the recorded data: which GPU ran which run, with how many processes.

One source for every count the book states about its data (GPUs, runs, processes) and
for the short GPU labels the prose uses ("H100-a") instead of UUIDs. It reads run
folders directly (``run.json``, ``plan.json`` and the journal's ``trial`` units, each of
which carries its process's fingerprint, GPU UUID and start time), never the Parquet
tables, so the whole of ``data/runs`` is read in well under a second, without torch.

Labels are stable: the GPUs of one model get letters in the order of their first
recorded trial process, so a run added later (measured later) never relabels an older
GPU. A GPU whose runs recorded no UUID (the first, protocol-1 runs) cannot be told apart
from the others: each such run gets its own row labelled ``"<model> (UUID not
recorded, <run>)"``, and it counts in ``n_runs_unidentified_gpu``, never in ``n_gpus``.

The git time of the commit that added a run's ``plan.json`` (``plan_committed_utc``) and
of the one that added its ``run.json`` (``results_committed_utc``) come from one ``git
log``; outside a git checkout both are None.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
from pathlib import Path

import pandas as pd

from .. import configs
from ..record.journal import journal_paths
from ..record.schema import PLAN, RUN_INFO

__all__ = ["DEFAULT_RUNS_DIR", "FINGERPRINT", "UNRECORDED", "ROLES", "gpu_model",
           "label_letters", "campaign_of", "run_role", "gpu_inventory", "run_inventory", "gpu_labels",
           "gpu_label", "compact_labels", "counts", "plan_statement"]

DEFAULT_RUNS_DIR = "data/runs"
FINGERPRINT = "fingerprint.json"  # the consolidated fingerprints (record.JSON_VIEWS)
UNRECORDED = "UUID not recorded"
ROLES = ("confirmatory", "calibration", "exploratory")
# Candidates of known truth: the A/A twin and the spin controls (controls.spin_name).
_CONTROL = re.compile(r"^sdpa(_twin|_spin\w*)$")
_GPU_COLUMNS = ["label", "model", "uuid", "runs", "n_runs", "processes", "first_entry_utc"]
_RUN_COLUMNS = ["run", "model", "gpus", "processes", "placements_per_unit", "samples",
                "candidates", "configs", "matrix", "protocol", "role", "campaign",
                "first_entry_utc", "finished_utc", "code_version", "code_commit", "plan_committed_utc",
                "results_committed_utc", "results_commit"]
# The named plans of configs (CAMPAIGN_PLANS, POWERED_PLANS, ...): a run measured with one
# of them is that campaign's; the pre-registered powered campaigns are confirmatory.
_CONFIRMATORY_PLANS = ("POWERED_PLANS",)


_NULLABLE = ("samples", "matrix", "campaign", "first_entry_utc", "finished_utc", "code_version",
             "code_commit",
             "plan_committed_utc", "results_committed_utc", "results_commit")


def gpu_model(name) -> str:
    """'H100' from 'NVIDIA H100 80GB HBM3', 'H200' from 'NVIDIA H200'; 'CPU' for none."""
    if not name:
        return "CPU"
    words = str(name).replace("NVIDIA", "").split()
    match = next((w for w in words if re.fullmatch(r"[A-Z]+\d+\w*", w)), None)
    return match or " ".join(words) or "CPU"


def label_letters(index: int) -> str:
    """The letters of the ``index``-th GPU of a model: 0 -> 'a', 25 -> 'z', 26 -> 'aa'."""
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise ValueError(f"`index` must be a non-negative integer; got {index!r}.")
    out = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        out = chr(ord("a") + rest) + out
    return out


def campaign_of(plan: dict) -> tuple[str, str] | None:
    """(table, name) of the configs plan a run's ``plan`` measured (same matrix, modes and
    candidates; e.g. ('POWERED_PLANS', 'powered-v1-reports')), or None."""
    want = (plan.get("matrix"), tuple(plan.get("modes") or ()),
            frozenset(plan.get("candidates") or ()))
    for table in sorted(n for n in dir(configs) if n.endswith("_PLANS")):
        for name, c in getattr(configs, table).items():
            if (c.get("matrix"), tuple(c.get("modes") or ()),
                    frozenset(c.get("candidates") or ())) == want:
                return table, name
    return None


def run_role(run_id: str, plan: dict, info: dict | None = None) -> str:
    """A run's role: as recorded (``role`` in run.json or plan.json), else derived: a run
    of a pre-registered campaign (``configs.POWERED_PLANS``) or of a ``confirm-*`` matrix
    is confirmatory; one whose candidates are only the baseline
    and controls of known truth (or named for calibration or controls) is a calibration;
    everything else is exploratory."""
    recorded = (info or {}).get("role") or (plan or {}).get("role")
    if recorded:
        return str(recorded)
    if str((plan or {}).get("matrix") or "").startswith("confirm"):
        return "confirmatory"
    candidates = [str(c) for c in (plan or {}).get("candidates") or ()]
    only_controls = candidates and all(c == "sdpa" or _CONTROL.match(c) for c in candidates)
    if only_controls or "calibration" in run_id or "controls" in run_id:
        return "calibration"
    found = campaign_of(plan or {})
    # a pre-registered plan: every POWERED_PLANS entry, and any plan that states its family
    if found and (found[0] in _CONFIRMATORY_PLANS
                  or "family_size" in getattr(configs, found[0])[found[1]]):
        return "confirmatory"
    return "exploratory"


def _read_json(path: Path):
    return json.loads(path.read_text())


def _trials(run_dir: Path) -> list[dict]:
    """Per trial process: trial, started_utc, gpu_name, gpu_uuid (None where unrecorded),
    from the journal's trial units, else from ``fingerprint.json`` (no start time)."""
    rows = []
    for path in journal_paths(run_dir, "trial"):
        unit = _read_json(path)
        fp = unit.get("fingerprint") or {}
        rows.append({"trial": int(unit["trial"]), "started_utc": unit.get("started_utc"),
                     "gpu_name": fp.get("gpu_name"), "gpu_uuid": _uuid(fp)})
    if not rows and (run_dir / FINGERPRINT).exists():
        trials = (_read_json(run_dir / FINGERPRINT).get("trials") or {})
        rows = [{"trial": int(t), "started_utc": None, "gpu_name": fp.get("gpu_name"),
                 "gpu_uuid": _uuid(fp)} for t, fp in trials.items()]
    return sorted(rows, key=lambda r: r["trial"])


def _uuid(fp: dict):
    uuid = fp.get("gpu_uuid")
    return str(uuid).removeprefix("GPU-") if uuid else None


def _git_added(runs_dir: Path) -> dict:
    """{(run, file name): (ISO commit time, short hash) of the first commit that added it}
    for plan.json and run.json under ``runs_dir``; {} outside a git checkout or without git."""
    try:
        top = subprocess.run(["git", "-C", str(runs_dir), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, timeout=30)
        if top.returncode:
            return {}
        rel = runs_dir.resolve().relative_to(Path(top.stdout.strip()).resolve())
        log = subprocess.run(
            ["git", "-C", top.stdout.strip(), "log", "--diff-filter=A", "--format=%x00%cI %h",
             "--name-only", "--", f"{rel.as_posix()}/*/{PLAN}", f"{rel.as_posix()}/*/{RUN_INFO}"],
            capture_output=True, text=True, timeout=60)
    except (OSError, ValueError, subprocess.SubprocessError):
        return {}
    if log.returncode:
        return {}
    added: dict = {}
    for block in log.stdout.split("\x00")[1:]:
        lines = [ln for ln in block.splitlines() if ln.strip()]
        if not lines:
            continue
        stamp, commit = lines[0].split()
        when = (pd.Timestamp(stamp).tz_convert("UTC").isoformat(), commit)
        for name in lines[1:]:
            parts = Path(name).parts
            if len(parts) >= 2:
                added[(parts[-2], parts[-1])] = when  # log runs newest first: keep the oldest
    return added


def _git_campaign_added(runs_dir: Path, names) -> dict:
    """{campaign name: ISO time of the first commit whose configs.py holds the plan, as a
    dict key ('"name":') or as an item set on a plan table ('["name"]'), whichever came
    first}, {} without git."""
    out = {}
    for name in sorted(set(names)):
        times = []
        for written in (f'"{name}":', f'["{name}"]'):
            try:
                log = subprocess.run(
                    ["git", "-C", str(runs_dir), "log", "--reverse", "--format=%cI",
                     f"-S{written}", "--", ":/attn_analysis/configs.py"],
                    capture_output=True, text=True, timeout=60)
            except (OSError, subprocess.SubprocessError):
                return {}
            times += log.stdout.split()[:1] if log.returncode == 0 else []
        if times:
            out[name] = min(pd.Timestamp(t).tz_convert("UTC") for t in times).isoformat()
    return out


def _signature(runs_dir: Path) -> tuple:
    """What identifies the state of ``runs_dir`` for the cache: each run and the times of
    its run.json and journal."""
    out = []
    for d in sorted(p for p in runs_dir.iterdir() if (p / RUN_INFO).is_file()):
        journal = d / "journal"
        out.append((d.name, (d / RUN_INFO).stat().st_mtime_ns,
                    journal.stat().st_mtime_ns if journal.is_dir() else 0))
    return tuple(out)


def _runs_dir(runs_dir) -> Path:
    path = Path(runs_dir)
    if not path.is_dir():
        raise ValueError(f"`runs_dir` must be a folder of recorded runs; got {str(runs_dir)!r}.")
    return path.resolve()


@functools.lru_cache(maxsize=16)
def _tables(runs_dir: Path, signature: tuple) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """(GPU table, run table, uuid -> label) of ``runs_dir`` in the state ``signature``."""
    added = _git_added(runs_dir)
    runs, processes = [], []
    for name, _, _ in signature:
        run_dir = runs_dir / name
        info = _read_json(run_dir / RUN_INFO)
        plan = (_read_json(run_dir / PLAN) if (run_dir / PLAN).is_file() else None) \
            or info.get("plan") or {}
        trials = _trials(run_dir)
        starts = [t["started_utc"] for t in trials if t["started_utc"]]
        campaign = campaign_of(plan)
        for t in trials:
            key = t["gpu_uuid"] or (f"{UNRECORDED}:{name}" if t["gpu_name"] else None)
            processes.append({**t, "run": name, "key": key, "model": gpu_model(t["gpu_name"])})
        models = sorted({gpu_model(t["gpu_name"]) for t in trials}) or ["CPU"]
        runs.append({
            "run": name, "model": "/".join(models), "processes": len(trials),
            "placements_per_unit": int(plan.get("placements") or 1),
            "samples": (plan.get("timing") or {}).get("n_samples"),
            "candidates": len(plan.get("candidates") or ()),
            "configs": len(plan.get("configs") or ()), "matrix": plan.get("matrix"),
            "protocol": 2 if "placements" in plan else 1,
            "role": run_role(name, plan, info),
            "campaign": campaign[1] if campaign else None,
            "first_entry_utc": min(starts) if starts else None,
            "finished_utc": info.get("finished_utc"),
            "code_version": info.get("attn_analysis_version"),
            "code_commit": info.get("code_commit"),
            "plan_committed_utc": added.get((name, PLAN), (None,))[0],
            "results_committed_utc": added.get((name, RUN_INFO), (None,))[0],
            "results_commit": added.get((name, RUN_INFO), (None, None))[1]})
    # the plan entered git when its plan.json did, or earlier with its configs campaign
    campaigns = _git_campaign_added(runs_dir, [r["campaign"] for r in runs if r["campaign"]]) \
        if added else {}
    for r in runs:
        times = [t for t in (r["plan_committed_utc"], campaigns.get(r["campaign"])) if t]
        r["plan_committed_utc"] = min(times, key=pd.Timestamp) if times else None
    procs = pd.DataFrame(processes, columns=["run", "trial", "started_utc", "gpu_name",
                                             "gpu_uuid", "key", "model"])
    gpus, labels = _gpu_table(procs)
    run_table = pd.DataFrame(runs, columns=[c for c in _RUN_COLUMNS if c != "gpus"])
    for col in _NULLABLE:  # None stays None (pandas would make it NaN in a str column)
        run_table[col] = pd.Series([r[col] for r in runs], index=run_table.index, dtype=object)
    run_gpus = {run: list(dict.fromkeys(labels[k] for k in g["key"].dropna()))
                for run, g in procs.groupby("run", sort=False)}
    run_table.insert(2, "gpus", [run_gpus.get(r, []) for r in run_table["run"]])
    run_table = run_table.sort_values(["first_entry_utc", "run"], na_position="first",
                                      kind="stable").reset_index(drop=True)
    return gpus, run_table, labels


def _gpu_table(procs: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """One row per GPU (``key``: its UUID, or one key per run that recorded none)."""
    gpu = procs.dropna(subset=["key"])
    first = (gpu.assign(start=gpu["started_utc"].fillna(""))
             .groupby("key", sort=False)
             .agg(model=("model", "first"), start=("start", "min"), run0=("run", "min"))
             .reset_index())
    first["identified"] = ~first["key"].str.startswith(UNRECORDED)
    rows, labels = [], {}
    for model, group in first.groupby("model", sort=True):
        ident = group[group["identified"]].sort_values(["start", "run0", "key"])
        for i, key in enumerate(ident["key"]):
            labels[key] = f"{model}-{label_letters(i)}"
        for key, run0 in zip(group.loc[~group["identified"], "key"],
                             group.loc[~group["identified"], "run0"]):
            labels[key] = f"{model} ({UNRECORDED}, {run0})"
    for key, row in first.set_index("key").iterrows():
        mine = gpu[gpu["key"] == key]
        rows.append({"label": labels[key], "model": row["model"],
                     "uuid": key if row["identified"] else None,
                     "runs": sorted(mine["run"].unique()), "n_runs": int(mine["run"].nunique()),
                     "processes": int(len(mine)), "first_entry_utc": row["start"] or None,
                     "_order": (not row["identified"], row["model"], row["start"], key)})
    rows.sort(key=lambda r: r.pop("_order"))
    table = pd.DataFrame(rows, columns=_GPU_COLUMNS)
    for col in ("uuid", "first_entry_utc"):
        table[col] = pd.Series([r[col] for r in rows], index=table.index, dtype=object)
    return table, labels


def _load(runs_dir):
    path = _runs_dir(runs_dir)
    return _tables(path, _signature(path))


def gpu_inventory(runs_dir=DEFAULT_RUNS_DIR) -> pd.DataFrame:
    """One row per physical GPU of the recorded runs: label ('H100-a'), model, uuid (None
    for a run that recorded none), runs (sorted ids), n_runs, processes (trial processes
    on it, all runs), first_entry_utc; identified GPUs by model and label order first."""
    return _load(runs_dir)[0].copy()


def run_inventory(runs_dir=DEFAULT_RUNS_DIR) -> pd.DataFrame:
    """One row per run, in order of its first journal entry: run, model, gpus (labels),
    processes, placements_per_unit, samples, candidates and configs (counts), matrix,
    protocol (1 or 2), role, campaign (the configs plan it measured, or None),
    first_entry_utc, finished_utc, code_version (the package version the run recorded),
    code_commit (the commit its code came from, recorded by runs since 0.3.0, else None),
    plan_committed_utc (the first commit holding its plan.json, or its campaign in
    configs.py if that came first), results_committed_utc and results_commit (time and
    short hash of the commit that added run.json: the measuring code is that commit's
    parent or older, since runs record no commit of their own); git fields are None
    outside a checkout."""
    return _load(runs_dir)[1].copy()


def gpu_labels(runs_dir=DEFAULT_RUNS_DIR) -> dict:
    """{uuid: label} of every GPU whose UUID was recorded."""
    return {k: v for k, v in _load(runs_dir)[2].items() if not k.startswith(UNRECORDED)}


def gpu_label(uuid, runs_dir=DEFAULT_RUNS_DIR) -> str:
    """The label of the GPU with ``uuid`` (with or without its 'GPU-' prefix; a unique
    prefix of at least 8 characters is enough)."""
    labels = gpu_labels(runs_dir)
    key = str(uuid or "").removeprefix("GPU-")
    hits = [v for k, v in labels.items() if k == key] or \
        ([v for k, v in labels.items() if k.startswith(key)] if len(key) >= 8 else [])
    if len(hits) != 1:
        raise ValueError(f"`uuid` must name one recorded GPU (full UUID or a prefix of 8+ "
                         f"characters); got {uuid!r}, which matches {len(hits)}.")
    return hits[0]


def compact_labels(labels) -> str:
    """GPU labels of one run in a narrow cell: labels of one model share its prefix,
    'H200-k,l,m,n' for ['H200-k', 'H200-n', 'H200-m', 'H200-l'] (letters sorted, shorter
    first so that 'z' comes before 'aa'); a label outside the 'MODEL-letters' form (a GPU
    whose UUID was not recorded) is shown as '?'; '-' for none."""
    if isinstance(labels, str) or not hasattr(labels, "__iter__"):
        raise ValueError(f"`labels` must be a list of GPU labels; got {labels!r}.")
    groups: dict = {}
    unknown = False
    for label in labels:
        m = re.fullmatch(r"(.+)-([a-z]+)", str(label))
        if m:
            groups.setdefault(m.group(1), set()).add(m.group(2))
        else:
            unknown = True
    parts = [f"{model}-{','.join(sorted(letters, key=lambda x: (len(x), x)))}"
             for model, letters in sorted(groups.items())]
    return ", ".join(parts + (["?"] if unknown else [])) or "-"


def counts(runs_dir=DEFAULT_RUNS_DIR) -> dict:
    """The counts the book states about its data: n_runs, n_processes, n_gpus (GPUs told
    apart by UUID), n_gpus_<model> and n_runs_<model> and n_processes_<model> per model
    (h100 and h200 always present), n_runs_unidentified_gpu (runs that recorded no UUID),
    n_runs_<role> per role of ``ROLES``, n_models."""
    gpus, runs, _ = _load(runs_dir)
    ident = gpus[gpus["uuid"].notna()]
    out = {"n_runs": int(len(runs)), "n_processes": int(runs["processes"].sum()),
           "n_gpus": int(len(ident)), "n_models": int(ident["model"].nunique()),
           "n_runs_unidentified_gpu": int(sum(
               any(UNRECORDED in g for g in gs) for gs in runs["gpus"]))}
    for model in sorted({"H100", "H200", *ident["model"], *runs["model"]}):
        low = model.lower().replace("/", "_")
        out[f"n_gpus_{low}"] = int((ident["model"] == model).sum())
        out[f"n_runs_{low}"] = int((runs["model"] == model).sum())
        out[f"n_processes_{low}"] = int(runs.loc[runs["model"] == model, "processes"].sum())
    for role in ROLES:
        out[f"n_runs_{role}"] = int((runs["role"] == role).sum())
    return out


def plan_statement(runs: pd.DataFrame) -> str:
    """What git shows of when the confirmatory plans were fixed, in plain sentences, from a
    :func:`run_inventory` table: a plan committed after its run's first process (and
    whether in the commit that added the results) is said so; without git history (no
    commit times) nothing is claimed."""
    need = ("run", "role", "first_entry_utc", "plan_committed_utc", "results_committed_utc")
    missing = [c for c in need if c not in getattr(runs, "columns", ())]
    if missing:
        raise ValueError(f"`runs` must be a run_inventory table; missing {missing}.")
    confirm = runs[runs["role"] == "confirmatory"]
    if confirm.empty:
        return "No recorded run is confirmatory."
    unknown = [r.run for r in confirm.itertuples() if not isinstance(r.plan_committed_utc, str)]
    if unknown:
        return (f"This copy has no git history, so when the plans of the confirmatory runs "
                f"({', '.join(unknown)}) entered git is not shown.")
    late = [r for r in confirm.itertuples() if isinstance(r.first_entry_utc, str)
            and pd.Timestamp(r.plan_committed_utc) > pd.Timestamp(r.first_entry_utc)]
    if not late:
        return "Every confirmatory plan entered git before its run's first process."
    with_results = all(r.plan_committed_utc == r.results_committed_utc for r in late)
    where = ("in the commit that added their results" if with_results
             else "after their first process started")
    early = [r.run for r in confirm.itertuples() if r.run not in {x.run for x in late}]
    after = (f"The plans of {', '.join(early)} entered git before their first process."
             if early else "Plans from now on are committed before their runs.")
    return (f"The plans of the confirmatory runs {', '.join(r.run for r in late)} entered git "
            f"{where}. So git cannot show that they were fixed before measuring. {after}")
