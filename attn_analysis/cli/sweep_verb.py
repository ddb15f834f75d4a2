"""``sweep``: check every flag, then measure (resumable).

What it checks comes in two steps. First everything that needs neither torch nor the
candidates' registry (the folder, repeated entries, shapes, timing and shard settings, the
GPUs on a cpu sweep), before any other process starts; then, while the trial processes'
fork server and the GPU's memory read start beside it (they import torch as this process
does), the device, the candidates and plugins, memory and a finished run. A refusal in
that second step stops the fork server at once (``sweep.stop_trial_server``): it would
otherwise outlive the command by seconds, holding its stdout. Nothing is written before
every check has passed.
"""

from __future__ import annotations

import signal
import sys

__all__ = ["cmd_sweep"]


def cmd_sweep(args) -> int:
    """Validate every flag (``--out`` first, before torch is imported) and check that the
    sweep can run (memory, a finished run) before anything is written, then sweep.

    Returns 0, or 1 when a unit errored or crashed (the rest was measured and the run
    finalized). A finished run is left as it is, said so, and returns 0.
    """
    from ..measure import sweep  # torch-free at import
    checked = _check_without_torch(args)
    # the trial processes' server and the child that reads the GPU's memory import torch
    # while this process does (in turn, they cost the first trial 10-12 s more, and the
    # read 3.5-7.5 s, on a fresh machine)
    sweep.start_trial_server(args.start_method)
    swept = False
    try:
        plan, pins, finished = _check_with_torch(args, checked)
        if finished is not None:
            print(f"{args.out} is a finished run (finalized {finished['finished_utc']}): "
                  f"nothing to measure, nothing changed; {finished['timed']} of "
                  f"{finished['timing_units']} timing units hold samples. A new --out "
                  f"records a new run.")
            return 0
        swept = True
        return _sweep(args, plan, pins)
    finally:
        if not swept:
            sweep.stop_trial_server()


def _check_without_torch(args) -> dict:
    """The checks that need neither torch nor the registry; returns what they built."""
    from .. import _validate, configs
    from ..measure import run_lock
    from ..measure.plan import DEFAULT_TIMING, _timing_iv
    from ..record import shard_iv
    run_lock.check_run_folder(args.out, "--out")
    modes = tuple(args.modes) if args.modes is not None else configs.MODES
    _validate.distinct("--modes", modes, "a mode")
    shard = None if args.shard is None else shard_iv(args.shard, "--shard")
    if args.candidates is not None:
        _validate.distinct("--candidates", args.candidates, "a name")
    if args.shape:
        cfgs = tuple(configs.Config(*s[:3], s[3] if len(s) == 4 else args.head_dim,
                                    args.dtype, args.causal) for s in args.shape)
        _validate.distinct("--shape", (c.key for c in cfgs), "a shape")
        matrix_name = ""
    else:
        matrix_name = args.matrix or "reports-v1"
        cfgs = configs.matrix(matrix_name)
    # --budget is checked even when a fixed sample count makes it unused.
    _timing_iv({"ci_target": args.ci_target, "budget_s": args.budget})
    timing = ({"ci_target": args.ci_target, "budget_s": args.budget}
              if args.ci_target is not None
              else {"n_samples": DEFAULT_TIMING["n_samples"] if args.samples is None
                    else args.samples})
    timing["warmup_ms"] = args.warmup_ms
    _timing_iv(timing)
    if args.device == "cpu" and args.gpus is not None:
        _sweep_gpus(args, "cpu")  # refuses
    return {"modes": modes, "shard": shard, "configs": cfgs, "matrix": matrix_name,
            "timing": timing}


def _check_with_torch(args, checked: dict) -> tuple:
    """The device, the plan (candidates and plugins), the GPUs, memory and a finished
    run: (plan, GPU pins, the finished run's summary or None)."""
    from ..measure import device_memory, sweep
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
        from ..measure.candidates import DEFAULT_CANDIDATES  # imports torch
        candidates = tuple(DEFAULT_CANDIDATES)
    else:
        candidates = tuple(args.candidates)
    sweep.check_fits(checked["configs"], device_memory.read(device), device,
                     "--shape" if args.shape else "--matrix")
    plan = sweep.Plan(configs=checked["configs"], candidates=candidates,
                      modes=checked["modes"], trials=args.trials, device=device,
                      timing=checked["timing"], seed=args.seed, plugins=tuple(args.plugin),
                      matrix=checked["matrix"], profile=not args.no_profile,
                      ceilings=not args.no_ceilings, allow_mixed=args.allow_mixed,
                      deterministic=args.deterministic, placements=args.placements,
                      kernel_times=not args.no_kernel_times,
                      process_warmup_ms=args.process_warmup_ms,
                      start_method=args.start_method, shard=checked["shard"])
    pins = _sweep_gpus(args, device)
    finished = sweep.preflight(args.out, plan, "--out")  # writes nothing
    if device == "cuda" and finished is None:
        _power_warning(plan)
    return plan, pins, finished


def _sweep(args, plan, pins) -> int:
    """Make the folder and sweep (``sweep.run`` removes the folder again if the sweep
    fails before recording a unit); report what was recorded."""
    from ..measure import run_lock, sweep
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
    from ..measure import gpus
    if device != "cuda":
        if args.gpus is not None:
            raise ValueError("`--gpus` spreads trial processes over GPUs; this sweep runs on "
                             "the cpu.")
        return ()
    pins = gpus.select_gpus(args.gpus, gpus.visible_gpus(), "--gpus")
    at_once = 1 if args.one_at_a_time else len(pins)
    print(f"gpus: {len(pins)} ({', '.join(pins)}); {at_once} trial process(es) at a time")
    return pins


def _power_warning(plan) -> None:
    """Warn (stderr) when a GPU sweep's design cannot decide at its family, per the
    recorded design SDs; nothing where they are absent."""
    from ..analyse import power
    sigmas = power.load_design_sigmas(configs=[c.key for c in plan.configs],
                                      candidates=plan.candidates, placements=plan.placements)
    if sigmas is None:
        return
    m, report, text = power.plan_decidability(len(plan.configs), plan.candidates,
                                              plan.trials, sigmas)
    if not all(r.decides for r in report):
        print(f"warning: this design cannot decide at its family (m = {m}); "
              f"`python -m attn_analysis plan --power` says more.\n{text}", file=sys.stderr)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


