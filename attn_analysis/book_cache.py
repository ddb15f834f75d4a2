"""Keep the book's cached notebook executions in step with the recorded data, and name
a failing notebook's error on the console (a Sphinx extension).

Jupyter Book caches each notebook's execution under a key made from the notebook's code,
so a run added to ``data/`` (say, a reader's L4 run), or a recorded file corrupted in
place, would leave every cached output, and the book, as it was. This extension, listed
in ``_config.yml``, digests every file the notebooks read: each file inside each run
folder of ``data/runs`` (journal, tables, views and manifest alike, so a file edited in
place changes the digest even though its manifest did not), and every file of
``data/reference`` and ``data/checks``. When the digest differs from the one stamped in
the cache folder at the end of the last build, it empties the cache, and the digest is
also a Sphinx configuration value, so every page is read again. An unchanged second
build stays cached.

A notebook that fails leaves its glued values missing, and every page that pastes them
then warns; the notebook's own error is only in ``_build/html/reports/``. At the end of
the build this extension repeats, as the last warning, each failed notebook's error line
and where its traceback is.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

STAMP = "attn_data_digest.txt"
# Every file inside a run folder (not the lock files beside them), every reference and check.
DATA_GLOBS = ("data/runs/*/**/*", "data/reference/**/*", "data/checks/**/*")


def _data_files(root: Path) -> list[Path]:
    """The files the notebooks read, without temporary files an interrupted writer left."""
    from .records import TEMPORARY_PREFIX
    return sorted({p for pattern in DATA_GLOBS for p in root.glob(pattern)
                   if p.is_file() and not p.name.startswith(TEMPORARY_PREFIX)})


def data_digest(root) -> str:
    """SHA-256 over the names and contents of the data files the notebooks depend on."""
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"`root` must be an existing folder; got {str(root)!r}.")
    h = hashlib.sha256()
    files = _data_files(root)
    for path in files:
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _cache_dir(app) -> Path:
    """Where myst-nb keeps its cache: the configured path (relative to the working
    folder, as myst-nb reads it), else ``.jupyter_cache`` beside the output folder."""
    configured = getattr(app.config, "nb_execution_cache_path", "")
    if configured:
        return Path(configured).resolve()
    return Path(app.outdir).parent / ".jupyter_cache"


def refresh_cache(cache: Path, digest: str) -> bool:
    """Empty ``cache`` unless it is stamped with ``digest``; return True if it was emptied."""
    cache = Path(cache)
    stamp = cache / STAMP
    if not cache.exists():
        return False
    if stamp.is_file() and stamp.read_text().strip() == digest:
        return False
    shutil.rmtree(cache)
    return True


def _on_config_inited(app, config) -> None:
    digest = data_digest(app.srcdir)
    config.attn_data_digest = digest
    if refresh_cache(_cache_dir(app), digest):
        from sphinx.util import logging
        logging.getLogger(__name__).info(
            "attn_analysis: recorded data changed; notebook cache emptied")


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
        (cache / STAMP).write_text(app.config.attn_data_digest + "\n")


def setup(app):
    app.add_config_value("attn_data_digest", "", "env")
    app.connect("config-inited", _on_config_inited)
    app.connect("build-finished", _on_build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
