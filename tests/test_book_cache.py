"""The book's notebook cache follows everything the notebooks read: a changed run, a change
to the package's code or data files, or a changed notebook empties it; an unchanged tree
(or a change to the prose) keeps it."""

import subprocess
import sys
from pathlib import Path

import pytest

from attn_analysis.present import book_cache

REPO = Path(__file__).resolve().parents[1]


def _data_digest(root) -> str:
    return book_cache.input_digests(root)["recorded data"]


def _repo(tmp_path):
    run = tmp_path / "data" / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text('{"files": {"a": "1"}}')
    (tmp_path / "data" / "reference").mkdir()
    (tmp_path / "data" / "reference" / "l4.csv").write_text("x\n1\n")
    return tmp_path


def test_digest_changes_with_a_manifest_a_new_run_or_a_reference(tmp_path):
    root = _repo(tmp_path)
    first = _data_digest(root)
    assert _data_digest(root) == first
    (root / "data" / "runs" / "r1" / "manifest.json").write_text('{"files": {"a": "2"}}')
    second = _data_digest(root)
    assert second != first
    new = root / "data" / "runs" / "mine-l4"
    new.mkdir()
    (new / "manifest.json").write_text("{}")
    third = _data_digest(root)
    assert third != second
    (root / "data" / "reference" / "l4.csv").write_text("x\n2\n")
    assert _data_digest(root) != third


def test_digest_follows_every_recorded_file_not_only_the_manifests(tmp_path):
    root = _repo(tmp_path)
    before = _data_digest(root)
    run = root / "data" / "runs" / "r1"
    (run / "samples.parquet").write_bytes(b"PAR1 table")
    added = _data_digest(root)
    assert added != before
    (run / "samples.parquet").write_bytes(b"PAR1 tabl3")  # corrupted in place, same size
    assert _data_digest(root) != added
    (run / "journal").mkdir()
    (run / "journal" / "unit.json").write_text("{}")
    journal = _data_digest(root)
    assert journal != added
    (root / "data" / "checks").mkdir()
    (root / "data" / "checks" / "timer.json").write_text("{}")
    checks = _data_digest(root)
    assert checks != journal
    (root / "data" / "checks" / "timer.json").write_text("[]")
    assert _data_digest(root) != checks


def test_digest_follows_every_folder_of_data_such_as_the_simulations(tmp_path):
    root = _repo(tmp_path)
    before = _data_digest(root)
    (root / "data" / "simulations").mkdir()  # read by the calibration chapter
    (root / "data" / "simulations" / "interval_coverage.csv").write_text("cov\n0.95\n")
    added = _data_digest(root)
    assert added != before
    (root / "data" / "simulations" / "interval_coverage.csv").write_text("cov\n0.90\n")
    assert _data_digest(root) != added


def test_digest_ignores_temporaries_markers_and_lock_files_beside_runs(tmp_path):
    root = _repo(tmp_path)
    before = _data_digest(root)
    (root / "data" / "runs" / ".r2.lock").write_text('{"pid": 1}')
    (root / "data" / "runs" / "r1" / ".tmp-abc").write_text("half")
    (root / "data" / "runs" / "r1" / ".current-t0").write_text("{}")
    (root / "data" / ".ipynb_checkpoints").mkdir()
    (root / "data" / ".ipynb_checkpoints" / "x.csv").write_text("1")
    assert _data_digest(root) == before


def test_first_error_line_is_the_exception_without_colours():
    tb = ("An error occurred while executing the following cell:\n------------------\n"
          "R = records.load(p)\n------------------\n\n"
          "\x1b[0;31m-----------\x1b[0m\n\x1b[0;31mRecordError\x1b[0m  Traceback (most "
          "recent call last)\nCell In[1], line 1\n\x1b[0;31mRecordError\x1b[0m: run r1 does "
          "not verify: samples.parquet: SHA-256 does not match the manifest\n")
    assert book_cache.first_error_line(tb) == (
        "RecordError: run r1 does not verify: samples.parquet: SHA-256 does not match the "
        "manifest")
    assert book_cache.first_error_line("") == "(no traceback)"


def test_refresh_cache_keeps_a_matching_stamp_and_empties_a_stale_one(tmp_path):
    cache = tmp_path / "cache"
    digests = {"recorded data": "abc", "package code": "123", "notebooks": "x"}
    assert book_cache.refresh_cache(cache, digests) == []  # nothing to empty
    cache.mkdir()
    (cache / "global.db").write_text("db")
    assert book_cache.refresh_cache(cache, digests) == list(digests)  # no stamp: stale
    assert not cache.exists()
    cache.mkdir()
    (cache / "attn_data_digest.txt").write_text("abc\n")  # an older build's stamp
    assert book_cache.refresh_cache(cache, digests) == list(digests)
    cache.mkdir()
    book_cache.write_stamp(cache, digests)
    assert book_cache.read_stamp(cache) == digests
    assert book_cache.refresh_cache(cache, digests) == []
    assert cache.exists()
    code_changed = dict(digests, **{"package code": "456"})
    assert book_cache.refresh_cache(cache, code_changed) == ["package code"]
    assert not cache.exists()


def _package_and_notebooks(root):
    pkg = root / "attn_analysis"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "present").mkdir()
    (pkg / "present" / "tables.py").write_text("ROWS = 25\n")
    (pkg / "hardware.json").write_text('{"H100": {}}')
    (root / "notebooks").mkdir()
    (root / "notebooks" / "02_fixed_shape.py").write_text("# %%\nx = 1\n")
    (root / "book").mkdir()
    (root / "book" / "methods.md").write_text("# Methods\n")
    return root


@pytest.mark.parametrize("path, group", [
    ("attn_analysis/present/tables.py", "package code"),  # every chapter imports it
    ("attn_analysis/hardware.json", "package code"),
    ("notebooks/02_fixed_shape.py", "notebooks"),
])
def test_a_change_to_the_package_or_a_notebook_changes_its_digest_alone(tmp_path, path, group):
    root = _package_and_notebooks(_repo(tmp_path))
    before = book_cache.input_digests(root)
    assert set(before) == set(book_cache.INPUT_GLOBS)
    with open(root / path, "a") as fh:
        fh.write("\n# edited\n")
    after = book_cache.input_digests(root)
    assert [g for g in before if before[g] != after[g]] == [group]
    cache = tmp_path / "cache"
    cache.mkdir()
    book_cache.write_stamp(cache, before)
    assert book_cache.refresh_cache(cache, after) == [group] and not cache.exists()


def test_a_new_module_changes_the_code_digest_but_prose_caches_and_checkpoints_do_not(tmp_path):
    root = _package_and_notebooks(_repo(tmp_path))
    before = book_cache.input_digests(root)
    (root / "book" / "methods.md").write_text("# Methods, reworded\n")
    (root / "attn_analysis" / "__pycache__").mkdir()
    (root / "attn_analysis" / "__pycache__" / "tables.cpython-311.pyc").write_bytes(b"\0")
    (root / "notebooks" / ".ipynb_checkpoints").mkdir()
    (root / "notebooks" / ".ipynb_checkpoints" / "02_fixed_shape-checkpoint.py").write_text("")
    assert book_cache.input_digests(root) == before
    (root / "attn_analysis" / "new_stat.py").write_text("")
    assert book_cache.input_digests(root)["package code"] != before["package code"]


def test_digest_rejects_a_missing_root(tmp_path):
    with pytest.raises(ValueError, match="`root` must be an existing folder"):
        book_cache.input_digests(tmp_path / "nope")


# ------------------------------------------------------------- a real (toy) book build

_CONFIG = """title: toy
only_build_toc_files: true
execute:
  execute_notebooks: cache
  timeout: 120
sphinx:
  local_extensions:
    attn_analysis.present.book_cache: {repo}
"""


def _toy_book(tmp_path) -> Path:
    """A one-notebook book whose notebook loads a recorded run, with book_cache on."""
    import nbformat

    from conftest import make_run
    book = tmp_path / "book"
    runs = book / "data" / "runs"
    runs.mkdir(parents=True)
    make_run(runs)
    (book / "_config.yml").write_text(_CONFIG.format(repo=REPO))
    (book / "_toc.yml").write_text("format: jb-book\nroot: nb\n")
    code = (f"import sys\nsys.path.insert(0, {str(REPO)!r})\n"
            "from attn_analysis import record\n"
            "run = record.load('data/runs/run-a')\nprint(len(run.samples), 'samples')")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Toy"),
                                         nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, book / "nb.ipynb")
    return book


def _build(book: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "jupyter-book"
    return subprocess.run([str(exe), "build", str(book), "-W", "-n", "--keep-going"],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # four builds of a toy book
def test_a_changed_notebook_or_a_run_corrupted_in_place_re_executes(tmp_path):
    book = _toy_book(tmp_path)
    first = _build(book)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "Executed notebook" in first.stdout + first.stderr
    memo = book / "_build" / book_cache.VERIFIED  # the kernel verified run-a and said so
    assert len(list(memo.iterdir())) == 1
    second = _build(book)  # unchanged: nothing re-executed
    assert second.returncode == 0 and "Executed notebook" not in second.stdout + second.stderr
    (book / "notebooks").mkdir()  # an input of the notebooks' group, as a checkout brings it
    (book / "notebooks" / "other.py").write_text("# %%\nx = 2\n")
    changed = _build(book)
    out = changed.stdout + changed.stderr
    assert changed.returncode == 0, out[-3000:]
    assert "notebooks changed; notebook cache emptied" in out and "Executed notebook" in out
    assert len(list(memo.iterdir())) == 1  # emptied with the cache, verified again
    samples = book / "data" / "runs" / "run-a" / "samples.parquet"
    data = bytearray(samples.read_bytes())
    data[len(data) // 2] ^= 0xFF  # in place: the manifest still lists the old checksum
    samples.write_bytes(bytes(data))
    third = _build(book)
    out = third.stdout + third.stderr
    assert third.returncode != 0, out[-3000:]
    assert "recorded data changed; notebook cache emptied" in out
    assert ("notebook nb failed: RecordError: run run-a does not verify: samples.parquet: "
            "SHA-256 does not match the manifest") in out
