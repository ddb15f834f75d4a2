"""The verbs that analyse recorded runs: ``compare`` (speedups over a baseline, with
verdicts) and ``calibrate`` (false-positive rate and power from the A/A and spin controls)."""

from __future__ import annotations


__all__ = ["cmd_compare", "cmd_calibrate"]


def cmd_compare(args) -> int:
    import json
    from ..analyse import comparisons, stats
    from .. import _validate, record
    stats.margin_iv(args.margin, "--margin")
    _validate.integer("--resamples", args.resamples, 100)
    _validate.choice("--interval", args.interval, stats.INTERVAL_METHODS)
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
    from ..analyse import calibration, protocols, stats
    from .. import _validate, record
    stats.margin_iv(args.margin, "--margin")
    _validate.integer("--processes", args.processes)
    _validate.integer("--family", args.family)
    _validate.integer("--resamples", args.resamples, 100)
    _validate.choice("--level", args.level, calibration.LEVELS)
    _validate.choice("--interval", args.interval, stats.INTERVAL_METHODS)
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
                         f"sdpa_twin and sdpa_spin<N>: --plugin attn_analysis.measure.controls).")
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
