"""A pytest plugin that writes when each test starts, and which of the session's
background steps (tests/session_builds.py) had finished by then, to the file named by
ATTN_TIMELINE (default timeline.tsv): seconds since the session began, one digit per
step in SessionBuilds.STEPS order (1 = done), the test's node id; END at the end.

    PYTHONPATH=benchmarks/test-suite-logs ATTN_TIMELINE=/tmp/t.tsv \
        python3 -m pytest -p timeline_plugin
"""

import os
import sys
import time

_T0 = time.monotonic()
_OUT = open(os.environ.get("ATTN_TIMELINE", "timeline.tsv"), "w")


def _steps() -> str:
    conftest = sys.modules.get("conftest")
    if conftest is None:
        return "-"
    return "".join(str(int(step.done.is_set())) for step in conftest._BUILDS.steps.values())


def _write(what: str) -> None:
    _OUT.write(f"{time.monotonic() - _T0:.1f}\t{_steps()}\t{what}\n")
    _OUT.flush()


def pytest_runtest_logstart(nodeid, location):
    _write(nodeid)


def pytest_sessionfinish(session, exitstatus):
    _write("END")
