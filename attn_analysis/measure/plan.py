"""What a sweep measures: the :class:`Plan` (configurations, candidates, modes, trials,
device, timing settings, placements, plugins), validated when built, and the settings a
resumed run must share with the run it continues. Torch-free: a plan is built and checked
before anything touches a GPU; :mod:`.sweep` runs it, :mod:`.trial` is one trial process.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math

from .. import _validate, record
from ..configs import MODES, Config, plugin_modules

__all__ = ["SETTINGS_THAT_MUST_MATCH", "PROTOCOL", "DEFAULT_TRIALS", "DEFAULT_PLACEMENTS",
           "DEFAULT_TIMING", "START_METHODS", "SweepError", "Plan", "plan_units"]

SETTINGS_THAT_MUST_MATCH = ("device", "timing", "seed", "deterministic", "placements",
                            "kernel_times", "start_method", "shard")
# Measurement protocol written into every timing unit. 1 (runs before 2026-11-24): one
# allocation of the inputs per candidate per process, candidates one after another.
# 2: ``placements`` fresh allocations per unit behind a random pad, candidates interleaved
# in randomized rounds, the profiler's kernel time per placement.
PROTOCOL = 2


# Protocol 2's calibrated design (book, "Protocol 2"; the calibration chapter measures its
# error rates): 4 processes x 8 placements x 20 samples, 10 ms of warm-up per placement.
# Four processes are the fewest whose power reached 80 % for a call-level control of about
# two margins on the H100 and the H200 (runs *-calibration-v3; two processes: 10 % and 55 %).
DEFAULT_TRIALS = 4
DEFAULT_PLACEMENTS = 8
DEFAULT_TIMING = {"n_samples": 20, "warmup_ms": 10.0}

# How a trial process starts. "forkserver": forked from a server that imported torch and
# the measuring modules once (no CUDA: each trial still starts its own CUDA context,
# allocator and generators), which saves every trial the imports; "spawn": a fresh
# interpreter that imports everything itself, as every run recorded before 2026-11-25 did
# (a recorded plan without the key was spawned: record.RECORDED_START_METHOD).
START_METHODS = ("forkserver", "spawn")


class SweepError(RuntimeError):
    """The sweep cannot go on (for example, a resumed run on a different machine)."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a sweep measures. Validated when built; nothing touches a GPU before that."""

    configs: tuple
    candidates: tuple
    modes: tuple = MODES
    trials: int = DEFAULT_TRIALS
    device: str = "cuda"
    timing: dict = dataclasses.field(default_factory=lambda: dict(DEFAULT_TIMING))
    seed: int = 0
    plugins: tuple = ()
    matrix: str = ""
    profile: bool = True
    ceilings: bool = True
    allow_mixed: bool = False
    # Deterministic algorithms change which kernel SDPA dispatches to (on Hopper they rule
    # out cuDNN attention), so the default measures what a user gets without asking.
    deterministic: bool = False
    # Protocol v2: placements per unit (fresh inputs behind a random pad, graph re-captured),
    # the profiler's kernel time at each placement, and a warm-up before the first round.
    placements: int = DEFAULT_PLACEMENTS
    kernel_times: bool = True
    process_warmup_ms: float = 500.0
    start_method: str = START_METHODS[0]
    # (K, N): this plan records shard K of N only, the trials t with t % N == K - 1
    # (record.shard_trials); None records every trial. ``merge`` joins the N shard runs.
    shard: tuple | None = None

    def __post_init__(self):
        from . import candidates as cands
        if isinstance(self.plugins, (list, tuple)):  # a moved plugin by its current path
            object.__setattr__(self, "plugins", plugin_modules(self.plugins))
        _plugins_iv(self.plugins)
        if not self.configs or not all(isinstance(c, Config) for c in self.configs):
            raise ValueError("`configs` must be a non-empty sequence of Config.")
        _validate.distinct("configs", (c.key for c in self.configs), "a configuration")
        if not self.candidates:
            raise ValueError(f"`candidates` must name at least one of {sorted(cands.CANDIDATES)}.")
        for name in self.candidates:
            cands.get(name)
        _validate.distinct("candidates", self.candidates, "a name")
        for mode in self.modes:
            if mode not in MODES:
                raise ValueError(f"`modes` must be drawn from {MODES}; got {mode!r}.")
        if not self.modes:
            raise ValueError(f"`modes` must name at least one of {MODES}.")
        _validate.distinct("modes", self.modes, "a mode")
        if isinstance(self.trials, bool) or not isinstance(self.trials, int) or self.trials < 1:
            raise ValueError(f"`trials` must be a positive integer; got {self.trials!r}.")
        if (isinstance(self.placements, bool) or not isinstance(self.placements, int)
                or self.placements < 1):
            raise ValueError(f"`placements` must be a positive integer; got {self.placements!r}.")
        if (isinstance(self.process_warmup_ms, bool)
                or not isinstance(self.process_warmup_ms, (int, float))
                or not 0 <= self.process_warmup_ms < float("inf")):
            raise ValueError(f"`process_warmup_ms` must be a finite number >= 0; "
                             f"got {self.process_warmup_ms!r}.")
        if self.device not in cands.DEVICES:
            raise ValueError(f"`device` must be one of {cands.DEVICES}; got {self.device!r}.")
        if not any(self.device in cands.get(n).devices for n in self.candidates):
            raise ValueError(f"`candidates` must include one that runs on {self.device}; "
                             f"{list(self.candidates)} run on "
                             f"{sorted({d for n in self.candidates for d in cands.get(n).devices})}"
                             f" only.")
        # Each trial's generators are seeded with seed + trial, which numpy needs < 2**32.
        if (isinstance(self.seed, bool) or not isinstance(self.seed, int)
                or not 0 <= self.seed <= 2**32 - self.trials):
            raise ValueError(f"`seed` must be an integer in [0, 2**32 - trials]; "
                             f"got {self.seed!r}.")
        for key in ("profile", "ceilings", "allow_mixed", "deterministic"):
            _validate.flag(key, getattr(self, key))
        _validate.choice("start_method", self.start_method, START_METHODS)
        if self.shard is not None:
            object.__setattr__(self, "shard", record.shard_iv(self.shard))
            if not record.shard_trials(self.trials, self.shard):
                raise ValueError(f"`shard` {self.shard[0]}/{self.shard[1]} holds no trial of "
                                 f"{self.trials}: N must not exceed `trials`.")
        _timing_iv(self.timing)

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["configs"] = [c.key for c in self.configs]
        d["candidates"], d["modes"], d["plugins"] = (list(self.candidates), list(self.modes),
                                                     list(self.plugins))
        if self.shard is None:
            del d["shard"]  # an unsharded plan reads as every plan recorded before shards
        else:
            d["shard"] = list(self.shard)
        return d

    def unsharded(self) -> "Plan":
        """This plan with every trial: the run that ``merge`` makes of its shards."""
        return dataclasses.replace(self, shard=None)

    @classmethod
    def from_json(cls, d: dict) -> "Plan":
        d = with_recorded_defaults(d)
        d["configs"] = tuple(Config.from_key(k) for k in d["configs"])
        for key in ("candidates", "modes", "plugins"):
            d[key] = tuple(d[key])
        if d.get("shard") is not None:
            d["shard"] = tuple(d["shard"])
        return cls(**d)


def with_recorded_defaults(plan_json: dict) -> dict:
    """A copy of a recorded plan with the keys that older runs lack set to what those runs
    did (``start_method``: spawned), and its plugins by their current module paths
    (``configs.RENAMED_MODULES``), so a run recorded under an old path resumes."""
    d = dict(plan_json)
    d.setdefault("start_method", record.RECORDED_START_METHOD)
    if isinstance(d.get("plugins"), (list, tuple)):
        d["plugins"] = list(plugin_modules(d["plugins"]))
    return d


def _timing_iv(timing: dict) -> None:
    """Check the timing settings: either a fixed sample count or a CI target and budget."""
    allowed = {"n_samples", "ci_target", "budget_s", "min_samples", "max_samples",
               "warmup_ms", "confidence"}
    unknown = set(timing) - allowed
    if unknown:
        raise ValueError(f"`timing` keys must be drawn from {sorted(allowed)}; got {sorted(unknown)}.")
    for key, label in (("n_samples", "samples"), ("min_samples", "min_samples"),
                       ("max_samples", "max_samples")):
        n = timing.get(key)
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(f"`{label}` must be a positive integer; got {n!r}.")
    if timing.get("min_samples", 1) > timing.get("max_samples", timing.get("min_samples", 1)):
        raise ValueError(f"`min_samples` must not exceed `max_samples`; got "
                         f"{timing['min_samples']} and {timing['max_samples']}.")
    for key in ("ci_target", "budget_s"):
        value = timing.get(key)
        if value is not None and not (_real(value) and 0 < value < math.inf):
            raise ValueError(f"`{key}` must be a positive number; got {value!r}.")
    warmup = timing.get("warmup_ms")
    if warmup is not None and not (_real(warmup) and 0 <= warmup < math.inf):
        raise ValueError(f"`warmup_ms` must be a number of milliseconds >= 0; got {warmup!r}.")
    confidence = timing.get("confidence")
    if confidence is not None and not (_real(confidence) and 0 < confidence < 1):
        raise ValueError(f"`confidence` must be a number in (0, 1); got {confidence!r}.")


def _real(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _plugins_iv(plugins) -> None:
    """Import each plugin module; a failure names the plugin and the reason."""
    from . import candidates as cands
    for name in plugins:
        if not isinstance(name, str) or not name:
            raise ValueError(f"`plugins` must be importable module names; got {name!r}.")
        try:
            cands.load_plugins((name,))
        except ModuleNotFoundError as exc:
            module = plugin_modules((name,))[0]
            if exc.name == module or module.startswith(f"{exc.name}."):
                raise ValueError(f"`plugins` must be importable module names (on sys.path or "
                                 f"PYTHONPATH) that register candidates; no module named "
                                 f"{name!r}.") from None
            raise ValueError(f"`plugins`: importing {name!r} failed: {type(exc).__name__}: "
                             f"{exc}") from None
        except Exception as exc:  # a plugin that raises while registering
            raise ValueError(f"`plugins`: importing {name!r} failed: {type(exc).__name__}: "
                             f"{exc}") from None
        except (SystemExit, KeyboardInterrupt) as exc:
            # sys.exit() or an interrupt raised by the plugin's own code: refused as a
            # failed import naming the plugin, never read as the sweep's exit or Ctrl-C
            raise ValueError(f"`plugins`: importing {name!r} raised {type(exc).__name__}"
                             f"({exc.args[0] if exc.args else ''!r}); a plugin module must "
                             f"only register candidates when imported (nothing was "
                             f"measured or written).") from None


def plan_units(plan: Plan) -> dict[int, list[str]]:
    """Every journal unit the plan calls for, grouped by trial."""
    return record.plan_unit_names(plan.to_json())


def _candidate_units(plan: Plan, config: Config, cand: str, trial: int) -> list[str]:
    return record.candidate_unit_names(config.key, cand, trial, plan.modes, plan.profile)


def _input_seed(plan: "Plan", trial: int, ci: int) -> int:
    """Seed of the correctness inputs of configuration ``ci`` in ``trial``; placement p
    draws its timing inputs from seed + 1 + p."""
    return (plan.seed * 7919 + trial * 104_729 + ci * 131 + 17) % (2**31)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
