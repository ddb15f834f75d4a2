"""scripts/: they import on a CPU machine, build on the package's primitives, and write
sealed check files (the GPU runs themselves happen on the device machine only)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from attn_analysis.record import checks
from attn_analysis.measure import profiler, timing

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "scripts").glob("*.py"))
# What each GPU script writes, and the package primitive that replaced its own copy.
WRITERS = {"audit_extras.py": "audit_extras", "check_timer.py": "check_timer",
           "graph_anatomy.py": "graph_anatomy", "graph_variability.py": "graph_variability",
           "peers_check.py": "peers_check", "triton_check.py": "triton_check",
           "gluon_check.py": "gluon_check"}
# Kinds whose script exists but has not yet run on the device (no file in data/checks);
# gluon_check left it on 2026-11-24 (data/checks/gluon_check_h100.json, _h200.json).
NOT_YET_RECORDED: set[str] = set()


def load(path: Path):
    """Import a script as a module (as ``PYTHONPATH=. python3 scripts/x.py`` would)."""
    spec = importlib.util.spec_from_file_location(f"script_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_every_script_imports_without_a_gpu(path):
    if path.name == "triton_check.py":
        pytest.importorskip("triton")
    assert callable(load(path).main)


@pytest.mark.parametrize("name, kind", sorted(WRITERS.items()))
def test_gpu_scripts_write_sealed_check_files_through_the_package(name, kind):
    text = (ROOT / "scripts" / name).read_text()
    assert f'"{kind}")' in text and "checks.write(" in text
    assert "json.dump(" not in text and "os.replace(" not in text  # no writer of their own
    assert "torch.cuda.CUDAGraph()" not in text  # graphs come from profiler.capture_graph
    assert "def reference(" not in text and "torch.softmax" not in text  # candidates.reference
    assert "pynvml" not in text and "nvidia-smi" not in text  # machine.gpu_state, machine.fingerprint


def test_check_timer_smoke_run_writes_a_check_file_that_verifies(tmp_path, capsys):
    out = tmp_path / "check_timer.json"
    script = load(ROOT / "scripts" / "check_timer.py")
    assert script.main(["--smoke", "--trials", "0", "--budget-s", "0.02", "--out", str(out)]) == 0
    assert checks.verify(out) == []
    doc = checks.read(out, "check_timer")
    assert doc["fingerprint"]["device_kind"] == "cpu"
    assert set(doc["results"]) == {"64", "128"}
    for r in doc["results"].values():
        assert r["rel_error_vs_fp64"] < 1e-5  # float32 SDPA against the float64 reference
        assert set(r["modes"]) == set(timing.MODES)
    assert "acceptance" in doc and "wrote" in capsys.readouterr().out


@pytest.mark.parametrize("call", [lambda: profiler.capture_graph(lambda: None, 2),
                                  lambda: profiler.profile_graph(object(), 2)])
def test_graph_primitives_need_cuda(call):
    if timing._cuda_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(ValueError, match="needs CUDA, which is not available here"):
        call()


@pytest.mark.parametrize("call, message", [
    (lambda: profiler.capture_graph(None), "`fn` must be a zero-argument callable"),
    (lambda: profiler.capture_graph(lambda: None, 0), "`n_calls` must be an integer >= 1"),
    (lambda: profiler.profile_graph(object(), 1, n_replays=0), "`n_replays` must be an integer"),
])
def test_graph_primitives_check_their_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_committed_check_files_name_the_script_that_writes_them():
    kinds = {json.loads(p.read_text())["check"] for p in (ROOT / "data" / "checks").glob("*.json")}
    assert kinds == set(WRITERS.values()) - NOT_YET_RECORDED
    assert set(WRITERS.values()) == set(checks.KINDS)
    assert not kinds & NOT_YET_RECORDED  # recorded now: take it out of NOT_YET_RECORDED
