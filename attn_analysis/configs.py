"""Attention configurations and the named, versioned experiment matrices."""

from __future__ import annotations

import dataclasses
import numbers
import re

import numpy as np

DTYPES = ("float16", "bfloat16")
HEAD_DIMS = (64, 128)
DTYPE_SHORT = {"float16": "fp16", "bfloat16": "bf16"}
_SHORT_DTYPE = {v: k for k, v in DTYPE_SHORT.items()}


def _positive_int_iv(name: str, value) -> int:
    """Return ``value`` as a plain int > 0 (numpy integers too), else raise ValueError."""
    if (isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral)
            or value <= 0):
        raise ValueError(f"`{name}` must be a positive integer; got {value!r}.")
    return int(value)


def _config_iv(batch, heads, seq_len, head_dim, dtype, causal) -> dict:
    """Check and normalise every field of ``Config`` to plain Python values."""
    out = {name: _positive_int_iv(name, value) for name, value in
           (("batch", batch), ("heads", heads), ("seq_len", seq_len), ("head_dim", head_dim))}
    if out["head_dim"] not in HEAD_DIMS:
        raise ValueError(f"`head_dim` must be one of {HEAD_DIMS}; got {head_dim!r}.")
    if not (isinstance(dtype, str) and dtype in DTYPES):
        raise ValueError(f"`dtype` must be one of {DTYPES}; got {dtype!r}.")
    if not isinstance(causal, (bool, np.bool_)):
        raise ValueError(f"`causal` must be True or False; got {causal!r}.")
    out.update(dtype=str(dtype), causal=bool(causal))
    return out


@dataclasses.dataclass(frozen=True, order=True)
class Config:
    """One forward-attention workload: Q, K, V of shape (batch, heads, seq_len, head_dim).

    Validated when built: sizes are positive integers, ``dtype`` is one of
    ``DTYPES``, ``head_dim`` one of ``HEAD_DIMS`` and ``causal`` a bool. numpy integers
    and bools (as pandas hands them out) are accepted and stored as plain ``int`` and
    ``bool``, so equal configurations compare, hash and serialise alike; floats (even
    ``32.0``) and bools as sizes are refused.
    """

    batch: int
    heads: int
    seq_len: int
    head_dim: int = 64
    dtype: str = "float16"
    causal: bool = False

    def __post_init__(self):
        fields = _config_iv(self.batch, self.heads, self.seq_len, self.head_dim, self.dtype,
                            self.causal)
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    @property
    def key(self) -> str:
        """Stable text key, e.g. ``B32-H8-S512-D64-fp16`` (``-causal`` appended if causal)."""
        text = (f"B{self.batch}-H{self.heads}-S{self.seq_len}-D{self.head_dim}-"
                f"{DTYPE_SHORT[self.dtype]}")
        return text + ("-causal" if self.causal else "")

    @classmethod
    def from_key(cls, key: str) -> "Config":
        """Parse a key made by :attr:`key`; raise ValueError on anything else.

        Only the canonical spelling is accepted (``from_key(k).key == k``): no leading
        zeros, no other digits than ASCII, sizes and head_dim as ``Config`` allows.
        """
        match = (re.fullmatch(r"B(\d+)-H(\d+)-S(\d+)-D(\d+)-(fp16|bf16)(-causal)?", key)
                 if isinstance(key, str) else None)
        if match is None:
            raise ValueError(
                f"`config` must look like 'B32-H8-S512-D64-fp16[-causal]'; got {key!r}.")
        b, h, s, d, dt, causal = match.groups()
        config = cls(int(b), int(h), int(s), int(d), _SHORT_DTYPE[dt], causal is not None)
        if config.key != key:
            raise ValueError(f"`config` must be spelled as Config.key spells it "
                             f"({config.key!r}); got {key!r}.")
        return config

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _reports_v1() -> tuple[Config, ...]:
    """The original reports' ten configurations (B=32, H=8, S=512, D=64 is the target)."""
    seq = [Config(32, 8, s) for s in (128, 256, 512, 1024, 2048)]
    batch = [Config(b, 8, 512) for b in (8, 16, 64)]
    heads = [Config(32, h, 512) for h in (4, 16)]
    return tuple(seq + batch + heads)


# Named experiment matrices. A name never changes meaning: a changed matrix gets a new
# name (``-v2``), so a recorded run's matrix name identifies its configurations.
MATRICES: dict[str, tuple[Config, ...]] = {
    "reports-v1": _reports_v1(),
    "fixed-v1": (Config(32, 8, 512),),
    "long-v1": (Config(32, 8, 4096), Config(32, 8, 8192),
                Config(32, 8, 512, 128), Config(32, 8, 2048, 128)),
    # Tiny shapes for CPU smoke runs and tests.
    "tiny-v1": (Config(1, 2, 16, 64), Config(2, 2, 33, 64)),
}

TARGET = Config(32, 8, 512)


def matrix(name: str) -> tuple[Config, ...]:
    """Return the configurations of a named matrix (a name in ``MATRICES``)."""
    if not isinstance(name, str) or name not in MATRICES:
        raise ValueError(f"`matrix` must be one of {sorted(MATRICES)}; got {name!r}.")
    return MATRICES[name]
