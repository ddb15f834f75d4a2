"""scripts/ncu_stalls_by_pc.py: where a kernel's warps stall, from ncu's source page (CPU)."""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("ncu_stalls_by_pc",
                                                  ROOT / "scripts" / "ncu_stalls_by_pc.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


HEADER = '"Address","Source","# Samples","Instructions Executed","stall_barrier","stall_wait"'


def _export(*kernels):
    lines = []
    for name, rows in kernels:
        lines += [f'"Kernel Name","{name}",', HEADER]
        lines += [f'"0x{i:x}","{src}","{n}","{ex}","{bar}","0"'
                  for i, (src, n, ex, bar) in enumerate(rows)]
    return "\n".join(lines) + "\n"


def test_summary_splits_idle_warps_from_wgmma_waits(tmp_path):
    mod = _script()
    text = _export(
        ("ours", [("BAR.SYNC.DEFER_BLOCKING 0x1", 0, 264, 0), ("NOP", 30, 264, 30),
                  ("HGMMA.64x128x16.F32 R24", 5, 100, 0),
                  ("WARPGROUP.DEPBAR.LE gsb0, 0x0", 12, 100, 7), ("FMUL R1, R2, R3", 9, 50, 2)]),
        ("theirs", [("WARPGROUP.DEPBAR.LE gsb0, 0x1", 20, 10, 20), ("NOP", 4, 10, 1)]))
    ours, theirs = (mod.summary(k) for k in mod.kernels(text))
    assert ours == {"name": "ours", "samples": 56, "barrier": 39,
                    "barrier_after_switch_loop": 30, "barrier_at_wgmma_wait": 7,
                    "instructions_executed": 778}
    assert theirs["barrier_after_switch_loop"] == 0 and theirs["barrier_at_wgmma_wait"] == 20
    path = tmp_path / "x.csv.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(text)
    assert mod.read_text(str(path)) == text


def test_refuses_what_is_not_a_source_page():
    with pytest.raises(ValueError, match="`text`"):
        _script().kernels('"ID","Kernel Name"\n"0","x"\n')


def test_recorded_export_gives_the_notes_table():
    """data/checks/gluon_stalls_h200_source.csv.gz: most of fa3_n128_s3's barrier samples
    sit after the switch-loop barrier, none of cuDNN's; cuDNN's sit at wgmma waits."""
    mod = _script()
    got = [mod.summary(k) for k in mod.kernels(mod.read_text(
        str(ROOT / "data" / "checks" / "gluon_stalls_h200_source.csv.gz")))]
    ours, cudnn = got[0], got[-1]
    assert ours["name"] == "_gluon_attn_fwd" and "cudnn" in cudnn["name"]
    assert ours["barrier_after_switch_loop"] > ours["barrier"] / 2
    assert cudnn["barrier_after_switch_loop"] == 0
    assert cudnn["barrier_at_wgmma_wait"] > cudnn["barrier"] / 2
