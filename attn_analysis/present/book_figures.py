"""Glued figures pasted into another page reach every builder (a Sphinx extension).

A page may paste a figure glued in a notebook (``{glue:figure} key`` with ``:doc:``, e.g.
the landing page's figure from the state-of-the-art notebook). myst-nb resolves such a
paste late, in a post-transform (``ReplacePendingGlueReferences``), as an image node
whose path points at ``<outdir>/<imagedir>/<sha256>.png`` relative to the pasting page,
and writes no file: it counts on the source notebook having rendered the same figure,
and on the builder having copied it there. Two things then break:

- the figure exists only if the source notebook also shows it (a figure glued with
  ``display=False`` and pasted only elsewhere is a broken image, in HTML too);
- the LaTeX builder compiles one ``book.tex`` in its output folder, but the path is
  relative to the pasting page's folder (``../<sha256>.png`` for ``book/index``), so
  LaTeX cannot find the PNG and the PDF build stops.

This extension writes every image of a pasted glue output to ``<outdir>/<imagedir>``
before myst-nb pastes it (:class:`WritePastedGlueImages`, priority 4; myst-nb's is 5),
and, for the LaTeX builder, makes the pasted image's path relative to the output folder
where ``book.tex`` is compiled (:class:`LatexPastedImagePaths`, priority 6). Listed in
``_config.yml`` (``local_extensions``).
"""

from __future__ import annotations

import hashlib
import os
from binascii import a2b_base64
from mimetypes import guess_extension
from pathlib import Path

from sphinx.transforms.post_transforms import SphinxPostTransform

__all__ = ["IMAGE_MIMES", "image_filename", "setup"]

# The image types myst-nb pastes across documents (myst_nb.ext.glue.crossref)
IMAGE_MIMES = ("image/png", "image/jpeg", "image/gif", "application/pdf")


def image_filename(mime: str, data_bytes: bytes) -> str:
    """The file name myst-nb gives a pasted image: the SHA-256 of its bytes and the
    extension of its MIME type ('.jpeg' for JPEG, which LaTeX recognises)."""
    if mime not in IMAGE_MIMES:
        raise ValueError(f"`mime` must be one of {IMAGE_MIMES}; got {mime!r}.")
    extension = guess_extension(mime) or "." + mime.rsplit("/")[-1]
    extension = ".jpeg" if extension == ".jpe" else extension
    return f"{hashlib.sha256(data_bytes).hexdigest()}{extension}"


def _write_atomic(path: Path, data: bytes) -> None:
    if path.is_file() and path.stat().st_size == len(data):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class WritePastedGlueImages(SphinxPostTransform):
    """Write the images of every pending cross-document glue output of this document to
    the builder's image folder, where myst-nb's pasted image node points."""

    default_priority = 4

    def run(self, **kwargs) -> None:
        from myst_nb.ext.glue.crossref import read_glue_cache
        from myst_nb.ext.glue.utils import PendingGlueReference

        folder = self.env.mystnb_config.output_folder
        images = Path(self.app.builder.outdir) / getattr(self.app.builder, "imagedir", "")
        for node in list(self.document.findall(PendingGlueReference)):
            if node.gtype == "text":
                continue
            data = (read_glue_cache(folder, node.refdoc).get(node.key) or {}).get("data") or {}
            for mime in IMAGE_MIMES:
                if mime in data:
                    raw = a2b_base64(data[mime])
                    _write_atomic(images / image_filename(mime, raw), raw)


class LatexPastedImagePaths(SphinxPostTransform):
    """For the LaTeX builder: a pasted image's path relative to the output folder (where
    ``book.tex`` is compiled), not to the pasting page's folder."""

    default_priority = 6
    builders = ("latex",)

    def run(self, **kwargs) -> None:
        from docutils import nodes

        outdir = Path(self.app.builder.outdir).resolve()
        page_dir = (outdir / self.env.docname).parent
        for node in self.document.findall(nodes.image):
            uri = node.get("uri", "")
            if uri in self.env.images or "://" in uri or uri.startswith("data:"):
                continue
            target = (page_dir / uri).resolve()
            if target.parent == outdir / getattr(self.app.builder, "imagedir", "") \
                    and target.is_file() and os.path.isabs(uri) is False:
                rel = os.path.relpath(target, outdir)
                node["uri"] = rel
                node["candidates"] = {"*": rel}


def setup(app):
    app.add_post_transform(WritePastedGlueImages)
    app.add_post_transform(LatexPastedImagePaths)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
