"""Tests for attn_analysis.reference and data/reference/l4_reported.csv."""

import re
from pathlib import Path

import pandas as pd
import pytest

from attn_analysis.analyse import reference as ref, workload
from attn_analysis.configs import Config, matrix

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"
needs_seeds = pytest.mark.skipif(not SEEDS.is_dir(),
                                 reason=f"original reports not found at {SEEDS}")


@pytest.fixture(scope="module")
def table():
    return ref.load_reported()


def values(table, quantity, source=None, **shape):
    t = table[table["quantity"] == quantity]
    if source is not None:
        t = t[t["source_file"].str.startswith(source)]
    for k, v in shape.items():
        t = t[t[k] == v]
    return t


def test_loads_typed_and_as_reported(table):
    assert list(table.columns) == list(ref.COLUMNS)
    assert len(table) > 250
    assert (table["status"] == "as reported").all()
    assert table["value"].dtype == float
    assert str(table["batch"].dtype) == "Int64"
    assert set(table["source_file"]) == set(ref.SEED_FILES)


def test_s512_median_spread_keeps_every_source(table):
    med = values(table, "median_latency_ms", batch=32, heads=8, seq_len=512, head_dim=64)
    by_file = med.groupby("source_file")["value"].apply(set).to_dict()
    assert {0.3195} <= by_file["000_44c3bd26a4df8292.txt"]
    assert {0.3210} <= by_file["001_0e44ae329ee121b7.txt"]
    assert {0.3205, 0.3251, 0.3277} <= by_file["002_9fc1ab7010bcab52.txt"]
    assert {0.3251, 0.3350} <= by_file["004_1779078fa30ca0a4.txt"]
    backends = set(med.loc[med["value"] == 0.3205, "backend"])
    assert backends == {"auto", "flash"}


def test_fixed_shape_statistics_of_000(table):
    got = {q: set(values(table, q, "000", seq_len=512)["value"])
           for q in ("n_samples", "mean_latency_ms", "std_latency_ms", "min_latency_ms",
                     "max_latency_ms", "ci_low_ms", "ci_high_ms", "hedges_g", "p_value")}
    assert {100} <= got["n_samples"]
    assert got["mean_latency_ms"] == {0.3287} and got["std_latency_ms"] == {0.0292}
    assert got["min_latency_ms"] == {0.3133} and got["max_latency_ms"] == {0.5263}
    assert {0.3185, 0.4940} <= got["ci_low_ms"] and {0.3210, 0.4972} <= got["ci_high_ms"]
    assert got["hedges_g"] == {0.0} and got["p_value"] == {1.0}
    me = values(table, "median_latency_ms", "000")
    assert set(me.loc[me["backend"] == "memory_efficient", "value"]) == {0.4956}


@pytest.mark.parametrize("cfg", matrix("reports-v1"), ids=lambda c: c.key)
def test_001_matrix_complete_and_consistent(table, cfg):
    shape = dict(batch=cfg.batch, heads=cfg.heads, seq_len=cfg.seq_len, head_dim=cfg.head_dim)
    sweep = table[table["source_section"].str.contains(" Sweep ")]  # the three matrix tables
    one = {q: values(sweep, q, "001", **shape)["value"]
           for q in ("median_latency_ms", "ci_low_ms", "ci_high_ms", "gflops", "bandwidth_gbs")}
    for q, v in one.items():
        assert len(set(v)) == 1, (cfg.key, q, list(v))
    med, lo, hi = (one[q].iloc[0] for q in ("median_latency_ms", "ci_low_ms", "ci_high_ms"))
    assert lo <= med <= hi
    # Their throughput and bandwidth columns are flops/median and 4*B*H*S*D*2/median:
    # the same counts as workload.flops and workload.min_bytes (to their rounding).
    assert workload.tflops_rate(workload.flops(cfg), med) * 1e3 == pytest.approx(
        one["gflops"].iloc[0], rel=5e-3)
    assert workload.gbs_rate(workload.min_bytes(cfg), med) == pytest.approx(
        one["bandwidth_gbs"].iloc[0], rel=5e-3, abs=0.5)


def test_roofline_table_flops_right_bytes_wrong(table):
    for s in (128, 256, 512, 1024, 2048):
        cfg = Config(32, 8, s)
        fl = values(table, "flops", "001", seq_len=s)["value"].item()
        by = values(table, "bytes", "001", seq_len=s)["value"].item()
        ai = values(table, "arithmetic_intensity", "001", seq_len=s)["value"].item()
        assert fl == pytest.approx(workload.flops(cfg), rel=5e-3)
        assert by / workload.min_bytes(cfg) == pytest.approx(0.381, abs=0.01)  # not the minimum
        assert ai == pytest.approx(fl / by, rel=5e-3)


def test_002_backend_and_shapes_004_configs(table):
    p2 = values(table, "median_latency_ms", "002", seq_len=512, batch=32)
    assert set(p2.loc[p2["backend"] == "memory_efficient", "value"]) == {0.4956, 0.496}
    for s, med in [(128, 0.0707), (256, 0.1044), (1024, 1.3317)]:
        assert med in set(values(table, "median_latency_ms", "002", seq_len=s)["value"])
    for shape, med in [((4, 8, 256), 0.0492), ((16, 16, 1024), 1.3235), ((32, 8, 128), 0.0512)]:
        b, h, s = shape
        assert set(values(table, "median_latency_ms", "004", batch=b, heads=h, seq_len=s)["value"]) == {med}


def test_literature_comparison_of_001(table):
    a100 = values(table, "median_latency_ms", "001", batch=16, heads=16, seq_len=512)
    assert a100["value"].item() == 0.15 and a100["device"].item().startswith("NVIDIA A100")
    assert set(values(table, "slowdown", "001")["value"]) == {2.13}
    assert set(values(table, "assumed_peak_tflops", "001")["value"]) == {30, 312}


# ---------------------------------------------------------------- against the seed files

def _sections(text):
    """(heading line, body) pairs; '#' lines inside ``` fences are not headings."""
    out, fence, head, body = [], False, None, []
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        if not fence and line.startswith("#"):
            if head is not None:
                out.append((head, "\n".join(body)))
            head, body = line, []
        else:
            body.append(line)
    if head is not None:
        out.append((head, "\n".join(body)))
    return out


@needs_seeds
def test_seed_files_match_readme():
    names = re.findall(r"^\|\s*(\d{3}_[0-9a-f]{16}\.txt)\s*\|", (SEEDS / "README.md").read_text(),
                       flags=re.M)
    assert tuple(names) == ref.SEED_FILES


@needs_seeds
def test_every_value_is_printed_in_its_section(table):
    cache = {f: _sections((SEEDS / f).read_text(encoding="utf-8", errors="replace"))
             for f in ref.SEED_FILES}
    missing = []
    for i, row in table.iterrows():
        bodies = [b for h, b in cache[row["source_file"]] if row["source_section"] in h]
        pat = re.compile(r"(?<![\d.,])" + re.escape(row["reported_text"]) + r"(?!\d)")
        if not bodies or not any(pat.search(b) for b in bodies):
            missing.append((i + 2, row["source_file"], row["source_section"], row["reported_text"]))
    assert not missing, missing[:10]


# ---------------------------------------------------------------- refusal of bad copies

@pytest.fixture
def raw():
    return pd.read_csv(ref.DEFAULT_PATH, dtype=str, keep_default_na=False)


def write(tmp_path, df):
    p = tmp_path / "copy.csv"
    df.to_csv(p, index=False)
    return p


@pytest.mark.parametrize("column,bad,match", [
    ("status", "measured", r"`status` must be 'as reported' on every row; lines 5 differ"),
    ("source_file", "005_0000000000000000.txt", r"`source_file` must be one of"),
    ("value", "abc", r"`value` must hold finite numbers; lines 5"),
    ("value", "inf", r"`value` must hold finite numbers"),
    ("value", "0.9999", r"`value` must equal `reported_text`"),
    ("quantity", "latency", r"`quantity` must be one of"),
    ("unit", "s", r"`unit` must match the quantity"),
    ("backend", "cudnn", r"`backend` must be one of"),
    ("dtype", "float32", r"`dtype` must be one of"),
    ("seq_len", "0", r"`seq_len` must be empty or a positive integer"),
    ("batch", "3.5", r"`batch` must be empty or a positive integer"),
    ("device", " ", r"`device` must not be empty"),
])
def test_corrupted_copy_refused(tmp_path, raw, column, bad, match):
    raw.loc[3, column] = bad
    with pytest.raises(ValueError, match=match):
        ref.load_reported(write(tmp_path, raw))


def test_intact_copy_loads(tmp_path, raw):
    pd.testing.assert_frame_equal(ref.load_reported(write(tmp_path, raw)), ref.load_reported())


def test_schema_and_file_refused(tmp_path, raw):
    with pytest.raises(ValueError, match=r"missing \['software'\], unexpected \[\]"):
        ref.load_reported(write(tmp_path, raw.drop(columns="software")))
    with pytest.raises(ValueError, match=r"unexpected \['extra'\]"):
        ref.load_reported(write(tmp_path, raw.assign(extra="x")))
    with pytest.raises(ValueError, match=r"holds no rows"):
        ref.load_reported(write(tmp_path, raw.iloc[:0]))
    with pytest.raises(ValueError, match=r"`path` must be an existing CSV file"):
        ref.load_reported(tmp_path / "absent.csv")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match=r"not a readable CSV table"):
        ref.load_reported(empty)
