"""The old import path of :mod:`attn_analysis.measure.peers`, kept because it is the plugin's
name on the command line (``--plugin attn_analysis.peers``), in ``configs.PLUGINS`` and in
recorded plans: the same module object, not a copy. New code imports
``attn_analysis.measure.peers``."""

import sys

from .measure import peers as _moved

sys.modules[__name__] = _moved
