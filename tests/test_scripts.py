"""scripts/: they import on a CPU machine, build on the package's primitives, and write
sealed check files (the GPU runs themselves happen on the device machine only); the Gluon
kernel's recorded checks (data/checks/gluon_check*.json) hold what they claim."""

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
           "gluon_check.py": "gluon_check", "gluon_space_probe.py": "gluon_probe",
           "timer_crosscheck.py": "timers", "crossover_ncu.py": "crossover_ncu"}
# Kinds whose script exists but has not yet run on the device (no file in data/checks);
# gluon_check left it on 2026-11-24 (data/checks/gluon_check_h100.json, _h200.json).
NOT_YET_RECORDED: set[str] = set()  # every writer has a recorded file


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


# ------------------------------------------------------------------ scripts/gluon_ncu.py

def test_gluon_ncu_prints_its_usage_and_refuses_unknown_variants(capsys):
    script = load(ROOT / "scripts" / "gluon_ncu.py")
    with pytest.raises(SystemExit) as done:
        script.main(["--help"])
    assert done.value.code == 0 and "ncu --set full" in capsys.readouterr().out
    for argv in ([], ["plain,fastest"]):  # refused before any input is made on a GPU
        with pytest.raises(SystemExit) as done:
            script.main(argv)
        assert done.value.code == 2
    assert "got ['fastest']" in capsys.readouterr().err


# ---------------------------------------------------------- scripts/gluon_space_probe.py

def test_gluon_space_probe_parses_changes_and_refuses_bad_ones_before_the_gpu(capsys):
    script = load(ROOT / "scripts" / "gluon_space_probe.py")
    assert script.parse_config("p2=overlap_only:PERSIST=2,OVERLAP=True") == (
        "p2", "overlap_only", {"PERSIST": 2, "OVERLAP": True})
    assert script.parse_config("same=fa3") == ("same", "fa3", {})
    for text in ("noequals", "x=fa3:BLOCK_N"):
        with pytest.raises(ValueError, match="--config"):
            script.parse_config(text)
    for argv in (["--config", "x=fastest"], ["--config", "x=fa3:BLOCK_N=96"]):
        with pytest.raises(SystemExit) as done:  # refused before torch touches a GPU
            script.main(argv)
        assert done.value.code == 2
    err = capsys.readouterr().err
    assert "got 'fastest'" in err and "BLOCK_N" in err


# ---------------------------------------------------------------- scripts/gluon_check.py

def _timed_out_child(monkeypatch, tmp_path, stdout: bytes):
    """run_child of gluon_check.py where the child reaches its time limit after printing
    ``stdout`` (as subprocess.run reports it: bytes, whatever ``text`` says)."""
    import subprocess
    script = load(ROOT / "scripts" / "gluon_check.py")

    def run(cmd, timeout, env, **kwargs):
        assert env["TRITON_CACHE_DIR"] == str(tmp_path)  # consan compiles into a fresh cache
        raise subprocess.TimeoutExpired(cmd, timeout, output=stdout, stderr=b"compiling\n")
    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setattr(script.tempfile, "mkdtemp", lambda prefix: str(tmp_path))
    return script.run_child("pingpong", "consan", False, 275.0)


def test_gluon_check_from_row_is_refused_outside_the_cases_before_the_gpu(capsys):
    script = load(ROOT / "scripts" / "gluon_check.py")
    n = len(script.grid_cases(quick=False, consan=True))
    for argv in (["--sections", "consan", "--from-row", str(n)],
                 ["--sections", "consan", "--from-row", "-1"],
                 ["--sections", "speed", "--from-row", "1"]):
        with pytest.raises(SystemExit) as done:
            script.main(argv)
        assert done.value.code == 2
    assert f"--from-row must be in [0, {n})" in capsys.readouterr().err


def test_gluon_check_a_child_stopped_after_rows_is_not_called_a_hang(monkeypatch, tmp_path):
    row = json.dumps({"section": "consan", "variant": "pingpong", "ok": True})
    rows, end = _timed_out_child(monkeypatch, tmp_path, f"ROW {row}\nnoise\nROW {row}\n".encode())
    assert len(rows) == 2 and end["rows_done"] == 2
    assert end["status"] == ("timeout: time limit after 275 s with 2 rows done; "
                             "not shown to hang")
    assert end["stderr_tail"] == "compiling\n"


def test_gluon_check_only_a_child_with_no_row_may_have_hung(monkeypatch, tmp_path):
    rows, end = _timed_out_child(monkeypatch, tmp_path, b"")
    assert rows == [] and end["rows_done"] == 0
    assert end["status"].startswith("timeout: time limit after 275 s with no row done; ")
    assert "possibly a hang" in end["status"] and "possibly a slow compile" in end["status"]


# ------------------------------------ the Gluon kernel's recorded device checks (data/checks)

def _gluon_check_files():
    files = sorted((ROOT / "data" / "checks").glob("gluon_check*.json"))
    return {p.name: checks.read(p, "gluon_check") for p in files}


def test_every_gluon_variant_has_passed_its_grid_on_a_gpu():
    from attn_analysis.measure import gluon_config as gc
    script = load(ROOT / "scripts" / "gluon_check.py")
    docs = _gluon_check_files()
    passed = {v: set() for v in gc.CHECKED_VARIANTS}
    for name, doc in docs.items():
        assert doc["fingerprint"]["compute_capability"] == "9.0", name
        assert doc["triton"] == "3.6.0" and doc["unavailable"] is None, name
        for r in doc["rows"]:
            if r["section"] in ("grid", "gate"):
                assert r["ok"], (name, r)  # no recorded grid or gate row failed
            if r["section"] == "grid":
                assert r["nonfinite"] == 0 and r["err"] < r["threshold"], (name, r)
                # a variant outside CHECKED_VARIANTS may have passed too (the ablation's
                # candidates for the next check): recorded, held to the same rows
                passed.setdefault(r["variant"], set()).add((r["dtype"], r["D"], r["causal"],
                                                            r["B"], r["H"], r["S"]))
    # plain's full grid ran in the second session of 2026-11-25 (gluon_check_h200c_plain_grid)
    full = set(script.grid_cases(quick=False))
    assert len(full) == 56
    for variant in gc.CHECKED_VARIANTS:
        assert passed[variant] >= full, (variant, sorted(full - passed[variant]))


def test_gluon_consan_rows_that_ran_found_no_race():
    from attn_analysis.measure import gluon_config as gc
    docs = _gluon_check_files()
    rows = [(name, r) for name, doc in docs.items() for r in doc["rows"]
            if r["section"] == "consan"]
    assert {r["variant"] for _, r in rows} >= {"warp_spec", "pingpong", "fa3"}
    assert all(r["ok"] and "error" not in r for _, r in rows), rows
    for name, doc in docs.items():
        for child in doc["children"]:
            if child["section"] != "consan" or child["status"] == "ok":
                continue
            # cut by the time limit (the label then said "a hang") after rows had passed
            done = [r for r in doc["rows"]
                    if r["section"] == "consan" and r["variant"] == child["variant"]]
            assert child["status"].startswith("timeout") and done, (name, child)
    # every sanitizer case has run for each warp-specialised variant the tuner may choose
    # (CHECKED_VARIANTS; fa3_n128_s3 joined it on its two parts of 2026-11-28): pingpong,
    # fa3 and fa3_n128_s3, cut by the time limit in one call, were finished from the case
    # they had reached (gluon_check.py --from-row), on the inputs a full run draws
    script = load(ROOT / "scripts" / "gluon_check.py")
    cases = set(script.grid_cases(quick=False, consan=True))
    assert len(cases) == 8
    warp_specialised = [v for v in gc.CHECKED_VARIANTS if gc.config_for(64, v)["WARP_SPEC"]]
    assert {"warp_spec", "pingpong", "fa3", "fa3_n128_s3"} <= set(warp_specialised)
    for variant in warp_specialised:
        ran = {(r["dtype"], r["D"], r["causal"], r["B"], r["H"], r["S"])
               for _, r in rows if r["variant"] == variant}
        assert ran == cases, (variant, sorted(cases - ran))


# The speed sections recorded: H200 21a363ab (2026-11-25), then H100 4aa6738a and another
# H200, 78684018 (2026-11-25, second session; code 928900d0), each of the variants checked
# then (later variants join CHECKED_VARIANTS without a speed section of their own).
SPEED_FILES = ("gluon_check_h200_speed.json", "gluon_check_h100_speed.json",
               "gluon_check_h200b_speed.json")
SPEED_VARIANTS = ("plain", "persist", "warp_spec", "pingpong", "fa3", "overlap_only")


def test_the_speed_files_are_the_recorded_speed_sections():
    docs = _gluon_check_files()
    recorded = {name for name, doc in docs.items()
                if any(r["section"] == "speed" for r in doc["rows"])}
    assert recorded == set(SPEED_FILES)
    gpus = {docs[name]["fingerprint"]["gpu_uuid"] for name in SPEED_FILES}
    assert len(gpus) == len(SPEED_FILES)  # three different GPUs


@pytest.mark.parametrize("name", SPEED_FILES)
def test_gluon_speed_check_timed_each_variant_beside_cudnn(name):
    from attn_analysis.measure import candidates as cands
    from attn_analysis.measure import gluon_config as gc
    from attn_analysis.measure import gluon_kernels as gk
    speed = {r["variant"]: r for r in _gluon_check_files()[name]["rows"]}
    assert set(speed) == {"sdpa", *SPEED_VARIANTS}
    assert set(SPEED_VARIANTS) <= set(gc.CHECKED_VARIANTS)
    for variant, r in speed.items():
        assert r["ok"] and r["err"] < cands.REL_ERROR_THRESHOLD["float16"], variant
        kernel = r["kernels"][0]["name"]
        assert (kernel.startswith("cudnn_") if variant == "sdpa" else kernel == gk.KERNEL_NAME)
        assert r["attention_kernel_ms"] == r["kernels"][0]["ms_per_call"]
        assert r["sdpa_over_this_attention_kernel"] == pytest.approx(
            speed["sdpa"]["attention_kernel_ms"] / r["attention_kernel_ms"])


def test_compile_bytecode_writes_under_the_prefix_and_skips_test_suites(tmp_path, monkeypatch):
    script = load(ROOT / "scripts" / "compile_bytecode.py")
    pkg = tmp_path / "src" / "somepkg"
    (pkg / "tests").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("X = 1\n")
    (pkg / "tests" / "test_mod.py").write_text("def test(): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    assert script.package_dirs(["somepkg", "no_such_package_here"]) == [pkg]
    prefix = tmp_path / "pyc"
    monkeypatch.setattr("sys.pycache_prefix", str(prefix))
    assert script.compile_all([pkg], workers=1, stdlib=False)
    written = sorted(p.name.split(".")[0] for p in prefix.rglob("*.pyc"))
    assert written == ["__init__", "mod"]
    assert not list(pkg.rglob("*.pyc"))  # nothing beside the sources
