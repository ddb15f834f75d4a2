"""The entry points, one module per job. The command line: :mod:`.parser` builds the
arguments (torch-free, so ``--help`` works without torch), :mod:`.sweep_verb` runs
``sweep``, :mod:`.plan_verb` ``plan --power``, :mod:`.run_verbs` ``verify``, ``show`` and
``merge``, and :mod:`.analysis_verbs` ``compare`` and ``calibrate``; ``python -m
attn_analysis`` (:mod:`attn_analysis.__main__`) dispatches to them. The notebooks:
:mod:`.notebook_support`, the prelude every notebook of the book calls first.
"""

__all__: list[str] = []
