"""Sentences computed from verdict tables: they name what the table says, and nothing else."""

import pandas as pd
import pytest

from attn_analysis.analyse import findings, kernel_evidence


def table(*rows):
    return pd.DataFrame(rows, columns=["candidate", "speedup", "ci_low", "ci_high", "verdict"])


def test_sentence_names_faster_and_equivalent_candidates_with_intervals():
    t = table(("sdpa", 1.0, 0.98, 1.02, "equivalent"),
              ("compiled", 1.038, 1.024, 1.049, "faster"),
              ("twin", 0.996, 0.979, 1.012, "equivalent"),
              ("triton", 0.923, 0.909, 0.934, "slower"),
              ("cudnn", 0.987, 0.971, 1.002, "inconclusive"))
    s = findings.verdict_sentence(t)
    assert s.startswith("Of 4 candidates, 1 faster than sdpa by more than 2%: compiled "
                        "(speedup 1.038, CI 1.024–1.049)")
    assert "1 equivalent to sdpa within ±2%: twin (speedup 0.996" in s
    assert "1 slower by more than 2%: triton" in s and "1 inconclusive" in s and "cudnn" in s
    assert "sdpa (" not in s  # the baseline's self-comparison is left out


def test_sentence_without_a_faster_candidate_does_not_claim_one():
    s = findings.verdict_sentence(table(("a", 0.5, 0.4, 0.6, "slower"),
                                        ("b", 0.99, 0.95, 1.03, "inconclusive")))
    assert "faster" not in s and s.startswith("Of 2 candidates, 1 slower by more than 2%: a; "
                                              "1 inconclusive")


def test_sentence_margin_and_bad_input():
    t = table(("a", 1.0, 0.99, 1.01, "equivalent"))
    assert "within ±5%" in findings.verdict_sentence(t, margin=0.05)
    assert findings.verdict_sentence(table(("sdpa", 1, 1, 1, "equivalent"))).startswith("No ")
    with pytest.raises(ValueError, match=r"`margin` must be a number in \(0, 1\)"):
        findings.verdict_sentence(t, margin=1.5)
    with pytest.raises(ValueError, match="lacks columns"):
        findings.verdict_sentence(t.drop(columns="verdict"))
    with pytest.raises(ValueError, match="one row per candidate"):
        findings.verdict_sentence(pd.concat([t, t]))
    with pytest.raises(ValueError, match="`verdict` values"):
        findings.verdict_sentence(table(("a", 1, 1, 1, "maybe")))


def test_same_kernels_compares_kernel_name_sets_per_config():
    k = pd.DataFrame({"config": ["c"] * 6 + ["d"],
                      "candidate": ["sdpa", "sdpa", "comp", "comp", "flash", "tri", "comp"],
                      "kernel": ["cudnn", "memset", "memset", "cudnn", "fa2", "tri", "x"]})
    assert kernel_evidence.same_kernels(k, "c") == ["comp"]
    assert kernel_evidence.same_kernels(k, "d") == []
    with pytest.raises(ValueError, match="`kernels` must be"):
        kernel_evidence.same_kernels(pd.DataFrame({"a": [1]}), "c")


def test_negative_result_verdict_follows_the_table():
    faster = table(("comp", 1.04, 1.02, 1.05, "faster"), ("tri", 0.9, 0.88, 0.92, "slower"))
    assert findings.negative_result_verdict(faster).startswith("refuted: comp was faster")
    assert "no faster kernel was found" not in findings.negative_result_verdict(faster)
    same = findings.negative_result_verdict(faster, same_kernel_candidates=["comp"])
    assert "runs sdpa's own kernels" in same and "no faster kernel was found" in same
    both = table(("a", 1.1, 1.05, 1.2, "faster"), ("b", 1.1, 1.05, 1.2, "faster"))
    assert "a and b were faster" in findings.negative_result_verdict(both, ["a"])
    assert "own kernels" not in findings.negative_result_verdict(both, ["a"])
    held = table(("a", 0.9, 0.8, 0.95, "slower"), ("b", 1.0, 0.99, 1.01, "equivalent"))
    assert findings.negative_result_verdict(held).startswith("supported")
    unclear = table(("a", 0.9, 0.8, 0.95, "slower"), ("b", 1.0, 0.9, 1.1, "inconclusive"))
    assert findings.negative_result_verdict(unclear) == (
        "open: no candidate was shown faster, but b could be neither told apart from sdpa "
        "nor shown equivalent")


def test_kernel_answer_needs_both_levels_beyond_the_margin():
    import pandas as pd

    def t(*rows):
        return pd.DataFrame(rows, columns=["candidate", "level", "verdict"])
    yes = t(("k", "call", "faster"), ("k", "kernel", "faster"))
    assert findings.kernel_answer(yes).startswith("yes: k is faster")
    call_only = t(("k", "call", "faster"), ("k", "kernel", "equivalent"))
    assert findings.kernel_answer(call_only).startswith("not as a kernel: k")
    small = t(("k", "call", "faster within margin"), ("k", "kernel", "faster within margin"))
    assert findings.kernel_answer(small).startswith("no: no candidate is faster")
    assert "no kernel times" in findings.kernel_answer(t(("k", "call", "equivalent")))
    with pytest.raises(ValueError, match="columns"):
        findings.kernel_answer(pd.DataFrame({"candidate": ["k"]}))
