"""The old import path of :mod:`attn_analysis.analyse.catalog`: the same module object, so
callers not yet moved (the state-of-the-art chapter) keep working. New code imports
``attn_analysis.analyse.catalog``."""

import sys

from .analyse import catalog as _moved

sys.modules[__name__] = _moved
