"""Tests of the Triton attention kernel on the CPU.

Correctness runs the real kernel through Triton's interpreter. ``TRITON_INTERPRET=1``
must be in the environment before the ``@triton.jit`` function is defined, so those
checks run in one subprocess (``_CHILD`` below) at tiny shapes and report JSON back.
Only fp16 inputs are checked there: the interpreter computes bf16 ``tl.dot`` wrongly
without raising an error, so bf16 is checked on the GPU (scripts/triton_check.py).

The reference is independent of the kernel: ``softmax(q k^T * scale [+ causal mask]) v``
computed in float64 by torch on the CPU, in one piece (no tiling, no online softmax).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

# The book needs no triton, so a CPU user may not have it (requirements-test.txt adds it).
# CI sets ATTN_REQUIRE_TRITON=1 (.ci/run): there a missing triton fails instead of skipping.
pytestmark = pytest.mark.slow  # the Triton interpreter

if os.environ.get("ATTN_REQUIRE_TRITON") != "1":
    pytest.importorskip("triton", reason="triton is not installed: these tests run the kernel "
                                         "through its interpreter (pip install -r "
                                         "requirements-test.txt)", exc_type=ImportError)

from attn_analysis.measure import triton_attention as ta  # noqa: E402

# (B, H, S, D, causal, config or None, sm_scale or None, path). Odd S, S below one block,
# BLOCK_M != BLOCK_N both ways (the causal diagonal then spans part of a tile), B*H > 1.
# path "tma" goes through `attention` (tensor descriptors, as on Hopper); "ptr" forces the
# pointer path used on older GPUs and for misaligned tensors. EXP_F16 is emulated here
# (fp16 argument and result); its PTX instruction itself runs only on the GPU.
CASES = [
    (1, 2, 17, 64, False, None, None, "tma"),
    (1, 2, 17, 64, True, None, None, "tma"),
    (2, 1, 33, 128, True, {"BLOCK_M": 32, "BLOCK_N": 16}, None, "tma"),
    (1, 1, 33, 128, False, {"BLOCK_M": 16, "BLOCK_N": 32}, None, "tma"),
    (1, 1, 40, 64, True, {"BLOCK_M": 16, "BLOCK_N": 32}, None, "tma"),
    (1, 1, 8, 64, False, None, None, "tma"),
    (1, 1, 8, 128, True, None, None, "tma"),
    (2, 3, 20, 64, True, {"BLOCK_M": 32, "BLOCK_N": 32}, None, "tma"),
    (1, 1, 1, 64, True, None, None, "tma"),
    (1, 2, 32, 64, False, None, 0.3, "tma"),
    (1, 2, 33, 64, True, {"BLOCK_M": 32, "BLOCK_N": 16, "EXP_F16": True}, None, "tma"),
    (1, 2, 17, 64, False, None, None, "ptr"),
    (2, 1, 33, 128, True, {"BLOCK_M": 32, "BLOCK_N": 16}, None, "ptr"),
    (1, 1, 40, 64, True, {"BLOCK_M": 16, "BLOCK_N": 32, "EXP_F16": True}, None, "ptr"),
    # Variants (notes/triton_kernel.md, session i17). Persistent grids: the interpreter
    # counts 3 multiprocessors, so each program loops over several tiles (here 6 or 3).
    (2, 3, 40, 64, False, {"PERSIST": 1}, None, "tma"),
    (2, 3, 40, 64, True, {"PERSIST": 2}, None, "tma"),
    (1, 2, 64, 64, False, {"PERSIST": 1}, None, "tma"),  # even: one loop
    (2, 1, 33, 128, True, {"PERSIST": 1, "BLOCK_M": 32, "BLOCK_N": 16}, None, "ptr"),
    # Lazy rescale with a large scale, so that row maxima keep growing by more than 2**8
    # after the first tile (the branch is taken late, not only at the start).
    (1, 2, 70, 64, False, {"LAZY_RESCALE": True}, 2.0, "tma"),
    (1, 2, 70, 64, True, {"LAZY_RESCALE": True, "BLOCK_M": 32}, 2.0, "ptr"),
    (1, 2, 70, 64, False, {"LAZY_RESCALE": True, "EXP_F16": True}, None, "tma"),
    (1, 2, 47, 64, False, {"LAZY_RESCALE": True}, None, "tma"),
    # Polynomial exponentials: a large scale drives arguments below the -125 clamp.
    (1, 2, 50, 64, False, {"POLY_EXP": True}, 4.0, "tma"),
    (1, 2, 50, 128, True, {"POLY_EXP": True, "LAZY_RESCALE": True, "PERSIST": 1}, None,
     "tma"),
    (1, 2, 50, 64, True, {"POLY_EXP": True}, None, "ptr"),
    (1, 2, 33, 64, False, {"WARP_SPEC": True}, None, "tma"),  # a hint the interpreter ignores
    # Two row halves per program (Q/O descriptors of BLOCK_M // 2 rows).
    (1, 2, 77, 64, False, {"DUAL": True, "BLOCK_M": 32}, None, "tma"),
    (2, 1, 77, 64, True, {"DUAL": True, "BLOCK_M": 32}, None, "tma"),
    (1, 2, 40, 128, True, {"DUAL": True, "BLOCK_M": 64, "BLOCK_N": 16}, None, "ptr"),
    (1, 2, 50, 64, False, {"DUAL": True, "BLOCK_M": 32, "POLY_EXP": True}, None, "ptr"),
    (2, 3, 64, 64, False, {"DUAL": True, "BLOCK_M": 32, "PERSIST": 1}, None, "tma"),
    (2, 3, 45, 64, True, {"DUAL": True, "BLOCK_M": 32, "PERSIST": 2, "EXP_F16": True}, None,
     "tma"),
    (1, 2, 33, 64, False, {"DUAL": True, "BLOCK_M": 32, "MAXNREG": 168}, None, "tma"),
    # Leaving out the empty masked loop: only where it is empty (even S, not causal).
    (2, 2, 64, 64, False, {"SKIP_TAIL": True}, None, "tma"),
    (1, 2, 63, 64, False, {"SKIP_TAIL": True}, None, "tma"),
    (1, 2, 64, 64, True, {"SKIP_TAIL": True}, None, "tma"),
    (1, 2, 48, 128, False, {"SKIP_TAIL": True, "DUAL": True, "BLOCK_M": 32}, None, "ptr"),
]

_CHILD = r"""
import json, sys, torch
from attn_analysis.measure import triton_attention as ta, triton_kernels as tk

def reference(q, k, v, causal, scale):
    q, k, v = (t.double() for t in (q, k, v))
    s = (q @ k.transpose(-1, -2)) * scale
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v

def rel(out, ref):
    return float((out.double() - ref).norm() / ref.norm())

torch.manual_seed(1234)
results = []
for B, H, S, D, causal, cfg, scale, path in json.loads(sys.argv[1]):
    q, k, v = (torch.randn(B, H, S, D, dtype=torch.float16) for _ in range(3))
    out = torch.full_like(q, float("nan"))
    if path == "tma":
        got = ta.attention(q, k, v, causal=causal, config=cfg, sm_scale=scale, out=out)
    else:
        s, full = ta._attention_iv(q, k, v, causal, scale, cfg, out)
        got = ta._launch(q, k, v, out, causal, s * ta.LOG2E, full, tma=False)
    ref = reference(q, k, v, causal, D ** -0.5 if scale is None else scale)
    results.append({"same_buffer": got is out, "nan": bool(torch.isnan(out).any()),
                    "err": rel(out, ref),
                    "err_other_mask": rel(out, reference(q, k, v, not causal,
                                                         D ** -0.5 if scale is None else scale))})
# The polynomial exp2 alone, on arguments from 0 down past its -125 clamp.
import triton, triton.language as tl
@triton.jit
def _poly(X, Y, N: tl.constexpr):
    x = tl.load(X + tl.arange(0, N))
    y = tk._poly_exp2(x.reshape(N // 16, 16))
    tl.store(Y + tl.arange(0, N), y.reshape(N))
n = 4096
x = torch.cat([-torch.rand(n // 2) * 130, -torch.rand(n // 2)]).float()
x[0], x[1], x[2] = 0.0, -125.0, float("-inf")
y = torch.empty_like(x)
_poly[(1,)](x, y, N=n)
exact = torch.exp2(x.double())
inside = x >= -125
poly = {"max_rel_err": float(((y.double() - exact).abs() / exact)[inside].max()),
        "max_below": float(y[~inside].abs().max()), "min": float(y.min()),
        "nan": bool(torch.isnan(y).any())}
# build under the interpreter: no timing, the small configuration, fn allocates.
q, k, v = (torch.randn(1, 2, 19, 64, dtype=torch.float16) for _ in range(3))
fn, tuning = ta.build(q, k, v, causal=True)
extra = {"tuning": tuning, "build_err": rel(fn(q, k, v), reference(q, k, v, True, 0.125)),
         "poly": poly}
try:
    ta.tune(q, k, v)
    extra["tune_raised"] = False
except RuntimeError:
    extra["tune_raised"] = True
print("RESULT" + json.dumps({"cases": results, "extra": extra}))
"""


@pytest.fixture(scope="module")
def interpreted():
    """Run every interpreter case in one subprocess; return its JSON result."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(CASES)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT"):])


@pytest.mark.parametrize("i", range(len(CASES)), ids=[
    f"B{c[0]}H{c[1]}S{c[2]}D{c[3]}{'-causal' if c[4] else ''}{'-cfg' if c[5] else ''}-{c[7]}"
    for c in CASES])
def test_matches_float64_reference(interpreted, i):
    res = interpreted["cases"][i]
    assert res["same_buffer"]
    assert not res["nan"], "output poisoned with NaN was not fully written"
    assert res["err"] < 2e-3
    if CASES[i][2] > 1:  # the mask matters: the other mask's reference is far off
        assert res["err_other_mask"] > 1e-2


def test_polynomial_exp2(interpreted):
    """Degree-3 polynomial: relative error ~1e-4 on [-125, 0]; below, tiny and finite."""
    poly = interpreted["extra"]["poly"]
    assert poly["max_rel_err"] < 1.5e-4
    assert not poly["nan"] and poly["min"] >= 0.0
    assert poly["max_below"] < 2.0 ** -124


def test_build_under_interpreter(interpreted):
    extra = interpreted["extra"]
    tuning = extra["tuning"]
    assert tuning["interpreted"] is True and tuning["tuned_ms"] is None
    assert {k: tuning[k] for k in ta.CONFIG_KEYS} == ta.INTERPRETER_CONFIG
    assert extra["build_err"] < 2e-3
    assert extra["tune_raised"]


# --------------------------------------------------------------------------- validation


@pytest.fixture
def no_launch(monkeypatch):
    """Accept CPU tensors as under the interpreter, and fail if the kernel is launched."""
    launched = []

    class _Kernel:
        def __getitem__(self, grid):
            launched.append(grid)
            raise AssertionError("kernel launched")

    monkeypatch.setattr(ta, "INTERPRETED", True)
    monkeypatch.setattr(ta, "_attn_fwd", _Kernel())
    return launched


def _qkv(shape=(1, 2, 8, 64), dtype=torch.float16):
    return tuple(torch.randn(shape).to(dtype) for _ in range(3))


@pytest.mark.parametrize("change, match", [
    (lambda q, k, v: (q.float(), k, v), r"`q` dtype must be torch.float16 or torch.bfloat16"),
    (lambda q, k, v: (q, k.bfloat16(), v), r"`k` dtype must equal `q` dtype"),
    (lambda q, k, v: (q[..., :32].contiguous(), k, v), r"`q` head dim .* \(64, 128\)"),
    (lambda q, k, v: (q[0], k, v), r"`q` must be 4-D"),
    (lambda q, k, v: (q, k[:, :, :4], v), r"`k` shape must equal `q` shape"),
    (lambda q, k, v: (q, k, v.transpose(1, 2)), r"`v` shape must equal"),
    (lambda q, k, v: (q, k, v.transpose(2, 3).contiguous().transpose(2, 3)),
     r"`v` must be contiguous"),
    (lambda q, k, v: (q[:, :, :0], k[:, :, :0], v[:, :, :0]), r"`q` must have B, H, S >= 1"),
    (lambda q, k, v: (q, k, v.numpy()), r"`v` must be a torch.Tensor"),
])
def test_tensor_validation(no_launch, change, match):
    q, k, v = change(*_qkv())
    with pytest.raises(ValueError, match=match):
        ta.attention(q, k, v)
    assert not no_launch


@pytest.mark.parametrize("kwargs, match", [
    ({"causal": 1}, r"`causal` must be True or False"),
    ({"sm_scale": -1.0}, r"`sm_scale` must be a finite positive number"),
    ({"sm_scale": float("nan")}, r"`sm_scale` must be a finite positive number"),
    ({"config": {"BLOCK_M": 48}}, r"`config\['BLOCK_M'\]` must be one of"),
    ({"config": {"num_warps": 3}}, r"`config\['num_warps'\]` must be one of"),
    ({"config": {"num_stages": 0}}, r"`config\['num_stages'\]` must be one of"),
    ({"config": {"BLOCK_K": 64}}, r"`config` keys must be among"),
    ({"config": {"EXP_F16": 1}}, r"`config\['EXP_F16'\]` must be one of \(False, True\)"),
    ({"config": {"BLOCK_N": True}}, r"`config\['BLOCK_N'\]` must be one of"),
    ({"config": [128, 64]}, r"`config` must be a dict"),
    ({"config": {"PERSIST": 5}}, r"`config\['PERSIST'\]` must be one of"),
    ({"config": {"PERSIST": True}}, r"`config\['PERSIST'\]` must be one of"),
    ({"config": {"LAZY_RESCALE": 1}}, r"`config\['LAZY_RESCALE'\]` must be one of"),
    ({"config": {"POLY_EXP": True, "EXP_F16": True}}, r"`config\['POLY_EXP'\]` needs fp32"),
    ({"config": {"DUAL": True, "LAZY_RESCALE": True}}, r"`config\['DUAL'\]` needs"),
    ({"config": {"DUAL": 1}}, r"`config\['DUAL'\]` must be one of"),
    ({"config": {"MAXNREG": 100}}, r"`config\['MAXNREG'\]` must be one of"),
    ({"config": {"MAXNREG": True}}, r"`config\['MAXNREG'\]` must be one of"),
    ({"config": {"SKIP_TAIL": 1}}, r"`config\['SKIP_TAIL'\]` must be one of"),
    ({"out": torch.empty(1, 2, 8, 64, dtype=torch.bfloat16)}, r"`out` dtype must equal"),
    ({"out": torch.empty(1, 2, 9, 64, dtype=torch.float16)}, r"`out` shape must equal"),
])
def test_argument_validation(no_launch, kwargs, match):
    with pytest.raises(ValueError, match=match):
        ta.attention(*_qkv(), **kwargs)
    assert not no_launch


def test_cpu_tensors_need_the_interpreter(monkeypatch):
    monkeypatch.setattr(ta, "INTERPRETED", False)
    with pytest.raises(ValueError, match=r"`q` must be a CUDA tensor"):
        ta.attention(*_qkv())


def test_candidates_validated_before_timing(no_launch):
    with pytest.raises(ValueError, match=r"`config\['BLOCK_N'\]` must be one of"):
        ta.tune(*_qkv(), candidates=[{"BLOCK_N": 20}])
    with pytest.raises(ValueError, match=r"`candidates` must be a non-empty list"):
        ta.tune(*_qkv(), candidates=[])
    assert not no_launch


def test_documented_defaults(monkeypatch):
    monkeypatch.setattr(ta, "INTERPRETED", False)
    assert ta._config_iv(None, 64) == ta.DEFAULT_CONFIGS[64]
    assert ta._config_iv(None, 128) == ta.DEFAULT_CONFIGS[128]
    # Missing keys take the head dim's default; tuning metadata is accepted and dropped.
    got = ta._config_iv({"BLOCK_N": 32, "tuned_ms": 0.1, "n_tried": 3}, 128)
    assert got == {**ta.DEFAULT_CONFIGS[128], "BLOCK_N": 32}
    monkeypatch.setattr(ta, "INTERPRETED", True)
    assert ta._config_iv(None, 64) == ta.INTERPRETER_CONFIG
    off = {"PERSIST": 0, "LAZY_RESCALE": False, "POLY_EXP": False,
           "WARP_SPEC": False, "DUAL": False, "MAXNREG": 0, "SKIP_TAIL": False}
    assert ta.DEFAULT_CONFIGS[64] == {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8,
                                      "num_stages": 3, "EXP_F16": False, **off}
    assert ta.DEFAULT_CONFIGS[128] == {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8,
                                       "num_stages": 3, "EXP_F16": False, **off}


@pytest.mark.parametrize("head_dim", [64, 128])
def test_default_candidates_are_valid(monkeypatch, head_dim):
    monkeypatch.setattr(ta, "INTERPRETED", False)
    cands = ta._candidates(head_dim)
    assert len(cands) >= 4
    assert all(ta._config_iv(c, head_dim) == c for c in cands)
    assert not any(c["EXP_F16"] for c in cands)  # opt-in only: slower on the H100
