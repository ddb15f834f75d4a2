"""Candidate metadata: validation, fallbacks, and kernel patterns checked against the
kernel names the recorded runs' profilers saw."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from attn_analysis.analyse import catalog, kernel_evidence

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"


@pytest.mark.parametrize("kwargs, match", [
    ({"label": "", "origin": "peer", "family": "f"}, "`label` must be a non-empty string"),
    ({"label": "x", "origin": "vendor", "family": "f"}, "`origin` must be one of"),
    ({"label": "x", "origin": "peer", "family": " "}, "`family` must be a non-empty string"),
    ({"label": "x", "origin": "peer", "family": "f", "kernel_pattern": "("},
     "`kernel_pattern` must be a regular expression"),
])
def test_meta_refuses_bad_fields(kwargs, match):
    with pytest.raises(ValueError, match=match):
        catalog.Meta(**kwargs)


def test_meta_round_trips_and_refuses_unknown_keys():
    meta = catalog.CATALOG["fa4"]
    assert catalog.Meta.from_dict(meta.as_dict()) == meta
    with pytest.raises(ValueError, match="`meta` keys must be drawn from"):
        catalog.Meta.from_dict({**meta.as_dict(), "colour": "red"})


def test_meta_for_prefers_what_a_run_recorded_then_the_catalog():
    recorded = {"label": "my kernel", "origin": "ours", "family": "mine", "kernel_pattern": "^my"}
    assert catalog.meta_for("fa4", recorded).label == "my kernel"
    assert catalog.meta_for("fa4").origin == "peer"
    spin = catalog.meta_for("sdpa_spin2500")
    assert spin.origin == "control" and "2500" in spin.label
    unknown = catalog.meta_for("user_kernel")
    assert (unknown.label, unknown.origin) == ("user_kernel", "ours")
    with pytest.raises(ValueError, match="`name` must be a candidate name"):
        catalog.meta_for("")


def test_by_origin_keeps_order():
    names = ["triton", "sdpa", "fa4", "sdpa_twin", "flashinfer"]
    assert catalog.by_origin(names, "peer") == ["fa4", "flashinfer"]
    assert catalog.by_origin(names, "ours") == ["triton"]
    with pytest.raises(ValueError, match="`origin` must be one of"):
        catalog.by_origin(names, "other")


def test_kernel_family_of_known_and_unknown_names():
    assert catalog.kernel_family("Memset (Device)") == "memset / fill"
    assert catalog.kernel_family("nvjet_sm90_hsh_256x128") == "GEMM"
    assert catalog.kernel_family("a_kernel_nobody_knows") == "other"


def _recorded_kernels() -> pd.DataFrame:
    frames = [pd.read_parquet(p) for p in sorted(RUNS.glob("*/kernels.parquet"))]
    return pd.concat(frames, ignore_index=True)


def test_each_pattern_matches_its_candidates_recorded_attention_kernel():
    main = kernel_evidence.kernel_split(_recorded_kernels())
    checked = set()
    for cand, meta in catalog.CATALOG.items():
        if not meta.kernel_pattern:
            continue
        kernels = main.loc[main["candidate"] == cand, "main_kernel"]
        if kernels.empty:
            continue  # never recorded (xFormers)
        checked.add(cand)
        for name in set(kernels):
            assert catalog.kernel_family(name) == meta.family, (cand, name)
    assert {"fa4", "flashinfer", "cudnn_frontend", "sdpa_flash", "triton"} <= checked
