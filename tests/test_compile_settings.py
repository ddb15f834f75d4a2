"""How a sweep process runs torch.compile (``measure.compile_settings``)."""

import torch
import torch._inductor.config as inductor_config

from attn_analysis.measure import compile_settings


def test_inductor_compiles_in_process_unless_the_environment_says(monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    monkeypatch.setattr(inductor_config, "compile_threads", 16)
    assert compile_settings.compile_in_process() == 1
    assert inductor_config.compile_threads == 1
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "4")  # the user's choice stands
    monkeypatch.setattr(inductor_config, "compile_threads", 4)
    assert compile_settings.compile_in_process() == 4


def test_recompile_limits_are_raised_never_lowered(monkeypatch):
    cfg = torch._dynamo.config
    monkeypatch.setattr(cfg, "recompile_limit", 8)
    compile_settings.raise_recompile_limits()
    assert cfg.recompile_limit == compile_settings.RECOMPILE_LIMIT
    monkeypatch.setattr(cfg, "recompile_limit", 10_000)
    compile_settings.raise_recompile_limits()
    assert cfg.recompile_limit == 10_000


def test_prepare_returns_the_threads_a_candidate_records(monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    assert compile_settings.prepare() == 1
