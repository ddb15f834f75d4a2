"""Attention configurations and the named, versioned experiment matrices."""

from __future__ import annotations

import dataclasses
import re

DTYPES = ("float16", "bfloat16")
HEAD_DIMS = (64, 128)
DTYPE_SHORT = {"float16": "fp16", "bfloat16": "bf16"}
_SHORT_DTYPE = {v: k for k, v in DTYPE_SHORT.items()}


def _positive_int_iv(name: str, value) -> int:
    """Return ``value`` as an int, or raise ValueError naming the parameter."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"`{name}` must be a positive integer; got {value!r}.")
    return value


@dataclasses.dataclass(frozen=True, order=True)
class Config:
    """One forward-attention workload: Q, K, V of shape (batch, heads, seq_len, head_dim).

    Validated when built: sizes are positive integers, ``dtype`` is one of
    ``DTYPES`` and ``head_dim`` one of ``HEAD_DIMS``.
    """

    batch: int
    heads: int
    seq_len: int
    head_dim: int = 64
    dtype: str = "float16"
    causal: bool = False

    def __post_init__(self):
        for name in ("batch", "heads", "seq_len", "head_dim"):
            _positive_int_iv(name, getattr(self, name))
        if self.head_dim not in HEAD_DIMS:
            raise ValueError(f"`head_dim` must be one of {HEAD_DIMS}; got {self.head_dim!r}.")
        if self.dtype not in DTYPES:
            raise ValueError(f"`dtype` must be one of {DTYPES}; got {self.dtype!r}.")
        if not isinstance(self.causal, bool):
            raise ValueError(f"`causal` must be True or False; got {self.causal!r}.")

    @property
    def key(self) -> str:
        """Stable text key, e.g. ``B32-H8-S512-D64-fp16`` (``-causal`` appended if causal)."""
        text = (f"B{self.batch}-H{self.heads}-S{self.seq_len}-D{self.head_dim}-"
                f"{DTYPE_SHORT[self.dtype]}")
        return text + ("-causal" if self.causal else "")

    @classmethod
    def from_key(cls, key: str) -> "Config":
        """Parse a key made by :attr:`key`; raise ValueError on anything else."""
        match = re.fullmatch(r"B(\d+)-H(\d+)-S(\d+)-D(\d+)-(fp16|bf16)(-causal)?", key)
        if match is None:
            raise ValueError(
                f"`config` must look like 'B32-H8-S512-D64-fp16[-causal]'; got {key!r}.")
        b, h, s, d, dt, causal = match.groups()
        return cls(int(b), int(h), int(s), int(d), _SHORT_DTYPE[dt], causal is not None)

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
    """Return the configurations of a named matrix."""
    if name not in MATRICES:
        raise ValueError(f"`matrix` must be one of {sorted(MATRICES)}; got {name!r}.")
    return MATRICES[name]
