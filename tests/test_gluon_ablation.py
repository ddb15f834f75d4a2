"""The ablation table of the kernel appendix (``chapters.gluon_ablation``) on synthetic
payloads of scripts/gluon_ablation.py's shape with known speedups, plus the recorded
rounds."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from attn_analysis.chapters import gluon_ablation as ga
from attn_analysis.measure import gluon_config
from attn_analysis.record import checks

ROOT = Path(__file__).resolve().parents[1]
TENSOR, SFU = ga.TENSOR, ga.SFU
A, B = "fa3_n128_s3", "overlap_p2"  # real variants (their changes come from gluon_config)
BARRIER = "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"
WAIT = "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"


def payload(kernel_ms: dict, call_ratio: dict, ncu: dict | None = None,
            info: dict | None = None) -> dict:
    """A minimal ablation payload: SDPA and variants with the given attention-kernel
    times, call-ratio (median, min, max) and optional ncu metrics per candidate."""
    summary = {c: {"median_ms": 0.05 / r[0], "ratio_median": r[0], "ratio_min": r[1],
                   "ratio_max": r[2], "rounds": 6} for c, r in call_ratio.items()}
    kernel = {c: {"attention_kernel_ms": ms,
                  "kernels": [{"name": "cudnn_fprop_x" if c == "sdpa" else "_gluon_attn_fwd",
                               "ms_per_call": ms}]} for c, ms in kernel_ms.items()}
    doc = {"ablation": True, "fingerprint": {"gpu_name": "NVIDIA H200",
                                             "gpu_uuid": "GPU-12345678-aaaa"},
           "grid": {c: {"ok": True} for c in kernel_ms if c != "sdpa"},
           "timing": {"summary": summary, "kernel": kernel,
                      "do_bench_cudagraph_ms": {c: 2 * ms for c, ms in kernel_ms.items()},
                      "info": info or {}}}
    if ncu is not None:
        doc["ncu"] = {"order": list(ncu), "kernels": list(ncu.values()), "rc": 0}
    return doc


def test_rows_speedups_are_sdpa_over_variant_and_sorted():
    doc = payload({"sdpa": 0.05, A: 0.04, B: 0.1},
                  {"sdpa": (1, 1, 1), A: (1.2, 1.1, 1.3), B: (0.5, 0.4, 0.6)})
    df = ga.ablation_rows(doc, 2, "H200-x, round 2")
    assert list(df["variant"]) == [A, "sdpa", B]
    a = df.set_index("variant").loc[A]
    assert a["kernel_speedup"] == pytest.approx(0.05 / 0.04)
    assert (a["call_speedup"], a["call_min"], a["call_max"]) == (1.2, 1.1, 1.3)
    assert a["bench_speedup"] == pytest.approx(0.1 / 0.08)
    assert a["reference_kernel"] == "cudnn_fprop_x" and a["round"] == 2
    assert a["gpu"] == "H200-x, round 2" and bool(a["grid_ok"])
    assert df.set_index("variant").loc[B, "kernel_speedup"] == pytest.approx(0.5)


def test_ncu_columns_and_top_stall_where_recorded():
    ncu = {A: {TENSOR: 41.5, SFU: 43.0, BARRIER: 2.8, WAIT: 1.3},
           "sdpa": {TENSOR: 41.0, SFU: 42.0, BARRIER: 0.5, WAIT: 0.9}}
    doc = payload({"sdpa": 0.05, A: 0.05, B: 0.06},
                  {"sdpa": (1, 1, 1), A: (1, 1, 1), B: (0.9, 0.8, 1)}, ncu=ncu)
    df = ga.ablation_rows(doc, 3, "H200").set_index("variant")
    assert (df.loc[A, "tensor_pct"], df.loc[A, "sfu_pct"]) == (41.5, 43.0)
    assert df.loc[A, "top_stall"] == "barrier" and df.loc[A, "top_stall_per_issue"] == 2.8
    assert df.loc["sdpa", "top_stall"] == "wait"
    assert df.loc[B, "top_stall"] is None or df.loc[B, "top_stall"] != df.loc[B, "top_stall"]
    assert df.loc[B, "tensor_pct"] is None or math.isnan(df.loc[B, "tensor_pct"])


def test_changes_are_read_from_the_recorded_config():
    default = dict(gluon_config.DEFAULT_CONFIGS[64])
    assert ga.default_config(64) == default  # the one copy, read without importing torch
    info = {"new": {**default, "PERSIST": 2, "OVERLAP": True, "variant": "new"},
            "same": {**default, "variant": "same"}}
    doc = payload({"sdpa": 0.05, "new": 0.05, "same": 0.06, "fa3": 0.07},
                  {"sdpa": (1, 1, 1), "new": (1, 1, 1), "same": (1, 1, 1), "fa3": (1, 1, 1)},
                  info=info)
    df = ga.ablation_rows(doc, 1, "H100").set_index("variant")
    assert df.loc["new", "changes"] == "PERSIST=2, OVERLAP=True"
    assert df.loc["same", "changes"] == "(the default)"
    assert df.loc["sdpa", "changes"] == "" and __import__("pandas").isna(df.loc["fa3", "changes"])
    with pytest.raises(ValueError, match="`info`"):
        ga.changes_text("x", "PERSIST=1")
    with pytest.raises(ValueError, match="`head_dim`"):
        ga.default_config(96)


def test_table_args_short_table_and_caption_from_the_frame():
    rows = [ga.ablation_rows(payload({"sdpa": 0.05, A: 0.04},
                                     {"sdpa": (1, 1, 1), A: (1.2, 1.1, 1.3)}), r, g)
            for r, g in ((1, "H100, round 1"), (2, "H200-x, round 2"))]
    frame = __import__("pandas").concat(rows, ignore_index=True)
    args = ga.table_args(frame)
    assert list(args["df"]["gpu"]) == ["H200-x, round 2"] * 2 + ["H100, round 1"] * 2
    assert list(args["df"]["variant"][:2]) == [A, "sdpa"]
    assert args["df"]["call"][0] == "1.200 (1.100–1.300)"
    assert 5 <= args["df"].shape[1] <= 7 and args["full"] is frame
    assert "H100, round 1; H200-x, round 2" in args["caption"]
    with pytest.raises(ValueError, match="`frame`"):
        ga.table_args(frame.drop(columns="call_min"))


def test_gpu_label_prefers_inventory_and_never_the_uuid():
    fp = {"gpu_name": "NVIDIA H100 80GB HBM3", "gpu_uuid": "GPU-abcdef12-3456"}
    assert ga.gpu_label(fp) == "H100"
    assert ga.gpu_label(fp, {"abcdef12-3456": "H100-c"}) == "H100-c"
    with pytest.raises(ValueError, match="`fingerprint`"):
        ga.gpu_label("H100")


@pytest.mark.parametrize("bad, match", [
    ({"timing": {}}, "`doc`"),
    ({"ablation": True, "timing": {"summary": {}}}, "`doc`"),
    ({"ablation": True, "timing": {"summary": {A: {}}, "kernel": {A: {}}}}, "`doc`"),
])
def test_invalid_payload_raises_naming_doc(bad, match):
    with pytest.raises(ValueError, match=match):
        ga.ablation_rows(bad, 1, "H100")


def test_invalid_arguments_raise_naming_them(tmp_path):
    doc = payload({"sdpa": 0.05, A: 0.04}, {"sdpa": (1, 1, 1), A: (1, 1, 1)})
    with pytest.raises(ValueError, match="`round_`"):
        ga.ablation_rows(doc, 0, "H100")
    with pytest.raises(ValueError, match="`gpu`"):
        ga.ablation_rows(doc, 1, "")
    doc["ncu"] = {"order": [A, "sdpa"], "kernels": [{}]}
    with pytest.raises(ValueError, match="`doc`"):
        ga.ablation_rows(doc, 1, "H100")
    with pytest.raises(ValueError, match="`files`"):
        ga.ablation_table(ROOT, files={})
    with pytest.raises(ValueError, match="`root`"):
        ga.ablation_table(tmp_path / "nowhere")


def test_table_reads_sealed_files_and_refuses_unsealed(tmp_path):
    doc = payload({"sdpa": 0.05, A: 0.04}, {"sdpa": (1, 1, 1), A: (1.2, 1.1, 1.3)})
    checks.write(tmp_path / "r1.json", doc, "gluon_check")
    df = ga.ablation_table(tmp_path, files={1: "r1.json"}, runs_dir="none")
    assert list(df["gpu"].unique()) == ["H200, round 1"]
    (tmp_path / "r2.json").write_text('{"ablation": true}')
    with pytest.raises(ValueError, match="`files`"):
        ga.ablation_table(tmp_path, files={1: "r2.json"}, runs_dir="none")


def test_recorded_rounds_load_with_their_variants():
    df = ga.ablation_table(ROOT)
    assert len(df)
    rounds = {1: gluon_config.ABLATION_VARIANTS, 2: gluon_config.ROUND2_VARIANTS,
              3: gluon_config.ROUND3_VARIANTS, 4: gluon_config.ROUND4_VARIANTS,
              5: gluon_config.ROUND5_VARIANTS, 6: gluon_config.ROUND6_VARIANTS}
    for r, variants in rounds.items():
        got = set(df.loc[df["round"] == r, "variant"])
        assert got == set(variants) | {ga.REFERENCE}
    assert not df["gpu"].str.contains(r"[0-9a-f]{8}").any()  # no UUID block
    assert df["kernel_speedup"].gt(0).all() and df["call_speedup"].gt(0).all()
    assert df.loc[df["round"] > 1, "tensor_pct"].notna().any()  # rounds 2 and 3 ran ncu
    shown = ga.table_args(df)["df"]
    per_round = shown["gpu"].value_counts()
    assert len(per_round) == len(rounds) and per_round.max() == ga.SHOWN_PER_ROUND
    # the fastest kernels of each round are the ones shown
    for gpu, rows in shown.groupby("gpu"):
        rest = df[(df["gpu"] == gpu) & ~df["variant"].isin(rows["variant"])]
        assert rest.empty or rest["kernel_speedup"].max() <= rows["kernel_speedup"].min()


def test_the_chapters_read_the_one_copy_of_the_gluon_defaults():
    """The ablation's 'changes' column compares against configs.GLUON_DEFAULT_CONFIGS, the
    same object the measuring side builds every variant on (no second copy, no source
    parsing)."""
    from attn_analysis import configs
    assert gluon_config.DEFAULT_CONFIGS is configs.GLUON_DEFAULT_CONFIGS
    assert ga.default_config(64) == configs.GLUON_DEFAULT_CONFIGS[64]
    assert ga.default_config(64) is not configs.GLUON_DEFAULT_CONFIGS[64]  # a copy to change
    with pytest.raises(ValueError, match="`head_dim`"):
        ga.default_config(96)
