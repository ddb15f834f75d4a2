"""Command line: ``python -m attn_analysis sweep | verify | show | merge | ...``.

Building the parser imports nothing that needs torch (``configs`` and ``sweep`` are
torch-free at import), so ``--help`` works on a machine without it; the verbs import what
they need when they run.
"""

from __future__ import annotations

import argparse
import sys
import time


def _shape(text: str):
    """Parse 'B,H,S[,D]' into sizes (dtype and causal come from other flags)."""
    parts = text.split(",")
    if len(parts) not in (3, 4) or not all(p.strip().isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"--shape must look like B,H,S or B,H,S,D; got {text!r}")
    return tuple(int(p) for p in parts)


def build_parser() -> argparse.ArgumentParser:
    from .measure import sweep  # torch-free at import, unlike candidates
    from .analyse.margin import DEFAULT_MARGIN  # torch- and scipy-free
    from .configs import BASELINE, DEVICES, MATRICES, MODES
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
    sw.add_argument("--head-dim", type=int, default=64, help="D for --shape without D")
    sw.add_argument("--dtype", default="float16", help="float16 or bfloat16 (with --shape)")
    sw.add_argument("--causal", action="store_true", help="causal masking (with --shape)")
    sw.add_argument("--candidates", nargs="+", default=None,
                    help="registered candidate names (default: every built-in candidate, "
                         "candidates.DEFAULT_CANDIDATES, resolved when the sweep starts)")
    sw.add_argument("--modes", nargs="+", default=list(MODES),
                    help=f"timing protocols (default: {' '.join(MODES)})")
    # The defaults are protocol 2's calibrated design (book, "Protocol 2"): 4 processes x
    # 8 placements x 20 samples, 10 ms of warm-up per placement.
    sw.add_argument("--trials", type=int, default=sweep.DEFAULT_TRIALS,
                    help=f"independent processes (default {sweep.DEFAULT_TRIALS})")
    stop = sw.add_mutually_exclusive_group()
    stop.add_argument("--samples", type=int, default=None,
                      help=f"fixed number of samples per placement (default "
                           f"{sweep.DEFAULT_TIMING['n_samples']})")
    stop.add_argument("--ci-target", type=float, default=None,
                      help="instead of a fixed count: stop when the median's 95%% CI "
                           "half-width / median falls below this (with --budget)")
    sw.add_argument("--budget", type=float, default=0.5,
                    help="with --ci-target: seconds per placement at most (default 0.5)")
    sw.add_argument("--warmup-ms", type=float, default=sweep.DEFAULT_TIMING["warmup_ms"],
                    help=f"warm-up per placement in milliseconds (default "
                         f"{sweep.DEFAULT_TIMING['warmup_ms']:g})")
    sw.add_argument("--placements", type=int, default=sweep.DEFAULT_PLACEMENTS,
                    help="memory placements per unit: fresh inputs behind a random pad, graph "
                         f"re-captured, candidates interleaved in rounds "
                         f"(default {sweep.DEFAULT_PLACEMENTS})")
    sw.add_argument("--no-kernel-times", action="store_true",
                    help="skip the profiler's kernel time at each placement")
    sw.add_argument("--process-warmup-ms", type=float, default=500.0,
                    help="GPU warm-up before a configuration's first round (default 500)")
    sw.add_argument("--start-method", default=sweep.START_METHODS[0],
                    choices=sweep.START_METHODS,
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
    pl.add_argument("--candidates", nargs="+", default=None,
                    help="with --matrix: the candidates (default: every built-in)")
    pl.add_argument("--trials", type=int, default=None,
                    help=f"processes (default: the plan's, else {sweep.DEFAULT_TRIALS})")
    pl.add_argument("--gpu-model", default=None,
                    help="GPU model whose recorded SDs to use, e.g. 'NVIDIA H200' "
                         "(default: pooled over models)")
    pl.add_argument("--sigma", nargs=2, type=float, metavar=("CALL", "KERNEL"), default=None,
                    help="per-process SDs of the call and kernel levels instead of the "
                         "recorded ones")

    me = sub.add_parser("merge", help="join the shard runs of one plan into one run")
    me.add_argument("out", help="new run folder, e.g. data/runs/<run-id>")
    me.add_argument("shards", nargs="+", help="the finalized shard run folders, 1..N")

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
    ca.add_argument("--processes", type=int, default=sweep.DEFAULT_TRIALS,
                    help=f"processes per replication of the design (default "
                         f"{sweep.DEFAULT_TRIALS}, the sweep's; at most the processes of one "
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


def cmd_sweep(args) -> int:
    """Validate every flag (``--out`` first, before torch is imported) and check that the
    sweep can run (memory, a finished run) before anything is written, then sweep.

    Returns 0, or 1 when a unit errored or crashed (the rest was measured and the run
    finalized). A finished run is left as it is, said so, and returns 0.
    """
    import signal

    from . import _validate, configs
    from .measure import device_memory, run_lock, sweep  # torch-free at import
    from .measure.plan import _timing_iv
    run_lock.check_run_folder(args.out, "--out")
    _validate.distinct("--modes", args.modes, "a mode")
    from .record import shard_iv
    shard = None if args.shard is None else shard_iv(args.shard, "--shard")
    if args.candidates is not None:
        _validate.distinct("--candidates", args.candidates, "a name")
    # the trial processes' server and the child that reads the GPU's memory import torch
    # while this process does (in turn, they cost the first trial 10-12 s more, and the
    # read 3.5-7.5 s, on a fresh machine)
    sweep.start_trial_server(args.start_method)
    if args.device != "cpu":
        device_memory.start_read()
    import torch  # the sweep's first need of torch: a missing torch is a one-line error
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.device is None:
        print(f"device: {device} (" + ("a CUDA device is present" if device == "cuda" else
                                       "no CUDA device found") + "; --device chooses)")
    elif device == "cuda" and not torch.cuda.is_available():
        raise ValueError("`--device` is cuda, but this machine has no CUDA device (torch "
                         f"{torch.__version__}); pass --device cpu or leave --device out.")
    if args.candidates is None:
        from .measure.candidates import DEFAULT_CANDIDATES  # imports torch: only when a sweep runs
        candidates = tuple(DEFAULT_CANDIDATES)
    else:
        candidates = tuple(args.candidates)
    if args.shape:
        cfgs = tuple(configs.Config(*s[:3], s[3] if len(s) == 4 else args.head_dim,
                                    args.dtype, args.causal) for s in args.shape)
        _validate.distinct("--shape", (c.key for c in cfgs), "a shape")
        matrix_name = ""
    else:
        matrix_name = args.matrix or "reports-v1"
        cfgs = configs.matrix(matrix_name)
    sweep.check_fits(cfgs, device_memory.read(device), device,
                     "--shape" if args.shape else "--matrix")
    # --budget is checked even when a fixed sample count makes it unused.
    _timing_iv({"ci_target": args.ci_target, "budget_s": args.budget})
    timing = ({"ci_target": args.ci_target, "budget_s": args.budget}
              if args.ci_target is not None
              else {"n_samples": sweep.DEFAULT_TIMING["n_samples"] if args.samples is None
                    else args.samples})
    timing["warmup_ms"] = args.warmup_ms
    plan = sweep.Plan(configs=cfgs, candidates=candidates, modes=tuple(args.modes),
                      trials=args.trials, device=device, timing=timing, seed=args.seed,
                      plugins=tuple(args.plugin), matrix=matrix_name,
                      profile=not args.no_profile, ceilings=not args.no_ceilings,
                      allow_mixed=args.allow_mixed, deterministic=args.deterministic,
                      placements=args.placements, kernel_times=not args.no_kernel_times,
                      process_warmup_ms=args.process_warmup_ms,
                      start_method=args.start_method, shard=shard)
    pins = _sweep_gpus(args, device)
    finished = sweep.preflight(args.out, plan, "--out")  # writes nothing
    if device == "cuda" and finished is None:
        _power_warning(plan)
    if finished is not None:
        print(f"{args.out} is a finished run (finalized {finished['finished_utc']}): nothing "
              f"to measure, nothing changed; {finished['timed']} of "
              f"{finished['timing_units']} timing units hold samples. A new --out records "
              f"a new run.")
        return 0
    run_lock.make_run_folder(args.out, "--out")
    # `kill PID` stops the sweep as Ctrl-C does: the worker is stopped, the lock released.
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        summary = sweep.run(args.out, plan, progress=not args.quiet,
                            prebuild=False if args.no_prebuild else None,
                            command_started=getattr(args, "started", None),
                            gpus=pins, one_at_a_time=args.one_at_a_time)
    finally:
        signal.signal(signal.SIGTERM, previous)
    not_timed = ", ".join(f"{k} {v}" for k, v in sorted(summary["not_timed"].items()))
    print(f"recorded {summary['timed']} of {summary['timing_units']} timing units with samples "
          f"into {summary['out']} in {summary['wall_s']:.1f} s"
          + (f"; not timed: {not_timed}" if not_timed else ""))
    if summary["errored"]:
        print(f"error: {summary['errored']} timing unit(s) errored or crashed (first: "
              f"{summary['first_error']}); the rest was measured and the run finalized with "
              f"them recorded", file=sys.stderr)
        return 1
    return 0


def _sweep_gpus(args, device: str) -> tuple:
    """The GPU pins of a sweep's trial processes (``--gpus``; on cuda every visible GPU by
    default, none on cpu), said on one line."""
    from .measure import gpus
    if device != "cuda":
        if args.gpus is not None:
            raise ValueError("`--gpus` spreads trial processes over GPUs; this sweep runs on "
                             "the cpu.")
        return ()
    pins = gpus.select_gpus(args.gpus, gpus.visible_gpus(), "--gpus")
    at_once = 1 if args.one_at_a_time else len(pins)
    print(f"gpus: {len(pins)} ({', '.join(pins)}); {at_once} trial process(es) at a time")
    return pins


def _plan_spec(args) -> dict:
    """The plan ``plan --power`` judges: a named one, or a matrix with candidates."""
    from . import configs
    if args.campaign:
        plans = {**configs.CAMPAIGN_PLANS, **configs.CALIBRATION_PLANS, **configs.GLUON_PLANS,
                 **configs.PEER_PLANS, **configs.POWERED_PLANS}
        spec = dict(plans[_choice("--campaign", args.campaign, tuple(sorted(plans)))])
    else:
        if args.candidates is None:
            from .measure.candidates import DEFAULT_CANDIDATES
            candidates = tuple(DEFAULT_CANDIDATES)
        else:
            candidates = tuple(args.candidates)
        spec = {"matrix": args.matrix or "reports-v1", "candidates": candidates}
    if args.trials is not None:
        spec["trials"] = _positive_int("--trials", args.trials)
    return spec


def cmd_plan(args) -> int:
    from . import configs
    from .analyse import power
    from .measure import sweep
    spec = _plan_spec(args)
    cfgs = configs.matrix(spec["matrix"])
    trials = spec.get("trials", sweep.DEFAULT_TRIALS)
    levels = tuple(spec.get("levels", ("call", "kernel")))
    if args.sigma is not None:
        sigmas = {"call": args.sigma[0], "kernel": args.sigma[1]}
        source = "given with --sigma"
    else:
        sigmas = power.load_design_sigmas(device=args.gpu_model, configs=[c.key for c in cfgs],
                                          candidates=spec["candidates"])
        if sigmas is None:
            raise ValueError(f"no recorded design SDs ({power.DESIGN_SIGMAS}; "
                             f"scripts/design_sigmas.py writes it): pass --sigma CALL KERNEL.")
        source = (f"the {power.SIGMA_QUANTILE:.0%} quantile of the recorded comparisons of "
                  f"these shapes and candidates ({power.DESIGN_SIGMAS}, "
                  f"{args.gpu_model or 'GPU models pooled'}; where none was recorded, of all)")
    m, report, text = power.plan_decidability(
        len(cfgs), spec["candidates"], trials, sigmas, levels=levels,
        family=spec.get("family_size"))
    print(f"plan: matrix {spec['matrix']} ({len(cfgs)} configurations), "
          f"{len(spec['candidates'])} candidates, {trials} processes; family m = {m} "
          f"({'pre-registered' if 'family_size' in spec else 'every candidate but sdpa x configurations x levels'})")
    print(f"per-process SDs: {source}")
    for r in report:
        print(f"  {r.level}: needs {r.needed if r.needed is not None else 'more than 1024'} "
              f"processes; {r.processes} give power {r.power:.0%}, A/A equivalent "
              f"{r.equivalence:.0%}")
    print(text)
    return 0


def _power_warning(plan) -> None:
    """Warn (stderr) when a GPU sweep's design cannot decide at its family, per the
    recorded design SDs; nothing where they are absent."""
    from .analyse import power
    sigmas = power.load_design_sigmas(configs=[c.key for c in plan.configs],
                                      candidates=plan.candidates)
    if sigmas is None:
        return
    m, report, text = power.plan_decidability(len(plan.configs), plan.candidates,
                                              plan.trials, sigmas)
    if not all(r.decides for r in report):
        print(f"warning: this design cannot decide at its family (m = {m}); "
              f"`python -m attn_analysis plan --power` says more.\n{text}", file=sys.stderr)


def cmd_merge(args) -> int:
    from . import record
    out = record.merge(args.out, args.shards)
    print(f"merged {len(args.shards)} shard runs into {out}; it verifies")
    return 0


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def cmd_verify(args) -> int:
    from .record import checks
    from . import record
    status = 0
    for run in args.runs:
        problems = checks.verify(run) if checks.is_check_path(run) else record.verify(run)
        if problems:
            status = 1
            print(f"{run}: FAILED")
            for p in problems:
                print(f"  {p}")
        elif checks.is_check_path(run) or not record.is_legacy_identity(run):
            print(f"{run}: ok")
        else:
            print(f"{run}: ok (legacy run: run.json records no run id, so the folder's "
                  f"name is not checked)")
    return status


def cmd_show(args) -> int:
    from . import record, show
    run = record.load(args.run)
    print(show.summary(run))
    return 0


def _positive_int(name: str, value: int, minimum: int = 1) -> int:
    if value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {value}.")
    return value


def _choice(name: str, value: str, allowed: tuple) -> str:
    if value not in allowed:
        raise ValueError(f"`{name}` must be one of {allowed}; got {value!r}.")
    return value


def cmd_compare(args) -> int:
    import json
    from .analyse import comparisons, stats
    from . import record
    stats.margin_iv(args.margin, "--margin")
    _positive_int("--resamples", args.resamples, 100)
    _choice("--interval", args.interval, stats.INTERVAL_METHODS)
    run = record.load(args.run)
    kernels = run.kernels if args.attention else None
    table = comparisons.speedup_table(run.samples, run.placements, baseline=args.baseline,
                                      mode=args.mode, configs=args.config, margin=args.margin,
                                      n_resamples=args.resamples, kernels=kernels,
                                      method=args.interval)
    _, missing = comparisons.plan_comparisons(run.samples, run.placements, args.baseline,
                                              (args.mode,), args.config, None, kernels)
    if args.json:
        print(json.dumps(comparisons.as_json(
            table, run_id=run.run_id, device=run.device, protocol=run.protocol,
            baseline=args.baseline, mode=args.mode, margin=args.margin, confidence=0.95,
            not_compared=missing), indent=1))
    else:
        print(f"run {run.run_id} ({run.device}, protocol {run.protocol}), mode {args.mode}, "
              f"baseline {args.baseline}, margin +-{args.margin:g}")
        print(comparisons.format_table(table, missing))
    return 0


def cmd_calibrate(args) -> int:
    import json
    from .analyse import calibration, protocols, stats
    from . import record
    stats.margin_iv(args.margin, "--margin")
    _positive_int("--processes", args.processes)
    _positive_int("--family", args.family)
    _positive_int("--resamples", args.resamples, 100)
    _choice("--level", args.level, calibration.LEVELS)
    _choice("--interval", args.interval, stats.INTERVAL_METHODS)
    runs = record.distinct_runs([record.load(r) for r in args.runs], "runs")
    frames = {r.run_id: (protocols.level_samples(r, args.level), r.kernels) for r in runs}
    empty = [rid for rid, (s, _) in frames.items() if s.empty]
    if empty:
        raise ValueError(f"`--level` kernel needs the profiler's kernel time at each "
                         f"placement; runs {empty} recorded none (kernel times off, or "
                         f"protocol 1): use --level call.")
    samples, kernels = protocols.pool_runs(frames, devices={r.run_id: r.device for r in runs})
    gaps = protocols.missing_controls(samples)
    if gaps:
        raise ValueError(f"`runs` must hold the calibration controls; missing {gaps} in "
                         f"{[r.run_id for r in runs]} (a calibration run times sdpa, "
                         f"sdpa_twin and sdpa_spin<N>: --plugin attn_analysis.controls).")
    most = protocols.max_processes(samples)
    if args.processes > most:
        per = ", ".join(f"{r.run_id}: {r.samples['trial'].nunique()}" for r in runs)
        raise ValueError(f"`--processes` must be an integer in [1, {most}], the most "
                         f"processes one run holds ({per}); replications never span runs; "
                         f"got {args.processes}.")
    table = calibration.design_calibration(samples, kernels, mode=args.mode, k=args.processes,
                                           margin=args.margin, n_comparisons=args.family,
                                           n_resamples=args.resamples, method=args.interval)
    doc = calibration.calibration_json(table, runs=[r.run_id for r in runs], device=runs[0].device,
                                       mode=args.mode, margin=args.margin, family=args.family,
                                       level=args.level, interval=args.interval)
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print(calibration.format_calibration(doc))
    return 0


COMMANDS = {"sweep": cmd_sweep, "verify": cmd_verify, "show": cmd_show, "merge": cmd_merge,
            "plan": cmd_plan,
            "compare": cmd_compare, "calibrate": cmd_calibrate}


def main(argv=None) -> int:
    """Run a verb. Exit codes: 0 success, 1 failure (an error, a missing dependency such as
    torch for ``sweep``, a run that does not verify, or a sweep in which a unit errored or
    crashed: finalized, with the failures recorded), 2 bad command line (argparse),
    130 interrupted."""
    started = time.monotonic()  # the sweep records its start-up from here (run.json)
    args = build_parser().parse_args(argv)
    args.started = started
    try:
        return COMMANDS[args.verb](args)
    except KeyboardInterrupt:
        print("interrupted: finished units are on disk; rerun the same command to resume",
              file=sys.stderr)
        return 130
    except (ValueError, RuntimeError, OSError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
