"""notebook_support: the one-call prelude of the notebooks and the checks it applies."""

import math
import re
import sys
from pathlib import Path

import pytest

from attn_analysis.record import checks
from attn_analysis.cli import notebook_support as nbs

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
MEASURING = ("01_environment.py", "02_fixed_shape.py", "03_matrix.py", "04_sweeps.py",
             "05_cross_device.py")


def parameters_cell(notebook: str) -> dict:
    """The defaults of a notebook's parameters cell, as Python reads them."""
    text = (NOTEBOOKS / notebook).read_text()
    cell = re.search(r'# %% tags=\["parameters".*?\n(.*?)\n# %%', text, re.S).group(1)
    values = {}
    exec(cell, {}, values)
    return values


@pytest.fixture
def in_repo(monkeypatch):
    """Run from notebooks/, as the book and papermill do; leave sys.path as it was."""
    monkeypatch.chdir(NOTEBOOKS)
    monkeypatch.setattr(sys, "path", list(sys.path))


def test_measure_defaults_are_03_matrix_s_declared_defaults():
    declared = parameters_cell("03_matrix.py")
    assert {k: declared[k] for k in nbs.MEASURE_DEFAULTS} == nbs.MEASURE_DEFAULTS
    assert set(nbs.COMMON_PARAMETERS) <= set(declared)


@pytest.mark.parametrize("notebook", MEASURING)
def test_measuring_notebooks_declare_measure_and_call_the_prelude_once(notebook):
    declared = parameters_cell(notebook)
    assert {"runs_dir", "run", "measure", "n_resamples"} <= set(declared)
    if notebook != "03_matrix.py":
        assert not set(nbs.MEASURE_DEFAULTS) & set(declared)
    text = (NOTEBOOKS / notebook).read_text()
    assert text.count("nbs.prelude(") == 1 and "_given" not in text


@pytest.mark.parametrize("notebook", ("09_audit.py", "11_variance.py", "12_calibration.py"))
def test_reading_notebooks_call_parameters_once(notebook):
    text = (NOTEBOOKS / notebook).read_text()
    assert text.count("nbs.parameters(") == 1 and "_given" not in text


def test_given_parameters_leaves_out_modules_and_private_names():
    given = nbs.given_parameters({"runs_dir": "x", "sys": sys, "_cwd": 1, "In": [], "n": 2})
    assert given == {"runs_dir": "x", "n": 2}


def test_parameters_refuses_an_unknown_name_with_a_hint(in_repo):
    ns = {"runs_dir": "data/runs", "margin": 0.02, "n_resample": 100, "sys": sys}
    with pytest.raises(ValueError, match=r"`n_resample` is not a parameter.*did you mean "
                                         r"`n_resamples`\?"):
        nbs.parameters(ns, margin=nbs.small_fraction_iv, n_resamples=nbs.resamples_iv)


@pytest.mark.parametrize("ns, message", [
    (dict(runs_dir="no/such/dir", margin=0.02, n_resamples=100),
     "`runs_dir` must be an existing folder; got 'no/such/dir'."),
    (dict(runs_dir="data/runs", margin=0.5, n_resamples=100),
     r"`margin` must be a number in \(0, 0.5\); got 0.5."),
    (dict(runs_dir="data/runs", margin=0.02, n_resamples=99),
     "`n_resamples` must be an integer >= 100; got 99."),
    (dict(runs_dir="data/runs", margin=0.02),
     r"the notebook's parameters cell must define \['n_resamples'\]."),
])
def test_parameters_checks_each_in_order(in_repo, ns, message):
    with pytest.raises(ValueError, match=message):
        nbs.parameters(ns, margin=nbs.small_fraction_iv, n_resamples=nbs.resamples_iv)


def test_parameters_returns_what_each_check_returns(in_repo):
    root, params = nbs.parameters(
        {"runs_dir": "data/runs", "runs": "h200-kernel-bf16-p2", "family": 3,
         "one": "h200-kernel-bf16-p2"},
        family=nbs.count_iv, runs=nbs.runs_iv, one=nbs.run_iv)
    assert root == ROOT and str(ROOT) in sys.path
    assert params["runs_dir"] == ROOT / "data" / "runs" and params["family"] == 3
    assert list(params["runs"]) == ["h200-kernel-bf16-p2"]
    assert params["one"].run_id == "h200-kernel-bf16-p2"
    assert nbs.recorded_runs_iv("x", " h200-kernel-bf16-p2, ", params) == ["h200-kernel-bf16-p2"]
    assert nbs.recorded_runs_iv("x", "", params) == []


@pytest.mark.parametrize("check, value, message", [
    (nbs.runs_iv, " , ", "`x` must name one or more runs, comma-separated"),
    (nbs.runs_iv, "h200-kernel-bf16-p2,nope", "`x` must be '' or a finalized run under"),
    (nbs.protocol2_runs_iv, "h100-calibration-v1", r"`x` must name protocol-v2 runs .*"
                                                    r"\['h100-calibration-v1'\] are protocol 1"),
    (nbs.run_iv, "a,b", "`x` must be a run folder name; got 'a,b'."),
    (nbs.recorded_runs_iv, "h200-kernel-bf16-p2,nope", "`x` must be '' or a finalized run"),
    (nbs.recorded_runs_iv, 3, "`x` must be '' or comma-separated run folder names"),
    (nbs.count_iv, True, "`x` must be an integer >= 1; got True."),
    (nbs.mode_iv, "warm", "`x` must be one of ('per_call', 'cold_l2', 'graph')"),
])
def test_run_and_number_checks_name_the_parameter(check, value, message):
    params = {"root": ROOT, "runs_dir": ROOT / "data" / "runs"}
    with pytest.raises(ValueError, match=re.escape(message) if "(" in message else message):
        check("x", value, params)


def test_check_file_iv_reads_a_sealed_file_of_its_kind(tmp_path):
    checks.write(tmp_path / "a.json", {"results": {"k": math.pi}}, "graph_anatomy")
    (tmp_path / "old.json").write_text('{"results": {}}')
    params = {"root": tmp_path}
    assert nbs.check_file_iv("graph_anatomy")("x", "a.json", params) == {"results": {"k": math.pi}}
    assert nbs.check_file_iv("graph_variability", optional=True)("x", "", params) is None
    with pytest.raises(ValueError, match="`x` must be '' or an existing file relative to"):
        nbs.check_file_iv("graph_anatomy", optional=True)("x", "b.json", params)
    with pytest.raises(ValueError, match="`x` must be an existing file relative to"):
        nbs.check_file_iv("graph_anatomy")("x", "", params)
    with pytest.raises(ValueError, match="`x` must be a audit_extras check file that verifies; "
                                         ".*holds a graph_anatomy check"):
        nbs.check_file_iv("audit_extras")("x", "a.json", params)
    with pytest.raises(ValueError, match="not a sealed check file"):
        nbs.check_file_iv("graph_anatomy")("x", "old.json", params)


def test_prelude_checks_everything_before_it_measures(in_repo, tmp_path):
    runs = tmp_path / "runs"
    ns = dict(runs_dir=str(runs), run="", measure=True, n_resamples=1000, mode="warm",
              device="cpu", sys=sys)
    with pytest.raises(ValueError, match="`mode` must be one of"):
        nbs.prelude(ns, mode=nbs.mode_iv)
    with pytest.raises(ValueError, match="`trails` is not a parameter.*did you mean `trials`"):
        nbs.prelude(dict(ns, mode="graph", trails=3), mode=nbs.mode_iv)
    with pytest.raises(ValueError, match="`candidate` must be one of"):
        nbs.prelude(dict(ns, mode="graph", candidates="nope"), mode=nbs.mode_iv)
    assert not runs.exists()  # nothing measured, nothing written


def test_prelude_leads_with_the_requested_run_in_the_requested_mode(in_repo, tmp_path):
    import shutil
    run = "h200-kernel-bf16-p2"
    shutil.copytree(ROOT / "data" / "runs" / run, tmp_path / run)
    ns = dict(runs_dir=str(tmp_path), run=run, measure=False, n_resamples=1000,
              mode="graph")
    got = nbs.prelude(ns, mode=nbs.mode_iv)
    assert got.root == ROOT and got.lead == "h200-kernel-bf16-p2"
    assert got.run is got.runs["h200-kernel-bf16-p2"] and got.params["mode"] == "graph"
    assert got.params["device"] in ("cpu", "cuda")  # MEASURE_DEFAULTS["device"], resolved
    assert list(got.catalog["run"]) == list(got.runs)
    root, params, runs, catalog, lead, run = got  # the notebooks unpack it
    assert lead == got.lead
    with pytest.raises(ValueError, match=r"`mode` 'per_call' was not recorded in run "
                                         r"'h200-kernel-bf16-p2'; it has \['graph'\]"):
        nbs.prelude(dict(ns, mode="per_call"), mode=nbs.mode_iv)


@pytest.mark.parametrize("notebook", ("02_fixed_shape.py", "09_audit.py", "11_variance.py",
                                      "12_calibration.py", "06_state_of_the_art.py"))
def test_each_notebooks_margin_is_the_analysis_default(notebook):
    # the margin is declared in each parameters cell (papermill needs a literal); it must be
    # the one default of the analysis
    from attn_analysis.analyse.stats import DEFAULT_MARGIN
    assert parameters_cell(notebook)["margin"] == DEFAULT_MARGIN


def test_margin_iv_is_the_analysis_range():
    assert nbs.margin_iv("margin", 0.5) == 0.5
    for bad in (0, 1.0, True, "0.02"):
        with pytest.raises(ValueError, match=r"`margin` must be a number in \(0, 1\)"):
            nbs.margin_iv("margin", bad)
