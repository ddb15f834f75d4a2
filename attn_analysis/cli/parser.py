"""The command line's arguments: :func:`build_parser`, one sub-parser per verb.

Building it imports nothing that needs torch or scipy (the sweep's defaults come from the
torch-free :mod:`..measure.plan`, the candidates' names from
:mod:`..measure.candidate_names`), so ``--help`` works on a machine without torch and the
sweep's trial server starts without waiting for it. Every option that takes a list
accumulates when repeated; ``--sigma``, a pair, is refused when repeated.
"""

from __future__ import annotations

import argparse

__all__ = ["build_parser"]


class _Once(argparse.Action):
    """An option that may be given once (a repeated ``--sigma`` would silently keep the
    last pair): a second use is a usage error naming it (exit 2)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option_string} may be given once (it takes one pair of values); "
                         f"got it twice.")
        setattr(namespace, self.dest, values)


def _shape(text: str):
    """Parse 'B,H,S[,D]' into sizes (dtype and causal come from other flags)."""
    parts = text.split(",")
    if len(parts) not in (3, 4) or not all(p.strip().isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"--shape must look like B,H,S or B,H,S,D; got {text!r}")
    return tuple(int(p) for p in parts)


def build_parser() -> argparse.ArgumentParser:
    from ..measure import plan as defaults  # torch-free: the sweep's defaults
    from ..measure.candidate_names import BUILT_IN, EXAMPLE_PLUGINS  # torch-free
    from ..analyse.margin import DEFAULT_MARGIN  # torch- and scipy-free
    from ..configs import BASELINE, DEVICES, MATRICES, MODES
    names = (f"registered candidate names: built in {', '.join(BUILT_IN)}; a --plugin "
             f"registers more (e.g. {', '.join(EXAMPLE_PLUGINS)})")
    parser = argparse.ArgumentParser(prog="python -m attn_analysis",
                                     description="Measure, verify and show attention runs.")
    sub = parser.add_subparsers(dest="verb", required=True)

    sw = sub.add_parser("sweep", help="measure a matrix of configurations (resumable)")
    sw.add_argument("--out", required=True, help="run folder, e.g. data/runs/<run-id>")
    sw.add_argument("--device", choices=DEVICES, default=None,
                    help="cuda or cpu (default: cuda if this machine has a CUDA device, else "
                         "cpu; the sweep says which it chose)")
    group = sw.add_mutually_exclusive_group()
    group.add_argument("--matrix", choices=sorted(MATRICES), help="a named matrix")
    group.add_argument("--shape", type=_shape, action="append",
                       help="explicit B,H,S[,D]; repeat for several")
    # Every option that takes a list accumulates when repeated (``--modes a --modes b``
    # is ``--modes a b``), as --shape, --plugin and --config do; a default list is taken
    # only when the option is absent (None here, filled in by the verb).
    sw.add_argument("--head-dim", type=int, default=64, help="D for --shape without D")
    sw.add_argument("--dtype", default="float16", help="float16 or bfloat16 (with --shape)")
    sw.add_argument("--causal", action="store_true", help="causal masking (with --shape)")
    sw.add_argument("--candidates", nargs="+", action="extend", default=None,
                    help=f"{names} (default: every built-in but gluon, "
                         f"candidates.DEFAULT_CANDIDATES, resolved when the sweep starts)")
    sw.add_argument("--modes", nargs="+", action="extend", default=None,
                    help=f"timing protocols (default: {' '.join(MODES)})")
    # The defaults are protocol 2's calibrated design (book, "Protocol 2"): 4 processes x
    # 8 placements x 20 samples, 10 ms of warm-up per placement.
    sw.add_argument("--trials", type=int, default=defaults.DEFAULT_TRIALS,
                    help=f"independent processes (default {defaults.DEFAULT_TRIALS})")
    stop = sw.add_mutually_exclusive_group()
    stop.add_argument("--samples", type=int, default=None,
                      help=f"fixed number of samples per placement (default "
                           f"{defaults.DEFAULT_TIMING['n_samples']})")
    stop.add_argument("--ci-target", type=float, default=None,
                      help="instead of a fixed count: stop when the median's 95%% CI "
                           "half-width / median falls below this (with --budget)")
    sw.add_argument("--budget", type=float, default=0.5,
                    help="with --ci-target: seconds per placement at most (default 0.5)")
    sw.add_argument("--warmup-ms", type=float, default=defaults.DEFAULT_TIMING["warmup_ms"],
                    help=f"warm-up per placement in milliseconds (default "
                         f"{defaults.DEFAULT_TIMING['warmup_ms']:g})")
    sw.add_argument("--placements", type=int, default=defaults.DEFAULT_PLACEMENTS,
                    help="memory placements per unit: fresh inputs behind a random pad, graph "
                         f"re-captured, candidates interleaved in rounds "
                         f"(default {defaults.DEFAULT_PLACEMENTS})")
    sw.add_argument("--no-kernel-times", action="store_true",
                    help="skip the profiler's kernel time at each placement")
    sw.add_argument("--process-warmup-ms", type=float, default=500.0,
                    help="GPU warm-up before a configuration's first round (default 500)")
    sw.add_argument("--start-method", default=defaults.START_METHODS[0],
                    choices=defaults.START_METHODS,
                    help="how each trial process starts: forkserver (default; forked from a "
                         "server that imported torch once, CUDA started in each trial) or "
                         "spawn (a fresh interpreter, as runs before 2026-11-25)")
    sw.add_argument("--no-prebuild", action="store_true",
                    help="compile nothing before the first trial process (by default, on a "
                         "GPU, the compiled candidates of every configuration are compiled "
                         "in parallel first, into the machine's caches; recorded in run.json)")
    sw.add_argument("--seed", type=int, default=0)
    sw.add_argument("--plugin", action="append", default=[],
                    help="module that registers extra candidates")
    sw.add_argument("--no-profile", action="store_true", help="skip kernel evidence")
    sw.add_argument("--no-ceilings", action="store_true", help="skip measured ceilings")
    sw.add_argument("--allow-mixed", action="store_true",
                    help="resume on a machine with a different fingerprint")
    sw.add_argument("--deterministic", action="store_true",
                    help="time under torch.use_deterministic_algorithms(True) (changes SDPA's "
                         "dispatch; default off, as for a user who never asked)")
    sw.add_argument("--gpus", default=None,
                    help="GPU indices to spread the trial processes over, e.g. 0,1, or 'all' "
                         "(default on cuda: every visible GPU), one process per GPU at a time, "
                         "each pinned with CUDA_VISIBLE_DEVICES")
    sw.add_argument("--one-at-a-time", action="store_true",
                    help="run one trial process at a time, trial t on the t-th GPU of --gpus "
                         "in turn (the control for neighbours' effect)")
    sw.add_argument("--shard", default=None,
                    help="K/N: record shard K of N only (the trials t with t %% N == K-1); "
                         "`merge` joins the N shard runs into one run")
    sw.add_argument("--quiet", action="store_true", help="no progress bar")

    ve = sub.add_parser("verify", help="check a run's schema and checksums, or check files'")
    ve.add_argument("runs", nargs="+", help="run folders, check files or their folder "
                                            "(data/checks)")

    pl = sub.add_parser("plan", help="what a design can decide at its family, before "
                                     "anything is measured")
    pl.add_argument("--power", action="store_true", required=True,
                    help="the processes needed for 80%% power at 1.5 margins and a 90%% A/A "
                         "'equivalent' rate at the plan's family m, per level")
    what = pl.add_mutually_exclusive_group()
    what.add_argument("--campaign", help="a named plan (configs: CAMPAIGN_PLANS, "
                                         "POWERED_PLANS, ...)")
    what.add_argument("--matrix", choices=sorted(MATRICES), help="a named matrix")
    pl.add_argument("--candidates", nargs="+", action="extend", default=None,
                    help=f"with --matrix: {names} (default: every built-in but gluon)")
    pl.add_argument("--trials", type=int, default=None,
                    help=f"processes (default: the plan's, else {defaults.DEFAULT_TRIALS})")
    pl.add_argument("--placements", type=int, default=None,
                    help="placements per process (default: the plan's, else "
                         f"{defaults.DEFAULT_PLACEMENTS}); the recorded SDs are recomputed "
                         "from their variance components at this number")
    pl.add_argument("--gpu-model", default=None,
                    help="GPU model whose recorded SDs to use, e.g. 'NVIDIA H200' "
                         "(default: pooled over models)")
    pl.add_argument("--sigma", nargs=2, type=float, metavar=("CALL", "KERNEL"), default=None,
                    action=_Once,
                    help="per-process SDs of the call and kernel levels instead of the "
                         "recorded ones")

    me = sub.add_parser("merge", help="join the shard runs of one plan into one run")
    me.add_argument("out", help="new run folder, e.g. data/runs/<run-id>")
    me.add_argument("shards", nargs="+", help="the finalized shard run folders, 1..N")
    me.add_argument("--across-versions", action="store_true",
                    help="merge shards recorded by different package versions (each kept "
                         "under merged_from); only where the measuring code is the same")

    sh = sub.add_parser("show", help="summarise a run and warn about unstable data")
    sh.add_argument("run", help="run folder")

    co = sub.add_parser("compare", help="call and kernel speedups over a baseline, with verdicts")
    co.add_argument("run", help="run folder")
    co.add_argument("--baseline", default=BASELINE,
                    help=f"reference candidate (default {BASELINE})")
    co.add_argument("--config", action="append", default=None,
                    help="configuration key, e.g. B32-H8-S512-D64-fp16; repeat for several "
                         "(default: every configuration of the run)")
    co.add_argument("--mode", default="graph", help="timing mode of the call level (default graph)")
    co.add_argument("--margin", type=float, default=DEFAULT_MARGIN,
                    help=f"equivalence margin (default {DEFAULT_MARGIN})")
    co.add_argument("--resamples", type=int, default=20_000,
                    help="bootstrap resamples per comparison (default 20000)")
    co.add_argument("--attention", action="store_true",
                    help="add the attention level: each side's longest kernel alone (its "
                         "kernel time less its other kernels, e.g. SDPA's memset), from the "
                         "run's profiler evidence; joins the same family")
    co.add_argument("--interval", default="process-t",
                    help="the interval behind the verdicts: process-t (default: a t-interval "
                         "over processes) or bootstrap (hierarchical, for comparison)")
    co.add_argument("--json", action="store_true",
                    help="print JSON (schema attn_analysis.compare/2, documented in "
                         "comparisons.as_json)")

    ca = sub.add_parser("calibrate", help="false-positive rate and power from A/A and spin controls")
    ca.add_argument("runs", nargs="+", help="run folder(s) with sdpa, sdpa_twin and sdpa_spin<N>; "
                                            "several are pooled (replications never span runs)")
    ca.add_argument("--processes", type=int, default=defaults.DEFAULT_TRIALS,
                    help=f"processes per replication of the design (default "
                         f"{defaults.DEFAULT_TRIALS}, the sweep's; at most the processes of one "
                         f"run)")
    ca.add_argument("--level", default="call",
                    help="call (the timed samples, default) or kernel (the profiler's kernel "
                         "time at each placement)")
    ca.add_argument("--interval", default="process-t",
                    help="the design's interval: process-t (default) or bootstrap")
    ca.add_argument("--mode", default="graph", help="timing mode (default graph)")
    ca.add_argument("--margin", type=float, default=DEFAULT_MARGIN,
                    help=f"equivalence margin (default {DEFAULT_MARGIN})")
    ca.add_argument("--family", type=int, default=1,
                    help="Bonferroni family size each comparison is adjusted for (default 1)")
    ca.add_argument("--resamples", type=int, default=2000,
                    help="bootstrap resamples per comparison (default 2000)")
    ca.add_argument("--json", action="store_true",
                    help="print JSON (schema attn_analysis.calibrate/2, documented in "
                         "calibration.calibration_json)")
    return parser
