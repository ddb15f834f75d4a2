"""The Gluon kernel's Python side on a CPU (``attn_analysis.measure.gluon_*``): validation,
configuration, launch plan, the candidate's Unsupported reasons and its catalog entry, the
schedule mirrored in torch; where Triton 3.6 is importable, that every variant compiles to
sm_90a (Triton's compiler and bundled ptxas, no GPU). Elsewhere (the Triton 3.9 of
requirements-test.txt) the compile tests skip, saying why, and the candidate is Unsupported
with the reason; CI runs them once more with Triton 3.6 and ``ATTN_REQUIRE_GLUON=1``, where a
missing compiler fails them instead (``.ci/run``).

Nothing here runs the kernel: that needs an sm90 GPU (``scripts/gluon_check.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attn_analysis.analyse import catalog
from attn_analysis.configs import Config
from attn_analysis.measure import candidates as cands
from attn_analysis.measure import gluon_attention as ga
from attn_analysis.measure import gluon_config as gc
from attn_analysis.measure import gluon_kernels as gk
from attn_analysis.measure import gluon_tile

ROOT = Path(__file__).resolve().parents[1]
TINY = Config(2, 2, 33, 64)


def qkv(shape=(1, 2, 17, 64), dtype=torch.float16):
    return tuple(torch.randn(shape, dtype=dtype) for _ in range(3))


# ----------------------------------------------------------------------- import guard

def test_module_imports_without_triton(tmp_path):
    hidden = tmp_path / "hide"
    (hidden / "triton").mkdir(parents=True)
    (hidden / "triton" / "__init__.py").write_text(
        'raise ModuleNotFoundError("No module named \'triton\'", name="triton")\n')
    code = ("from attn_analysis.measure import gluon_attention as ga, gluon_kernels as gk, "
            "gluon_tile as gt; "
            "print(gt.GLUON_IMPORT_ERROR); "
            "print(hasattr(gk, '_gluon_attn_fwd') or hasattr(gt, '_consume_tile')); "
            "print(ga.unavailable_reason())")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hidden), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert out[0].startswith("ModuleNotFoundError")
    assert out[1] == "False"
    assert "Gluon's Hopper API is not importable" in out[2]


# ------------------------------------------------------------------- argument checks

@pytest.mark.parametrize("make, message", [
    (lambda: (torch.randn(1, 2, 17, 64), *qkv()[1:]), "`q` dtype must be torch.float16"),
    (lambda: (torch.randn(2, 17, 64).half(), *qkv()[1:]), "`q` must be 4-D"),
    (lambda: qkv((1, 2, 17, 96)), r"`q` head dim \(last axis\) must be one of \(64, 128\)"),
    (lambda: qkv((1, 0, 17, 64)), "`q` must have B, H, S >= 1"),
    (lambda: (qkv()[0], qkv()[1].bfloat16(), qkv()[2]), "`k` dtype must equal `q` dtype"),
    (lambda: (qkv()[0], qkv()[1], torch.randn(1, 2, 18, 64).half()),
     "`v` shape must equal `q` shape"),
    (lambda: (qkv()[0].transpose(1, 2).contiguous().transpose(1, 2), *qkv()[1:]),
     "`q` must be contiguous"),
    (lambda: ([1, 2], *qkv()[1:]), "`q` must be a torch.Tensor"),
])
def test_attention_names_the_bad_argument(make, message):
    q, k, v = make()
    with pytest.raises(ValueError, match=message):
        ga.attention(q, k, v)


@pytest.mark.parametrize("kwargs, message", [
    ({"causal": 1}, "`causal` must be True or False"),
    ({"config": "plain"}, "`config` must be a dict"),
    ({"config": {"BLOCK_K": 64}}, r"`config` keys must be among"),
    ({"config": {"BLOCK_M": 96}}, r"`config\['BLOCK_M'\]` must be one of \(64, 128\)"),
    ({"config": {"WARP_SPEC": 1}}, r"`config\['WARP_SPEC'\]` must be one of"),
    ({"config": {"PERSIST": True}}, r"`config\['PERSIST'\]` must be one of"),
    ({"config": {"PINGPONG": True}}, r"`config\['PINGPONG'\]` needs WARP_SPEC"),
    ({"config": {"PINGPONG": True, "WARP_SPEC": True}}, "needs num_warps 4 and BLOCK_M 64"),
    ({"config": {"BLOCK_M": 64, "num_warps": 8}}, "must be a multiple of 16 \\* num_warps"),
    ({"config": {"OVERLAP": True, "STAGES": 2}}, "must be >= 3 with OVERLAP and no WARP_SPEC"),
    ({"config": {"WARP_SPEC": True, "STAGES": 1}}, "must be >= 2 with WARP_SPEC"),
])
def test_attention_checks_causal_and_config(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ga.attention(*qkv(), **kwargs)


def test_a_config_over_the_shared_memory_is_refused():
    with pytest.raises(ValueError, match="bytes of shared memory at D=128"):
        ga.attention(*qkv((1, 1, 8, 128)), config={"STAGES": 4, "BLOCK_N": 128})
    # the same at D=64 fits: 2 * 128*64*2 (Q, O) + 4 * 2 * 128*64*2 (ring) = 160 KiB
    assert gc.full_config({"STAGES": 4, "BLOCK_N": 128}, 64)["STAGES"] == 4


def test_valid_arguments_on_a_cpu_raise_gluon_unavailable():
    with pytest.raises(ga.GluonUnavailable):
        ga.attention(*qkv(), causal=True)
    with pytest.raises(ga.GluonUnavailable):
        ga.build(*qkv((1, 1, 5, 128), torch.bfloat16))


# --------------------------------------------------------------------- configuration

@pytest.mark.parametrize("head_dim", gc.HEAD_DIMS)
@pytest.mark.parametrize("dtype", gc.DTYPES)
@pytest.mark.parametrize("causal", [False, True])
def test_each_variant_changes_only_its_keys_and_fits(head_dim, dtype, causal):
    base = gc.config_for(head_dim, "plain", dtype, causal)
    assert base == gc.DEFAULT_CONFIGS[head_dim]
    assert not (base["PERSIST"] or base["WARP_SPEC"] or base["PINGPONG"] or base["OVERLAP"])
    for name in gc.VARIANTS:
        changes = gc.variant_changes(name, head_dim)
        cfg = gc.config_for(head_dim, name, dtype, causal)
        assert {k for k in cfg if cfg[k] != base[k]} == {k for k, v in changes.items()
                                                          if base[k] != v}, name
        assert gc.shared_bytes(cfg, head_dim) <= gc.SMEM_BYTES


def test_the_ablation_adds_one_schedule_step_at_a_time():
    steps = ["plain", "persist", "warp_spec", "pingpong", "fa3"]
    assert list(gc.VARIANTS)[:5] == steps
    flags = [(bool(c["PERSIST"]), c["WARP_SPEC"], c["PINGPONG"], c["OVERLAP"])
             for c in (gc.config_for(64, s) for s in steps)]
    assert flags == [(False, False, False, False), (True, False, False, False),
                     (True, True, False, False), (True, True, True, False),
                     (True, True, True, True)]


def test_shared_bytes_counts_q_o_and_the_ring():
    cfg = gc.config_for(64, "plain")  # Q + O: 2 * 128*64*2; ring: 3 * 2 * 64*64*2
    assert gc.shared_bytes(cfg, 64) == 32768 + 49152
    pp = gc.config_for(128, "pingpong")  # two consumers: 2 * 2 * 64*128*2; ring 2 stages
    assert gc.shared_bytes(pp, 128) == 65536 + 65536


@pytest.mark.parametrize("call, message", [
    (lambda: gc.config_for(96), "`head_dim` must be one of"),
    (lambda: gc.config_for(64, "fastest"), "`variant` must be one of"),
    (lambda: gc.config_for(64, "plain", torch.float32), "`dtype` must be"),
    (lambda: gc.config_for(64, "plain", torch.float16, "yes"), "`causal` must be"),
])
def test_config_for_checks_its_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ------------------------------------------------------------------------ launch plan

def test_plan_at_the_target_shape():
    shape = (32, 8, 512, 64)
    plain = gc.plan(shape, False, gc.config_for(64, "plain"), num_sms=132)
    assert (plain["n_m"], plain["n_tiles"], plain["grid"]) == (4, 1024, (4, 256))
    assert plain["kv_tiles_first"] == plain["kv_tiles_last"] == 8
    assert plain["warps"] == 8
    persist = gc.plan(shape, False, gc.config_for(64, "persist"), num_sms=132)
    assert persist["grid"] == (132,) and persist["n_tiles"] == 1024
    pp = gc.plan(shape, False, gc.config_for(64, "pingpong"), num_sms=132)
    assert (pp["rows_per_tile"], pp["n_m"], pp["n_tiles"], pp["grid"]) == (128, 4, 1024,
                                                                           (132,))
    assert pp["warps"] == 9  # two consumer warpgroups and the producer warp
    assert gc.plan(shape, False, gc.config_for(64, "warp_spec"), 132)["warps"] == 9


@pytest.mark.parametrize("S, causal, n_m, first, last", [
    (1, False, 1, 1, 1), (1, True, 1, 1, 1),
    (17, True, 1, 1, 1), (127, False, 1, 2, 2),
    (509, False, 4, 8, 8), (509, True, 4, 2, 8),  # last tile's keys end at S, not 512
    (1000, False, 8, 16, 16), (1000, True, 8, 2, 16),
    (129, True, 2, 2, 3),
])
def test_plan_tile_counts_at_odd_sequence_lengths(S, causal, n_m, first, last):
    p = gc.plan((2, 3, S, 64), causal, gc.config_for(64, "plain"), num_sms=132)
    assert (p["n_m"], p["kv_tiles_first"], p["kv_tiles_last"]) == (n_m, first, last)
    assert p["n_tiles"] == n_m * 6 and p["grid"] == (n_m, 6)


def test_small_persistent_grids_hold_no_idle_programs():
    p = gc.plan((1, 1, 17, 128), False, gc.config_for(128, "persist"), num_sms=132)
    assert p["grid"] == (1,)


# --------------------------------------------------------- candidate and Unsupported

def test_gluon_is_registered_as_ours_but_not_a_default():
    cand = cands.get("gluon")
    assert cand.devices == ("cuda",) and cand.min_capability == (9, 0)
    assert cand.meta == catalog.CATALOG["gluon"] and cand.meta.origin == "ours"
    assert "gluon" not in cands.DEFAULT_CANDIDATES


def test_gluon_on_a_cpu_is_unsupported_with_a_reason():
    with pytest.raises(cands.Unsupported, match="gluon runs on cuda only, not cpu"):
        cands.build("gluon", TINY, "cpu")
    # the builder itself (as a GPU sweep would reach it) says what is missing here
    with pytest.raises(cands.Unsupported, match="Gluon|CUDA|Triton 3.6"):
        cands._build_gluon(TINY, "cpu")


def test_unavailable_reasons(monkeypatch):
    monkeypatch.setattr(ga, "GLUON_IMPORT_ERROR", "ImportError: no gluon")
    assert "not importable" in ga.unavailable_reason()
    monkeypatch.setattr(ga, "GLUON_IMPORT_ERROR", None)
    monkeypatch.setattr(ga, "TRITON_VERSION", "3.9.0")
    assert "written against Triton 3.6" in ga.unavailable_reason()
    monkeypatch.setattr(ga, "TRITON_VERSION", "3.6.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert ga.unavailable_reason().startswith("no CUDA device")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert "CUDA tensors only" in ga.unavailable_reason("cpu")
    for cap, ok in (((8, 0), False), ((9, 0), True), ((10, 0), False)):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None, c=cap: c)
        reason = ga.unavailable_reason("cuda")
        assert (reason is None) == ok, cap
        if not ok:
            assert f"{cap[0]}.{cap[1]}" in reason


def test_builder_turns_unavailability_into_unsupported(monkeypatch):
    monkeypatch.setattr(ga, "unavailable_reason", lambda device=None: "no sm90 here")
    with pytest.raises(cands.Unsupported, match="no sm90 here"):
        cands._build_gluon(TINY, "cpu")


# ---------------------------------------------------------------- tuning (candidate)

def test_tuning_space_holds_each_variant_once_checked():
    for d in gc.HEAD_DIMS:
        space = gc.tuning_space(d)
        assert list(space) == list(gc.CHECKED_VARIANTS)  # only variants whose grid passed
        assert all(gc.full_config(cfg, d) == cfg for cfg in space.values())
        assert all(gc.variant_of(cfg, d) == name for name, cfg in space.items())
    assert gc.variant_of({"STAGES": 4}, 64) == "custom"
    with pytest.raises(ValueError, match="`head_dim` must be one of"):
        gc.tuning_space(96)


def _fake_gpu(monkeypatch, medians, nonfinite=(), broken=()):
    """Let ``tune`` run on CPU tensors: the kernel is replaced by a fake that writes NaN
    for the configurations named in ``nonfinite`` and raises for those in ``broken``, and
    the graph timer by one that returns ``medians[name]``."""
    from attn_analysis.measure import timing
    names = {repr(sorted(cfg.items())): n for n, cfg in gc.tuning_space(64).items()}
    current = {}

    def attention(q, k, v, *, causal=False, config=None, out=None):
        name = names[repr(sorted(ga.full_config(config, q.shape[3]).items()))]
        current["name"] = name
        if name in broken:
            raise RuntimeError("out of resources")
        out = torch.empty_like(q) if out is None else out
        return out.fill_(float("nan") if name in nonfinite else 0.5)

    def measure(fn, mode, device, n_samples):
        assert mode == "graph" and n_samples == ga.TUNE_SAMPLES
        fn()
        return timing.TimingSample(times_ms=(medians[current["name"]],) * 3, mode="graph",
                                   clock="cuda_event", device="cuda", calls_per_sample=1,
                                   n_warmup_calls=1, flush_bytes=None, stop_reason="n_samples",
                                   ci_rel_halfwidth=0.0, elapsed_s=0.0)

    monkeypatch.setattr(ga, "unavailable_reason", lambda device=None: None)
    monkeypatch.setattr(ga, "attention", attention)
    monkeypatch.setattr(timing, "measure", measure)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)


def test_tune_picks_the_fastest_and_skips_what_fails(monkeypatch):
    # (every checked variant timed; any added later, e.g. gluon_config.NEXT_CHECKED, slower)
    medians = dict.fromkeys(gc.CHECKED_VARIANTS, 0.09) | {
        "plain": 0.052, "persist": 0.069, "warp_spec": 0.030, "pingpong": 0.064,
        "fa3": 0.040, "overlap_only": 0.050}
    _fake_gpu(monkeypatch, medians, nonfinite=("warp_spec",), broken=("pingpong",))
    got = ga.tune(*qkv((1, 2, 17, 64)))
    assert got["variant"] == "fa3" and got["tuned_ms"] == pytest.approx(0.040)
    assert {k: got[k] for k in gc.CONFIG_KEYS} == gc.config_for(64, "fa3")
    assert set(got["tried_ms"]) == set(gc.CHECKED_VARIANTS) - {"warp_spec", "pingpong"}
    assert (got["n_tried"], got["n_failed"]) == (len(gc.CHECKED_VARIANTS) - 2, 2)


def test_tune_with_every_configuration_failing_raises(monkeypatch):
    _fake_gpu(monkeypatch, {}, broken=tuple(gc.VARIANTS))
    with pytest.raises(RuntimeError, match=f"every one of {len(gc.CHECKED_VARIANTS)} Gluon "
                                           f"configurations failed"):
        ga.tune(*qkv((1, 2, 17, 64)))


def test_build_tunes_or_reuses_and_records_which(monkeypatch):
    medians = dict.fromkeys(gc.VARIANTS, 0.06) | {"overlap_only": 0.05}
    _fake_gpu(monkeypatch, medians)
    q, k, v = qkv((1, 2, 17, 64))
    fn, info = ga.build(q, k, v, tuned=True)
    assert info["variant"] == "overlap_only" and "reused" not in info
    assert info["n_tried"] == len(gc.CHECKED_VARIANTS)
    fn, again = ga.build(q, k, v, config={key: info[key] for key in gc.CONFIG_KEYS})
    assert again["variant"] == "overlap_only" and again["reused"] and "tuned_ms" not in again
    with pytest.raises(ValueError, match="`tuned` and `config` exclude each other"):
        ga.build(q, k, v, config=gc.config_for(64, "fa3"), tuned=True)


def test_candidate_tunes_in_the_first_trial_and_reuses_the_choice_after(monkeypatch):
    calls = []

    def build(q, k, v, *, causal=False, config=None, tuned=False):
        calls.append((config, tuned))
        cfg = config or gc.config_for(64, "pingpong")
        return (lambda q, k, v: q), {**cfg, "variant": gc.variant_of(cfg, 64)}

    monkeypatch.setattr(ga, "unavailable_reason", lambda device=None: None)
    monkeypatch.setattr(ga, "build", build)
    first = cands._build_gluon(TINY, "cpu")
    assert calls[-1] == (None, True) and first.info["config"]["variant"] == "pingpong"
    second = cands._build_gluon(TINY, "cpu", hint=first.info)
    assert calls[-1] == (gc.config_for(64, "pingpong"), False)
    # a hint without a full configuration (another candidate's, an old run's) tunes again
    cands._build_gluon(TINY, "cpu", hint={"config": {"BLOCK_M": 64}})
    assert calls[-1] == (None, True)
    assert second.info["config"]["variant"] == "pingpong"


# ------------------------------------------------------------------------- catalog

def test_catalog_tells_the_gluon_kernel_from_the_triton_one():
    assert catalog.kernel_family(gk.KERNEL_NAME) == "attn_analysis Gluon kernel"
    assert catalog.kernel_family("_attn_fwd") == "attn_analysis Triton kernel"
    assert catalog.kernel_family("_attn_fwd_persist") == "attn_analysis Triton kernel"
    assert catalog.by_origin(["sdpa", "gluon", "triton", "fa4"], "ours") == ["gluon", "triton"]


# ------------------------------------------------------- compile to sm_90a, no GPU

def _why_not_compile() -> str | None:
    """Why the compile test cannot run here (it needs Triton 3.6 with Gluon), or None."""
    if gluon_tile.GLUON_IMPORT_ERROR is not None:
        return f"needs Triton 3.6 with Gluon's Hopper API: {gluon_tile.GLUON_IMPORT_ERROR}"
    if not gluon_tile.TRITON_VERSION.startswith(ga.SUPPORTED_TRITON):
        return (f"needs Triton 3.6 (the device's version; the kernel uses its Gluon API), "
                f"found {gluon_tile.TRITON_VERSION}")
    return None


@pytest.fixture
def sm90a_compiler():
    """Skip where Triton 3.6's Gluon is missing, saying why; fail there instead where
    ``ATTN_REQUIRE_GLUON=1`` (CI's second pass, which installs Triton 3.6 for these tests)."""
    why = _why_not_compile()
    if why is None:
        return
    if os.environ.get("ATTN_REQUIRE_GLUON") == "1":
        pytest.fail(f"ATTN_REQUIRE_GLUON=1 but the Gluon compile cannot run: {why}")
    pytest.skip(why)


@pytest.mark.slow
@pytest.mark.usefixtures("sm90a_compiler")
@pytest.mark.parametrize("variant", list(gc.VARIANTS))
@pytest.mark.parametrize("head_dim", gc.HEAD_DIMS)
def test_every_variant_compiles_to_sm90a(variant, head_dim):
    assert gk._gluon_attn_fwd.fn.__name__ == gk.KERNEL_NAME
    for dtype, causal in ((torch.float16, False), (torch.bfloat16, True)):
        cfg = gc.config_for(head_dim, variant, dtype, causal)
        ck = ga.compile_only(head_dim, dtype, causal, cfg)
        ptx = ck.asm["ptx"]
        assert ".target sm_90a" in ptx and ck.asm["cubin"]
        assert ptx.count("wgmma.mma_async") > 0 and ptx.count("cp.async.bulk.tensor") > 0
        assert "mma.sync" not in ptx
        # what shared_bytes counts, plus the mbarriers, and within the block's limit
        assert gc.shared_bytes(cfg, head_dim) <= ck.metadata.shared <= gc.SMEM_BYTES
        assert (ptx.count("setmaxnreg") > 0) == cfg["WARP_SPEC"]


def _ws_ptx(variant: str, head_dim: int = 64) -> list[str]:
    """The PTX lines of ``variant`` (fp16, not causal), compiled with Triton 3.6."""
    cfg = gc.config_for(head_dim, variant)
    return ga.compile_only(head_dim, torch.float16, False, cfg).asm["ptx"].splitlines()


@pytest.mark.slow
@pytest.mark.usefixtures("sm90a_compiler")
@pytest.mark.parametrize("variant", ["warp_spec", "pingpong", "fa3", "ws_q2", "pp_gemms",
                                     "pp_exp", "cudnn_tile", "cudnn_s3", "fa3_n128_s3",
                                     "ws_n128_s3", "ws_ovl_n128", "cudnn_kv", "ws_ovl_kv",
                                     "fa3_kv_s3", "fa3_kv_s4", "fa3_xt", "fa3_rs", "fa3_ls"])
def test_warp_specialised_releases_are_partition_synchronised(variant):
    """Risks 1 and 4 of notes/gluon-plan.md as Triton 3.6 lowers them: every plain
    mbarrier.arrive (a K/V slot, the Q buffer or a ping-pong turn released) comes right after
    a barrier over the arriving partition's warps (so no warp's wgmma reads are pending when
    one thread arrives), and every barrier inside the partitions is a named one with the
    partition's thread count, never a CTA-wide ``bar.sync 0``."""
    lines = [ln.strip() for ln in _ws_ptx(variant)]
    arrives = [i for i, ln in enumerate(lines)
               if "mbarrier.arrive.shared::cta.b64" in ln and "expect_tx" not in ln]
    assert arrives
    for i in arrives:
        # within the few address instructions before it (the arrive's predicate and slot)
        assert any(ln.startswith(("bar.sync", "barrier.sync")) for ln in lines[i - 5:i]), i
    partition_threads = {32 * gc.config_for(64, variant)["num_warps"], 128}
    for ln in lines:
        if ln.startswith(("bar.sync", "barrier.sync")):
            ident, _, count = ln.split(None, 1)[1].rstrip(";").partition(",")
            if count:
                assert int(count) in partition_threads, ln
            else:  # only the compiler's switch-loop barrier (id 1) spans every warp
                assert ident.strip() == "1", ln


@pytest.mark.slow
@pytest.mark.usefixtures("sm90a_compiler")
@pytest.mark.parametrize("variant, base", [("cudnn_kv", "cudnn_tile"),
                                           ("ws_ovl_kv", "ws_ovl_n128"),
                                           ("fa3_kv_s3", "fa3_n128_s3")])
def test_kv_split_gives_v_barriers_of_its_own(variant, base):
    """KV_SPLIT as compiled: the same configuration as its base but the switch; one more
    expect_tx (the producer arms K's and V's barriers apart), one more mbarrier per ring
    slot, and more waits (each consumer waits for V before its PV products)."""
    cfg, ref = gc.config_for(64, variant), gc.config_for(64, base)
    assert {k for k in cfg if cfg[k] != ref[k]} == {"KV_SPLIT"}
    ptx, ref_ptx = "\n".join(_ws_ptx(variant)), "\n".join(_ws_ptx(base))
    assert ptx.count("expect_tx") == ref_ptx.count("expect_tx") + 1
    assert ptx.count("mbarrier.init") == ref_ptx.count("mbarrier.init") + cfg["STAGES"]
    assert ptx.count("mbarrier.try_wait") > ref_ptx.count("mbarrier.try_wait")


def _ptxas_usage(variant: str) -> tuple[int, int]:
    """(registers per thread, spill bytes) of ``variant`` at D64 fp16 (not causal), from
    the ptxas bundled with Triton 3.6 (``-v``) on the PTX it compiles."""
    import re
    import tempfile

    import triton
    ptx = "\n".join(_ws_ptx(variant))
    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        err = subprocess.run([str(ptxas), "-arch=sm_90a", "-v", str(src), "-o",
                              str(Path(tmp) / "k.cubin")], capture_output=True, text=True,
                             check=True).stderr
    regs = int(re.search(r"Used (\d+) registers", err).group(1))
    spills = sum(int(n) for n in re.findall(r"(\d+) bytes spill", err))
    return regs, spills


@pytest.mark.slow
@pytest.mark.usefixtures("sm90a_compiler")
def test_round2_register_pressure():
    """Register pressure of the second round at D64, as ptxas allocates it: no variant
    spills; the warp-specialised ones stay at their MAXNREG (168, whence 240 per consumer
    thread); overlap_only (8 warps) and overlap_n128_m64 (4 warps) leave registers for two
    programs per SM, so shared memory alone decides their occupancy (see the shared-memory
    test); key step 128 on 8 warps needs more than 128 per thread (a 128 x 128 fp32 score
    tile is 64 per thread, with P and O beside it), so one program per SM there."""
    usage = {n: _ptxas_usage(n) for n in gc.ROUND2_VARIANTS}
    assert all(spill == 0 for _, spill in usage.values()), usage
    for name, (regs, _) in usage.items():
        cfg = gc.config_for(64, name)
        if cfg["WARP_SPEC"]:
            assert regs <= cfg["MAXNREG"], name
    for name in ("overlap_only", "overlap_p2", "overlap_n128_m64"):
        threads = 32 * gc.config_for(64, name)["num_warps"]
        assert 2 * threads * (-(-usage[name][0] // 8) * 8) <= 65536, (name, usage[name])
    assert usage["overlap_n128"][0] > 128


@pytest.mark.slow
@pytest.mark.usefixtures("sm90a_compiler")
def test_round3_register_pressure():
    """The third round at D64, as ptxas allocates it: no spills; the warp-specialised ones
    within MAXNREG 168 (KV_SPLIT and a fourth slot add barriers, not live values); the
    fourth slot of overlap_p2_s4 leaves its registers room for two programs per SM, as
    overlap_p2's."""
    usage = {n: _ptxas_usage(n) for n in gc.ROUND3_VARIANTS}
    assert all(spill == 0 for _, spill in usage.values()), usage
    for name in ("fa3_n128_s3", "fa3_kv_s3", "fa3_kv_s4"):
        assert usage[name][0] <= gc.config_for(64, name)["MAXNREG"], (name, usage[name])
    threads = 32 * gc.config_for(64, "overlap_p2_s4")["num_warps"]
    assert 2 * threads * (-(-usage["overlap_p2_s4"][0] // 8) * 8) <= 65536, usage


def test_ping_pong_consumers_get_equal_register_budgets():
    """Risk 3: the default partition gets what MAXNREG leaves after the workers (warps
    are allocated by warpgroup, so the one-warp producer counts as four); with 240 for the
    second consumer both consumers get 240 and the sum is exactly the launch's."""
    cfg = gc.config_for(64, "pingpong")
    total = cfg["MAXNREG"] * 32 * 4 * 3  # consumer 0, consumer 1, producer warpgroup
    default = (total - 128 * gk.CONSUMER_REGS - 128 * gk.PRODUCER_REGS) // 128
    assert default == gk.CONSUMER_REGS == 240 and gk.PRODUCER_REGS == 24
    assert total <= 65536  # one CTA's register file


# --------------------------------------------- the schedule in torch (no Gluon code)

@pytest.mark.parametrize("variant", ["plain", "pingpong", "overlap_exp", "fa3_exp",
                                     "cudnn_exp", "fa3_xt", "fa3_rs", "fa3_ls"])
@pytest.mark.parametrize("S, D, causal, dtype", [
    (1, 64, False, torch.float16), (1, 128, True, torch.bfloat16),
    (17, 64, True, torch.float16), (127, 128, False, torch.float16),
    (129, 64, True, torch.bfloat16), (509, 64, True, torch.float16),
    (200, 128, True, torch.float16),
])
def test_the_schedule_agrees_with_float64_attention(variant, S, D, causal, dtype):
    torch.manual_seed(S * D + causal)
    q, k, v = qkv((2, 2, S, D), dtype)
    cfg = gc.config_for(D, variant, dtype, causal)
    out = ga.emulate(q, k, v, causal=causal, config=cfg)
    ref = cands.reference(q, k, v, causal)
    err = float((out.double() - ref).norm() / ref.norm())
    assert err < cands.REL_ERROR_THRESHOLD[str(dtype).split(".")[1]] / 4
    # ... and a wrong mask would not pass: the other mask is far off (S > 1)
    if S > 1:
        other = cands.reference(q, k, v, not causal)
        assert float((out.double() - other).norm() / other.norm()) > 0.05


def test_the_schedule_is_checked_like_the_kernel():
    with pytest.raises(ValueError, match="`causal` must be True or False"):
        ga.emulate(*qkv(), causal="no")


# ------------------------------------------------------- issue 43: the new variants

def test_issue43_variants_are_in_the_ablation_and_not_yet_tuned():
    assert set(gc.ABLATION_VARIANTS) <= set(gc.VARIANTS)
    new = set(gc.VARIANTS) - set(gc.CHECKED_VARIANTS)
    assert new and new <= (set(gc.ABLATION_VARIANTS) | set(gc.ROUND2_VARIANTS)
                           | set(gc.ROUND3_VARIANTS) | set(gc.ROUND4_VARIANTS)
                           | set(gc.ROUND5_VARIANTS) | set(gc.ROUND6_VARIANTS))
    for d in gc.HEAD_DIMS:
        assert not new & set(gc.tuning_space(d))


def test_the_next_checked_variants_have_passed_the_full_grid_on_a_gpu():
    """gluon_config.NEXT_CHECKED (the variants that join the tuning space after their
    sanitizer pass) holds only variants whose every full-grid case (56: fp16, bf16; D 64,
    128; causal or not; six S and the multi-tile row) passed in a recorded check file."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("gluon_check",
                                                  ROOT / "scripts" / "gluon_check.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    full = set(script.grid_cases(quick=False))
    passed = {}
    for path in sorted((ROOT / "data" / "checks").glob("gluon_check*.json")):
        for r in json.loads(path.read_text()).get("rows", []):
            if r.get("section") == "grid" and r.get("ok"):
                passed.setdefault(r["variant"], set()).add(
                    (r["dtype"], r["D"], r["causal"], r["B"], r["H"], r["S"]))
    assert gc.NEXT_CHECKED and set(gc.NEXT_CHECKED) <= set(gc.VARIANTS)
    for name in gc.NEXT_CHECKED:
        assert passed.get(name, set()) >= full, (name, len(full - passed.get(name, set())))


def test_cudnn_tile_is_the_engines_shape_at_d64():
    """cuDNN's sm90 engine at D64: two consumer warpgroups of 64 query rows (a 128-row
    tile), 128 keys a step, two K/V slots, two Q buffers, one program per SM."""
    cfg = gc.config_for(64, "cudnn_tile")
    p = gc.plan((32, 8, 512, 64), False, cfg, num_sms=132)
    assert (p["rows_per_tile"], cfg["BLOCK_N"], cfg["STAGES"], cfg["QBUF"]) == (128, 128, 2, 2)
    assert p["n_tiles"] == 1024 and p["grid"] == (132,) and p["kv_tiles_first"] == 4
    assert p["warps"] == 9 and cfg["PP_TURN"] == 2


def test_q_double_buffer_counts_in_shared_memory():
    one, two = gc.config_for(64, "warp_spec"), gc.config_for(64, "ws_q2")
    assert gc.shared_bytes(two, 64) - gc.shared_bytes(one, 64) == 128 * 64 * 2


def test_round2_runs_the_best_two_beside_every_new_combination():
    """The second round times the H100 round's best two and every variant added after it
    (none left out, none of the first round's repeated), each valid at both head dims."""
    r2 = gc.ROUND2_VARIANTS
    assert r2[:2] == ("overlap_only", "cudnn_tile") and len(set(r2)) == len(r2)
    new = (set(gc.VARIANTS) - set(gc.CHECKED_VARIANTS) - set(gc.ABLATION_VARIANTS)
           - set(gc.ROUND3_VARIANTS[2:]) - set(gc.ROUND4_VARIANTS[1:])
           - set(gc.ROUND5_VARIANTS[1:]) - set(gc.ROUND6_VARIANTS[1:]))
    assert set(r2[2:]) - set(gc.CHECKED_VARIANTS) == new
    for name in r2:
        for d in gc.HEAD_DIMS:
            assert gc.shared_bytes(gc.config_for(d, name), d) <= gc.SMEM_BYTES


def test_round2_shapes_and_shared_memory_at_the_target():
    """The hypotheses' arithmetic at D64: key step 128 (4 key tiles a tile), the shared
    memory each asks, and how many programs it leaves room for per SM (228 KiB an SM,
    1 KiB reserved per program): overlap_only and overlap_p2 two, overlap_n128 one,
    overlap_n128_m64 two again."""
    sm_bytes = 228 * 1024

    def per_sm(name):
        return sm_bytes // (gc.shared_bytes(gc.config_for(64, name), 64) + 1024)

    assert {n: gc.shared_bytes(gc.config_for(64, n), 64) // 1024 for n in gc.ROUND2_VARIANTS} \
        == {"overlap_only": 80, "cudnn_tile": 112, "overlap_n128": 128,
            "overlap_n128_m64": 112, "overlap_n128_p1": 128, "overlap_p2": 80,
            "cudnn_s3": 144, "fa3_n128_s3": 144, "ws_n128_s3": 144, "ws_ovl_n128": 144,
            "cudnn_kv": 112, "ws_ovl_kv": 144}
    assert [per_sm(n) for n in ("overlap_only", "overlap_p2", "overlap_n128",
                                "overlap_n128_m64")] == [2, 2, 1, 2]
    for name in gc.ROUND2_VARIANTS[2:]:
        cfg = gc.config_for(64, name)
        p = gc.plan((32, 8, 512, 64), False, cfg, num_sms=132)
        assert cfg["BLOCK_N"] == 128 or name == "overlap_p2"
        assert p["kv_tiles_first"] == 512 // cfg["BLOCK_N"]
    assert gc.plan((32, 8, 512, 64), False, gc.config_for(64, "overlap_p2"), 132)["grid"] \
        == (264,)
    ws = gc.config_for(64, "ws_ovl_n128")
    assert ws["OVERLAP"] and ws["WARP_SPEC"] and not ws["PINGPONG"] and ws["QBUF"] == 2


def test_round4_carries_the_overlap_over_tiles_in_one_step():
    """Round 4 times fa3_n128_s3 and fa3_xt, which changes only XTILE (same shared memory at
    both head dims); XTILE is refused without the producer warp, the overlap or a
    persistent grid, naming the key, before anything is compiled."""
    assert gc.ROUND4_VARIANTS == ("fa3_n128_s3", "fa3_xt")
    for d in gc.HEAD_DIMS:
        cfg, ref = gc.config_for(d, "fa3_xt"), gc.config_for(d, "fa3_n128_s3")
        assert {k for k in cfg if cfg[k] != ref[k]} == {"XTILE"}
        assert gc.shared_bytes(cfg, d) == gc.shared_bytes(ref, d) <= gc.SMEM_BYTES
    assert "fa3_xt" not in gc.CHECKED_VARIANTS  # round 4 found no winner
    base = gc.config_for(64, "fa3_xt")
    for key, value in (("OVERLAP", False), ("PERSIST", 0)):
        with pytest.raises(ValueError, match=r"`config\['XTILE'\]` 1 needs"):
            gc.full_config({**base, key: value}, 64)
    with pytest.raises(ValueError, match=r"`config\['XTILE'\]`"):
        gc.full_config({"XTILE": 1}, 64)


def test_round5_moves_the_rescale_in_one_step():
    """Round 5 times fa3_n128_s3 and fa3_rs, which changes only RESCALE (same shared memory
    at both head dims); RESCALE is refused without the producer warp or the overlap, and
    with XTILE, naming the key."""
    assert gc.ROUND5_VARIANTS == ("fa3_n128_s3", "fa3_rs")
    for d in gc.HEAD_DIMS:
        cfg, ref = gc.config_for(d, "fa3_rs"), gc.config_for(d, "fa3_n128_s3")
        assert {k for k in cfg if cfg[k] != ref[k]} == {"RESCALE"}
        assert gc.shared_bytes(cfg, d) == gc.shared_bytes(ref, d)
    base = gc.config_for(64, "fa3_rs")
    for change in ({"OVERLAP": False}, {"XTILE": 1}, {"WARP_SPEC": False, "PINGPONG": False,
                                                     "QBUF": 1}):
        with pytest.raises(ValueError, match=r"`config\['RESCALE'\]` 1 needs"):
            gc.full_config({**base, **change}, 64)


def test_round6_moves_the_row_sum_in_one_step():
    """Round 6 times fa3_n128_s3 and fa3_ls, which changes only LSUM and adds its ones block
    (8 x BLOCK_N fp16) to the shared memory at both head dims; LSUM is refused without the
    producer warp or the overlap, and with XTILE, naming the key."""
    assert gc.ROUND6_VARIANTS == ("fa3_n128_s3", "fa3_ls")
    for d in gc.HEAD_DIMS:
        cfg, ref = gc.config_for(d, "fa3_ls"), gc.config_for(d, "fa3_n128_s3")
        assert {k for k in cfg if cfg[k] != ref[k]} == {"LSUM"}
        assert gc.shared_bytes(cfg, d) - gc.shared_bytes(ref, d) == 8 * cfg["BLOCK_N"] * 2
        assert gc.shared_bytes(cfg, d) <= gc.SMEM_BYTES
    base = gc.config_for(64, "fa3_ls")
    for change in ({"OVERLAP": False}, {"XTILE": 1}, {"WARP_SPEC": False, "PINGPONG": False,
                                                     "QBUF": 1}):
        with pytest.raises(ValueError, match=r"`config\['LSUM'\]` 1 needs"):
            gc.full_config({**base, **change}, 64)


def test_lsum_emulation_sums_the_rounded_p():
    """With LSUM the emulated row sum is that of P rounded to the input dtype (the P the PV
    product multiplies): it still meets the float64 reference, and it differs from the
    fp32 sum's result only by rounding."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 300, 64, dtype=torch.float16) for _ in range(3))
    cfg = gc.config_for(64, "fa3_ls")
    ref = torch.softmax((q.double() @ k.double().transpose(-1, -2)) / 8.0, -1) @ v.double()
    got = ga.emulate(q, k, v, config=cfg).double()
    base = ga.emulate(q, k, v, config=gc.config_for(64, "fa3_n128_s3")).double()
    assert (got - ref).abs().max() < 2e-3
    assert 0 < (got - base).abs().max() < 2e-3


@pytest.mark.slow
@pytest.mark.usefixtures("sm90a_compiler")
def test_round6_register_pressure_and_the_row_sum_products():
    """fa3_ls holds its 4-register row-sum accumulator beside fa3_n128_s3's values: no
    spills, within MAXNREG 168; its PTX has no fp32 adds left (the row sum is all on the
    tensor cores) and one m64n8k16 wgmma per 16 keys of each PV."""
    regs, spills = _ptxas_usage("fa3_ls")
    assert spills == 0 and regs <= gc.config_for(64, "fa3_ls")["MAXNREG"]
    ptx, ref = (ga.compile_only(64, torch.float16, False, gc.config_for(64, n)).asm["ptx"]
                for n in ("fa3_ls", "fa3_n128_s3"))
    assert "add.f32" in ref and "add.f32" not in ptx and "add.rn.f32" not in ptx
    n8 = ptx.count("wgmma.mma_async.sync.aligned.m64n8k16")
    assert n8 and n8 == ptx.count("wgmma.mma_async") - ref.count("wgmma.mma_async")


@pytest.mark.slow
@pytest.mark.usefixtures("sm90a_compiler")
def test_round4_register_pressure():
    """fa3_xt holds the next tile's scores beside the last PV's accumulator at a tile's
    edge, as fa3_n128_s3 does inside a tile: no spills, within MAXNREG 168."""
    regs, spills = _ptxas_usage("fa3_xt")
    assert spills == 0 and regs <= gc.config_for(64, "fa3_xt")["MAXNREG"]


def test_round3_changes_one_step_from_its_base_and_fits():
    """Round 3 times round 2's fastest two of their schedules, then variants that each
    change one thing of one of them (at D64): K and V apart, then a fourth slot; a fourth
    slot on overlap_p2. Shared memory per program (KiB) and programs per SM (228 KiB an
    SM, 1 KiB reserved each): the fourth slot keeps overlap_p2_s4 at two per SM and
    fa3_kv_s4 within one block; every variant is valid at both head dims."""
    r3 = gc.ROUND3_VARIANTS
    assert r3[:2] == ("fa3_n128_s3", "overlap_p2") and len(set(r3)) == len(r3)
    assert set(r3[:2]) <= set(gc.ROUND2_VARIANTS)
    steps = {"fa3_kv_s3": ("fa3_n128_s3", {"KV_SPLIT"}), "fa3_kv_s4": ("fa3_kv_s3", {"STAGES"}),
             "overlap_p2_s4": ("overlap_p2", {"STAGES"})}
    assert set(steps) == set(r3[2:])
    for name, (base, keys) in steps.items():
        cfg, ref = gc.config_for(64, name), gc.config_for(64, base)
        assert {k for k in cfg if cfg[k] != ref[k]} == keys, name
    kib = {n: gc.shared_bytes(gc.config_for(64, n), 64) // 1024 for n in r3}
    assert kib == {"fa3_n128_s3": 144, "overlap_p2": 80, "fa3_kv_s3": 144, "fa3_kv_s4": 176,
                   "overlap_p2_s4": 96}
    assert [228 // (kib[n] + 1) for n in ("overlap_p2", "overlap_p2_s4", "fa3_kv_s4")] \
        == [2, 2, 1]
    for name in r3:
        for d in gc.HEAD_DIMS:
            assert gc.shared_bytes(gc.config_for(d, name), d) <= gc.SMEM_BYTES


# VARIANTS as they stood before rounds 2 and 3 were written as steps from a base
# (2026-11-28, code b4125838), every entry in order: the check files in data/checks name
# these variants, so a refactor must leave each one's configuration as it was.
VARIANTS_SNAPSHOT = (
    ("plain", {}),
    ("persist", {"PERSIST": 1}),
    ("warp_spec", {"MAXNREG": 168, "PERSIST": 1, "WARP_SPEC": True}),
    ("pingpong", {"BLOCK_M": 64, "MAXNREG": 168, "PERSIST": 1, "PINGPONG": True,
                  "WARP_SPEC": True, "num_warps": 4}),
    ("fa3", {"BLOCK_M": 64, "MAXNREG": 168, "OVERLAP": True, "PERSIST": 1, "PINGPONG": True,
             "WARP_SPEC": True, "num_warps": 4}),
    ("overlap_only", {"OVERLAP": True, "STAGES": 3}),
    ("ws_q2", {"MAXNREG": 168, "PERSIST": 1, "QBUF": 2, "WARP_SPEC": True}),
    ("ws_n128", {"BLOCK_N": 128, "MAXNREG": 168, "PERSIST": 1, "QBUF": 2, "STAGES": 2,
                 "WARP_SPEC": True}),
    ("pp_gemms", {"BLOCK_M": 64, "MAXNREG": 168, "PERSIST": 1, "PINGPONG": True, "PP_TURN": 1,
                  "WARP_SPEC": True, "num_warps": 4}),
    ("pp_exp", {"BLOCK_M": 64, "MAXNREG": 168, "PERSIST": 1, "PINGPONG": True, "PP_TURN": 2,
                "WARP_SPEC": True, "num_warps": 4}),
    ("cudnn_tile", {"BLOCK_M": 64, "BLOCK_N": 128, "MAXNREG": 168, "PERSIST": 1,
                    "PINGPONG": True, "PP_TURN": 2, "QBUF": 2, "STAGES": 2, "WARP_SPEC": True,
                    "num_warps": 4}),
    ("fa3_n128", {"BLOCK_M": 64, "BLOCK_N": 128, "MAXNREG": 168, "OVERLAP": True, "PERSIST": 1,
                  "PINGPONG": True, "QBUF": 2, "STAGES": 2, "WARP_SPEC": True, "num_warps": 4}),
    ("cudnn_exp", {"BLOCK_M": 64, "BLOCK_N": 128, "EXP_SPLIT": 2, "MAXNREG": 168, "PERSIST": 1,
                   "PINGPONG": True, "PP_TURN": 2, "QBUF": 2, "STAGES": 2, "WARP_SPEC": True,
                   "num_warps": 4}),
    ("overlap_exp", {"EXP_SPLIT": 2, "OVERLAP": True, "STAGES": 3}),
    ("fa3_exp", {"BLOCK_M": 64, "EXP_SPLIT": 1, "MAXNREG": 168, "OVERLAP": True, "PERSIST": 1,
                 "PINGPONG": True, "WARP_SPEC": True, "num_warps": 4}),
    ("overlap_n128", {"BLOCK_N": 128, "OVERLAP": True, "STAGES": 3}),
    ("overlap_n128_p1", {"BLOCK_N": 128, "OVERLAP": True, "PERSIST": 1, "STAGES": 3}),
    ("overlap_n128_m64", {"BLOCK_M": 64, "BLOCK_N": 128, "OVERLAP": True, "STAGES": 3,
                          "num_warps": 4}),
    ("overlap_p2", {"OVERLAP": True, "PERSIST": 2, "STAGES": 3}),
    ("cudnn_s3", {"BLOCK_M": 64, "BLOCK_N": 128, "MAXNREG": 168, "PERSIST": 1, "PINGPONG": True,
                  "PP_TURN": 2, "QBUF": 2, "STAGES": 3, "WARP_SPEC": True, "num_warps": 4}),
    ("fa3_n128_s3", {"BLOCK_M": 64, "BLOCK_N": 128, "MAXNREG": 168, "OVERLAP": True,
                     "PERSIST": 1, "PINGPONG": True, "QBUF": 2, "STAGES": 3, "WARP_SPEC": True,
                     "num_warps": 4}),
    ("ws_n128_s3", {"BLOCK_N": 128, "MAXNREG": 168, "PERSIST": 1, "QBUF": 2, "STAGES": 3,
                    "WARP_SPEC": True}),
    ("ws_ovl_n128", {"BLOCK_N": 128, "MAXNREG": 168, "OVERLAP": True, "PERSIST": 1, "QBUF": 2,
                     "STAGES": 3, "WARP_SPEC": True}),
    ("cudnn_kv", {"BLOCK_M": 64, "BLOCK_N": 128, "KV_SPLIT": 1, "MAXNREG": 168, "PERSIST": 1,
                  "PINGPONG": True, "PP_TURN": 2, "QBUF": 2, "STAGES": 2, "WARP_SPEC": True,
                  "num_warps": 4}),
    ("ws_ovl_kv", {"BLOCK_N": 128, "KV_SPLIT": 1, "MAXNREG": 168, "OVERLAP": True, "PERSIST": 1,
                   "QBUF": 2, "STAGES": 3, "WARP_SPEC": True}),
    ("fa3_kv_s3", {"BLOCK_M": 64, "BLOCK_N": 128, "KV_SPLIT": 1, "MAXNREG": 168,
                   "OVERLAP": True, "PERSIST": 1, "PINGPONG": True, "QBUF": 2, "STAGES": 3,
                   "WARP_SPEC": True, "num_warps": 4}),
    ("fa3_kv_s4", {"BLOCK_M": 64, "BLOCK_N": 128, "KV_SPLIT": 1, "MAXNREG": 168,
                   "OVERLAP": True, "PERSIST": 1, "PINGPONG": True, "QBUF": 2, "STAGES": 4,
                   "WARP_SPEC": True, "num_warps": 4}),
    ("overlap_p2_s4", {"OVERLAP": True, "PERSIST": 2, "STAGES": 4}),
    ("fa3_xt", {"BLOCK_M": 64, "BLOCK_N": 128, "MAXNREG": 168, "OVERLAP": True, "PERSIST": 1,
                "PINGPONG": True, "QBUF": 2, "STAGES": 3, "WARP_SPEC": True, "XTILE": 1,
                "num_warps": 4}),
    ("fa3_rs", {"BLOCK_M": 64, "BLOCK_N": 128, "MAXNREG": 168, "OVERLAP": True, "PERSIST": 1,
                "PINGPONG": True, "QBUF": 2, "RESCALE": 1, "STAGES": 3, "WARP_SPEC": True,
                "num_warps": 4}),
    ("fa3_ls", {"BLOCK_M": 64, "BLOCK_N": 128, "LSUM": 1, "MAXNREG": 168, "OVERLAP": True,
                "PERSIST": 1, "PINGPONG": True, "QBUF": 2, "STAGES": 3, "WARP_SPEC": True,
                "num_warps": 4}),
)
def test_variants_are_as_before_they_were_written_as_steps():
    assert [(n, v) for n, v in gc.VARIANTS.items()] == list(VARIANTS_SNAPSHOT)


@pytest.mark.parametrize("name", ["gluon_ablation_h100.json", "gluon_ablation2_h200.json",
                                  "gluon_ablation3_h200.json", "gluon_ablation4_h200.json",
                                  "gluon_ablation5_h200.json"])
def test_variants_build_the_configurations_the_ablations_recorded(name):
    """Each timed variant's configuration as the ablation built it (``timing.info``; the
    H100 round predates KV_SPLIT, which then was off) is ``config_for`` at D64 today."""
    from attn_analysis.record import checks
    info = checks.read(ROOT / "data" / "checks" / name, "gluon_check")["timing"]["info"]
    assert info
    for variant, built in info.items():
        recorded = gc.full_config({k: built[k] for k in gc.CONFIG_KEYS if k in built}, 64)
        assert recorded == gc.config_for(64, variant), (name, variant)


def test_variant_steps_refuse_a_repeated_name_or_an_unknown_base():
    base = {"a": {"STAGES": 3}}
    assert gc._steps(base, (("b", "a", {"PERSIST": 2}), ("c", "b", {"STAGES": 4}))) == {
        "b": {"STAGES": 3, "PERSIST": 2}, "c": {"STAGES": 4, "PERSIST": 2}}
    with pytest.raises(ValueError, match="`steps` names the variant 'a' twice"):
        gc._steps(base, (("a", "a", {}),))
    with pytest.raises(ValueError, match="`steps`: the base 'z'"):
        gc._steps(base, (("b", "z", {}),))
    assert base == {"a": {"STAGES": 3}}  # the variants given are not changed


def test_head_dim_overrides_are_only_where_needed():
    """Each override at D128 exists because the variant's own setting does not fit there
    (a test that fails if an override becomes unnecessary), and the overridden variant
    keeps its schedule switches."""
    for d, table in gc.HEAD_DIM_OVERRIDES.items():
        for name, keys in table.items():
            with pytest.raises(ValueError, match="shared memory"):
                gc.full_config(gc.VARIANTS[name], d)
            cfg = gc.config_for(d, name)
            for flag in ("PERSIST", "WARP_SPEC", "PINGPONG", "OVERLAP", "QBUF", "PP_TURN",
                         "KV_SPLIT"):
                assert cfg[flag] == gc.config_for(64, name)[flag], (name, flag)
            assert set(keys) <= {"STAGES", "BLOCK_N"}


@pytest.mark.parametrize("config, message", [
    ({"QBUF": 2}, "QBUF"),
    ({"PERSIST": 1, "WARP_SPEC": True, "PINGPONG": True, "OVERLAP": True, "BLOCK_M": 64,
      "num_warps": 4, "PP_TURN": 2}, "PP_TURN"),
    ({"PERSIST": 1, "WARP_SPEC": True, "PP_TURN": 1}, "PP_TURN"),
    ({"EXP_SPLIT": 3}, "EXP_SPLIT"),
    ({"KV_SPLIT": 1}, "KV_SPLIT"),
    ({"KV_SPLIT": 2, "PERSIST": 1, "WARP_SPEC": True}, "KV_SPLIT"),
    ({"QBUF": True}, "QBUF"),
])
def test_issue43_switches_are_checked(config, message):
    with pytest.raises(ValueError, match=message):
        gc.full_config(config, 64)


def test_polynomial_exp2_is_accurate_and_safe():
    """The kernel's polynomial 2**x: relative error under 1e-4 (fp16 rounds P at 4.9e-4)
    over the normal range, exactly 0 at and below -127 (masked keys, -inf included), and
    never NaN; a wrong coefficient would fail the bound."""
    x = torch.linspace(-126, 0, 400_001)
    ref = torch.exp2(x.double())
    y = ga.exp2_poly_reference(x)
    assert float(((y.double() - ref) / ref).abs().max()) < 1e-4
    low = ga.exp2_poly_reference(torch.tensor([-127.0, -300.0, float("-inf")]))
    assert low.tolist() == [0.0, 0.0, 0.0]
    assert ga.exp2_poly_reference(torch.zeros(1)).item() == 1.0
    assert bool(torch.isfinite(ga.exp2_poly_reference(torch.linspace(-1e4, 0, 999))).all())
    bad = gluon_tile.EXP2_POLY[:3] + (gluon_tile.EXP2_POLY[3] * 1.05,)
    f = torch.linspace(0, 0.999, 1000)
    p = ((bad[3] * f + bad[2]) * f + bad[1]) * f + bad[0]
    assert float((p / torch.exp2(f) - 1).abs().max()) > 1e-4


@pytest.mark.parametrize("split, n_poly", [(0, 0), (1, 32), (2, 16)])
def test_the_exp_split_picks_its_columns(split, n_poly):
    x = torch.full((2, 64), -0.5)
    y = ga._exp2_split(x, split)
    differs = (y != torch.exp2(x))[0]
    assert int(differs.sum()) == n_poly
    if split == 2:
        assert differs.nonzero().flatten().tolist()[:4] == [9, 11, 13, 15]


# ------------------------------------------------------- scripts/gluon_ablation.py

def _ablation():
    import importlib.util
    spec = importlib.util.spec_from_file_location("gluon_ablation",
                                                  ROOT / "scripts" / "gluon_ablation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_ablation_placements_rotate_and_reverse():
    orders = _ablation().placement_orders(["a", "b", "c"], 4)
    assert orders == [["a", "b", "c"], ["a", "c", "b"], ["c", "a", "b"], ["c", "b", "a"]]
    assert all(sorted(o) == ["a", "b", "c"] for o in orders)
    with pytest.raises(ValueError, match="`rounds`"):
        _ablation().placement_orders(["a"], 0)


def test_ablation_summary_pairs_rounds():
    s = _ablation().summarise({"sdpa": [1.0, 2.0, 1.0], "x": [0.5, 4.0, 1.0]})
    assert s["sdpa"]["ratio_median"] == 1.0
    assert (s["x"]["ratio_min"], s["x"]["ratio_median"], s["x"]["ratio_max"]) == (0.5, 1.0, 2.0)
    assert s["x"]["median_ms"] == 1.0
    with pytest.raises(ValueError, match="base"):
        _ablation().summarise({"x": [1.0]})


def test_ablation_reads_ncu_csv():
    mod = _ablation()
    head = ",".join(f'"{h}"' for h in ["ID", "Kernel Name", *mod.NCU_METRICS])
    units = ",".join(['""', '""'] + ['"%"'] * len(mod.NCU_METRICS))
    row = ",".join(['"0"', '"_gluon_attn_fwd"'] + ['"41.5"'] * (len(mod.NCU_METRICS) - 1)
                   + ['"n/a"'])
    rows = mod.parse_ncu_csv("==PROF== noise\n" + "\n".join([head, units, row]))
    assert len(rows) == 1 and rows[0]["kernel"] == "_gluon_attn_fwd"
    assert rows[0][mod.NCU_METRICS[0]] == 41.5 and rows[0][mod.NCU_METRICS[-1]] is None
    assert mod.parse_ncu_csv("nothing") == []


@pytest.mark.parametrize("argv, message", [
    (["--variants", "nope"], "`--variants` must be among"),
    (["--variants", "ws_q2,"], "`--variants` must be comma-separated"),
    (["--variants", "ws_q2,ws_q2"], "`--variants` names a variant twice"),
    (["--variants", "round7"], "`--variants` must be among"),
    (["--out-name", "sub/x.json"], "`--out-name` must be a file name"),
    (["--out-name", "x.txt"], "`--out-name` must be a file name"),
    (["--out-name", ".json"], "`--out-name` must be a file name"),
    (["--rounds", "0"], "`--rounds` must be >= 1"),
    (["--timeout-s", "0"], "`--timeout-s` must be > 0"),
])
def test_ablation_refuses_bad_arguments_before_writing(argv, message, tmp_path, monkeypatch):
    monkeypatch.setenv("OUT", str(tmp_path))
    with pytest.raises(ValueError, match=message):
        _ablation().main(argv)
    assert list(tmp_path.iterdir()) == []


def test_ablation_variants_parse():
    parse = _ablation().parse_variants
    named = {"round2": gc.ROUND2_VARIANTS, "round3": gc.ROUND3_VARIANTS}
    assert parse(None, gc.VARIANTS, gc.ABLATION_VARIANTS, named) == list(gc.ABLATION_VARIANTS)
    assert parse("round2", gc.VARIANTS, gc.ABLATION_VARIANTS, named) == list(gc.ROUND2_VARIANTS)
    assert parse("round3", gc.VARIANTS, gc.ABLATION_VARIANTS, named) == list(gc.ROUND3_VARIANTS)
    assert parse("ws_q2, fa3", gc.VARIANTS, (), named) == ["ws_q2", "fa3"]


def test_ablation_writes_why_not_here_under_its_name(tmp_path, monkeypatch):
    mod = _ablation()
    monkeypatch.setenv("OUT", str(tmp_path))
    assert mod.main(["--variants", "ws_q2"]) == 1  # no GPU here: recorded, not run
    doc = json.loads((tmp_path / "gluon_ablation.json").read_text())
    assert doc["unavailable"] and doc["ablation"] and doc["check"] == "gluon_check"
    assert mod.main(["--variants", "round2", "--quick", "--out-name",
                     "gluon_ablation2_h200.json"]) == 1
    doc = json.loads((tmp_path / "gluon_ablation2_h200.json").read_text())
    assert doc["variants"] == list(gc.ROUND2_VARIANTS) and doc["args"]["quick"]
    assert mod.main(["--variants", "round3", "--quick", "--out-name",
                     "gluon_ablation3_h200.json"]) == 1
    doc = json.loads((tmp_path / "gluon_ablation3_h200.json").read_text())
    assert doc["variants"] == list(gc.ROUND3_VARIANTS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gluon_ablation.json",
                                                          "gluon_ablation2_h200.json",
                                                          "gluon_ablation3_h200.json"]


def test_ablation_ncu_csv_is_named_after_the_check_file(tmp_path, monkeypatch):
    """ncu's CSV is ``<stem>_ncu.csv`` beside the check file, whichever candidate prints
    last in the table (the table's loop once reused the file's variable: round 3's CSV came
    back as ``overlap__ncu.csv``, from ``overlap_p2_s4``). The GPU steps are faked: the
    timing child's ROW line and ncu's CSV."""
    mod = _ablation()
    from attn_analysis.measure import gluon_attention as ga_mod
    monkeypatch.setattr(ga_mod, "unavailable_reason", lambda: None)
    monkeypatch.setenv("OUT", str(tmp_path))
    ms = {"sdpa": 0.050, "fa3_n128_s3": 0.048, "overlap_p2_s4": 0.053}
    samples = {n: [m] * 2 for n, m in ms.items()}
    row = {"summary": mod.summarise(samples), "samples_ms": samples,
           "kernel": {n: {"attention_kernel_ms": m} for n, m in ms.items()},
           "do_bench_cudagraph_ms": dict(ms)}
    head = ",".join(f'"{h}"' for h in ["ID", "Kernel Name", *mod.NCU_METRICS])
    body = [",".join([f'"{i}"', f'"{k}"'] + ['"1.5"'] * len(mod.NCU_METRICS))
            for i, k in enumerate(["_gluon_attn_fwd", "_gluon_attn_fwd", "cudnn_fprop"])]
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        if cmd[0] == "ncu":
            Path(cmd[cmd.index("--log-file") + 1]).write_text("\n".join([head, *body]))
            out = "".join(f"NCU_ORDER {i} {n}\n"
                          for i, n in enumerate(["fa3_n128_s3", "overlap_p2_s4", "sdpa"]))
        else:
            out = "ROW " + json.dumps(row) + "\n"
        return subprocess.CompletedProcess(cmd, 0, stdout=out, stderr="")

    monkeypatch.setattr(mod.subprocess, "run", fake_run)
    assert mod.main(["--variants", "fa3_n128_s3,overlap_p2_s4", "--skip-grid", "--ncu",
                     "--out-name", "gluon_ablation3_h200.json"]) == 0
    assert [c[0] for c in calls] == [sys.executable, "ncu"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gluon_ablation3_h200.json",
                                                          "gluon_ablation3_h200_ncu.csv"]
    doc = json.loads((tmp_path / "gluon_ablation3_h200.json").read_text())
    assert doc["ncu"]["csv"] == "gluon_ablation3_h200_ncu.csv"
    assert doc["ncu"]["order"] == ["fa3_n128_s3", "overlap_p2_s4", "sdpa"]
    assert len(doc["ncu"]["kernels"]) == 3 and doc["complete"]
    assert mod.ncu_report_path("/o/x.json") == "/o/x_ncu.csv"
    with pytest.raises(ValueError, match="`out`"):
        mod.ncu_report_path("/o/x.csv")
