"""The old import path of :mod:`attn_analysis.measure.controls`, kept because it is the
plugin's name on the command line (``--plugin attn_analysis.controls``), in
``configs.PLUGINS`` and in recorded plans: the same module object, not a copy. New code
imports ``attn_analysis.measure.controls``."""

import sys

from .measure import controls as _moved

sys.modules[__name__] = _moved
