"""Tests for attn_analysis.workload: closed forms, roofline, device table, validation."""

import dataclasses
import math

import numpy as np
import pytest

from attn_analysis.analyse import workload as w
from attn_analysis.configs import TARGET, Config

# Independent closed forms, written out by hand (not calling the module):
#   flops = 2 matmuls * B*H*S*S*D multiply-adds * 2 FLOP
#   bytes = 4 tensors (Q, K, V, O) * B*H*S*D elements * 2 B


def test_flops_closed_form_target():
    assert w.flops(Config(32, 8, 512, 64)) == 4 * 32 * 8 * 512 * 512 * 64 == 17_179_869_184


@pytest.mark.parametrize("b,h,s,d", [(1, 1, 1, 64), (2, 3, 33, 128), (16, 16, 1024, 64)])
def test_flops_counts_two_matmuls(b, h, s, d):
    # One head: Q@K^T is (s x d)(d x s), s*s*d multiply-adds; P@V is (s x s)(s x d), the same.
    per_head = 2 * (s * s * d) + 2 * (s * s * d)
    assert w.flops(Config(b, h, s, d)) == b * h * per_head


def test_causal_halves_flops_not_bytes():
    c, cc = Config(4, 2, 256), Config(4, 2, 256, causal=True)
    assert w.flops(cc) == w.flops(c) / 2
    assert w.min_bytes(cc) == w.min_bytes(c)
    assert w.intensity(cc) == w.intensity(c) / 2


def test_min_bytes_target_is_not_the_reports_figure():
    # 32*8*512*64 = 8,388,608 elements per tensor, 2 B each, 4 tensors.
    assert w.min_bytes(TARGET) == 4 * 32 * 8 * 512 * 64 * 2 == 67_108_864
    assert w.min_bytes(TARGET) / 25.6e6 == pytest.approx(2.62, abs=0.01)  # reports' roofline bytes


def test_min_bytes_bf16_and_head_dim():
    assert w.min_bytes(Config(1, 1, 10, 128, "bfloat16")) == 4 * 10 * 128 * 2


@pytest.mark.parametrize("s", [128, 512, 2048])
def test_intensity_is_half_seq_len_fp16(s):
    assert w.intensity(Config(32, 8, s)) == s / 2


def test_rates_reproduce_report_columns():
    # Report 001: S=512 median 0.3210 ms listed as 53,516 GFLOPS and 209 GB/s.
    assert w.tflops_rate(w.flops(TARGET), 0.3210) == pytest.approx(53.516, rel=1e-3)
    assert w.gbs_rate(w.min_bytes(TARGET), 0.3210) == pytest.approx(209.06, rel=1e-3)
    assert w.tflops_rate(w.flops(TARGET), np.float32(1.0)) == pytest.approx(17.179869184)
    # whole columns at once, as the tables use them
    np.testing.assert_allclose(w.tflops_rate(np.array([2e9, 4e9]), np.array([1.0, 2.0])),
                               [2.0, 2.0])
    assert w.roof_tflops(100.0, 300.0) == pytest.approx(30.0)


def test_roofline_times_and_ridge():
    r = w.roofline_bound(TARGET, peak_tflops=100.0, bandwidth_gbs=1000.0)
    assert r.compute_time_ms == pytest.approx(17_179_869_184 / 100e12 * 1e3)
    assert r.memory_time_ms == pytest.approx(67_108_864 / 1000e9 * 1e3)
    assert r.ridge_intensity == pytest.approx(100.0)
    assert r.intensity == 256.0
    assert r.bound_ms == max(r.compute_time_ms, r.memory_time_ms)
    assert r.limiter == "compute"
    assert r.attainable_tflops == pytest.approx(100.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.bound_ms = 0.0


def test_roofline_limiter_switches_at_ridge():
    bw = 1000.0
    # Intensity 256 FLOP/B: peak 256 TFLOP/s puts the ridge exactly on the workload.
    at = w.roofline_bound(TARGET, 256.0, bw)
    assert at.compute_time_ms == pytest.approx(at.memory_time_ms)
    below = w.roofline_bound(TARGET, 256.0 * 0.99, bw)  # ridge < intensity: compute-bound
    above = w.roofline_bound(TARGET, 256.0 * 1.01, bw)  # ridge > intensity: memory-bound
    assert below.limiter == "compute" and below.ridge_intensity < below.intensity
    assert above.limiter == "memory" and above.ridge_intensity > above.intensity
    assert above.attainable_tflops == pytest.approx(256.0 * bw / 1000.0)  # intensity * bw


def test_l4_target_roofline_is_memory_limited():
    l4 = w.device_spec_or_none("NVIDIA L4")
    r = w.roofline_bound(TARGET, l4.peak_tflops("float16"), l4.mem_bandwidth_gbs)
    assert r.ridge_intensity == pytest.approx(121e12 / 300e9)
    assert r.limiter == "memory"
    assert r.bound_ms == pytest.approx(67_108_864 / 300e9 * 1e3)


@pytest.mark.parametrize("torch_name,key", [
    ("NVIDIA L4", "NVIDIA L4"),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM4 80GB"),
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80GB"),
    ("NVIDIA H200", "NVIDIA H200 SXM 141GB"),
    ("  nvidia   h200 ", "NVIDIA H200 SXM 141GB"),
    ("NVIDIA H100 SXM5 80GB", "NVIDIA H100 SXM5 80GB"),
])
def test_device_spec_lookup(torch_name, key):
    assert w.device_spec_or_none(torch_name) is w.HARDWARE[key]


@pytest.mark.parametrize("name", ["NVIDIA H100 PCIe", "NVIDIA A100-SXM4-40GB", "NVIDIA RTX 4090", ""])
def test_unknown_device(name):
    assert w.device_spec_or_none(name) is None


def test_hardware_table_values_and_sources():
    assert set(w.HARDWARE) >= {"NVIDIA L4", "NVIDIA A100 SXM4 80GB", "NVIDIA H100 SXM5 80GB",
                               "NVIDIA H200 SXM 141GB"}
    expected = {  # (fp16 dense, GB/s, L2 MiB, SMs)
        "NVIDIA L4": (121.0, 300.0, 48.0, 58),
        "NVIDIA A100 SXM4 80GB": (312.0, 2039.0, 40.0, 108),
        "NVIDIA H100 SXM5 80GB": (989.4, 3350.0, 50.0, 132),
        "NVIDIA H200 SXM 141GB": (989.4, 4800.0, 60.0, 132),
    }
    for key, (tf, bw, l2, sm) in expected.items():
        s = w.HARDWARE[key]
        assert (s.fp16_tflops_dense, s.mem_bandwidth_gbs, s.l2_mb, s.sm_count) == (tf, bw, l2, sm)
        assert s.bf16_tflops_dense == s.fp16_tflops_dense
        for field in ("fp16_tflops_dense", "bf16_tflops_dense", "mem_bandwidth_gbs", "l2_mb",
                      "sm_count", "fp32_tflops"):
            assert any(src.startswith(field + "=") for src in s.sources), (key, field)
    # The reports' "30 TFLOPS" is the L4's CUDA-core figure, a quarter of the dense tensor peak.
    assert w.HARDWARE["NVIDIA L4"].fp32_tflops == pytest.approx(30.3)


def test_peak_tflops_dtype():
    h = w.HARDWARE["NVIDIA H100 SXM5 80GB"]
    assert h.peak_tflops("bfloat16") == 989.4
    with pytest.raises(ValueError, match=r"`dtype` must be one of"):
        h.peak_tflops("float32")


@pytest.mark.parametrize("fn", [w.flops, w.min_bytes, w.intensity])
def test_config_must_be_config(fn):
    with pytest.raises(ValueError, match=r"`config` must be an attn_analysis.configs.Config"):
        fn((32, 8, 512, 64))


@pytest.mark.parametrize("bad", [0, -5, math.nan, math.inf, False])
def test_roofline_peaks_must_be_positive(bad):
    with pytest.raises(ValueError, match=r"`peak_tflops` must be a positive finite number"):
        w.roofline_bound(TARGET, bad, 300.0)
    with pytest.raises(ValueError, match=r"`bandwidth_gbs` must be a positive finite number"):
        w.roofline_bound(TARGET, 121.0, bad)
    with pytest.raises(ValueError, match=r"`config` must be"):
        w.roofline_bound("B32-H8-S512-D64-fp16", 121.0, 300.0)


def test_device_name_must_be_string():
    with pytest.raises(ValueError, match=r"`name` must be a string"):
        w.device_spec_or_none(None)
