"""Guard a run folder while a sweep writes into it: what may be one, who owns it, and
that its workers never outlive the sweep.

``check_run_folder``
    A sweep writes only into a new folder or an existing run folder, never into the
    repository root, a folder of runs such as ``data/runs`` itself, a run's subfolder, or
    over a file. It writes nothing.
``hold``
    One sweep per folder at a time. The lock is a file beside the run folder
    (``<parent>/.<name>.lock``, outside the folder so that the run's manifest never lists
    it) holding the owner's pid, host and start time, and locked with ``flock``: the
    kernel releases that lock when its owner dies however it dies, so a lock file whose
    lock is free is stale and is taken over, with a note.
``die_with_parent``
    Called first in a worker process: on Linux the kernel sends it SIGKILL when its parent
    dies (``prctl(PR_SET_PDEATHSIG)``); elsewhere a watchdog thread checks the parent
    every half second. A worker started just as its parent died exits at once.
``die_with_process``
    The same for a process other than the parent: a trial forked by the fork server
    follows the sweep itself.

POSIX only (``fcntl``), like the sweep itself.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

__all__ = ["REPO_MARKERS", "PR_SET_PDEATHSIG", "ORPHAN_EXIT", "FolderBusy",
           "check_run_folder", "make_run_folder", "lock_path", "hold", "die_with_parent",
           "die_with_process", "is_alive"]

REPO_MARKERS = (".git", "pyproject.toml", "attn_analysis")
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
ORPHAN_EXIT = 75


class FolderBusy(RuntimeError):
    """Another live sweep holds the run folder's lock."""


def _is_run(path: Path) -> bool:
    from .. import record  # imported here: a worker's die_with_parent needs no pandas
    return any((path / m).exists() for m in (record.PLAN, record.MANIFEST, record.JOURNAL))


def _listing(path: Path) -> list[str]:
    """Entries of a folder, ignoring temporary files an interrupted writer left behind."""
    from .. import record
    return sorted(p.name for p in path.iterdir()
                  if not p.name.startswith(record.TEMPORARY_PREFIX))


def check_run_folder(path, name: str = "out_dir") -> Path:
    """Check that ``path`` may hold a run: a folder to create, an empty folder or an
    existing run folder (one with ``plan.json``, ``manifest.json`` or ``journal/``).

    Raise ValueError naming ``name`` (the parameter or flag), the value and the reason.
    Writes nothing; returns the path.
    """
    if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
        raise ValueError(f"`{name}` must be a folder path for the run (new, or a run "
                         f"folder to resume); got {path!r}.")
    path = Path(path)
    full = path.resolve()
    allowed = "a new folder, an empty one, or an existing run folder to resume"
    if full.exists() and not full.is_dir():
        raise ValueError(f"`{name}` must be {allowed}; {str(path)!r} is a file.")
    from .. import record
    record.outside_git_iv(path, name)
    for parent in full.parents:
        if any((parent / m).is_file() for m in (record.PLAN, record.MANIFEST)):
            raise ValueError(f"`{name}` must be {allowed}; {str(path)!r} lies inside the "
                             f"run folder {parent}.")
    if full.is_dir() and not _is_run(full):
        if any((full / m).exists() for m in REPO_MARKERS):
            raise ValueError(f"`{name}` must be {allowed}; {str(path)!r} is a repository "
                             f"root ({full}). Name a run folder, e.g. data/runs/<run-id>.")
        runs = [p.name for p in full.iterdir() if p.is_dir() and _is_run(p)]
        if runs:
            raise ValueError(f"`{name}` must be {allowed}; {str(path)!r} holds runs "
                             f"({', '.join(sorted(runs)[:3])}{', ...' if len(runs) > 3 else ''})"
                             f". Name a new run inside it, e.g. {path / '<run-id>'}.")
        entries = _listing(full)
        if entries:
            raise ValueError(f"`{name}` must be {allowed}; {str(path)!r} is a folder of "
                             f"other files ({', '.join(entries[:3])}"
                             f"{', ...' if len(entries) > 3 else ''}).")
    existing = next(p for p in (full, *full.parents) if p.exists())
    if not existing.is_dir():
        raise ValueError(f"`{name}` cannot be created: {existing} is a file, not a folder; "
                         f"got {str(path)!r}.")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"`{name}` cannot be written: {existing} is not writable by this "
                         f"user; got {str(path)!r}.")
    return path


def make_run_folder(path, name: str = "out_dir") -> Path:
    """``check_run_folder``, then create the folder; an OSError becomes a ValueError
    naming ``name``, the path and the system's reason."""
    path = check_run_folder(path, name)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"`{name}` cannot be created: {path}: {exc.strerror or exc}.") from None
    return path


def lock_path(run_dir) -> Path:
    """The lock file of a run folder: a hidden file beside it."""
    run_dir = Path(run_dir).resolve()
    return run_dir.parent / f".{run_dir.name}.lock"


def _owner(text: str) -> dict:
    try:
        owner = json.loads(text)
    except ValueError:
        return {}
    return owner if isinstance(owner, dict) else {}


def _acquire(path: Path) -> tuple[int, dict]:
    """Open and flock the lock file; return its descriptor and the stale owner it held, if any."""
    for _ in range(20):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _owner(Path(path).read_text(errors="replace"))
            os.close(fd)
            raise FolderBusy(
                f"{path.parent / path.name[1:-5]} is being recorded by another sweep (pid "
                f"{owner.get('pid', '?')} on {owner.get('host', '?')}, since "
                f"{owner.get('started_utc', '?')}); wait for it to finish or stop it, then "
                f"rerun (lock file {path}).") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # the previous owner removed the file between our open and flock
            os.close(fd)
            continue
        stale = _owner(os.read(fd, 1 << 16).decode(errors="replace"))
        body = {"pid": os.getpid(), "host": socket.gethostname(),
                "started_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(body).encode(), 0)
        return fd, stale
    raise FolderBusy(f"could not take the lock {path}: it keeps changing hands")


@contextlib.contextmanager
def hold(run_dir):
    """Hold the run folder's lock for the duration of the ``with`` block (see the module
    docstring); raise FolderBusy if a live sweep holds it."""
    path = lock_path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, stale = _acquire(path)
    if stale:
        print(f"note: took over a stale lock of {Path(run_dir)} (pid {stale.get('pid', '?')}, "
              f"since {stale.get('started_utc', '?')}, no longer running)", file=sys.stderr)
    try:
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)


def _watch_parent(parent_pid: int, interval_s: float) -> None:
    while True:
        time.sleep(interval_s)
        if os.getppid() != parent_pid:
            os._exit(ORPHAN_EXIT)


def die_with_parent(parent_pid: int, interval_s: float = 0.5) -> str:
    """Make this process die when ``parent_pid`` (its parent) does; return how: "prctl"
    (Linux: SIGKILL from the kernel) or "watchdog" (a thread polling ``os.getppid``)."""
    how = "watchdog"
    if sys.platform.startswith("linux"):
        import ctypes
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0:
                how = "prctl"
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(ORPHAN_EXIT)
    if how == "watchdog":
        threading.Thread(target=_watch_parent, args=(parent_pid, interval_s), daemon=True,
                         name="attn-parent-watchdog").start()
    return how


def die_with_process(pid: int, interval_s: float = 0.5) -> str:
    """Make this process exit (``ORPHAN_EXIT``) as soon as process ``pid``, not its parent,
    ends: a trial forked by the fork server, whose parent outlives the sweep while any
    trial still holds the server's pipe. Returns how: "pidfd" (Linux: a thread waits on
    the process's descriptor, immune to pid reuse) or "watchdog" (a thread polling)."""
    import select
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(ORPHAN_EXIT)
    except (AttributeError, OSError):
        if not is_alive(pid):
            os._exit(ORPHAN_EXIT)
        threading.Thread(target=_watch_process, args=(pid, interval_s), daemon=True,
                         name="attn-sweep-watchdog").start()
        return "watchdog"

    def wait():
        select.select([fd], [], [])
        os._exit(ORPHAN_EXIT)
    threading.Thread(target=wait, daemon=True, name="attn-sweep-pidfd").start()
    return "pidfd"


def _watch_process(pid: int, interval_s: float) -> None:
    while is_alive(pid):
        time.sleep(interval_s)
    os._exit(ORPHAN_EXIT)


def is_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (a signal-0 probe; one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
