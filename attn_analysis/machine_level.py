"""The old import path of :mod:`attn_analysis.analyse.machine_level`, kept because the
state-of-the-art notebook (being changed on main) imports it there: the same module object,
not a copy. New code imports ``attn_analysis.analyse.machine_level``."""

import sys

from .analyse import machine_level as _moved

sys.modules[__name__] = _moved
