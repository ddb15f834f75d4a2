"""The old import path of :mod:`attn_analysis.measure.sweep`, kept because the state-of-the-art
notebook (being changed on main) imports it there: the same module object, not a copy. New
code imports ``attn_analysis.measure.sweep``."""

import sys

from .measure import sweep as _moved

sys.modules[__name__] = _moved
