"""Builders the test modules share: journal units, a small finalized run, the process
checks of the tests that kill sweeps and their workers, one tiny recorded sweep, and the
book, what Chromium finds in it and its PDF, built once per test session in the background
(``built_book``, ``chromium_report``, ``chapter_screenshots``, ``built_pdf``,
``measured_copy``; see ``session_builds``).

Import the builders by name (``from conftest import make_run``); pytest also loads this
file itself, before any test module, and hands the fixtures to the tests that name them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import session_builds
from attn_analysis import record
from attn_analysis.measure import tuning_cache
from attn_analysis.record import verify_memo

ROOT = Path(__file__).resolve().parents[1]
_BUILDS = session_builds.SessionBuilds()
# Sweeps run by the tests on a GPU must not write the user's per-machine tuning cache.
os.environ.setdefault(tuning_cache.ENV_VAR,
                      str(Path(tempfile.mkdtemp(prefix="attn-tuning-")) / "tuning.json"))
# One memo of verified runs for the session (record.verify_memo), as the book keeps one for
# a build: the first test to load a committed run checks it in depth, later loads of the
# same bytes check its manifest and identity (the memo is keyed by the manifest's bytes
# and the checking code, so a run a test alters is checked in depth again). Tests of the
# memo itself set or clear the variable.
os.environ.setdefault(verify_memo.ENV, tempfile.mkdtemp(prefix="attn-verified-"))
# The fixtures that wait for a background step (session_builds); tests that use them run last.
_BOOK_FIXTURES = session_builds.SessionBuilds.STEPS


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected what will not run
def pytest_collection_modifyitems(session, config, items):
    """Start the session's background steps (``session_builds``) that the selected tests
    need, and move those tests to the end, so that the rest run meanwhile."""
    needs = [item for item in items if set(_BOOK_FIXTURES) & set(item.fixturenames)]
    if needs and not config.option.collectonly:
        _BUILDS.start({name for item in needs for name in item.fixturenames
                       if name in _BOOK_FIXTURES})
        items[:] = [item for item in items if item not in needs] + needs


def pytest_sessionfinish(session, exitstatus):
    _BUILDS.close()


def _waited(name: str):
    """The value of background step ``name``; skips with its reason where it cannot run."""
    value = _BUILDS.wait(name)
    if isinstance(value, session_builds.Skip):
        pytest.skip(str(value))
    return value


@pytest.fixture(scope="session")
def built_book() -> Path:
    """The repository's HTML book (``_build/html``), built once per test session with the
    README's command, ``-W -n --keep-going`` (any warning fails it), in the background
    from collection time (``session_builds``). Its notebook cache in
    ``_build/.jupyter_cache`` makes an unchanged tree rebuild in seconds."""
    return _waited("built_book")


@pytest.fixture(scope="session")
def measured_copy(built_book) -> dict:
    """A copy of the repository holding the session's built book, after papermill measured
    a new CPU run into its ``data/runs`` and the README's build ran again: the copy, the
    measured notebook, and the cross-device page before and after (``session_builds``)."""
    return _waited("measured_copy")


@pytest.fixture(scope="session")
def chromium_report(built_book) -> dict:
    """What headless Chromium found on each chapter of the built book (``book_browser``'s
    check page), page by page; skips, saying why, without Chromium."""
    return _waited("chromium_report")


@pytest.fixture(scope="session")
def chapter_screenshots(built_book) -> dict:
    """Page -> its screenshot under ``_build/screenshots`` (``book_browser``); skips,
    saying why, without Chromium."""
    return _waited("chapter_screenshots")


@pytest.fixture(scope="session")
def built_pdf(built_book) -> Path:
    """The PDF from the documented command, once per session, after the HTML build (its
    notebook cache makes it quick); skips, saying why, without TeX Live or poppler-utils."""
    return _waited("built_pdf")


def make_timing_unit(config="B1-H2-S16-D64-fp16", candidate="sdpa", mode="graph", trial=0,
                     times=(0.5, 0.52, 0.51), status="ok", reason=""):
    """Builder for a timing unit as the sweep writes it."""
    return {"kind": "timing", "config": config, "candidate": candidate, "mode": mode,
            "trial": trial, "status": status, "reason": reason, "times_ms": list(times),
            "timing": {"clock": "cpu_wall", "stop_reason": "n_samples",
                       "ci_rel_halfwidth": 0.01, "calls_per_sample": 1},
            "gpu_state_start": {"sm_clock_mhz": None}, "gpu_state_end": {},
            "measurement_id": f"{candidate}-{mode}-{trial}"}


def make_run(tmp_path, n_trials=2):
    """A finalized CPU run, ``tmp_path/run-a``, holding a unit of every kind: per trial a
    trial unit, two timing units and a correctness unit; an unsupported candidate's timing
    unit, a kernels unit and a ceilings unit."""
    run = tmp_path / "run-a"
    for t in range(n_trials):
        record.write_unit(run, {"kind": "trial", "trial": t,
                                 "fingerprint": {"fingerprint_hash": "abc", "device_kind": "cpu"}})
        for mode in ("graph", "per_call"):
            record.write_unit(run, make_timing_unit(mode=mode, trial=t,
                                                     times=(0.5 + t, 0.6 + t, 0.55 + t)))
        record.write_unit(run, {"kind": "correctness", "config": "B1-H2-S16-D64-fp16",
                                 "candidate": "sdpa", "trial": t, "status": "ok", "reason": "",
                                 "result": {"passed": True, "rel_error": 3e-4,
                                            "max_abs_error": 1e-3, "threshold": 5e-3,
                                            "nonfinite": 0}})
    record.write_unit(run, make_timing_unit(candidate="sdpa_flash", status="unsupported",
                                             reason="cuda only", times=()))
    record.write_unit(run, {"kind": "kernels", "config": "B1-H2-S16-D64-fp16",
                             "candidate": "sdpa", "status": "ok",
                             "kernels": [{"name": "k1", "calls_per_call": 1.0,
                                          "device_ms_per_call": 0.4}]})
    record.write_unit(run, {"kind": "ceilings", "ceilings": {"matmul": {"tflops": 1.0}}})
    record.finalize(run, {"plan": {"device": "cpu"}})
    return run


# The sweep tests' tiny plan: two configurations (one causal bf16), one placement, four
# samples, no warm-up; tests override what they examine.
TINY_CONFIGS = ("B1-H2-S16-D64-fp16", "B2-H1-S9-D64-bf16-causal")
SWEPT_CANDIDATES = ("sdpa", "eager", "fake_wrong_scale", "fake_oom", "fake_gpu_only",
                    "fake_half_written")


def tiny_plan(**overrides):
    """A sweep plan of the tiny CPU design, with ``overrides``."""
    from attn_analysis.measure import sweep
    from attn_analysis.configs import Config
    base = dict(configs=tuple(Config.from_key(k) for k in TINY_CONFIGS),
                candidates=("sdpa", "eager"), modes=("per_call", "graph"), trials=2,
                device="cpu", timing={"n_samples": 4}, plugins=("fake_candidates",),
                ceilings=False, profile=False, placements=1, process_warmup_ms=0.0)
    base.update(overrides)
    return sweep.Plan(**base)


@pytest.fixture(scope="session")
def swept_run(tmp_path_factory):
    """One tiny CPU sweep recorded once per session and read by every test that needs a
    run as the sweep records it: (folder, plan, summary). Two processes, every kind of
    failure a candidate can record (wrong result, half-written output, out of memory,
    unsupported), kernel evidence and ceilings. Read it; copy it to change it."""
    import fake_candidates  # noqa: F401  (registers the failing candidates)
    from attn_analysis.measure import sweep
    out = tmp_path_factory.mktemp("swept") / "run"
    plan = tiny_plan(candidates=SWEPT_CANDIDATES, profile=True, ceilings=True)
    summary = sweep.run(out, plan, progress=False)
    return out, plan, summary


def main_here(capsys, *args) -> subprocess.CompletedProcess:
    """``python -m attn_analysis *args`` through ``main`` in this process, as the
    CompletedProcess the command would give (exit code, stdout, stderr captured by
    ``capsys``): no interpreter to start and no torch to import again (1-3 s a command).
    A test that uses it runs the same verb through the command line too, or another test
    does."""
    from attn_analysis.__main__ import main
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return subprocess.CompletedProcess(["python", "-m", "attn_analysis", *args], code,
                                       out.out, out.err)


def copy_run(run: Path, folder: Path) -> Path:
    """A copy of ``run`` under ``folder``, with the same name (a run is known by its id)."""
    return Path(shutil.copytree(run, Path(folder) / run.name))


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, counts as dead)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def wait_dead(pids, timeout_s: float = 15.0) -> list[int]:
    """Wait for every pid to die; return those still alive after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


@pytest.fixture
def restore_torch_state():
    """The test leaves the global torch state, env var and RNGs as it found them (the lock's
    and the fingerprint's tests use it)."""
    import os

    from attn_analysis.measure import env
    before = env.lock_state()
    with env.preserved_state():
        # Exported, as on a GPU run: other tests may already have initialised CUDA in this
        # process, after which lock() refuses to set the variable itself.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        yield
    assert env.lock_state() == before
