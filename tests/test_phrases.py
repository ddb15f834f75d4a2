"""chapters.phrases: count and per-level clauses that read right for every outcome (zero
counts, all of a total, equal verdicts), the pieces the results chapters glue."""

from __future__ import annotations

import pytest

from attn_analysis.chapters import phrases


@pytest.mark.parametrize("counts, expected", [
    ({"faster": 0, "slower": 3, "inconclusive": 77},
     "3 of 80 comparisons are slower and 77 inconclusive; none is faster"),
    ({"faster": 0, "slower": 0, "undecided": 16},
     "all 16 comparisons are undecided; none is faster or slower"),
    ({"faster": 2, "slower": 5, "undecided": 9},
     "2 of 16 comparisons are faster, 5 slower and 9 undecided"),
    ({"faster": 1, "slower": 0}, "the only one of the comparisons is faster; none is slower"),
    ({"faster": 0, "slower": 0}, "there are no comparisons"),
    ({"faster": 0, "slower": 0, "equivalent": 0, "undecided": 4},
     "all 4 comparisons are undecided; none is faster, slower or equivalent")])
def test_tally_reads_right_for_every_outcome(counts, expected):
    text = phrases.tally(counts, "comparisons")
    assert text == expected
    assert " at 0" not in text and "0 of 0" not in text and " 0 " not in f" {text} "


@pytest.mark.parametrize("counts, expected", [
    ({"H100": (0, 16), "H200": (0, 16)}, "at none of the 16 shapes on either the H100 or the H200"),
    ({"H100": (8, 8), "H200": (8, 8)}, "at all 8 shapes on both the H100 and the H200"),
    ({"H100": (2, 16), "H200": (2, 16)}, "at 2 of 16 shapes on both the H100 and the H200"),
    ({"H100": (2, 16), "H200": (0, 16)}, "at 2 of 16 shapes on the H100 and 0 of 16 on the H200"),
    ({"H200": (0, 3)}, "at none of the 3 shapes on the H200"),
    ({"H100": (0, 0), "H200": (0, 0)}, "at no shapes (none measured)")])
def test_count_by_model_says_agreeing_models_once(counts, expected):
    assert phrases.count_by_model(counts, "shapes") == expected


def test_per_level_and_join_never_double_a_word():
    assert phrases.per_level("equivalent", "equivalent") == "equivalent per call and per kernel"
    assert phrases.per_level("slower", "inconclusive") == (
        "slower per call and inconclusive per kernel")
    assert phrases.join(["a"]) == "a" and phrases.join([3, 4, 5]) == "3, 4 and 5"


def test_invalid_input_is_refused_by_name():
    with pytest.raises(ValueError, match="`counts`"):
        phrases.tally({"faster": -1}, "comparisons")
    with pytest.raises(ValueError, match="`noun`"):
        phrases.tally({"faster": 1}, "")
    with pytest.raises(ValueError, match="`counts`"):
        phrases.count_by_model({"H100": (3, 2)}, "shapes")
    with pytest.raises(ValueError, match="`kernel`"):
        phrases.per_level("slower", "")
    with pytest.raises(ValueError, match="`items`"):
        phrases.join([])


def test_processes_by_run_groups_runs_of_one_count_fewest_first():
    from attn_analysis.chapters.phrases import processes_by_run
    assert processes_by_run([("b", 6), ("c", 28), ("a", 6), ("d", 24.0)]) == (
        "6 in a and b; 24 in d; 28 in c")
    with pytest.raises(ValueError, match="`runs`"):
        processes_by_run([])
    with pytest.raises(ValueError, match="`runs`"):
        processes_by_run([("a", float("nan"))])
