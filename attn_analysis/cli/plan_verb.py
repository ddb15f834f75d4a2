"""``plan --power``: what a design can decide at its family, before anything is measured."""

from __future__ import annotations

__all__ = ["cmd_plan"]


def _plan_spec(args) -> dict:
    """The plan ``plan --power`` judges: a named one, or a matrix with candidates."""
    from .. import _validate, configs
    if args.campaign:
        plans = {**configs.CAMPAIGN_PLANS, **configs.CALIBRATION_PLANS, **configs.GLUON_PLANS,
                 **configs.PEER_PLANS, **configs.POWERED_PLANS}
        spec = dict(plans[_validate.choice("--campaign", args.campaign, tuple(sorted(plans)))])
    else:
        if args.candidates is None:
            from ..measure.candidates import DEFAULT_CANDIDATES
            candidates = tuple(DEFAULT_CANDIDATES)
        else:
            candidates = tuple(args.candidates)
        spec = {"matrix": args.matrix or "reports-v1", "candidates": candidates}
    if args.trials is not None:
        spec["trials"] = _validate.integer("--trials", args.trials)
    if args.placements is not None:
        spec["placements"] = _validate.integer("--placements", args.placements)
    return spec


def cmd_plan(args) -> int:
    from .. import configs
    from ..analyse import power
    from ..measure import sweep
    from ..measure.plan import DEFAULT_PLACEMENTS
    spec = _plan_spec(args)
    cfgs = configs.matrix(spec["matrix"])
    trials = spec.get("trials", sweep.DEFAULT_TRIALS)
    placements = spec.get("placements", DEFAULT_PLACEMENTS)
    levels = tuple(spec.get("levels", ("call", "kernel")))
    if args.sigma is not None:
        sigmas = {"call": args.sigma[0], "kernel": args.sigma[1]}
        source = "given with --sigma"
    else:
        sigmas = power.load_design_sigmas(device=args.gpu_model, configs=[c.key for c in cfgs],
                                          candidates=spec["candidates"],
                                          placements=placements)
        if sigmas is None:
            raise ValueError(f"no recorded design SDs ({power.DESIGN_SIGMAS}; "
                             f"scripts/design_sigmas.py writes it): pass --sigma CALL KERNEL.")
        source = (f"the {power.SIGMA_QUANTILE:.0%} quantile of the recorded comparisons of "
                  f"these shapes and candidates ({power.DESIGN_SIGMAS}, "
                  f"{args.gpu_model or 'GPU models pooled'}; where none was recorded, of all), "
                  f"at {placements} placements per process")
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
