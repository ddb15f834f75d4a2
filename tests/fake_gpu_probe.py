"""A test double (a plugin) that records, in its build's info, the CUDA_VISIBLE_DEVICES
its trial process saw and when its build began and ended (it sleeps 1.5 s there and 50 ms a call), so that a test
can tell which fake GPU each process was pinned to and whether two processes overlapped."""

import math
import os
import time

import torch

from attn_analysis.measure import candidates as cands


def _probe(config, device):
    started = time.time()
    time.sleep(1.5)  # a build long enough that processes started together overlap in it

    def fn(q, k, v):
        time.sleep(0.05)
        return torch.softmax((q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1]), dim=-1) @ v
    return cands.Built(fn, {"pin": os.environ.get("CUDA_VISIBLE_DEVICES"),
                            "build_window": [started, time.time()]})


if "fake_gpu_probe" not in cands.CANDIDATES:
    cands.register(cands.Candidate("fake_gpu_probe", "test double: records its GPU pin",
                                   _probe, devices=cands.DEVICES))
