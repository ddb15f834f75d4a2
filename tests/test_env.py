"""Tests for attn_analysis.measure.env: the lock catches every way back to TF32 or
nondeterminism (the fingerprint's tests are test_machine.py's)."""

from __future__ import annotations

import os
import re

import pytest
import torch

from attn_analysis.measure import env, machine
from attn_analysis.measure.env import EnvironmentNotLocked

B = torch.backends
HAS_FP32_API = env.lock_state()["cuda_matmul_fp32_precision"] is not None
pytestmark = pytest.mark.usefixtures("restore_torch_state")


def _raise_message() -> str:
    with pytest.raises(EnvironmentNotLocked) as info:
        env.assert_locked()
    return str(info.value)


# ------------------------------------------------------------------ lock

def test_lock_then_assert_locked_passes():
    result = env.lock(seed=3)
    env.assert_locked()
    assert env.is_locked()
    assert result.seed == 3
    assert result.cublas_workspace_config == os.environ["CUBLAS_WORKSPACE_CONFIG"]
    assert dict(result.state) == env.lock_state()
    with pytest.raises(TypeError):
        result.state["cudnn_benchmark"] = True  # read-only record of what was applied


def test_lock_sets_the_first_accepted_value_of_every_setting():
    os.environ.pop("CUBLAS_WORKSPACE_CONFIG")
    if torch.cuda.is_initialized():
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    state = env.lock().state
    for setting in env.LOCK_SETTINGS:
        if not (setting.optional and state[setting.key] is None):
            assert state[setting.key] == setting.accepted[0], setting.key


def test_unlocked_default_state_is_reported_with_every_fault():
    torch.use_deterministic_algorithms(False)
    B.cudnn.deterministic = False
    os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    message = _raise_message()
    assert "torch.are_deterministic_algorithms_enabled() is False" in message
    assert "torch.backends.cudnn.deterministic is False" in message
    assert "CUBLAS_WORKSPACE_CONFIG is None, want ':4096:8' or ':16:8'" in message
    assert not env.is_locked()


def test_original_reports_ordering_bug_is_caught():
    # The reports' env_lock: allow_tf32 = False, then set_float32_matmul_precision("high").
    env.lock()
    B.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("high")
    message = _raise_message()
    assert "float32 matmul precision is 'high' (TF32 allowed), want 'highest'" in message
    # the second statement silently re-enabled the first one's flag as well
    assert "torch.backends.cuda.matmul.allow_tf32 is True, want False" in message


@pytest.mark.parametrize("undo, named", [
    (lambda: setattr(B.cudnn, "allow_tf32", True), "torch.backends.cudnn.allow_tf32 is True"),
    (lambda: setattr(B.cuda.matmul, "allow_tf32", True),
     "torch.backends.cuda.matmul.allow_tf32 is True"),
    (lambda: torch.set_float32_matmul_precision("medium"),
     "float32 matmul precision is 'medium' (bf16 allowed)"),
    (lambda: torch.use_deterministic_algorithms(False),
     "torch.are_deterministic_algorithms_enabled() is False"),
    (lambda: torch.use_deterministic_algorithms(True, warn_only=True),
     "deterministic algorithms warn_only is True"),
    (lambda: setattr(B.cudnn, "benchmark", True), "torch.backends.cudnn.benchmark is True"),
    (lambda: setattr(B.cudnn, "deterministic", False),
     "torch.backends.cudnn.deterministic is False"),
    (lambda: os.environ.pop("CUBLAS_WORKSPACE_CONFIG"), "CUBLAS_WORKSPACE_CONFIG is None"),
    (lambda: os.environ.update(CUBLAS_WORKSPACE_CONFIG=":0:0"),
     "CUBLAS_WORKSPACE_CONFIG is ':0:0'"),
    (lambda: setattr(torch.utils.deterministic, "fill_uninitialized_memory", True),
     "fill_uninitialized_memory is True"),
    (lambda: setattr(B.cuda.matmul, "allow_fp16_reduced_precision_reduction", False),
     "allow_fp16_reduced_precision_reduction is False"),
    (lambda: B.cuda.allow_fp16_bf16_reduction_math_sdp(True),
     "fp16_bf16_reduction_math_sdp_allowed() is True"),
])
def test_each_way_back_is_caught(undo, named):
    env.lock()
    undo()
    assert named in _raise_message()
    assert not env.is_locked()


@pytest.mark.skipif(not HAS_FP32_API, reason="this torch has no fp32_precision API")
@pytest.mark.parametrize("node, label", [
    (lambda: B.cuda.matmul, "torch.backends.cuda.matmul.fp32_precision"),
    (lambda: B.cudnn.conv, "torch.backends.cudnn.conv.fp32_precision"),
    (lambda: B.cudnn.rnn, "torch.backends.cudnn.rnn.fp32_precision"),
    (lambda: B, "torch.backends.fp32_precision"),
])
def test_new_fp32_precision_api_is_caught(node, label):
    env.lock()
    node().fp32_precision = "tf32"
    message = _raise_message()
    assert re.search(re.escape(label) + r" is 'tf32' \(TF32 allowed\)", message)


@pytest.mark.skipif(not HAS_FP32_API, reason="this torch has no fp32_precision API")
def test_lock_survives_a_tf32_root_set_beforehand():
    # Under a 'tf32' root, cudnn.allow_tf32 = False alone leaves conv/rnn inheriting TF32;
    # lock() must set the leaves too.
    B.fp32_precision = "tf32"
    env.lock()
    state = env.lock_state()
    assert state["cudnn_conv_fp32_precision"] == state["cudnn_rnn_fp32_precision"] == "ieee"


@pytest.mark.skipif(not HAS_FP32_API, reason="this torch has no fp32_precision API")
def test_mixed_api_state_that_torch_cannot_report_is_a_fault():
    env.lock()
    torch.set_float32_matmul_precision("high")
    B.cuda.matmul.allow_tf32 = False  # precision getter now raises on mixed APIs (torch 2.13)
    state = env.lock_state()
    if not str(state["float32_matmul_precision"]).startswith("<unreadable"):
        pytest.skip("this torch reports the mixed state")
    assert "float32 matmul precision cannot be read" in _raise_message()


def test_two_faults_are_both_named():
    env.lock()
    B.cudnn.allow_tf32 = True
    B.cudnn.benchmark = True
    message = _raise_message()
    assert "torch.backends.cudnn.allow_tf32 is True, want False" in message
    assert "torch.backends.cudnn.benchmark is True, want False" in message
    assert message.count(";") >= 1


def test_lock_keeps_an_existing_deterministic_cublas_value():
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":16:8"
    result = env.lock()
    assert result.cublas_workspace_config == ":16:8"
    assert result.previous_cublas_workspace_config == ":16:8"


def test_lock_sets_the_cublas_variable_before_cuda_starts(monkeypatch):
    os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    result = env.lock()
    assert result.previous_cublas_workspace_config is None
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == result.cublas_workspace_config == ":4096:8"


def test_lock_replaces_a_nondeterministic_cublas_value(monkeypatch):
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":0:0"
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert env.lock().previous_cublas_workspace_config == ":0:0"
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"


def test_lock_refuses_when_cuda_was_initialised_without_the_cublas_variable(monkeypatch):
    os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(EnvironmentNotLocked, match="CUDA is already initialised"):
        env.lock()
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ  # nothing half-applied to the variable


def test_lock_seeds_every_generator():
    import random

    import numpy as np
    env.lock(seed=1)
    first = (torch.rand(4), np.random.rand(2), random.random())
    env.lock(seed=1)
    second = (torch.rand(4), np.random.rand(2), random.random())
    assert torch.equal(first[0], second[0])
    assert (first[1] == second[1]).all() and first[2] == second[2]
    env.lock(seed=2)
    assert not torch.equal(first[0], torch.rand(4))


@pytest.mark.parametrize("seed", [-1, 2**32, 1.5, "0", True, None])
def test_lock_rejects_bad_seed(seed):
    with pytest.raises(ValueError, match=r"`seed` must be an integer in \[0, 2\*\*32\)"):
        env.lock(seed=seed)


def test_lock_default_seed_is_zero():
    assert env.lock().seed == 0


def test_default_dispatch_lock_keeps_everything_but_deterministic_algorithms():
    with env.preserved_state():
        env.lock(seed=3, deterministic=False)
        env.assert_locked(deterministic=False)
        assert not torch.are_deterministic_algorithms_enabled()
        assert torch.get_float32_matmul_precision() == "highest"
        with pytest.raises(env.EnvironmentNotLocked, match="deterministic_algorithms_enabled"):
            env.assert_locked(deterministic=True)
        assert machine.fingerprint()["locked"] is True
        torch.set_float32_matmul_precision("high")  # the reports' bug is still caught
        with pytest.raises(env.EnvironmentNotLocked, match="TF32 allowed"):
            env.assert_locked(deterministic=False)


def test_lock_profile_changes_the_fingerprint_hash():
    with env.preserved_state():
        env.lock(seed=0, deterministic=True)
        a = machine.fingerprint()["fingerprint_hash"]
        env.lock(seed=0, deterministic=False)
        b = machine.fingerprint()["fingerprint_hash"]
    assert a != b


def test_lock_validates_deterministic():
    with pytest.raises(ValueError, match="`deterministic` must be True or False"):
        env.lock(deterministic="yes")
