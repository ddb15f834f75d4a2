"""Configurations: validation when built, the text key, and the named matrices."""

import dataclasses

import numpy as np
import pytest

from attn_analysis import configs
from attn_analysis.configs import Config

SIZES = ("batch", "heads", "seq_len", "head_dim")


def make_config(**changes):
    """Builder: the target shape (B=32, H=8, S=512, D=64, fp16, not causal) with changes."""
    return Config(**{**dict(batch=32, heads=8, seq_len=512, head_dim=64, dtype="float16",
                            causal=False), **changes})


# ---------------------------------------------------------------- defaults

def test_defaults_pinned():
    fields = {f.name: f.default for f in dataclasses.fields(Config)}
    assert fields["head_dim"] == 64 and fields["dtype"] == "float16"
    assert fields["causal"] is False
    assert Config(32, 8, 512) == make_config() == configs.TARGET
    assert configs.DTYPES == ("float16", "bfloat16") and configs.HEAD_DIMS == (64, 128)


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize("name", SIZES)
@pytest.mark.parametrize("value", [0, -1, -64, 32.0, 64.5, True, False, "32", None,
                                   np.float64(64.0)])
def test_sizes_must_be_positive_integers(name, value):
    with pytest.raises(ValueError, match=rf"`{name}` must be a positive integer; got "):
        make_config(**{name: value})


@pytest.mark.parametrize("head_dim", [32, 80, 96, 256, 65])
def test_head_dim_outside_allowed_values(head_dim):
    with pytest.raises(ValueError, match=r"`head_dim` must be one of \(64, 128\); got "
                                         rf"{head_dim}"):
        make_config(head_dim=head_dim)


@pytest.mark.parametrize("dtype", ["float32", "fp16", "bf16", "Float16", "", None, np.float16])
def test_unknown_dtype(dtype):
    with pytest.raises(ValueError, match=r"`dtype` must be one of \('float16', 'bfloat16'\)"):
        make_config(dtype=dtype)


@pytest.mark.parametrize("causal", [0, 1, "True", "yes", None, 1.0])
def test_causal_must_be_a_bool(causal):
    with pytest.raises(ValueError, match=r"`causal` must be True or False; got "):
        make_config(causal=causal)


@pytest.mark.parametrize("kind", [np.int64, np.int32, np.uint16, np.int8])
def test_numpy_integers_accepted_and_normalised(kind):
    # Values read from pandas are numpy scalars; they are accepted, stored as plain int.
    c = Config(kind(32), kind(8), kind(64), kind(64), np.str_("bfloat16"), np.bool_(True))
    assert c == Config(32, 8, 64, 64, "bfloat16", True)
    assert hash(c) == hash(Config(32, 8, 64, 64, "bfloat16", True))
    assert all(type(getattr(c, n)) is int for n in SIZES)
    assert type(c.dtype) is str and type(c.causal) is bool
    assert c.key == "B32-H8-S64-D64-bf16-causal"


def test_numpy_integer_sizes_still_checked():
    with pytest.raises(ValueError, match="`batch` must be a positive integer"):
        make_config(batch=np.int64(0))
    with pytest.raises(ValueError, match="`head_dim` must be one of"):
        make_config(head_dim=np.int64(96))
    with pytest.raises(ValueError, match="`heads` must be a positive integer"):
        make_config(heads=np.bool_(True))


def test_config_is_frozen_and_ordered():
    c = make_config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.batch = 16
    assert sorted([make_config(batch=64), make_config(batch=8)])[0].batch == 8


# ---------------------------------------------------------------- key

@pytest.mark.parametrize("config, key", [
    (Config(32, 8, 512), "B32-H8-S512-D64-fp16"),
    (Config(32, 8, 512, 128, "bfloat16"), "B32-H8-S512-D128-bf16"),
    (Config(1, 2, 16, causal=True), "B1-H2-S16-D64-fp16-causal"),
    (Config(2, 2, 33, 128, "bfloat16", True), "B2-H2-S33-D128-bf16-causal"),
])
def test_key_round_trip(config, key):
    assert config.key == key
    back = Config.from_key(key)
    assert back == config and back.key == key
    assert back.as_dict() == dataclasses.asdict(config)


def test_every_matrix_config_round_trips():
    for name, cfgs in configs.MATRICES.items():
        for c in cfgs:
            assert Config.from_key(c.key) == c, name


@pytest.mark.parametrize("key", [
    "", "B32-H8-S512-D64", "B32-H8-S512-D64-fp32", "b32-h8-s512-d64-fp16",
    "B32-H8-S512-D64-fp16-causal-x", "B32-H8-S512-fp16", "B32_H8_S512_D64_fp16",
    " B32-H8-S512-D64-fp16", "B32-H8-S512-D64-fp16\n", "B-1-H8-S512-D64-fp16",
    "B32-H8-S512-D64-float16", "B32.0-H8-S512-D64-fp16",
])
def test_from_key_malformed(key):
    with pytest.raises(ValueError, match=r"`config` must look like "
                                         r"'B32-H8-S512-D64-fp16\[-causal\]'"):
        Config.from_key(key)


@pytest.mark.parametrize("key", [None, 32, b"B32-H8-S512-D64-fp16"])
def test_from_key_not_a_string(key):
    with pytest.raises(ValueError, match="`config` must look like"):
        Config.from_key(key)


@pytest.mark.parametrize("key, match", [
    ("B0-H8-S512-D64-fp16", "`batch` must be a positive integer"),
    ("B32-H0-S512-D64-fp16", "`heads` must be a positive integer"),
    ("B32-H8-S512-D96-fp16", r"`head_dim` must be one of \(64, 128\)"),
    ("B032-H8-S512-D64-fp16", r"`config` must be spelled as Config.key spells it "
                              r"\('B32-H8-S512-D64-fp16'\)"),
    ("B3\u0662-H8-S512-D64-fp16", "`config` must be spelled as Config.key spells it"),
])
def test_from_key_well_formed_but_invalid(key, match):
    with pytest.raises(ValueError, match=match):
        Config.from_key(key)


# ---------------------------------------------------------------- matrices

@pytest.mark.parametrize("name", ["reports-v2", "", "REPORTS-V1", None, 1])
def test_unknown_matrix_lists_known_names(name):
    known = (r"\['confirm-v1', 'fixed-v1', 'long-grid-v1', 'long-v1', 'long-v2', 'reports-v1', "
             r"'tiny-v1'\]")
    assert sorted(configs.MATRICES) == ["confirm-v1", "fixed-v1", "long-grid-v1", "long-v1",
                                        "long-v2", "reports-v1", "tiny-v1"]
    with pytest.raises(ValueError, match=rf"`matrix` must be one of {known}; got "):
        configs.matrix(name)


def test_long_grid_v1_is_the_fa3_geometry_from_128_to_8192():
    grid = configs.matrix("long-grid-v1")
    assert len(grid) == 16 and len(set(grid)) == 16
    assert {c.seq_len for c in grid} == {128, 512, 2048, 8192}
    assert {(c.head_dim, c.causal) for c in grid} == {(64, False), (64, True), (128, False),
                                                     (128, True)}
    # 16k tokens per batch and hidden size 2048 (FlashAttention-3's evaluation shapes)
    assert all(c.batch * c.seq_len == 16384 and c.heads * c.head_dim == 2048 for c in grid)


def test_reports_v1_is_the_original_ten():
    got = configs.matrix("reports-v1")
    expected = ([(32, 8, s) for s in (128, 256, 512, 1024, 2048)]
                + [(b, 8, 512) for b in (8, 16, 64)]
                + [(32, h, 512) for h in (4, 16)])
    assert len(got) == 10 and len(set(got)) == 10
    assert [(c.batch, c.heads, c.seq_len) for c in got] == expected
    assert all(c.head_dim == 64 and c.dtype == "float16" and not c.causal for c in got)
    assert configs.TARGET in got
    assert [c.key for c in got] == [
        "B32-H8-S128-D64-fp16", "B32-H8-S256-D64-fp16", "B32-H8-S512-D64-fp16",
        "B32-H8-S1024-D64-fp16", "B32-H8-S2048-D64-fp16", "B8-H8-S512-D64-fp16",
        "B16-H8-S512-D64-fp16", "B64-H8-S512-D64-fp16", "B32-H4-S512-D64-fp16",
        "B32-H16-S512-D64-fp16"]


def test_matrix_returns_the_named_tuple():
    for name, cfgs in configs.MATRICES.items():
        assert configs.matrix(name) is cfgs and isinstance(cfgs, tuple)
        assert all(isinstance(c, Config) for c in cfgs)


def test_parse_shapes():
    assert configs.parse_shapes("2,2,64;1,2,16,128") == (Config(2, 2, 64),
                                                           Config(1, 2, 16, 128))
    assert configs.parse_shapes("") == ()
    assert len(configs.parse_shapes("reports-v1")) == 10
    with pytest.raises(ValueError, match="`shapes` entries must look like"):
        configs.parse_shapes("2,2")
    with pytest.raises(ValueError, match="`shapes` must be a string"):
        configs.parse_shapes(5)
