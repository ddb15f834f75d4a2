"""What every notebook of the book does first: find the repository, check the papermill
parameters, optionally measure a new run, discover and load the recorded runs, glue.

A notebook's first code cell puts its repository's package first on ``sys.path`` and makes
one call: :func:`prelude` in the notebooks that can measure (they lead with one run), or
:func:`parameters` in those that only read named runs and checks. Either checks every
parameter, each with the check the notebook names for it, before any work. Everything
numeric lives in :mod:`attn_analysis.analyse` and the chapter modules
(:mod:`attn_analysis.chapters`), and every figure in :mod:`attn_analysis.present.plots`; the checks
of recorded inputs (runs, check files) live in :mod:`attn_analysis.chapters.inputs`.
"""

from __future__ import annotations

import datetime as _dt
import math
import numbers
import re
import sys
import types
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from .. import _validate, configs
from ..analyse import provenance, stats
from ..chapters.inputs import (check_file_iv, load_runs, protocol2_runs_iv,
                              recorded_run_iv, recorded_runs_iv, repo_file_iv, run_iv,
                              runs_iv)

__all__ = ["DEFAULT_LEAD_RUN", "DEFAULT_TRITON_RUN", "DEVICE_CHOICES", "COMMON_PARAMETERS",
           "MEASURE_DEFAULTS", "repo_root", "check_parameters", "given_parameters",
           "unknown_parameters_iv", "check_given", "choice_iv", "fraction_iv", "config_iv",
           "candidate_names_iv", "measure_new_run", "run_catalog", "lead_run", "as_number",
           "glue_text", "glue_values", "glue_figure", "small_fraction_iv", "margin_iv",
           "count_iv", "resamples_iv", "names_iv", "mode_iv", "candidate_name_iv",
           "parameters", "Prelude", "prelude", "start", "check_file_iv", "load_runs",
           "protocol2_runs_iv", "recorded_run_iv", "recorded_runs_iv", "repo_file_iv",
           "run_iv", "runs_iv"]

DEFAULT_LEAD_RUN = "h200-reports-p2-all"
DEFAULT_TRITON_RUN = "h200-triton-p2"
DEVICE_CHOICES = ("auto", "cuda", "cpu")
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# The parameters every measuring notebook declares (01 to 05), in their cells' order.
COMMON_PARAMETERS = ("runs_dir", "run", "measure", "device", "shapes", "candidates", "trials",
                     "samples", "run_id", "n_resamples")
# The parameters that only a measurement uses. 03_matrix declares them in its parameters
# cell with these defaults (a test pins that the two agree); the other measuring notebooks
# declare only ``measure`` and take these defaults unless papermill passes a value.
MEASURE_DEFAULTS = {"device": "auto", "shapes": "", "candidates": "", "trials": 4,
                    "samples": 0, "run_id": ""}


def repo_root(start=None) -> Path:
    """The repository root: the first of ``start`` (default: cwd) and its parents that
    holds ``attn_analysis/``. Put first on ``sys.path`` so that a copy of the repository
    imports its own package."""
    here = Path(start or Path.cwd()).resolve()
    for p in (here, *here.parents):
        if (p / "attn_analysis" / "__init__.py").is_file():
            if str(p) not in sys.path:
                sys.path.insert(0, str(p))
            return p
    raise ValueError(f"`start` must lie inside the repository (no attn_analysis/ above "
                     f"{here}).")


def check_parameters(*, root: Path, runs_dir: str, run: str, measure: bool, device: str,
                     shapes: str, candidates: str, trials: int, samples: int, run_id: str,
                     n_resamples: int) -> dict:
    """Validate a notebook's parameters; return them normalised (``runs_dir`` absolute,
    ``device`` resolved from "auto"). Raise ValueError naming the first bad one."""
    if not isinstance(runs_dir, str) or not runs_dir:
        raise ValueError(f"`runs_dir` must be a non-empty path string; got {runs_dir!r}.")
    path = (root / runs_dir).resolve()
    if not path.is_dir() and not measure:
        raise ValueError(f"`runs_dir` must be an existing folder of recorded runs; "
                         f"{path} is not one.")
    if not isinstance(run, str):
        raise ValueError(f"`run` must be a run folder name or ''; got {run!r}.")
    measure = _validate.flag("measure", measure)
    if not measure and run != DEFAULT_LEAD_RUN:
        # named folders only, before any run is loaded (loading them all takes minutes);
        # the documented default may be absent (lead_run then picks)
        recorded_run_iv("run", run, {"runs_dir": path})
    if device not in DEVICE_CHOICES:
        raise ValueError(f"`device` must be one of {DEVICE_CHOICES}; got {device!r}.")
    if device == "auto":
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if not isinstance(shapes, str):
        raise ValueError(f"`shapes` must be a string such as '2,2,64;2,2,128'; got {shapes!r}.")
    configs.parse_shapes(shapes)  # raises on a malformed entry
    if not isinstance(candidates, str):
        raise ValueError(f"`candidates` must be a comma-separated string; got {candidates!r}.")
    trials = _validate.integer("trials", trials, 1)
    samples = _validate.integer("samples", samples, 0)
    n_resamples = _validate.integer("n_resamples", n_resamples, 100)
    if not isinstance(run_id, str) or (run_id and not _RUN_ID.fullmatch(run_id)):
        raise ValueError(f"`run_id` must be '' or a folder name of letters, digits, '.', '_' "
                         f"and '-'; got {run_id!r}.")
    return dict(runs_dir=path, run=run, measure=measure, device=device, shapes=shapes,
                candidates=candidates, trials=trials, samples=samples, run_id=run_id,
                n_resamples=n_resamples)


def given_parameters(namespace: dict) -> dict:
    """The notebook's parameters as papermill left them: the user's names in
    ``namespace`` (``globals()`` before any import but of modules), without IPython's
    own, private names (a leading ``_``) or modules."""
    try:
        from IPython import get_ipython
        hidden = set(getattr(get_ipython(), "user_ns_hidden", None) or ())
    except ImportError:
        hidden = set()
    return {k: v for k, v in namespace.items()
            if not k.startswith("_") and k not in hidden and k not in ("In", "Out")
            and not isinstance(v, types.ModuleType)}


def unknown_parameters_iv(given: dict, declared) -> None:
    """Refuse a parameter the notebook does not declare (papermill only warns, then
    injects it, so a misspelled ``-p trails 3`` would be ignored)."""
    unknown = sorted(set(given) - set(declared))
    if unknown:
        import difflib
        hints = [f"did you mean `{m[0]}`?" for name in unknown
                 for m in [difflib.get_close_matches(name, declared, n=1)] if m]
        raise ValueError(f"`{unknown[0]}` is not a parameter of this notebook; its parameters "
                         f"are {list(declared)}; got {unknown}" +
                         (f" ({' '.join(hints)})" if hints else "") + ".")


def check_given(root: Path, given: dict, extra=()) -> dict:
    """A measuring notebook's first step: refuse unknown parameters (declared: the common
    ones and ``extra``), check the common ones (:func:`check_parameters`) and, with
    ``measure``, build the measurement plan (which checks shapes, candidates, device and
    sample counts), all before anything is measured or written. Returns the checked
    parameters, with ``plan`` (None unless measuring)."""
    given = given_parameters(given)
    unknown_parameters_iv(given, COMMON_PARAMETERS + tuple(extra))
    missing = [k for k in COMMON_PARAMETERS if k not in given]
    if missing:
        raise ValueError(f"the notebook's parameters cell must define {missing}.")
    params = check_parameters(root=root, **{k: given[k] for k in COMMON_PARAMETERS})
    params["plan"] = None
    if params["measure"]:
        from ..measure import sweep
        params["plan"] = sweep.measurement_plan(
            params["device"], shapes=params["shapes"], candidates=params["candidates"],
            trials=params["trials"], samples=params["samples"])
    return params


def choice_iv(name: str, value, choices) -> str:
    """Check a parameter that must be one of ``choices``."""
    if value not in tuple(choices):
        raise ValueError(f"`{name}` must be one of {tuple(choices)}; got {value!r}.")
    return value


def fraction_iv(name: str, value, high: float) -> float:
    """Check a number in the open interval (0, ``high``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < high:
        raise ValueError(f"`{name}` must be a number in (0, {high}); got {value!r}.")
    return float(value)


def config_iv(name: str, value, params: dict) -> str:
    """Check a configuration key: '' or a key such as B32-H8-S512-D64-fp16; when
    measuring, one of the configurations the plan measures."""
    from ..configs import Config
    if not isinstance(value, str):
        raise ValueError(f"`{name}` must be '' or a configuration key; got {value!r}.")
    if value:
        Config.from_key(value)
        plan = params.get("plan")
        if plan is not None and value not in [c.key for c in plan.configs]:
            raise ValueError(f"`{name}` must be '' or one of the configurations to measure "
                             f"{[c.key for c in plan.configs]}; got {value!r}.")
    return value


def candidate_names_iv(name: str, value, params: dict, single: bool = False) -> tuple:
    """Check comma-separated candidate names (exactly one if ``single``): each registered;
    when measuring, at least one of them among the plan's candidates. Returns the names."""
    from ..measure import candidates as cands
    what = "a candidate name" if single else "comma-separated candidate names"
    names = tuple(value.replace(",", " ").split()) if isinstance(value, str) else ()
    bad = [n for n in names if n not in cands.CANDIDATES]
    if not names or bad or (single and len(names) != 1):
        raise ValueError(f"`{name}` must be {what} from {sorted(cands.CANDIDATES)}; "
                         f"got {value!r}.")
    plan = params.get("plan")
    if plan is not None and not set(names) & set(plan.candidates):
        raise ValueError(f"`{name}` must name one of the candidates to measure "
                         f"{list(plan.candidates)}; got {value!r}.")
    return names


def measure_new_run(params: dict) -> str:
    """Measure ``params["plan"]`` (default: ``sweep.measurement_plan`` of the
    parameters) into ``runs_dir/<run_id>`` (resumable); return the run id. The default id
    names the device and the UTC time."""
    from ..measure import sweep
    run_id = params["run_id"] or (f"{params['device']}-"
                                  f"{_dt.datetime.now(_dt.timezone.utc):%Y%m%dT%H%M%SZ}")
    plan = params.get("plan") or sweep.measurement_plan(
        params["device"], shapes=params["shapes"], candidates=params["candidates"],
        trials=params["trials"], samples=params["samples"])
    sweep.run(Path(params["runs_dir"]) / run_id, plan, progress=False)
    return run_id


def run_catalog(runs: dict) -> pd.DataFrame:
    """One row per run: device kind, device label, matrix, candidates, modes and unit count
    (the input of ``provenance.choose_lead``)."""
    rows = []
    for run_id, r in runs.items():
        trials = (r.fingerprint or {}).get("trials") or {}
        fp = next(iter(trials.values()), {})
        plan = (r.info or {}).get("plan", {})
        rows.append({"run": run_id, "device_kind": fp.get("device_kind", "unknown"),
                     "label": provenance.run_label(r), "matrix": plan.get("matrix") or "",
                     "n_configs": int(r.samples["config"].nunique()),
                     "candidates": ", ".join(sorted(r.samples["candidate"].unique())),
                     # unique() first: a set of the column walks millions of strings
                     "modes": ", ".join(m for m in configs.MODES
                                        if m in set(r.samples["mode"].unique())),
                     "n_trials": int(r.samples["trial"].nunique()),
                     "n_units": int((r.units["status"] == "ok").sum()),
                     "n_samples": len(r.samples)})
    return pd.DataFrame(rows, columns=["run", "device_kind", "label", "matrix", "n_configs",
                                       "candidates", "modes", "n_trials", "n_units",
                                       "n_samples"])


def lead_run(catalog: pd.DataFrame, requested: str, measured: str = "") -> str:
    """The run a notebook leads with: the run just measured, else ``requested`` when it is
    recorded, else (for the documented default only) ``provenance.choose_lead``'s pick."""
    if measured:
        return measured
    if requested == DEFAULT_LEAD_RUN and requested not in set(catalog["run"]):
        requested = ""
    return provenance.choose_lead(catalog, requested)


def as_number(value) -> float:
    """A plain Python float (glue's text form of numpy scalars does not parse back)."""
    value = float(value)
    return value if math.isfinite(value) else math.nan


def glue_text(key: str, value) -> None:
    """Glue a number (as a float) or a string without displaying it."""
    from myst_nb import glue
    if isinstance(value, str):
        glue(key, value, display=False)
    else:
        glue(key, as_number(value), display=False)


def glue_values(prefix: str, values: dict) -> None:
    """Glue each of ``values`` (:func:`glue_text`) under ``prefix`` followed by its key."""
    for key, value in values.items():
        glue_text(prefix + key, value)


def glue_figure(key: str, fig) -> None:
    """Glue a matplotlib Figure as a PNG without displaying it here (the book pastes it).

    The PNG is rendered here, so no matplotlib backend or IPython formatter is involved.
    """
    import io

    from IPython.display import Image
    from myst_nb import glue
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    glue(key, Image(data=buf.getvalue(), format="png"), display=False)


def small_fraction_iv(name: str, value, params=None) -> float:
    """Check a number in (0, 0.5): an equivalence margin or a test's level."""
    return fraction_iv(name, value, 0.5)


def margin_iv(name: str, value, params=None) -> float:
    """Check an equivalence margin as the analysis does (``stats.margin_iv``: a number in
    ``stats.MARGIN_RANGE``)."""
    return stats.margin_iv(value, name)


def count_iv(name: str, value, params=None) -> int:
    """Check an integer of at least 1 (processes, a family size)."""
    return _validate.integer(name, value, 1)


def resamples_iv(name: str, value, params=None) -> int:
    """Check a number of bootstrap resamples: an integer of at least 100."""
    return _validate.integer(name, value, 100)


def names_iv(name: str, value, params=None, choices=None) -> tuple:
    """Check '' or comma-separated names (run ids, or campaigns: each one of ``choices``
    when given); return them as a tuple, in order (empty for '')."""
    names = tuple(v.strip() for v in value.split(",") if v.strip()) \
        if isinstance(value, str) else None
    if names is None or any(not _RUN_ID.fullmatch(n) for n in names) or \
            (choices is not None and not set(names) <= set(choices)):
        allowed = f" from {sorted(choices)}" if choices is not None else ""
        raise ValueError(f"`{name}` must be '' or comma-separated names{allowed}; "
                         f"got {value!r}.")
    return names


def mode_iv(name: str, value, params=None) -> str:
    """Check a timing mode (``configs.MODES``); :func:`prelude` then checks that the lead
    run recorded it."""
    return choice_iv(name, value, configs.MODES)


def candidate_name_iv(name: str, value, params: dict) -> str:
    """Check one registered candidate name (:func:`candidate_names_iv`)."""
    return candidate_names_iv(name, value, params, single=True)[0]


def _checked(given: dict, params: dict, checks: dict) -> dict:
    """Apply each notebook check, in order, to the parameter of its name."""
    missing = [k for k in checks if k not in given]
    if missing:
        raise ValueError(f"the notebook's parameters cell must define {missing}.")
    for name, check in checks.items():
        params[name] = check(name, given[name], params)
    return params


def parameters(namespace: dict, **checks) -> tuple[Path, dict]:
    """The first step of a notebook that reads named runs and checks (it never measures):
    find the repository (:func:`repo_root`), refuse a parameter other than ``runs_dir``
    and those named in ``checks``, check that ``runs_dir`` is a folder, then apply each
    check ``check(name, value, params)`` in order. ``namespace`` is the notebook's
    ``globals()`` (only modules imported before the call).

    Returns ``(root, params)``: ``params`` maps ``root``, ``runs_dir`` (absolute) and each
    checked parameter to what its check returned (a loaded run, a check file's payload, a
    normalised number).
    """
    root = repo_root()
    given = given_parameters(namespace)
    unknown_parameters_iv(given, ("runs_dir",) + tuple(checks))
    runs_dir = given.get("runs_dir")
    if not isinstance(runs_dir, str) or not runs_dir or not (root / runs_dir).is_dir():
        raise ValueError(f"`runs_dir` must be an existing folder; got {runs_dir!r}.")
    return root, _checked(given, {"root": root, "runs_dir": (root / runs_dir).resolve()},
                          checks)


class Prelude(NamedTuple):
    """What :func:`prelude` hands a measuring notebook."""

    root: Path          # the repository
    params: dict        # every parameter, checked (see prelude)
    runs: dict          # every finalized run under runs_dir, loaded, by run id
    catalog: pd.DataFrame  # run_catalog(runs)
    lead: str           # the run the notebook leads with
    run: object         # runs[lead]


def prelude(namespace: dict, **checks) -> Prelude:
    """The first step of a notebook that can measure (01 to 05), in one call.

    Refuses a parameter that is neither common (``COMMON_PARAMETERS``; the measuring ones
    a notebook does not declare take ``MEASURE_DEFAULTS``) nor named in ``checks``; checks
    the common ones (:func:`check_given`, which also builds the measurement plan) and then
    each ``check(name, value, params)`` in order, all before anything is measured or
    written. Then :func:`start`: measure if ``measure``, load every run, pick the lead. A
    notebook with a ``mode`` parameter must find that mode in the lead run.
    ``namespace`` is the notebook's ``globals()``.
    """
    root = repo_root()
    given = {**MEASURE_DEFAULTS, **given_parameters(namespace)}
    params = dict(check_given(root, given, extra=tuple(checks)), root=root)
    params, runs, catalog, lead = start(_checked(given, params, checks))
    run = runs[lead]
    if "mode" in checks and params["mode"] not in set(run.samples["mode"].unique()):
        raise ValueError(f"`mode` {params['mode']!r} was not recorded in run {lead!r}; it "
                         f"has {sorted(run.samples['mode'].unique())}.")
    return Prelude(root, params, runs, catalog, lead, run)


def start(params: dict) -> tuple[dict, dict, pd.DataFrame, str]:
    """A notebook's step after every parameter is checked (:func:`check_given` and the
    notebook's own checks): measure a new run if ``measure`` is true, load every recorded
    run and pick the lead.

    Returns ``(params, runs, catalog, lead)``.
    """
    measured = measure_new_run(params) if params["measure"] else ""
    runs = load_runs(params["runs_dir"])
    catalog = run_catalog(runs)
    return params, runs, catalog, lead_run(catalog, params["run"], measured)
