"""Keep the book's cached notebook executions in step with the recorded data (a Sphinx extension).

Jupyter Book caches each notebook's execution under a key made from the notebook's code,
so a run added to ``data/`` (say, a reader's L4 run) would leave every cached output,
and the book, as it was. This extension, listed in ``_config.yml``, digests what the
notebooks read (each run's ``manifest.json``, which holds a SHA-256 of every file of the
run, plus ``data/reference`` and ``data/checks``). When the digest differs from the one
stamped in the cache folder at the end of the last build, it empties the cache, and the
digest is also a Sphinx configuration value, so every page is read again. An unchanged
second build stays cached.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

STAMP = "attn_data_digest.txt"
DATA_GLOBS = ("data/runs/*/manifest.json", "data/reference/*", "data/checks/*")


def data_digest(root) -> str:
    """SHA-256 over the names and contents of the data files the notebooks depend on."""
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"`root` must be an existing folder; got {str(root)!r}.")
    h = hashlib.sha256()
    files = sorted({p for pattern in DATA_GLOBS for p in root.glob(pattern) if p.is_file()})
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


def _on_build_finished(app, exception) -> None:
    cache = _cache_dir(app)
    if exception is None and cache.is_dir():
        (cache / STAMP).write_text(app.config.attn_data_digest + "\n")


def setup(app):
    app.add_config_value("attn_data_digest", "", "env")
    app.connect("config-inited", _on_config_inited)
    app.connect("build-finished", _on_build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
