"""3.5's table of the decisive runs at the reports' shape (pure): the numbers behind
:func:`.target_answer.claim_target` and the figure of every confirmatory run, one row per
run and custom kernel, from :func:`.target_answer.confirmatory_rows`."""

from __future__ import annotations

import pandas as pd

from .target_answer import _ROW_COLUMNS, _run_order

__all__ = ["LEVELS", "confirmatory_table"]

LEVELS = ("call", "kernel", "attention")  # the columns, in the figure's order


def confirmatory_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The decisive runs' numbers as a table, from ``rows``
    (:func:`.target_answer.confirmatory_rows`): one row per run and custom kernel (GPU,
    run, m, candidate label) with, per level, 'speedup (low–high) verdict' and a '*' where
    the comparison is judged at the run's m but is no member of its family; '–' where the
    run has no row at that level. Runs in the figure's order
    (:func:`.target_answer.figure_runs_phrase`), kernels by speedup per call, fastest
    first."""
    if not isinstance(rows, pd.DataFrame) or rows.empty or not set(_ROW_COLUMNS) <= set(rows):
        raise ValueError("`rows` must be a non-empty confirmatory_rows() frame.")
    out = []
    for machine, run_id in _run_order(rows):
        r = rows[(rows["machine"] == machine) & (rows["run"] == run_id)]
        call = r[r["level"] == "call"].set_index("candidate")["speedup"]
        for cand in sorted(set(r["candidate"]), key=lambda c: -call.get(c, float("-inf"))):
            c = r[r["candidate"] == cand].set_index("level")
            row = dict(machine=machine, run=run_id, m=int(c["m"].iloc[0]),
                       label=str(c["label"].iloc[0]))
            for level in LEVELS:
                if level not in c.index:
                    row[level] = "–"
                    continue
                x = c.loc[level]
                row[level] = (f"{x['speedup']:.3f} ({x['ci_low']:.3f}–{x['ci_high']:.3f}) "
                              f"{x['verdict']}" + ("" if x["in_family"] else "*"))
            out.append(row)
    return pd.DataFrame(out, columns=["machine", "run", "m", "label", *LEVELS])
