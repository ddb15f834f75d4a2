"""scripts/crossover_ncu.py on a CPU: the kernels it keeps and the record it makes of an
ncu raw export (a small CSV written here in ncu's layout: header, units, one row a kernel)."""

from __future__ import annotations

import csv
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("crossover_ncu", ROOT / "scripts" / "crossover_ncu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_plan_is_the_crossover_at_d64(script):
    assert script.CANDIDATES == ("sdpa_cudnn", "fa4", "fa3")
    keys = [c.key for c in script.SHAPES]
    assert keys == ["B32-H8-S512-D64-fp16", "B32-H8-S2048-D64-fp16", "B8-H8-S2048-D64-fp16"]
    tokens = {c.batch * c.seq_len for c in script.SHAPES if c.batch != 32}
    assert tokens == {32 * 512}  # the batch that keeps the target's tokens


def test_the_kernel_filter_keeps_the_three_attention_kernels_and_nothing_else(script):
    regex = re.compile(script.kernel_regex(), re.I)
    for name in ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64",
                 "kernel_cutlass_kernel_flash_attncuteflash_fwd_sm90FlashAttentionForwardSm90",
                 "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<"):
        assert regex.search(name), name
    for name in ("void at::native::vectorized_elementwise_kernel<4, FillFunctor>", "Memset"):
        assert not regex.search(name), name


def _raw_csv(path: Path, rows: list[dict]) -> None:
    header = ["ID", "Kernel Name", "Grid Size", "Block Size", *rows[0]]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["==PROF== a line ncu prints first"])
        w.writerow(header)
        w.writerow(["", "", "", "", *["usecond" if k == "gpu__time_duration.sum" else "%"
                                      for k in rows[0]]])
        for i, row in enumerate(rows):
            w.writerow([i, f"kernel{i}", "(132, 1, 1)", "(384, 1, 1)", *row.values()])


def test_summarise_picks_tensor_and_xu_pipes_stalls_and_waves(script, tmp_path):
    metrics = {"gpu__time_duration.sum": "101.5", "launch__waves_per_multiprocessor": "1.94",
               "sm__warps_active.avg.pct_of_peak_sustained_active": "18.2",
               "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active": "61.0",
               "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active": "33.5",
               "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active": "12.0",
               **{f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio": str(v)
                  for s, v in (("barrier", 3.0), ("long_scoreboard", 0.5), ("wait", 1.25),
                               ("math_pipe_throttle", 2.0), ("selected", 1.0),
                               ("short_scoreboard", 0.75))}}
    raw = tmp_path / "raw.csv"
    _raw_csv(raw, [metrics, dict(metrics, **{"launch__waves_per_multiprocessor": "0.49"})])
    recs = script.summarise(str(raw), ["fa4@B32-H8-S512-D64-fp16", "fa3@B32-H8-S512-D64-fp16"])
    first = recs[0]
    assert first["label"] == "fa4@B32-H8-S512-D64-fp16" and recs[1]["waves_per_sm"] == 0.49
    assert first["time"] == 101.5 and first["time_unit"] == "usecond"
    assert first["tensor_pipe_pct"] == {"pipe_tensor_op_gmma_cycles_active": 61.0}
    assert first["xu_pipe_pct"] == {"inst_executed_pipe_xu": 33.5}
    assert list(first["top_stalls_cycles_per_issue"]) == ["barrier", "math_pipe_throttle",
                                                          "wait", "selected", "short_scoreboard"]
    # labels are dropped, not shifted, when the launches and the kernels do not pair up
    assert script.summarise(str(raw), ["only-one"])[0]["label"] is None
