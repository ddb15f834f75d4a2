"""The device's memory (``measure.device_memory``): read in a child process, once per
process and visible set, begun early without importing torch, and None where it cannot
be read."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from attn_analysis.measure import device_memory


class FakeChild:
    """A stand-in for the reading child: what it prints and how it exits."""
    started: list = []

    def __init__(self, cmd, prints="85899345920\n", returncode=0, **popen_kwargs):
        self.cmd, self._stdout, self.returncode = cmd, prints, None
        self._code = returncode
        FakeChild.started.append(self)

    def communicate(self, timeout=None):
        self.returncode = self._code
        return self._stdout, None

    def kill(self):
        pass


@pytest.fixture
def children(monkeypatch):
    """Children recorded instead of started; nothing read or pending before the test."""
    FakeChild.started = []
    monkeypatch.setattr(device_memory, "_READ", {})
    monkeypatch.setattr(device_memory, "_PENDING", {})
    monkeypatch.setattr(subprocess, "Popen", FakeChild)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    return FakeChild.started


def test_the_host_and_a_missing_gpu():
    host = device_memory.read("cpu")
    assert isinstance(host, int) and host > 2**28  # this machine has more than 256 MiB
    if not torch.cuda.is_available():
        assert device_memory.read("cuda") is None


def test_read_in_a_child_so_cuda_stays_uninitialised_here(children, monkeypatch):
    # initialising CUDA here would stop a later env.lock() from setting
    # CUBLAS_WORKSPACE_CONFIG (a notebook measures, then locks)
    assert device_memory.read("cuda") == 80 * 2**30
    assert children[0].cmd[0] == sys.executable and "total_memory" in children[0].cmd[-1]
    assert not torch.cuda.is_initialized()
    monkeypatch.setattr(device_memory, "_READ", {})
    monkeypatch.setattr(subprocess, "Popen", lambda cmd, **kw: FakeChild(
        cmd, prints="", returncode=1))
    assert device_memory.read("cuda") is None


def test_read_once_per_process_and_visible_set(children, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert device_memory.read("cuda") == device_memory.read("cuda") == 80 * 2**30
    assert len(children) == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # another GPU: read again
    assert device_memory.read("cuda") == 80 * 2**30
    assert len(children) == 2
    monkeypatch.setattr(subprocess, "Popen", lambda cmd, **kw: FakeChild(
        cmd, prints="no CUDA", returncode=1))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    assert device_memory.read("cuda") is None
    assert device_memory.read("cuda") is None
    assert len(children) == 4  # a failure is not kept: the next call tries again


def test_a_read_begun_early_is_collected_once(children, monkeypatch, tmp_path):
    driver = tmp_path / "version"
    monkeypatch.setattr(device_memory, "NVIDIA_DRIVER", str(driver))
    assert device_memory.start_read() is False and children == []  # no driver here
    driver.write_text("NVRM version: 580")
    assert device_memory.start_read() is True
    assert device_memory.start_read() is False  # one read under way is enough
    assert len(children) == 1 and children[0].returncode is None  # not waited for yet
    assert device_memory.read("cuda") == 80 * 2**30
    assert len(children) == 1 and device_memory._PENDING == {}
    assert device_memory.start_read() is False  # kept: nothing to begin


def test_a_child_that_cannot_start_reads_none(children, monkeypatch, tmp_path):
    def cannot(cmd, **kwargs):
        raise OSError("no such interpreter")
    monkeypatch.setattr(subprocess, "Popen", cannot)
    driver = tmp_path / "version"
    driver.write_text("x")
    monkeypatch.setattr(device_memory, "NVIDIA_DRIVER", str(driver))
    assert device_memory.start_read() is False
    assert device_memory.read("cuda") is None


def test_torch_free_at_import():
    """The command line begins the read before it imports torch."""
    code = ("import sys; from attn_analysis.measure import device_memory, run_lock, sweep; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
