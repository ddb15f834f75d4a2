"""Keep the book's cached notebook executions in step with everything the notebooks read,
and name a failing notebook's error on the console (a Sphinx extension).

Jupyter Book caches each notebook's execution under a key made from the notebook's own
code cells, so a run added to ``data/`` (say, a reader's L4 run), a recorded file
corrupted in place, or a change to the package every chapter imports (``tables.py``, a
statistic, ``hardware.json``) would leave every cached output, and the book, as it was;
so would checking out another commit over an existing ``_build/``. This extension,
listed in ``_config.yml``, digests every input of the notebooks, in three groups
(``INPUT_GLOBS``):

- recorded data: every file under ``data/`` (each file inside each run folder of
  ``data/runs``, journal, tables, views and manifest alike, so a file edited in place
  changes the digest even though its manifest did not; ``data/reference``,
  ``data/checks``, ``data/simulations`` and any folder added there), but hidden files
  (a sweep's lock file beside its run folder, a run's in-progress markers);
- package code: ``attn_analysis/**/*.py`` and the package's data files (``*.json``);
- notebooks: ``notebooks/**/*.py``.

When a group's digest differs from the one stamped in the cache folder at the end of the
last build, it empties the cache (every notebook is executed again, the simplest rule
that is never stale: every chapter imports the package and reads the runs) and says
which groups changed; the combined digest is also a Sphinx configuration value, so every
page is read again. An unchanged second build stays cached. The book's prose
(``book/*.md``) is not an input of the notebooks and changes nothing here.

Every notebook loads and verifies every run. The extension points the notebooks' kernels
at a memo of verified runs beside the cache (``attn_analysis.verify_memo``, emptied with
the cache), so that each run's deeper checks run once per build, not once per notebook;
its manifest, checksums and run id are still checked by every notebook.

A notebook that fails leaves its glued values missing, and every page that pastes them
then warns; the notebook's own error is only in ``_build/html/reports/``. At the end of
the build this extension repeats, as the last warning, each failed notebook's error line
and where its traceback is.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

__all__ = ["STAMP", "VERIFIED", "INPUT_GLOBS", "group_digest", "input_digests",
           "combined_digest", "read_stamp", "changed_groups", "refresh_cache",
           "write_stamp", "first_error_line", "failed_notebooks", "setup"]

STAMP = "attn_inputs_digest.json"
# The memo of verified runs (verify_memo) the notebooks' kernels use: beside the cache.
VERIFIED = ".attn_verified"
# Everything the notebooks read, by group (paths relative to the book's root). Hidden
# files and folders (lock files, .ipynb_checkpoints, .pytest_cache) and temporaries are
# never inputs.
INPUT_GLOBS = {
    "recorded data": ("data/**/*",),
    "package code": ("attn_analysis/**/*.py", "attn_analysis/**/*.json"),
    "notebooks": ("notebooks/**/*.py",),
}


def _input_files(root: Path, patterns) -> list[Path]:
    """The files ``patterns`` match under ``root``, without hidden files or anything in a
    hidden folder (lock files, markers, checkpoints, the temporaries of an interrupted
    writer: ``records.TEMPORARY_PREFIX`` starts with a dot)."""
    found = set()
    for pattern in patterns:
        for path in root.glob(pattern):
            rel = path.relative_to(root)
            if path.is_file() and not any(part.startswith(".") for part in rel.parts):
                found.add(path)
    return sorted(found)


def _root_iv(root) -> Path:
    """``root`` as a Path, if it is an existing folder (the book's root)."""
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"`root` must be an existing folder; got {str(root)!r}.")
    return root


def group_digest(root, patterns) -> str:
    """SHA-256 over the relative names and contents of the files ``patterns`` match."""
    root = _root_iv(root)
    h = hashlib.sha256()
    for path in _input_files(root, patterns):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def input_digests(root) -> dict[str, str]:
    """The digest of each group of ``INPUT_GLOBS`` under the book's ``root``."""
    root = _root_iv(root)
    return {group: group_digest(root, patterns) for group, patterns in INPUT_GLOBS.items()}


def combined_digest(digests: dict[str, str]) -> str:
    """One SHA-256 of every group's digest (the Sphinx configuration value)."""
    return hashlib.sha256(json.dumps(digests, sort_keys=True).encode()).hexdigest()


def _cache_dir(app) -> Path:
    """Where myst-nb keeps its cache: the configured path (relative to the working
    folder, as myst-nb reads it), else ``.jupyter_cache`` beside the output folder."""
    configured = getattr(app.config, "nb_execution_cache_path", "")
    if configured:
        return Path(configured).resolve()
    return Path(app.outdir).parent / ".jupyter_cache"


def read_stamp(cache: Path) -> dict | None:
    """The group digests stamped in ``cache`` by the last build, or None where there is no
    readable stamp (no build finished there, or one from an older version of this file)."""
    try:
        stamp = json.loads((Path(cache) / STAMP).read_text())
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def changed_groups(stamp: dict | None, digests: dict[str, str]) -> list[str]:
    """The groups whose digest differs from the stamp's; every group where there is no stamp."""
    if stamp is None:
        return list(digests)
    return [group for group, digest in digests.items() if stamp.get(group) != digest]


def refresh_cache(cache: Path, digests: dict[str, str]) -> list[str]:
    """Empty ``cache`` unless it is stamped with ``digests``; return the groups that
    changed (empty: the cache was kept, or there was none to empty)."""
    cache = Path(cache)
    if not cache.exists():
        return []
    changed = changed_groups(read_stamp(cache), digests)
    if changed:
        shutil.rmtree(cache)
    return changed


def write_stamp(cache: Path, digests: dict[str, str]) -> None:
    """Stamp ``cache`` with the group digests of the build that just finished (atomically)."""
    from ..record import atomic_write_bytes
    atomic_write_bytes(Path(cache) / STAMP,
                       json.dumps(digests, indent=1, sort_keys=True).encode() + b"\n")


def _on_config_inited(app, config) -> None:
    import os

    from ..record import verify_memo
    digests = input_digests(app.srcdir)
    app.attn_input_digests = digests
    config.attn_inputs_digest = combined_digest(digests)
    cache = _cache_dir(app)
    unstamped = cache.exists() and read_stamp(cache) is None
    changed = refresh_cache(cache, digests)
    # The notebooks' kernels inherit this environment: each run is verified in full by the
    # first notebook that loads it, and its manifest and identity by every one.
    memo = cache.parent / VERIFIED
    if changed:
        shutil.rmtree(memo, ignore_errors=True)
    os.environ[verify_memo.ENV] = str(memo)
    if changed:
        from sphinx.util import logging
        what = ("the cache holds no stamp of its inputs" if unstamped
                else f"{' and '.join(changed)} changed")
        logging.getLogger(__name__).info(f"attn_analysis: {what}; notebook cache emptied")


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b.*")


def first_error_line(traceback: str) -> str:
    """The ``SomeError: message`` line of a notebook's traceback (the last such line),
    without terminal colours; else its last non-empty line."""
    lines = [_ANSI.sub("", line).strip() for line in (traceback or "").splitlines()]
    lines = [line for line in lines if line]
    errors = [line for line in lines if _ERROR_LINE.match(line)]
    return (errors or lines or ["(no traceback)"])[-1]


def failed_notebooks(app) -> list[tuple[str, str]]:
    """(docname, error line) of each notebook of this build whose execution failed."""
    metadata = getattr(app.env, "nb_metadata", None) or {}
    found = getattr(app.env, "found_docs", set())
    failed = []
    for docname in sorted(metadata):
        data = (metadata[docname] or {}).get("exec_data") or {}
        if docname in found and data and not data.get("succeeded", True):
            failed.append((docname, first_error_line(data.get("traceback") or "")))
    return failed


def _on_build_finished(app, exception) -> None:
    from sphinx.util import logging
    for docname, line in failed_notebooks(app):
        report = Path(app.outdir) / "reports" / f"{docname}.err.log"
        logging.getLogger(__name__).warning(
            f"notebook {docname} failed: {line} (traceback: {report}); the glue warnings "
            f"about missing keys follow from it", type="attn_analysis", subtype="notebook")
    cache = _cache_dir(app)
    if exception is None and cache.is_dir():
        write_stamp(cache, app.attn_input_digests)


def setup(app):
    app.add_config_value("attn_inputs_digest", "", "env")
    app.connect("config-inited", _on_config_inited)
    app.connect("build-finished", _on_build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
