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
                              "why", e)
            for i, e in enumerate(claims.EVIDENCE_ORDER)]
    v = claims.claims_values(rows)
    assert v["c1_claim"] == "claim 0" and v["c1_source"] == "src" and "c1_evidence" not in v
    assert v["c14_verdict"] == "fails" and v["n_claims"] == len(claims.EVIDENCE_ORDER) == 14
    assert (v["n_holds"], v["n_fails"], v["n_cannot_be_tested_here"]) == (1, 13, 0)
    with pytest.raises(ValueError, match="the claims' order changed"):
        claims.claims_values(rows[::-1])


def test_a_claim_that_needs_an_unmeasured_gpu_cannot_be_tested_here():
    # the audit's rule: a claim whose decision needs an L4 (or the A100 figure) is "cannot be
    # tested here", whatever our evidence says; a claim decided on Hopper keeps its verdict
    assert claim_table.decide("fails", ("L4",)) == "cannot be tested here"
    assert claim_table.decide("holds", ("H100", "A100")) == "cannot be tested here"
    assert claim_table.decide("fails", ("H100",)) == "fails"
    assert claim_table.decide("holds") == "holds"
    c = claim_table.Claim("c", "s", "m", "fails", "w", "e", needs=("L4",))
    assert c.verdict == "cannot be tested here"
    assert claim_table.Claim("c", "s", "m", "fails", "w", "e").verdict == "fails"
    with pytest.raises(ValueError, match="`needs`"):
        claim_table.decide("fails", "L4")
    with pytest.raises(ValueError, match="`verdict`"):
        claim_table.decide("maybe")
