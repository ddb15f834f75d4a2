"""The book's notebook cache follows the recorded data: a changed run empties it, an unchanged one keeps it."""

import pytest

from attn_analysis import book_cache


def _repo(tmp_path):
    run = tmp_path / "data" / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text('{"files": {"a": "1"}}')
    (tmp_path / "data" / "reference").mkdir()
    (tmp_path / "data" / "reference" / "l4.csv").write_text("x\n1\n")
    return tmp_path


def test_digest_changes_with_a_manifest_a_new_run_or_a_reference(tmp_path):
    root = _repo(tmp_path)
    first = book_cache.data_digest(root)
    assert book_cache.data_digest(root) == first
    (root / "data" / "runs" / "r1" / "manifest.json").write_text('{"files": {"a": "2"}}')
    second = book_cache.data_digest(root)
    assert second != first
    new = root / "data" / "runs" / "mine-l4"
    new.mkdir()
    (new / "manifest.json").write_text("{}")
    third = book_cache.data_digest(root)
    assert third != second
    (root / "data" / "reference" / "l4.csv").write_text("x\n2\n")
    assert book_cache.data_digest(root) != third


def test_digest_ignores_files_outside_the_manifests(tmp_path):
    root = _repo(tmp_path)
    before = book_cache.data_digest(root)
    (root / "data" / "runs" / "r1" / "journal").mkdir()
    (root / "data" / "runs" / "r1" / "journal" / "unit.json").write_text("{}")
    assert book_cache.data_digest(root) == before


def test_refresh_cache_keeps_a_matching_stamp_and_empties_a_stale_one(tmp_path):
    cache = tmp_path / "cache"
    assert book_cache.refresh_cache(cache, "abc") is False  # nothing to empty
    cache.mkdir()
    (cache / "global.db").write_text("db")
    assert book_cache.refresh_cache(cache, "abc") is True  # no stamp: stale
    assert not cache.exists()
    cache.mkdir()
    (cache / book_cache.STAMP).write_text("abc\n")
    assert book_cache.refresh_cache(cache, "abc") is False
    assert cache.exists()
    assert book_cache.refresh_cache(cache, "def") is True
    assert not cache.exists()


def test_digest_rejects_a_missing_root(tmp_path):
    with pytest.raises(ValueError, match="`root` must be an existing folder"):
        book_cache.data_digest(tmp_path / "nope")
