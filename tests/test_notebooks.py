"""The notebooks re-execute with new parameters, and a measured run reaches the book.

In a temporary copy of the repository (the real ``data/`` is never touched) that holds
the session's built book, papermill runs ``03_matrix`` with ``measure=True`` on the CPU
with a tiny new shape, the new run is recorded under the copy's ``data/runs``, and after
a rebuild (the same ``jupyter-book build`` command as the README's, over the existing
``_build``) the book's cross-device table has a row for the new configuration and the new
run. The copy, the measurement and the rebuild run in the background from collection
time (``measured_copy``, conftest and ``session_builds``); this file checks what they left.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from session_builds import NEW_RUN

pytestmark = pytest.mark.slow  # book build, papermill or the Triton interpreter

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
NEW_CONFIG_SHOWN = ("B2-H2-S48-D64-fp16", "B2 H2 S48")  # tables print the short form


def _html_outputs(nb) -> str:
    """The HTML and Markdown outputs (tables are Markdown, see attn_analysis.present.tables)."""
    return "\n".join(o.get("data", {}).get(kind, "") for c in nb.cells
                     if c.cell_type == "code" for o in c.get("outputs", [])
                     for kind in ("text/html", "text/markdown"))


def _shows_new_config(text: str) -> bool:
    return any(form in text for form in NEW_CONFIG_SHOWN)


def test_measure_on_cpu_reaches_the_cross_device_table(measured_copy):
    # the book as built before the measurement: the copy held the session's build
    before = measured_copy["before"]
    assert "h200-reports-p2-all" in before and not _shows_new_config(before)

    run_dir = measured_copy["copy"] / "data" / "runs" / NEW_RUN
    assert (run_dir / "manifest.json").is_file()
    assert not (ROOT / "data" / "runs" / NEW_RUN).exists()
    html = _html_outputs(measured_copy["measured"])
    assert _shows_new_config(html) and "CPU" in html  # the lead table is the new CPU run

    after = measured_copy["after"]  # the data changed, so the cached executions were redone
    assert _shows_new_config(after) and NEW_RUN in after


def test_bad_parameter_stops_with_a_named_value_error(tmp_path):
    ipynb = tmp_path / "in.ipynb"
    subprocess.run([sys.executable, "-m", "jupytext", "--to", "ipynb", "-o", str(ipynb),
                    str(NOTEBOOKS / "04_sweeps.py")], check=True, capture_output=True)
    proc = subprocess.run([sys.executable, "-m", "papermill", str(ipynb),
                           str(tmp_path / "out.ipynb"), "--cwd", str(NOTEBOOKS),
                           "-p", "mode", "warm"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "`mode` must be one of" in proc.stderr


# ----------------------------------------------- every parameter checked before any work


def _ipynb(notebook: str, folder: Path) -> Path:
    """``jupytext --to ipynb`` of ``notebook`` into ``folder``, through the command line's
    own entry point in this process (an interpreter's start and imports were about 1 s of
    each case); the command itself runs in ``test_bad_parameter_stops_with_a_named_value_error``
    and in the session's measured copy (``session_builds.papermill``)."""
    from jupytext.cli import jupytext
    out = folder / notebook.replace(".py", ".ipynb")
    if not out.exists():
        assert not jupytext(["--quiet", "--to", "ipynb", "-o", str(out),
                             str(NOTEBOOKS / notebook)])
    return out


@pytest.fixture(scope="module")
def notebook_kernel():
    """One python3 kernel, started in notebooks/ as papermill's ``--cwd`` would, shared by
    the refusal cases below: a kernel's start and the package's import were 4-5 s of each
    case. Each case first empties the kernel's namespace (``%reset -f``), so it sees only
    its own parameters (a name left over would itself be refused as an unknown parameter);
    ``test_bad_parameter_stops_with_a_named_value_error`` runs papermill's command line in a
    kernel of its own."""
    from jupyter_client.manager import KernelManager
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(NOTEBOOKS))
    try:
        yield km
    finally:
        km.shutdown_kernel(now=True)


def _run_bad(notebook: str, tmp_path: Path, km, **parameters) -> str:
    """Execute ``notebook`` in the shared kernel ``km`` (started in the real notebooks/
    folder), its namespace emptied first, with ``parameters``; it must stop with a
    ValueError, whose message is returned."""
    import papermill
    nb = nbformat.read(_ipynb(notebook, tmp_path), as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell("%reset -f"))
    fresh = tmp_path / "fresh.ipynb"
    nbformat.write(nb, fresh)
    with pytest.raises(papermill.PapermillExecutionError) as info:
        papermill.execute_notebook(str(fresh), str(tmp_path / "out.ipynb"),
                                   parameters=parameters, cwd=str(NOTEBOOKS),
                                   kernel_name="python3", progress_bar=False, km=km)
    assert info.value.ename == "ValueError", (info.value.ename, info.value.evalue)
    return info.value.evalue


@pytest.mark.parametrize("notebook, parameters, message", [
    ("02_fixed_shape.py", dict(measure=True, device="cpu", margin=2),
     "`margin` must be a number in (0, 1); got 2."),
    ("02_fixed_shape.py", dict(measure=True, device="cpu", config="B1-H1-S16-D64-fp16"),
     "`config` must be '' or one of the configurations to measure"),
    ("03_matrix.py", dict(measure=True, device="cpu", mode="bogus"),
     "`mode` must be one of ('per_call', 'cold_l2', 'graph'); got 'bogus'."),
    ("03_matrix.py", dict(measure=True, device="cpu", candidates="nope"),
     "`candidate` must be one of"),
    ("05_cross_device.py", dict(measure=True, device="cpu", candidate="sdpa,eager"),
     "`candidate` must be a candidate name from"),
    ("04_sweeps.py", dict(measure=True, device="cpu", roofline_candidates="sdpa_flash"),
     "`roofline_candidates` must name one of the candidates to measure"),
])
def test_a_bad_parameter_stops_the_notebook_before_it_measures(tmp_path, notebook_kernel,
                                                               notebook, parameters, message):
    runs = tmp_path / "runs"
    message_got = _run_bad(notebook, tmp_path, notebook_kernel, runs_dir=str(runs),
                           **parameters)
    assert message in message_got
    assert not runs.exists()  # nothing measured, nothing written


@pytest.mark.parametrize("notebook, parameters, message", [
    ("03_matrix.py", dict(trails=3),
     "`trails` is not a parameter of this notebook; its parameters are ['runs_dir'"),
    ("03_matrix.py", dict(trails=3), "(did you mean `trials`?)"),
    ("09_audit.py", dict(lead_rn="x"), "`lead_rn` is not a parameter of this notebook"),
    ("03_matrix.py", dict(triton_run="no-such-run"),
     "`triton_run` must be '' or a finalized run under"),
    ("04_sweeps.py", dict(roofline_candidates="bogus"),
     "`roofline_candidates` must be comma-separated candidate names from"),
    ("02_fixed_shape.py", dict(graph_check="data/checks/no_such_file.json"),
     "`graph_check` must be '' or an existing file"),
    ("02_fixed_shape.py", dict(replication="no-such-run"),
     "`replication` must be '' or a finalized run under"),
])
def test_unknown_and_missing_named_inputs_are_refused(tmp_path, notebook_kernel, notebook,
                                                     parameters, message):
    assert message in _run_bad(notebook, tmp_path, notebook_kernel, **parameters)


@pytest.mark.parametrize("notebook", sorted(p.name for p in NOTEBOOKS.glob("[01][0-9]_*.py")))
def test_papermill_parses_every_parameter_and_the_cell_is_hidden(tmp_path, notebook, caplog,
                                                                 monkeypatch):
    ipynb = _ipynb(notebook, tmp_path)
    nb = nbformat.read(ipynb, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assert "hide-input" in cell.metadata["tags"]
    declared = [line.split("=")[0].strip() for line in cell.source.splitlines()
                if line and not line.startswith((" ", "#"))]
    # `papermill --help-notebook`, its click command run in this process (an interpreter
    # per notebook was about 1 s each; `python -m papermill` runs in
    # test_bad_parameter_stops_with_a_named_value_error). The command sets this variable
    # for good; monkeypatch restores it. What papermill cannot parse it logs as a warning.
    from click.testing import CliRunner
    from papermill.cli import papermill
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    with caplog.at_level("WARNING", logger="papermill"):
        result = CliRunner().invoke(papermill, ["--help-notebook", str(ipynb)])
    assert result.exit_code == 0, result.output
    assert "Unable to parse" not in result.output + caplog.text
    listed = [line.split(":")[0].strip() for line in result.output.splitlines()
              if line.startswith("  ") and ": " in line and not line.startswith("   ")]
    assert listed == declared
