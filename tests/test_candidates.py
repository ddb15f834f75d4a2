"""The candidate registry and the float64 correctness gate, on the CPU."""

import contextlib
import math

import pytest
import torch

from attn_analysis.measure import candidates as cands
from attn_analysis.configs import Config

import fake_candidates  # noqa: F401  (registers the test doubles)

TINY = Config(2, 2, 33, 64)


def test_registry_has_every_library_backend_and_ours():
    expected = {"sdpa", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "sdpa_math", "eager",
                "eager_compiled", "flex", "triton"}
    assert expected <= set(cands.CANDIDATES)
    assert set(cands.DEFAULT_CANDIDATES) == expected


@pytest.mark.parametrize("name", ["sdpa", "sdpa_math", "eager"])
@pytest.mark.parametrize("config", [TINY, Config(1, 2, 17, 128, "bfloat16", True)])
def test_cpu_candidates_pass_the_gate(name, config):
    built = cands.build(name, config, "cpu")
    result = cands.check(built, config, "cpu", seed=3, name=name)
    assert result.passed, result.reason
    assert 0 < result.rel_error < result.threshold
    assert result.nonfinite == 0


@pytest.mark.parametrize("name", ["sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "flex",
                                  "triton", "fake_gpu_only"])
def test_gpu_only_candidates_say_why_on_cpu(name):
    reason = cands.get(name).unsupported_reason(TINY, "cpu")
    assert reason and "cpu" in reason
    with pytest.raises(cands.Unsupported, match="cuda only"):
        cands.build(name, TINY, "cpu")


def test_forced_backend_is_chosen_by_context_not_inside_the_call():
    built = cands.build("sdpa_math", TINY, "cpu")
    assert built.info["backend_selection"] == "outside the timed call"
    flash_before = torch.backends.cuda.flash_sdp_enabled()
    with built.context():
        assert torch.backends.cuda.math_sdp_enabled()
        assert not torch.backends.cuda.flash_sdp_enabled()
        assert not torch.backends.cuda.mem_efficient_sdp_enabled()
    assert torch.backends.cuda.flash_sdp_enabled() == flash_before
    # The call itself changes no backend flag: selection is the context's job.
    q, k, v = cands.make_inputs(TINY, "cpu", seed=2)
    built.fn(q, k, v)
    assert torch.backends.cuda.flash_sdp_enabled() == flash_before
    assert cands.check(built, TINY, "cpu", seed=2).passed
    assert cands.build("sdpa", TINY, "cpu").context is contextlib.nullcontext


def test_check_enters_the_candidates_context():
    built = cands.build("fake_needs_context", TINY, "cpu")
    assert cands.check(built, TINY, "cpu", seed=1).passed


def test_wrong_candidate_is_caught():
    built = cands.build("fake_wrong_scale", TINY, "cpu")
    result = cands.check(built, TINY, "cpu", seed=1, name="fake_wrong_scale")
    assert not result.passed
    assert result.rel_error > 10 * result.threshold
    assert "relative error" in result.reason


def test_partly_unwritten_output_is_caught():
    built = cands.build("fake_half_written", TINY, "cpu")
    result = cands.check(built, TINY, "cpu", seed=1, name="fake_half_written")
    assert not result.passed
    half = TINY.batch * TINY.heads * (TINY.seq_len - TINY.seq_len // 2) * TINY.head_dim
    assert result.nonfinite == half
    assert "non-finite" in result.reason


def test_nan_output_never_passes():
    built = cands.Built(lambda q, k, v: torch.full_like(q, float("nan")), {})
    result = cands.check(built, TINY, "cpu", seed=1)
    assert not result.passed and result.nonfinite == q_numel(TINY)


def q_numel(c):
    return c.batch * c.heads * c.seq_len * c.head_dim


def test_inputs_are_fresh_random_not_zeros():
    a = cands.make_inputs(TINY, "cpu", seed=1)
    b = cands.make_inputs(TINY, "cpu", seed=2)
    assert all(t.abs().sum() > 0 for t in a)
    assert not torch.equal(a[0], b[0])
    assert torch.equal(a[0], cands.make_inputs(TINY, "cpu", seed=1)[0])


def test_reference_matches_closed_form_for_uniform_keys():
    # With identical keys every query attends uniformly: output = mean of V over keys.
    q = torch.randn(1, 1, 5, 64, dtype=torch.float64)
    k = torch.ones(1, 1, 5, 64, dtype=torch.float64)
    v = torch.randn(1, 1, 5, 64, dtype=torch.float64)
    out = cands.reference(q, k, v, causal=False)
    assert torch.allclose(out, v.mean(dim=2, keepdim=True).expand_as(v))
    causal = cands.reference(q, k, v, causal=True)
    expected = torch.cumsum(v, dim=2) / torch.arange(1, 6, dtype=torch.float64).view(1, 1, 5, 1)
    assert torch.allclose(causal, expected)


def test_reference_chunking_does_not_change_the_result():
    q, k, v = (t.double() for t in cands.make_inputs(Config(2, 3, 9, 64), "cpu", seed=4))
    whole = cands.reference(q, k, v, causal=True)
    chunked = cands.reference(q, k, v, causal=True, max_chunk_bytes=9 * 9 * 8)
    assert torch.equal(whole, chunked)


def test_bad_names_and_devices_are_refused():
    with pytest.raises(ValueError, match="`candidate` must be one of"):
        cands.get("nope")
    with pytest.raises(ValueError, match="`device` must be one of"):
        cands.build("sdpa", TINY, "tpu")
    with pytest.raises(ValueError, match="already registered"):
        cands.register(cands.Candidate("sdpa", "dup", lambda c, d: None))
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            cands.build("sdpa", TINY, "cuda")


def test_thresholds_are_about_ten_unit_roundoffs():
    assert cands.REL_ERROR_THRESHOLD["float16"] == pytest.approx(10 * 2.0**-11, rel=0.05)
    assert cands.REL_ERROR_THRESHOLD["bfloat16"] == pytest.approx(10 * 2.0**-8, rel=0.05)
    assert math.isfinite(cands.REL_ERROR_THRESHOLD["float16"])
