"""audit: the audit chapter's inputs, calibration and timing checks (synthetic data), and
the whole chapter, claims included, on the committed runs and check files."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attn_analysis.chapters import audit, claims, kernel_claims
from attn_analysis.analyse import protocols
from attn_analysis.record import checks
from attn_analysis.chapters import state_of_the_art as sota

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "data" / "runs"


def timing_samples(medians_ms, n=200, sd=0.002, seed=0) -> list[dict]:
    """A check file's samples: one dict of raw times per process, lognormal around each
    median."""
    rng = np.random.default_rng(seed)
    return [{"times_ms": list(m * np.exp(rng.normal(0, sd, n)))} for m in medians_ms]


def make_extras(q_factor=2.0, qkv_factor=1.5, tf32_kernels=("a", "b")) -> dict:
    """A small audit_extras payload: chunking variants q_factor and qkv_factor times as
    slow as full attention; TF32 on and off equally fast."""
    meds = [0.30, 0.31, 0.305, 0.302]
    kern = [{"name": k, "ms_per_call": 0.1} for k in tf32_kernels]
    return {"fingerprint": {"gpu_name": "GPU X", "torch_version": "9.9"},
            "tf32": {"samples": {"on": timing_samples(meds, seed=1),
                                 "off": timing_samples(meds, seed=2)},
                     "kernels": {"on": kern, "off": [{"name": "a", "ms_per_call": 0.1},
                                                     {"name": "b", "ms_per_call": 0.1}]}},
            "chunking": {"variants": {
                "full": {"rel_error": 1e-4, "samples": timing_samples(meds, seed=3)},
                "q_chunks": {"rel_error": 2e-4,
                             "samples": timing_samples([q_factor * m for m in meds], seed=4)},
                "qkv_chunks": {"rel_error": 0.4,
                               "samples": timing_samples([qkv_factor * m for m in meds],
                                                         seed=5)}}},
            "warmup": {"n_samples": 400, "samples": timing_samples([0.01] * 3, n=400)}}


# ------------------------------------------------------------------------- the inputs

@pytest.mark.parametrize("value, expected", [("3,4,5", [3, 4, 5]), ("5, 3,3,", [3, 5]), (4, [4])])
def test_ks_iv_parses_sorted_unique_integers(value, expected):
    assert audit.ks_iv("ks", value) == expected


@pytest.mark.parametrize("value", ["", "1,3", "3,x", None])
def test_ks_iv_refuses_other_values(value):
    with pytest.raises(ValueError, match="`ks` must be a comma-separated list of integers >= 2"):
        audit.ks_iv("ks", value)


def test_extras_iv_needs_a_sealed_audit_extras_file_with_every_section(tmp_path):
    full = make_extras()
    checks.write(tmp_path / "x.json", full, "audit_extras")
    assert audit.extras_iv("extras", "x.json", {"root": tmp_path})["chunking"] == full["chunking"]
    del full["warmup"]
    checks.write(tmp_path / "y.json", full, "audit_extras")
    with pytest.raises(ValueError, match=r"`extras` must hold tf32, chunking, warmup, "
                                         r"fingerprint; missing \['warmup'\]"):
        audit.extras_iv("extras", "y.json", {"root": tmp_path})
    checks.write(tmp_path / "z.json", full, "graph_anatomy")
    with pytest.raises(ValueError, match="holds a graph_anatomy check, not audit_extras"):
        audit.extras_iv("extras", "z.json", {"root": tmp_path})


def test_calibration_runs_iv_needs_an_aa_control_and_spins():
    params = {"root": ROOT, "runs_dir": RUNS}
    with pytest.raises(ValueError, match=r"`c` must hold an A/A control \('sdpa_twin',\) and "
                                         r"spin controls; it holds"):
        audit.calibration_runs_iv("c", "h200-kernel-bf16-p2", params)


def test_outcome_table_shows_each_outcome_with_its_interval():
    rates = pd.DataFrame({
        "protocol": [protocols.PROTOCOL_A] * 2 + [protocols.PROTOCOL_B] * 2, "k": [1, 1, 3, 3],
        "candidate": ["sdpa_twin"] * 4, "outcome": ["significant", "significant, faster",
                                                   "equivalent", "inconclusive"],
        "rate": [0.4, 0.2, 0.5, 0.5], "ci_low": [0.3, 0.1, 0.2, 0.2],
        "ci_high": [0.5, 0.3, 0.8, 0.8], "n": [90, 90, 10, 10], "events": [36, 18, 5, 5]})
    a = audit.outcome_table(rates, protocols.PROTOCOL_A)
    assert list(a.columns) == ["candidate", "replications", "significant",
                               "significant, faster"]
    assert a.iloc[0]["significant"] == "40% (30–50)" and a.iloc[0]["replications"] == 90
    b = audit.outcome_table(rates, protocols.PROTOCOL_B)
    assert list(b.columns) == ["k", "candidate", "replications", "equivalent", "inconclusive"]


# ----------------------------------------------------- the committed data, end to end

@pytest.mark.slow
def test_the_audit_runs_on_the_committed_runs_and_checks():
    from attn_analysis.cli import notebook_support as nbs
    params = {"root": ROOT, "runs_dir": RUNS}
    cr = audit.calibration_runs_iv("c", "h100-calibration-v1,h100-calibration-v2", params)
    lead, triton = (nbs.run_iv("r", r, params) for r in ("h200-reports-p2-all", "h200-triton-p2"))
    extras = audit.extras_iv("x", "data/checks/audit_extras_h100.json", params)
    anatomy = nbs.check_file_iv("graph_anatomy")("a", "data/checks/graph_anatomy_h100.json",
                                                 params)
    ks = [3, 4, 5]
    head = audit.header_values(cr, lead, triton, extras, margin=0.02, alpha=0.05)
    assert head["run_c"] == "h100-calibration-v1 and h100-calibration-v2"
    assert head["n_controls"] == len(cr.spins) > 0 and cr.aa == ["sdpa_twin"]
    cb = audit.calibrate(cr, ks, margin=0.02, alpha=0.05, n_resamples=200)
    values = audit.calibration_values(cb, cr, ks, margin=0.02)
    assert {"a_fp", "b3_fp_lo", "b5_aa_inconclusive", "cov_gr_hi", "first_above"} <= set(values)
    a_fp = cb.a_fp(cr.aa)
    assert a_fp["rate"] > 0.05  # the reports' protocol: far above its nominal level
    fid = audit.fidelity(lead)
    assert fid.values["fid_s128_host"] > 0.5  # per call at S=128 is mostly host time
    assert set(audit.replay(anatomy, lead).values) >= {"rp_s128_k8_hi", "rp_rec_k512"}
    # the rule's example agrees with the rule: at S = 128 the cap on calls binds, so the
    # auto-sized replay is shorter than the target; the label names the check file
    rp = audit.replay(anatomy, lead, "data/checks/graph_anatomy_h100.json").values
    assert rp["rp_auto128_ms"] < rp["rp_target_ms"]
    assert rp["label_rp"] == "H100, graph_anatomy_h100.json"
    assert audit.check_label(extras).startswith("H100, torch ")
    cache_table, copy_gbs = audit.cache(lead).data
    assert copy_gbs > 0 and len(cache_table) == 10
    assert len(audit.cost(cr, lead, ks).data) == 1 + len(ks)
    rep = claims.Reported()
    all_runs = nbs.load_runs(RUNS)
    by_campaign = sota.campaigns_of(all_runs)
    tables = {c: [sota.comparison_table(r, n_resamples=200) for r in rs.values()]
              for c, rs in by_campaign.items()}
    every = [t for ts in tables.values() for t in ts]
    targets = {sota.machine_label(r): t for r, t in zip(by_campaign["target"].values(),
                                                          tables["target"])}
    not_run = {u["candidate"]: u["reason"] for r in by_campaign["target"].values()
               for _, u in sota.untimed(r).iterrows()}
    rows = [f.claim for f in (
        claims.tf32_claim(extras, rep, a_fp, margin=0.02, n_resamples=200),
        claims.backends_claim(nbs.run_iv("t", "h200-target-p2-m1", params), rep, margin=0.02),
        claims.self_claim(cr, rep), claims.ci_claim(cb, cr, rep), claims.flops_claim(rep),
        claims.bandwidth_claim(rep), claims.roofline_claim(rep), claims.seqlen_claim(lead, rep),
        claims.chunking_claim(extras, rep, n_resamples=200), claims.a100_claim(rep),
        claims.warmup_claim(extras, lead, fid.data, rep),
        claims.mann_whitney_claim(a_fp, rep, alpha=0.05),
        kernel_claims.custom_kernels_claim(every, rep),
        kernel_claims.peers_claim(targets, not_run, rep))]
    confirmatory = kernel_claims.confirmatory_tables(all_runs, n_resamples=200)
    ck = kernel_claims.custom_kernels_claim(confirmatory, rep).values
    assert ck["ck_n_runs"] == len(ck["ck_runs"].split(", ")) and 0 <= ck["ck_n_reached"] <= ck["ck_n"]
    # claim 13 counts every confirmatory run, our Gluon kernel's pre-registered ones too
    assert "our Gluon kernel (FA3-style)" in ck["ck_kernels"]
    assert {"h100-sota-confirm", "h200-gluon-v2-target"} <= set(ck["ck_runs"].split(", "))
    v = claims.claims_values(rows)
    assert v["n_claims"] == 14 and v["n_fails"] + v["n_holds"] + v["n_cannot_be_tested_here"] == 14
    assert not any(isinstance(x, float) and math.isnan(x) for x in v.values())


def test_confirmatory_tables_keep_confirmatory_runs_with_a_custom_kernel_at_their_family(
        monkeypatch):
    from attn_analysis.analyse import power
    from test_state_of_the_art import make_run
    runs = {"b-confirm": make_run(run_id="b-confirm", matrix="confirm-v1"),
            "a-explore": make_run(run_id="a-explore", uuid="GPU-11111111-1"),
            "c-sdpa": make_run(run_id="c-sdpa", matrix="confirm-v1", uuid="GPU-22222222-1",
                               candidates=("sdpa", "sdpa_twin", "cudnn_frontend"))}
    got = kernel_claims.confirmatory_tables(runs, n_resamples=200)
    assert [t["run"].iloc[0] for t in got] == ["b-confirm"]
    monkeypatch.setattr(power, "registered_family", lambda info: 3)
    assert set(kernel_claims.confirmatory_tables(runs, n_resamples=200)[0]["n_comparisons"]) \
        == {3}
    rep = claims.Reported()
    ck = kernel_claims.custom_kernels_claim(got, rep)
    assert ck.values["ck_kernels"] == "FlashAttention-4 (CuTe DSL) and our Triton kernel"
    assert "(FlashAttention-4 (CuTe DSL) and our Triton kernel)" in ck.claim.measured
    with pytest.raises(ValueError, match="`runs`"):
        kernel_claims.confirmatory_tables(list(runs.values()))
