"""The calibration controls: the A/A twin is SDPA itself, the spin controls pass the gate and cost time."""

import time

import pytest
import torch

from attn_analysis.measure import candidates as cands
from attn_analysis.measure import controls
from attn_analysis.configs import Config

TINY = Config(1, 2, 33, 64)


def test_controls_are_registered():
    for name in controls.CONTROL_NAMES:
        assert name in cands.CANDIDATES
    assert controls.spin_name(2500) == "sdpa_spin2500"


@pytest.mark.parametrize("name", controls.CONTROL_NAMES)
def test_controls_pass_the_correctness_gate(name):
    built = cands.build(name, TINY, "cpu")
    result = cands.check(built, TINY, "cpu", seed=11, name=name)
    assert result.passed, result.reason


def test_twin_computes_what_sdpa_computes():
    q, k, v = cands.make_inputs(TINY, "cpu", seed=3)
    twin = cands.build("sdpa_twin", TINY, "cpu").fn(q, k, v)
    base = cands.build("sdpa", TINY, "cpu").fn(q, k, v)
    assert torch.equal(twin, base)


def test_cpu_spin_waits_at_least_the_requested_time():
    start = time.perf_counter_ns()
    controls._spin_cpu(2_000_000)
    assert time.perf_counter_ns() - start >= 2_000_000
