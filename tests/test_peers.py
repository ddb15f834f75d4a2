"""The peer candidates on a CPU: registration, metadata, Unsupported reasons, and their
plumbing (views, memory layout, the cuDNN graph's variant pack) through stand-in packages.

The real packages need a Hopper GPU; what runs here is everything between our (B, H, S, D)
tensors and the package's call, with a small stand-in module in ``sys.modules`` that
computes attention the way the real API's documentation says it does (same argument
layout). The GPU path itself is exercised by ``scripts/peers_check.py`` and the recorded
runs.
"""

from __future__ import annotations

import sys
import types

import pytest
import torch
import torch.nn.functional as F

from attn_analysis.measure import candidates as cands
from attn_analysis.analyse import catalog
from attn_analysis.measure import peers
from attn_analysis.configs import Config

TINY = Config(2, 3, 33, 64)
TINY_CAUSAL = Config(2, 3, 33, 64, "float16", True)


def _sdpa_bshd(q, k, v, causal):
    """Reference attention on (..., S, H, D) tensors, returning the same layout."""
    out = F.scaled_dot_product_attention(q.transpose(-3, -2).float(), k.transpose(-3, -2).float(),
                                         v.transpose(-3, -2).float(), is_causal=causal)
    return out.transpose(-3, -2).to(q.dtype)


def _install(monkeypatch, name: str, module: types.ModuleType) -> None:
    """Put a stand-in module (and its parents) in sys.modules for this test."""
    parts = name.split(".")
    for i in range(1, len(parts)):
        parent = ".".join(parts[:i])
        if parent not in sys.modules:
            monkeypatch.setitem(sys.modules, parent, types.ModuleType(parent))
    monkeypatch.setitem(sys.modules, name, module)


# ------------------------------------------------------------------ registry and metadata

def test_peers_are_registered_with_their_metadata():
    for name in peers.PEER_NAMES:
        cand = cands.get(name)
        assert cand.devices == ("cuda",)
        assert cand.meta.origin == "peer"
        assert cand.meta.kernel_pattern
    assert cands.get("sdpa_bshd").meta.origin == "control"
    assert set(peers.PEER_NAMES) == set(peers.PACKAGES)


def test_peers_are_not_default_candidates():
    # the README's GPU command measures PyTorch's paths and ours; peers come with --plugin
    assert not set(peers.PEER_NAMES) & set(cands.DEFAULT_CANDIDATES)


def test_a_peer_on_a_cpu_is_unsupported_with_a_reason():
    with pytest.raises(cands.Unsupported, match="fa4 runs on cuda only"):
        cands.build("fa4", TINY, "cpu")


def test_a_missing_package_is_unsupported_and_says_how_to_install(monkeypatch):
    monkeypatch.setitem(peers.PACKAGES, "fa4", ("attn_analysis_no_such_module", "flash-attn-4",
                                                "pip install flash-attn-4"))
    with pytest.raises(cands.Unsupported, match=r"flash-attn-4 is not importable.*"
                                                r"pip install flash-attn-4"):
        peers.package("fa4")


def test_package_rejects_an_unknown_peer():
    with pytest.raises(ValueError, match="`candidate` must be one of"):
        peers.package("flash_attn_9")


def test_build_records_meta_and_layout_in_info():
    built = cands.build("sdpa_bshd", TINY, "cpu")
    assert built.info["meta"] == catalog.CATALOG["sdpa_bshd"].as_dict()
    assert built.info["layout"] == "BSHD"


# ------------------------------------------------------------------------ memory layouts

def test_bshd_inputs_are_transposed_views_of_bshd_memory():
    q, _, _ = cands.make_inputs(TINY, "cpu", seed=1, layout="BSHD")
    assert tuple(q.shape) == (2, 3, 33, 64)
    assert q.transpose(1, 2).is_contiguous() and not q.is_contiguous()
    with pytest.raises(ValueError, match="`layout` must be one of"):
        cands.make_inputs(TINY, "cpu", seed=1, layout="SBHD")


@pytest.mark.parametrize("config", [TINY, TINY_CAUSAL])
def test_sdpa_on_bshd_memory_passes_the_gate(config):
    built = cands.build("sdpa_bshd", config, "cpu")
    assert cands.check(built, config, "cpu", seed=5, name="sdpa_bshd").passed


# ------------------------------------------------------------------------------- fa4

def _fake_fa4(monkeypatch, scale_error=1.0, raise_first=None):
    calls = []

    def flash_attn_func(q, k, v, causal=False):
        if raise_first is not None and not calls:
            calls.append("raised")
            raise raise_first
        calls.append((tuple(q.shape), q.stride()))
        return _sdpa_bshd(q * scale_error, k, v, causal), None  # (out, lse), as FA4 returns

    module = types.ModuleType("flash_attn.cute")
    module.flash_attn_func = flash_attn_func
    _install(monkeypatch, "flash_attn.cute", module)
    return calls


@pytest.mark.parametrize("config", [TINY, TINY_CAUSAL])
def test_fa4_gets_bshd_views_and_passes_the_gate(monkeypatch, config):
    calls = _fake_fa4(monkeypatch)
    built = peers._build_fa4(config, "cpu")
    assert cands.check(built, config, "cpu", seed=7, name="fa4").passed
    shape, stride = calls[-1]
    assert shape == (config.batch, config.seq_len, config.heads, config.head_dim)
    # a view of the (B, H, S, D) tensor, not a copy: the S stride is D, the H stride S*D
    assert stride[1] == config.head_dim and stride[2] == config.seq_len * config.head_dim
    assert built.info["package"] == "flash-attn-4" and "version" in built.info


def test_the_gate_catches_a_wrong_peer(monkeypatch):
    _fake_fa4(monkeypatch, scale_error=1.5)
    built = peers._build_fa4(TINY, "cpu")
    result = cands.check(built, TINY, "cpu", seed=7, name="fa4")
    assert not result.passed and "relative error" in result.reason


def test_a_peer_that_refuses_a_configuration_is_unsupported(monkeypatch):
    _fake_fa4(monkeypatch, raise_first=AssertionError("head_dim 64 not supported on sm_75"))
    with pytest.raises(cands.Unsupported, match="AssertionError: head_dim 64 not supported"):
        peers._build_fa4(TINY, "cpu")


def test_a_peer_called_wrongly_is_an_error_not_unsupported(monkeypatch):
    _fake_fa4(monkeypatch, raise_first=TypeError("unexpected keyword argument 'causal'"))
    with pytest.raises(TypeError):
        peers._build_fa4(TINY, "cpu")


# ------------------------------------------------------------------------ flashinfer

class _FakeRaggedWrapper:
    """FlashInfer's ragged prefill as documented: plan(indptrs, heads, dim), run on
    (tokens, heads, dim) tensors."""

    def __init__(self, workspace, kv_layout="NHD"):
        assert kv_layout == "NHD"
        self._backend = "fa3"

    def plan(self, qo_indptr, kv_indptr, num_qo_heads, num_kv_heads, head_dim, causal=False,
             q_data_type=None, kv_data_type=None):
        self.indptr, self.causal = qo_indptr.tolist(), causal

    def run(self, q, k, v):
        assert q.is_contiguous() and q.dim() == 3
        out = torch.empty_like(q)
        for lo, hi in zip(self.indptr[:-1], self.indptr[1:]):
            out[lo:hi] = _sdpa_bshd(q[lo:hi], k[lo:hi], v[lo:hi], self.causal)
        return out


def _fake_flashinfer(monkeypatch):
    module = types.ModuleType("flashinfer")
    module.BatchPrefillWithRaggedKVCacheWrapper = _FakeRaggedWrapper
    _install(monkeypatch, "flashinfer", module)


@pytest.mark.parametrize("config", [TINY, TINY_CAUSAL])
def test_flashinfer_runs_on_bshd_memory_and_passes_the_gate(monkeypatch, config):
    _fake_flashinfer(monkeypatch)
    built = peers._build_flashinfer(config, "cpu")
    assert built.layout == "BSHD" and built.info["backend"] == "fa3"
    assert cands.check(built, config, "cpu", seed=9, name="flashinfer").passed


def test_flashinfer_refuses_to_copy_inputs_of_another_layout(monkeypatch):
    _fake_flashinfer(monkeypatch)
    built = peers._build_flashinfer(TINY, "cpu")
    q, k, v = cands.make_inputs(TINY, "cpu", seed=2, layout="BHSD")
    with pytest.raises(RuntimeError, match="view"):
        built.fn(q, k, v)


# -------------------------------------------------------------------- cudnn_frontend

class _FakeTensor:
    def __init__(self, like):
        self.like = like

    def set_output(self, flag):
        return self

    def set_dim(self, dim):
        self.dim = list(dim)
        return self

    def set_stride(self, stride):
        self.stride = list(stride)
        return self


class _FakeGraph:
    """cuDNN's pygraph as its examples use it: tensors, an sdpa node, build, execute."""

    def __init__(self, io_data_type, intermediate_data_type, compute_data_type, handle):
        self.built = False

    def tensor_like(self, template):
        return _FakeTensor(template)

    def sdpa(self, name, q, k, v, generate_stats, attn_scale, use_causal_mask):
        self.ports, self.scale, self.causal = (q, k, v), attn_scale, use_causal_mask
        self.o = _FakeTensor(None)
        return self.o, None

    def build(self):
        self.built = True

    def get_workspace_size(self):
        return 0

    def execute(self, pack, workspace, handle):
        assert self.built and handle == "handle" and self.o in pack
        q, k, v = (pack[p] for p in self.ports)
        assert list(pack[self.o].stride()) == self.o.stride
        pack[self.o].copy_(F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                          is_causal=self.causal,
                                                          scale=self.scale).to(q.dtype))


def _fake_cudnn(monkeypatch):
    module = types.ModuleType("cudnn")
    module.data_type = types.SimpleNamespace(HALF="half", BFLOAT16="bf16", FLOAT="float")
    module.create_handle = lambda: "handle"
    module.set_stream = lambda handle, stream: None
    module.backend_version = lambda: 91400
    module.pygraph = _FakeGraph
    _install(monkeypatch, "cudnn", module)


@pytest.mark.parametrize("config", [TINY, TINY_CAUSAL])
def test_cudnn_frontend_executes_its_graph_and_passes_the_gate(monkeypatch, config):
    _fake_cudnn(monkeypatch)
    built = peers._build_cudnn_frontend(config, "cpu")
    assert built.info["cudnn_backend"] == "91400"
    assert cands.check(built, config, "cpu", seed=13, name="cudnn_frontend").passed


# -------------------------------------------------------------------------- xformers

def _fake_xformers(monkeypatch, load_failure=None):
    top = types.ModuleType("xformers")
    top._cpp_lib = types.SimpleNamespace(_cpp_library_load_exception=load_failure)
    monkeypatch.setitem(sys.modules, "xformers", top)
    module = types.ModuleType("xformers.ops")

    class LowerTriangularMask:
        pass

    def memory_efficient_attention_forward(q, k, v, attn_bias=None):
        return _sdpa_bshd(q, k, v, isinstance(attn_bias, LowerTriangularMask))

    module.LowerTriangularMask = LowerTriangularMask
    module.memory_efficient_attention_forward = memory_efficient_attention_forward
    _install(monkeypatch, "xformers.ops", module)


@pytest.mark.parametrize("config", [TINY, TINY_CAUSAL])
def test_xformers_passes_the_gate(monkeypatch, config):
    _fake_xformers(monkeypatch)
    built = peers._build_xformers(config, "cpu")
    assert cands.check(built, config, "cpu", seed=17, name="xformers").passed
    assert built.info["package"] == "xformers"


def test_xformers_built_for_another_pytorch_is_unsupported_with_why(monkeypatch):
    failure = RuntimeError("xFormers can't load C++/CUDA extensions. xFormers was built for:\n"
                           "    PyTorch 2.10.0+cu128 with CUDA 1208 (you have 2.11.0+cu130)\n"
                           "    Python  3.10.19 (you have 3.12.3)\n  Please reinstall xformers")
    _fake_xformers(monkeypatch, load_failure=failure)
    with pytest.raises(cands.Unsupported, match=r"built for: PyTorch 2\.10\.0\+cu128"):
        peers._build_xformers(TINY, "cpu")

