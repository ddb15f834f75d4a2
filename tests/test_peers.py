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

    def tensor(self, name, dim, stride, data_type):
        return _FakeTensor(name)

    def sdpa(self, name, q, k, v, generate_stats, attn_scale, use_causal_mask, **stats):
        assert set(stats) <= {"score_max", "score_sum_exp"}
        self.ports, self.scale, self.causal = (q, k, v), attn_scale, use_causal_mask
        self.o, self.stats = _FakeTensor(None), list(stats.values())
        return self.o, None

    def build(self):
        self.built = True

    # the steps of build, as the OSS path calls them, in this order only
    def validate(self):
        self.steps = ["validate"]

    def build_operation_graph(self):
        self.steps.append("op_graph")

    def create_execution_plans(self, modes):
        assert modes == ["OPENSOURCE"], modes
        self.steps.append("plans")

    def check_support(self):
        self.steps.append("support")

    def build_plans(self, policy):
        assert self.steps == ["validate", "op_graph", "plans", "support"]
        assert policy == "HEURISTICS_CHOICE"
        self.built = True

    def get_workspace_size(self):
        return 0

    def execute(self, pack, workspace, handle):
        assert self.built and handle == "handle" and self.o in pack
        assert all(t in pack for t in self.stats)
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
    module.heur_mode = types.SimpleNamespace(A="A", FALLBACK="FALLBACK", OPENSOURCE="OPENSOURCE")
    module.build_plan_policy = types.SimpleNamespace(HEURISTICS_CHOICE="HEURISTICS_CHOICE")
    module.pygraph = _FakeGraph
    _install(monkeypatch, "cudnn", module)


@pytest.mark.parametrize("config", [TINY, TINY_CAUSAL])
def test_cudnn_frontend_executes_its_graph_and_passes_the_gate(monkeypatch, config):
    _fake_cudnn(monkeypatch)
    built = peers._build_cudnn_frontend(config, "cpu")
    assert built.info["cudnn_backend"] == "91400"
    assert cands.check(built, config, "cpu", seed=13, name="cudnn_frontend").passed


@pytest.mark.parametrize("config", [TINY, TINY_CAUSAL])
def test_cudnn_oss_plans_with_the_open_source_heuristic_only(monkeypatch, config):
    """cudnn_oss builds the same graph as cudnn_frontend but plans it with heur_mode
    OPENSOURCE alone (the fake graph refuses any other list), says so in its info, and
    passes the gate; its kernel pattern matches the open engine's kernel, not SDPA's
    closed one."""
    import re
    _fake_cudnn(monkeypatch)
    built = peers._build_cudnn_oss(config, "cpu")
    assert "OPENSOURCE" in built.info["implementation"]
    assert built.info["outputs"] == ["O", "score_max", "score_sum_exp"]
    assert built.layout == "BSHD" and peers._build_cudnn_frontend(config, "cpu").layout == "BHSD"
    assert cands.check(built, config, "cpu", seed=17, name="cudnn_oss").passed
    pattern = cands.get("cudnn_oss").meta.kernel_pattern
    oss = "cudnn_generated_oss_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1"
    assert re.search(pattern, oss) and not re.search(pattern, oss.replace("oss", "fort_native"))


def test_cudnn_oss_refusal_is_unsupported_with_the_frontends_reason(monkeypatch):
    _fake_cudnn(monkeypatch)

    cudnn = sys.modules["cudnn"]
    cudnn.cudnnGraphNotSupportedError = type("cudnnGraphNotSupportedError", (Exception,), {})

    def refuse(self):
        raise cudnn.cudnnGraphNotSupportedError("No execution plans support the graph.")
    monkeypatch.setattr(_FakeGraph, "check_support", refuse)
    with pytest.raises(cands.Unsupported, match="No execution plans support the graph"):
        peers._build_cudnn_oss(TINY, "cpu")


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



# ---------------------------------------------------- the peers of issue 42 (fa3 and co.)

NEW = ("fa3", "flex_flash", "sdpa_fa4", "fa4_bshd", "cudnn_oss")


def test_new_candidates_are_registered_with_family_pattern_and_origin():
    fa4_family = cands.get("fa4").meta.family
    expected = {"fa3": ("peer", "FlashAttention-3 (C++)"), "flex_flash": ("peer", fa4_family),
                "sdpa_fa4": ("peer", fa4_family), "fa4_bshd": ("control", fa4_family),
                "cudnn_oss": ("control", cands.get("cudnn_frontend").meta.family)}
    for name, (origin, family) in expected.items():
        meta = cands.get(name).meta
        assert (meta.origin, meta.family) == (origin, family), name
        assert meta.kernel_pattern and cands.get(name).devices == ("cuda",)
    assert cands.get("fa3").min_capability == (9, 0)
    assert set(NEW) <= set(peers.PEER_NAMES + peers.CONTROL_NAMES)
    assert not set(NEW) & set(cands.DEFAULT_CANDIDATES)


def test_fa3_kernel_pattern_tells_fa3_from_fa4_and_xformers():
    import re
    fa3_name = ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::"
                "FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2, cute::tuple<")
    assert re.search(cands.get("fa3").meta.kernel_pattern, fa3_name, re.I)
    for other in ("fa4", "xformers"):
        assert not re.search(cands.get(other).meta.kernel_pattern, fa3_name, re.I)


@pytest.mark.parametrize("name", NEW)
def test_new_candidates_on_a_cpu_are_unsupported_with_a_reason(name):
    with pytest.raises(cands.Unsupported, match=f"{name} runs on cuda only"):
        cands.build(name, TINY, "cpu")


def _fake_fa3(monkeypatch, module="flash_attn_interface", config_module="flash_attn_config"):
    calls = []

    def flash_attn_func(q, k, v, causal=False):
        calls.append((tuple(q.shape), q.stride()))
        return _sdpa_bshd(q, k, v, causal)  # FA3 returns the output alone by default

    mod = types.ModuleType(module)
    mod.flash_attn_func = flash_attn_func
    _install(monkeypatch, module, mod)
    cfg = types.ModuleType(config_module)
    cfg.CONFIG = {"build_flags": {"FLASHATTENTION_DISABLE_BACKWARD": True,
                                  "FLASHATTENTION_DISABLE_FP16": False}}
    _install(monkeypatch, config_module, cfg)
    return calls


def _hide(monkeypatch, *modules):
    """Make ``modules`` fail to import, whatever this machine has installed."""
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)


@pytest.mark.parametrize("config", [TINY, TINY_CAUSAL])
def test_fa3_gets_bshd_views_records_its_build_and_passes_the_gate(monkeypatch, config):
    calls = _fake_fa3(monkeypatch)
    built = peers._build_fa3(config, "cpu")
    assert cands.check(built, config, "cpu", seed=21, name="fa3").passed
    shape, stride = calls[-1]
    assert shape == (config.batch, config.seq_len, config.heads, config.head_dim)
    assert stride[1] == config.head_dim  # a view of (B, H, S, D) memory, not a copy
    assert built.info["package"] == "tokenspeed-fa3"
    assert built.info["implementation"] == "flash_attn_interface.flash_attn_func"
    assert built.info["build_flags"]["FLASHATTENTION_DISABLE_BACKWARD"] is True


def test_fa3_falls_back_to_the_forward_only_wheel(monkeypatch):
    _hide(monkeypatch, "flash_attn_interface")
    _fake_fa3(monkeypatch, "fa3_fwd_interface", "fa3_fwd_config")
    built = peers._build_fa3(TINY, "cpu")
    assert built.info["package"] == "fa3-fwd"
    assert built.info["implementation"] == "fa3_fwd_interface.flash_attn_func"


def test_fa3_missing_is_unsupported_naming_both_wheels(monkeypatch):
    _hide(monkeypatch, "flash_attn_interface", "fa3_fwd_interface")
    with pytest.raises(cands.Unsupported, match=r"tokenspeed-fa3 is not importable.*; "
                                                r"fa3-fwd is not importable"):
        peers._build_fa3(TINY, "cpu")


def test_fa4_bshd_runs_on_contiguous_bshd_memory(monkeypatch):
    calls = _fake_fa4(monkeypatch)
    built = peers._build_fa4_bshd(TINY, "cpu")
    assert built.layout == "BSHD" and "contiguous" in built.info["inputs"]
    assert cands.check(built, TINY, "cpu", seed=23, name="fa4_bshd").passed
    shape, stride = calls[-1]
    assert shape == (2, 33, 3, 64)
    assert stride == (33 * 3 * 64, 3 * 64, 64, 1)  # contiguous (B, S, H, D)
    # fa4 itself keeps the transposed views of (B, H, S, D) memory
    assert peers._build_fa4(TINY, "cpu").layout == "BHSD"


@pytest.mark.parametrize("name", ["flex_flash", "sdpa_fa4"])
def test_the_switches_without_flash_attn_4_are_unsupported(monkeypatch, name):
    _hide(monkeypatch, "flash_attn", "flash_attn.cute", "flash_attn.cute.interface")
    builder = {"flex_flash": peers._build_flex_flash, "sdpa_fa4": peers._build_sdpa_fa4}[name]
    with pytest.raises(cands.Unsupported, match="flash-attn-4 is not importable"):
        builder(TINY, "cpu")


def test_sdpa_fa4_on_a_torch_without_the_switch_is_unsupported(monkeypatch):
    import torch.nn.attention as attention
    monkeypatch.delattr(attention, "activate_flash_attention_impl", raising=False)
    with pytest.raises(cands.Unsupported, match="has no torch.nn.attention."
                                                "activate_flash_attention_impl"):
        peers._build_sdpa_fa4(TINY, "cpu")


def test_a_failing_switch_is_unsupported_with_its_first_line():
    def fn(q, k, v):
        raise ValueError("too many values to unpack (expected 2)\nmore text")
    with pytest.raises(cands.Unsupported, match=r"^ValueError: too many values to unpack "
                                                r"\(expected 2\)$"):
        peers._switch_first_call(fn, TINY, "cpu")


def test_sdpa_fa4_activates_fa4_only_inside_its_context(monkeypatch):
    import torch.nn.attention as attention
    events = []
    _fake_fa4(monkeypatch)
    _install(monkeypatch, "flash_attn.cute.interface", types.ModuleType("flash_attn.cute.interface"))
    monkeypatch.setattr(attention, "list_flash_attention_impls", lambda: ["FA3", "FA4"])
    monkeypatch.setattr(attention, "activate_flash_attention_impl",
                        lambda impl: events.append(("activate", impl)))
    monkeypatch.setattr(attention, "restore_flash_attention_impl",
                        lambda _raise_warn=True: events.append(("restore",)))
    built = peers._build_sdpa_fa4(TINY, "cpu")
    assert events == [("activate", "FA4"), ("restore",)] * 2  # the two first calls
    assert cands.check(built, TINY, "cpu", seed=29, name="sdpa_fa4").passed
    assert events[-2:] == [("activate", "FA4"), ("restore",)]
    assert built.info["backend_selection"] == "outside the timed call"


# ------------------------------------------------- scripts/peers_check.py: one file of parts

def _peers_check_script():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "scripts" / "peers_check.py"
    spec = importlib.util.spec_from_file_location("peers_check_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_peers_check_combines_its_environments_into_one_sealed_file(tmp_path):
    from attn_analysis.record import checks
    script = _peers_check_script()
    assert set(NEW) <= set(script.NAMES)
    for env, rows in (("main", [{"candidate": "fa3", "config": "B32-H8-S512-D64-fp16",
                                 "status": "ok"}]),
                      ("xformers", [{"candidate": "xformers", "config": "B32-H8-S512-D64-fp16",
                                     "status": "unsupported", "reason": "built for PyTorch 2.10"}])):
        script._write_json(str(tmp_path / f"peers_part_{env}.json"),
                           {"env": env, "gpu": "NVIDIA H100 80GB HBM3", "fingerprint": {"x": 1},
                            "pythonpath": f"/tmp/site-{env}", "versions": {"torch": "2.11.0"},
                            "candidates": [rows[0]["candidate"]], "rows": rows,
                            "complete": env == "main"})
    path = script.combine(str(tmp_path))
    assert path.endswith("peers2_check_h100.json")
    doc = checks.read(path, kind="peers_check")
    assert [(r["env"], r["candidate"]) for r in doc["rows"]] == [("main", "fa3"),
                                                                ("xformers", "xformers")]
    assert doc["environments"]["xformers"]["pythonpath"] == "/tmp/site-xformers"
    assert doc["complete"] is False  # one part was cut short
    with pytest.raises(ValueError, match="`out_dir`"):
        script.combine(str(tmp_path / "empty"))


def test_requirements_pin_what_the_stage_script_reads():
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    text = (root / "requirements-peers.txt").read_text()
    stage = (root / "scripts" / "peers_stage.sh").read_text()
    asked = re.findall(r"\$\(pin '?([^')]+?)'?\)", stage)
    assert {"flash-attn-4", "nvidia-cutlass-dsl", "tokenspeed-fa3", "fa3-fwd", "xformers",
            "# sdpa_fa4: flash-attn-4", "# sdpa_fa4: quack-kernels"} <= set(asked)
    for name in asked:  # the stage script's pin(): "^NAME([extra])?==VERSION"
        assert re.search(rf"^{re.escape(name)}(\[\w+\])?==\S+", text, re.M), name
    b18 = re.search(r"^# sdpa_fa4: flash-attn-4==(\S+)", text, re.M).group(1)
    assert b18 == peers.SDPA_FA4_RELEASE
    assert "sdpa_fa4" in peers.PACKAGES and b18 in peers.PACKAGES["sdpa_fa4"][2]


@pytest.mark.parametrize("causal", [False, True])
def test_flex_flash_and_flex_share_one_compiled_flex(monkeypatch, causal):
    """``flex_flash`` is ``flex`` plus BACKEND=FLASH: one builder (candidates.compiled_flex)
    makes both, forwarding the kernel options and building the causal mask once."""
    import dataclasses
    import torch
    import torch.nn.attention.flex_attention as fa
    calls, masks = [], []
    monkeypatch.setattr(torch, "compile", lambda f, **kw: f)
    monkeypatch.setattr(fa, "flex_attention",
                        lambda q, k, v, block_mask=None, **kw: calls.append((block_mask, kw)) or q)
    monkeypatch.setattr(fa, "create_block_mask",
                        lambda mask, **kw: masks.append(kw) or "causal-mask")
    config = dataclasses.replace(TINY, causal=causal)
    plain, _ = cands.compiled_flex(config, "cpu")
    flash, _ = cands.compiled_flex(config, "cpu", kernel_options={"BACKEND": "FLASH"})
    q = torch.zeros(1)
    plain(q, q, q)
    flash(q, q, q)
    want_mask = "causal-mask" if causal else None
    assert calls == [(want_mask, {}), (want_mask, {"kernel_options": {"BACKEND": "FLASH"}})]
    assert len(masks) == (2 if causal else 0)
