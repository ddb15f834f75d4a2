"""Command line: ``python -m attn_analysis sweep | verify | show | merge | ...``.

This module dispatches; :mod:`attn_analysis.cli` holds the parser (torch-free, so
``--help`` works on a machine without torch) and one module per group of verbs, which
import what they need when they run.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from .cli.analysis_verbs import cmd_calibrate, cmd_compare
from .cli.parser import build_parser
from .cli.plan_verb import cmd_plan
from .cli.run_verbs import cmd_merge, cmd_show, cmd_verify
from .cli.sweep_verb import _power_warning, cmd_sweep  # noqa: F401  (tests import it here)

COMMANDS = {"sweep": cmd_sweep, "verify": cmd_verify, "show": cmd_show, "merge": cmd_merge,
            "plan": cmd_plan, "compare": cmd_compare, "calibrate": cmd_calibrate}


def interrupt_message(args) -> str:
    """What an interrupted verb left: for a sweep whose folder holds a journal, that its
    finished units are there and the same command resumes; for a sweep that recorded
    nothing, that nothing was left; for any other verb, only that it was interrupted."""
    if getattr(args, "verb", None) != "sweep":
        return "interrupted"
    from .record.schema import JOURNAL
    out = Path(getattr(args, "out", "") or "")
    if str(out) and (out / JOURNAL).is_dir() and any((out / JOURNAL).iterdir()):
        return (f"interrupted: the finished units are in {out}; rerun the same command to "
                f"resume")
    return "interrupted before any unit was recorded; nothing was left on disk"


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
        print(interrupt_message(args), file=sys.stderr)
        return 130
    except (ValueError, RuntimeError, OSError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
