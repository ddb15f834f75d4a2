"""Tests for attn_analysis.chapters.cross_device: which runs the cross-device table shows."""

from __future__ import annotations

from attn_analysis.chapters import cross_device as xd
from attn_analysis.configs import TARGET


def test_target_sizes_ignore_dtype_and_causality():
    assert xd.target_sizes(TARGET.key)
    assert xd.target_sizes(TARGET.key.replace("fp16", "bf16"))
    assert not xd.target_sizes("B32-H8-S1024-D64-fp16")


def test_one_run_per_device_the_lead_first_then_the_widest():
    n = {"lead": 3, "a-big": 10, "a-small": 2, "b": 5, "c": 5, "d": 1, "e": 1}
    device = {"lead": "H200", "a-big": "H200", "a-small": "H100", "b": "L4", "c": "A100",
              "d": "B200", "e": "B200"}
    shown, left_out = xd.shown_runs(n, device, "lead")
    assert shown == ["lead", "b", "c", "a-small"]  # four columns at most; ties by name
    assert left_out == ["a-big", "d", "e"]
    assert xd.shown_runs(n, device, "none", max_runs=2)[0] == ["a-big", "b"]
