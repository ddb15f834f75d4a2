"""run_lock: which folders may hold a run, one sweep per folder, workers that die with their parent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from attn_analysis.measure import run_lock
from conftest import alive, wait_dead

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def fake_repo(tmp_path):
    """A folder shaped like the repository: .git, README.md, data/runs/r1 (a run)."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "README.md").write_text("readme\n")
    run = root / "data" / "runs" / "r1"
    (run / "journal").mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    (run / "plan.json").write_text("{}")
    return root


@pytest.mark.parametrize("rel, message", [
    ("", "must be a folder path"),
    (".", "is a repository root"),
    ("data/runs", "holds runs"),
    ("data", "is a folder of other files"),
    ("README.md", "is a file"),
    ("README.md/x", "is a file, not a folder"),
    ("data/runs/r1/journal", "lies inside the run folder"),
    ("data/runs/r1/journal/new", "lies inside the run folder"),
])
def test_check_run_folder_refuses_what_cannot_hold_a_run(fake_repo, monkeypatch, rel, message):
    monkeypatch.chdir(fake_repo)
    with pytest.raises(ValueError, match=message) as info:
        run_lock.check_run_folder(rel, "--out")
    assert str(info.value).startswith("`--out` ")
    assert repr(rel) in str(info.value) or rel == ""


def test_check_run_folder_accepts_new_empty_and_run_folders(fake_repo, monkeypatch):
    monkeypatch.chdir(fake_repo)
    for rel in ("data/runs/new", "data/runs/new/deeper", "data/runs/r1", "/tmp/attn-new-run"):
        assert run_lock.check_run_folder(rel) == Path(rel)
    (fake_repo / "empty").mkdir()
    (fake_repo / "empty" / ".tmp-left-behind").write_text("x")
    assert run_lock.check_run_folder("empty") == Path("empty")
    assert not (fake_repo / "data" / "runs" / "new").exists()  # checking writes nothing


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only folder")
def test_check_run_folder_refuses_an_unwritable_parent(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        with pytest.raises(ValueError, match="`out_dir` cannot be written: .* not writable"):
            run_lock.check_run_folder(locked / "run")
    finally:
        locked.chmod(0o755)


def test_make_run_folder_names_the_flag_and_the_reason(tmp_path):
    if Path("/sys").is_dir() and not os.access("/sys/attn-test", os.F_OK):
        target = Path("/sys/attn-test")  # sysfs refuses mkdir even for root
    else:
        pytest.skip("no /sys here")
    with pytest.raises(ValueError, match=r"`--out` cannot be (created|written)"):
        run_lock.make_run_folder(target, "--out")


def test_a_second_holder_is_refused_with_the_owners_pid(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with run_lock.hold(run) as path:
        assert path == tmp_path / ".run.lock"  # beside the run: never in its manifest
        assert json.loads(path.read_text())["pid"] == os.getpid()
        with pytest.raises(run_lock.FolderBusy, match=f"another sweep \\(pid {os.getpid()} "):
            with run_lock.hold(run):
                pass
    assert not path.exists()
    with run_lock.hold(run):  # released: free again
        pass


def test_a_stale_lock_is_taken_over_with_a_note(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    run_lock.lock_path(run).write_text(json.dumps({"pid": dead.pid, "started_utc": "then"}))
    with run_lock.hold(run) as path:
        assert json.loads(path.read_text())["pid"] == os.getpid()
    assert f"stale lock of {run} (pid {dead.pid}" in capsys.readouterr().err
    assert not path.exists()


def test_a_lock_held_by_another_process_is_refused(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from attn_analysis.measure import run_lock\n"
         "with run_lock.hold(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)",
         str(run)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(run_lock.FolderBusy, match=f"pid {holder.pid} "):
            with run_lock.hold(run):
                pass
    finally:
        holder.kill()
        holder.wait()
    with run_lock.hold(run):  # its owner was killed: the kernel freed the lock
        pass


_PARENT = r"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
print(child.pid, flush=True)
time.sleep(60)
"""
_CHILD = r"""
import os, sys, time
sys.platform = {platform!r}
from attn_analysis.measure import run_lock
print(run_lock.die_with_parent(os.getppid(), interval_s=0.1), file=sys.stderr, flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
@pytest.mark.parametrize("platform, how", [("linux", "prctl"), ("other", "watchdog")])
def test_child_dies_when_its_parent_is_killed(platform, how):
    parent = subprocess.Popen([sys.executable, "-c", _PARENT,
                               _CHILD.format(platform=platform)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    child = int(parent.stdout.readline())
    assert parent.stderr.readline().strip() == how
    assert alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    try:
        assert not wait_dead([child], 10.0), "the child outlived its parent"
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_child_whose_parent_is_already_gone_exits():
    code = ("from attn_analysis.measure import run_lock; import os\n"
            "run_lock.die_with_parent(os.getppid() + 1)\nprint('survived')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=REPO, timeout=60)
    assert result.returncode == run_lock.ORPHAN_EXIT and "survived" not in result.stdout


_FOLLOWER = r"""
import os, sys, time
from attn_analysis.measure import run_lock
if {no_pidfd}:
    del os.pidfd_open
print(run_lock.die_with_process(int(sys.argv[1]), interval_s=0.1), file=sys.stderr, flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
@pytest.mark.parametrize("no_pidfd, how", [(False, "pidfd"), (True, "watchdog")])
def test_a_process_that_follows_another_dies_with_it(no_pidfd, how):
    """A trial forked by the fork server follows the sweep, not its parent."""
    followed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    follower = subprocess.Popen([sys.executable, "-c", _FOLLOWER.format(no_pidfd=no_pidfd),
                                 str(followed.pid)], stderr=subprocess.PIPE, text=True,
                                cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        assert follower.stderr.readline().strip() == how
        assert follower.poll() is None  # alive while the followed process is
        followed.kill()
        followed.wait()
        assert follower.wait(timeout=10) == run_lock.ORPHAN_EXIT
    finally:
        for proc in (followed, follower):
            if proc.poll() is None:
                proc.kill()


def test_a_process_that_follows_one_already_gone_exits():
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    code = ("import sys; from attn_analysis.measure import run_lock\n"
            "run_lock.die_with_process(int(sys.argv[1]))\nprint('survived')")
    result = subprocess.run([sys.executable, "-c", code, gone.stdout.strip()],
                            capture_output=True, text=True, cwd=REPO, timeout=60,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert result.returncode == run_lock.ORPHAN_EXIT and "survived" not in result.stdout
