"""Print the time budget of a run's trial processes (what each phase of a process costs).

Usage: python scripts/process_budget.py RUN_DIR [RUN_DIR ...]

Reads the ``budget`` each trial unit of the run's journal records
(``measure.budget.PhaseClock``) and prints :func:`analyse.process_budget.budget_table` as a
Markdown table, for ``benchmarks/``. Processes measured before budgets were recorded are
counted and left out.
"""

from __future__ import annotations

import sys

from attn_analysis import record
from attn_analysis.analyse.process_budget import budget_table


def run_budgets(run_dir) -> tuple[list[dict], int]:
    """The budgets recorded by ``run_dir``'s trial units, and how many units had none."""
    budgets, missing = [], 0
    for path in record.journal_paths(run_dir, "trial"):
        unit = record.read_unit(path)
        if "budget" in unit:
            budgets.append(unit["budget"])
        else:
            missing += 1
    return budgets, missing


def main(run_dirs: list[str]) -> int:
    if not run_dirs:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    for run_dir in run_dirs:
        budgets, missing = run_budgets(run_dir)
        print(f"## {run_dir}: {len(budgets)} processes with a budget"
              + (f" ({missing} without)" if missing else ""))
        if not budgets:
            continue
        table = budget_table(budgets)
        print("| phase | processes | median s | mean s | max s | share of wall |")
        print("| --- | --- | --- | --- | --- | --- |")
        for r in table.itertuples():
            print(f"| {r.phase} | {r.processes} | {r.median_s:.2f} | {r.mean_s:.2f} | "
                  f"{r.max_s:.2f} | {r.share:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
