"""The device's total memory, which the sweep checks every configuration's inputs against
before it writes anything (``sweep.check_fits``).

Torch-free at import: the command line begins the GPU's read (:func:`start_read`) before
it imports torch itself, so that the read's child, the trial processes' fork server and
the command line start their torches at the same time rather than one after another
(each start took 3.5-7.5 s on the GPU machines: ``benchmarks/readme-command/``).

The CUDA device's properties are read in a short child process: reading them in this
process would initialise CUDA here, after which ``env.lock`` can no longer set
``CUBLAS_WORKSPACE_CONFIG`` (a notebook that measures, then locks, would fail). A value
read is kept for the life of this process (per ``CUDA_VISIBLE_DEVICES``): the command
line and the sweep's preflight each ask.
"""

from __future__ import annotations

import os
import subprocess
import sys

__all__ = ["read", "start_read"]

# What the child runs: the current CUDA device's total memory, in bytes.
_CHILD = ("import torch; print(torch.cuda.get_device_properties("
          "torch.cuda.current_device()).total_memory)")
# Present where the NVIDIA kernel driver is loaded (Linux): a cheap sign, read before
# torch is imported, that a CUDA device may be there.
NVIDIA_DRIVER = "/proc/driver/nvidia/version"
# What was read, by CUDA_VISIBLE_DEVICES (failures are not kept), and the children that
# start_read began and nobody has waited for yet.
_READ: dict[str | None, int] = {}
_PENDING: dict[str | None, subprocess.Popen] = {}


def read(device: str) -> int | None:
    """Total memory of ``device``: the current CUDA device's, or the host's physical
    memory for "cpu"; None where it cannot be read. A read that :func:`start_read` began
    is waited for here."""
    if device != "cuda":
        return _host_memory()
    import torch
    if not torch.cuda.is_available():
        return None
    key = os.environ.get("CUDA_VISIBLE_DEVICES")
    if key in _READ:
        return _READ[key]
    proc = _PENDING.pop(key, None) or _start_child()
    text = ""
    if proc is not None:
        try:
            text = proc.communicate(timeout=120)[0] or ""
        except (OSError, ValueError, subprocess.SubprocessError):
            proc.kill()
            proc.communicate()
    text = text.strip() if proc is not None and proc.returncode == 0 else ""
    if not text.isdigit():
        return None
    _READ[key] = int(text)
    return _READ[key]


def start_read() -> bool:
    """Begin reading the CUDA device's memory in its child now, without importing torch
    here; :func:`read` collects it. Returns whether a read was begun: not where a value
    is kept or a read is under way, nor on a machine without the NVIDIA driver."""
    key = os.environ.get("CUDA_VISIBLE_DEVICES")
    if key in _READ or key in _PENDING or not os.path.exists(NVIDIA_DRIVER):
        return False
    proc = _start_child()
    if proc is None:
        return False
    _PENDING[key] = proc
    return True


def _start_child() -> subprocess.Popen | None:
    try:
        return subprocess.Popen([sys.executable, "-c", _CHILD], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
    except OSError:
        return None


def _host_memory() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (OSError, ValueError):
        return None
