"""claims: each claim of the original reports, checked (synthetic check files, the
reports' table, the datasheet figures)."""

from __future__ import annotations

import pandas as pd
import pytest

from attn_analysis.chapters import claim_table, claims
from attn_analysis.analyse import workload
from test_audit import make_extras

def test_reported_finds_exactly_one_value_and_names_its_source():
    rep = claims.Reported()
    assert rep("000", "median_latency_ms", "Step 2", 512) == 0.3195
    assert rep.source("000", "Impact Assessment").endswith(".txt, 'Impact Assessment'")
    with pytest.raises(ValueError, match="expected one reported value for 001 median_latency_ms"):
        rep("001", "median_latency_ms", "Sequence Length Sweep")  # one per S: ambiguous


def test_chunking_claim_reads_time_ratios_and_errors():
    f = claims.chunking_claim(make_extras(q_factor=2.0, qkv_factor=1.5), claims.Reported(),
                             n_resamples=200)
    assert f.values["t_q"] == pytest.approx(2.0, rel=0.01)
    assert f.values["t_q_lo"] <= f.values["t_q"] <= f.values["t_q_hi"]
    assert f.values["t_qkv"] == pytest.approx(1.5, rel=0.01)
    assert (f.values["err_q"], f.values["err_qkv"], f.values["err_full"]) == (2e-4, 0.4, 1e-4)
    assert f.claim.verdict == "fails" and f.claim.evidence == "audit-chunking"
    assert "2.00x the time of full attention" in f.claim.measured


@pytest.mark.parametrize("kernels, same", [(("a", "b"), "the same kernels with either setting"),
                                           (("a", "c"), "different kernels under the two "
                                                        "settings")])
def test_tf32_claim_compares_the_two_settings_and_their_kernels(kernels, same):
    a_fp = pd.Series({"rate": 0.4, "ci_low": 0.3, "ci_high": 0.5, "n": 90})
    f = claims.tf32_claim(make_extras(tf32_kernels=kernels), claims.Reported(), a_fp,
                         margin=0.02, n_resamples=200)
    assert f.values["tf32_same"] == same and f.values["tf32_n"] == 4
    assert f.values["tf32_speedup"] == pytest.approx(1.0, abs=0.01)
    assert f.values["tf32_verdict"] in ("equivalent", "inconclusive")
    assert "differ 'significantly' 40% of the time" in f.claim.why


def test_datasheet_claims_use_the_workload_figures():
    rep = claims.Reported()
    flops = claims.flops_claim(rep).values
    assert flops["flops_512"] == workload.flops(claims.TARGET)
    assert flops["l4_sparse"] == 2 * flops["l4_fp16"]
    roof = claims.roofline_claim(rep)
    assert roof.values["l4_limiter"].endswith("-bound")
    assert roof.values["minbytes_512"] == workload.min_bytes(claims.TARGET)
    a100 = claims.a100_claim(rep).values
    assert a100["bh"] == 256 and a100["l4_a100"] == pytest.approx(
        rep("001", "median_latency_ms", "PyTorch SDPA (FlashAttention-2)", 512, 32, 8)
        / a100["a100_ms"])
    bw = claims.bandwidth_claim(rep)
    assert bw.claim.verdict == "cannot be tested here"
    assert bw.values["ws_l4_256"] < bw.values["ws_l4_512"]


def test_claims_values_pastes_each_cell_and_counts_verdicts():
    rows = [claim_table.Claim(f"claim {i}", "src", "measured", "holds" if i == 0 else "fails",
                              "why", e, needs=(), ground="measurement")
            for i, e in enumerate(claims.EVIDENCE_ORDER)]
    v = claims.claims_values(rows)
    assert v["c1_claim"] == "claim 0" and v["c1_source"] == "src" and "c1_evidence" not in v
    assert v["c14_verdict"] == "fails" and v["n_claims"] == len(claims.EVIDENCE_ORDER) == 14
    assert (v["n_holds"], v["n_fails"], v["n_cannot_be_tested_here"]) == (1, 13, 0)
    with pytest.raises(ValueError, match="the claims' order changed"):
        claims.claims_values(rows[::-1])


def test_a_claim_that_needs_an_unmeasured_gpu_cannot_be_tested_here():
    # the audit's rule: a claim about an L4 (or the A100 figure) that a measurement there
    # would decide is "cannot be tested here", whatever our evidence says; one that its own
    # arithmetic refutes keeps its verdict (shown "(arithmetic)"); a claim decided on
    # Hopper keeps its verdict
    assert claim_table.decide("fails", ("L4",), "measurement") == "cannot be tested here"
    assert claim_table.decide("holds", ("H100", "A100"), "measurement") == "cannot be tested here"
    assert claim_table.decide("fails", ("H100",), "measurement") == "fails"
    assert claim_table.decide("fails", ("L4",), "arithmetic") == "fails"
    assert claim_table.decide("holds", (), "measurement") == "holds"
    c = claim_table.Claim("c", "s", "m", "fails", "w", "e", needs=("L4",), ground="measurement")
    assert c.verdict == c.cell == "cannot be tested here"
    c = claim_table.Claim("c", "s", "m", "fails", "w", "e", needs=("L4",), ground="arithmetic")
    assert (c.verdict, c.cell) == ("fails", "fails (arithmetic)")
    c = claim_table.Claim("c", "s", "m", "fails", "w", "e", needs=(), ground="arithmetic")
    assert c.cell == "fails"
    with pytest.raises(ValueError, match="`needs`"):
        claim_table.decide("fails", "L4", "measurement")
    with pytest.raises(ValueError, match="`ground`"):
        claim_table.decide("fails", ("L4",), "logic")
    with pytest.raises(ValueError, match="`verdict`"):
        claim_table.decide("maybe", (), "arithmetic")


def test_no_claim_is_decided_by_leaving_out_the_device_it_is_about():
    # the old Claim defaulted `needs` to (), so the L4 claims 5, 7 and 8 (throughput, the
    # roofline table, the sequence-length 'speedup') were "fails" with no word of why;
    # now every claim says which devices it is about and what decides it
    with pytest.raises(ValueError, match="`needs` and `ground` must be given"):
        claim_table.Claim("c", "s", "m", "fails", "w", "e")
    rep = claims.Reported()
    for c in (claims.flops_claim(rep).claim, claims.roofline_claim(rep).claim):
        assert c.needs == ("L4",) and c.ground == "arithmetic"
        assert c.verdict == "fails" and c.cell == "fails (arithmetic)"
    bw = claims.bandwidth_claim(rep).claim
    assert bw.needs == ("L4",) and bw.cell == "cannot be tested here"
    a100 = claims.a100_claim(rep).claim
    assert a100.verdict == "cannot be tested here"
    v = claims.claims_values([claim_table.Claim(
        "c", "s", "m", "fails", "w", e, needs=("L4",), ground="arithmetic")
        for e in claims.EVIDENCE_ORDER])
    assert v["c5_verdict"] == "fails (arithmetic)" and v["n_fails"] == 14


def _family(n_processes: int, flash: float = 0.696, eff: float = 0.327) -> pd.DataFrame:
    rows = [("sdpa_flash", flash), ("sdpa_efficient", eff), ("sdpa_cudnn", 1.0)]
    return pd.DataFrame([
        {"candidate": c, "mode": "graph", "level": "call", "speedup": x, "ci_low": x * 0.99,
         "ci_high": x * 1.01, "verdict": "slower" if x < 0.98 else "equivalent",
         "n_processes": n_processes, "n_comparisons": 52} for c, x in rows]
        + [{"candidate": "sdpa_flash", "mode": "graph", "level": "kernel", "speedup": 0.6,
            "ci_low": 0.5, "ci_high": 0.7, "verdict": "slower", "n_processes": n_processes,
            "n_comparisons": 52}])


def test_the_backends_claim_refuses_a_run_too_small_to_decide_a_threefold_slowdown():
    # the audit read the forced backends from the two-process matrix run: one degree of
    # freedom in a family of 220 made a 0.326 slowdown "inconclusive". It now reads 3.1's
    # target run (7 processes, family 52) and refuses fewer than MIN_PROCESSES processes.
    rows = claims.backend_rows(_family(7))
    assert rows.loc["sdpa_efficient", "verdict"] == "slower" and "kernel" not in set(rows["level"])
    with pytest.raises(ValueError, match="at least 3 processes"):
        claims.backend_rows(_family(2))
    with pytest.raises(ValueError, match="missing"):
        claims.backend_rows(_family(7).iloc[1:])


@pytest.mark.parametrize("flash, eff, expected", [
    ("slower", "slower", "the flash and memory-efficient backends are both slower per call"),
    ("slower", "inconclusive", "the flash backend is slower and the memory-efficient "
                               "backend inconclusive per call"),
    ("equivalent", "equivalent", "are both equivalent per call")])
def test_the_backends_sentence_reads_right_for_every_pair_of_verdicts(flash, eff, expected):
    s = claims.backends_sentence({"flash_verdict": flash, "eff_verdict": eff,
                                  "backends_run": "r1"}, "H200-a")
    assert expected in s and s.endswith("on H200-a (run r1).")
    assert f"{flash} and {flash}" not in s
    with pytest.raises(ValueError, match="`label`"):
        claims.backends_sentence({"flash_verdict": flash, "eff_verdict": eff,
                                  "backends_run": "r1"}, "")
