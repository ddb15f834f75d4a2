"""Write the benchmark record of a campaign: how long it took, what CI half-widths it
reached per configuration, the fastest candidate per configuration and the kernels the
default SDPA dispatch ran. Everything is read from the recorded run.

    python scripts/campaign_report.py data/runs/h200-reports-p2-all > benchmarks/h200-reports-p2-all.md
"""

from __future__ import annotations

import sys

from attn_analysis import record
from attn_analysis.analyse import bootstrap
from attn_analysis.configs import Config


def main(run_dir: str, mode: str = "graph") -> str:
    run = record.load(run_dir)
    plan = run.info["plan"]
    fp = next(iter(run.fingerprint["trials"].values()))
    out = [f"# Campaign record: {run.run_id}", "",
           f"Device: {run.device}; torch {fp.get('torch_version')}, CUDA {fp.get('cuda_version')}, "
           f"driver {fp.get('driver_version')}, triton {fp.get('triton_version')}.", "",
           (f"Plan: matrix `{plan['matrix']}`, " if plan.get('matrix') else
            f"Plan: {len(run.units.groupby('config'))} explicit shapes, ") +
           f"{len(plan['candidates'])} candidates, modes "
           f"{', '.join(plan['modes'])}, {plan['trials']} trials (one process each), timing "
           f"{plan['timing']}, deterministic algorithms {plan.get('deterministic')}.", "",
           f"Wall time of the sweep (the invocation that finished it): "
           f"{run.info['sweep_wall_s_last_invocation']:.0f} s; "
           f"{len(run.units)} timing units, {len(run.samples)} samples.", "",
           "## CI half-width reached (95% order-statistic CI of the median / median)", "",
           "Per configuration and mode: median and maximum over candidates and trials, and the "
           "share of units that stopped on the CI target rather than on the time budget.", "",
           "| configuration | mode | median half-width | max half-width | stopped on target |",
           "| --- | --- | --- | --- | --- |"]
    ok = run.units[run.units["status"] == "ok"]
    for (config, m), g in ok.groupby(["config", "mode"]):
        out.append(f"| {config} | {m} | {g['ci_rel_halfwidth'].median():.2%} | "
                   f"{g['ci_rel_halfwidth'].max():.2%} | "
                   f"{(g['stop_reason'] == 'ci_target').mean():.0%} |")
    out += ["", f"## Fastest candidate per configuration (`{mode}` mode)", "",
            "Median over all trials' samples, with the hierarchical bootstrap 95% CI "
            "(trials, then samples within trials; 10 000 resamples).", "",
            "| configuration | fastest | median (ms) | 95% CI (ms) | default SDPA median (ms) |",
            "| --- | --- | --- | --- | --- |"]
    s = run.samples[run.samples["mode"] == mode]
    for config in sorted(s["config"].unique(), key=lambda k: Config.from_key(k)):
        c = s[s["config"] == config]
        medians = c.groupby("candidate")["ms"].median()
        best = medians.idxmin()
        trials = [g["ms"].to_numpy() for _, g in c[c["candidate"] == best].groupby("trial")]
        ci = bootstrap.median_ci_trials(trials)
        out.append(f"| {config} | {best} | {ci.estimate:.4f} | [{ci.low:.4f}, {ci.high:.4f}] | "
                   f"{medians.get('sdpa', float('nan')):.4f} |")
    out += ["", "## Kernels of the default SDPA dispatch (torch.profiler, trial 0)", ""]
    k = run.kernels[run.kernels["candidate"] == "sdpa"]
    for config, g in k.groupby("config"):
        names = "; ".join(f"`{n}` {ms * 1e3:.1f} us" for n, ms in
                          zip(g["kernel"], g["device_ms_per_call"]))
        out.append(f"- {config}: {names}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(main(*sys.argv[1:]))
