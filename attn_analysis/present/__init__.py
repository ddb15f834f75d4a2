"""The presentation stage: what turns analysed frames into the book's figures, tables and
text, and the book's build support.

- ``figure_style`` (one look for every figure), ``plots`` (the results' figures),
  ``latency_plots`` (latency against shape), ``audit_plots`` (the audit's and the
  appendices' figures), ``target_plots`` (the confirmatory runs at the reports' shape), ``tables`` (a frame as a captioned MyST table, with its CSV);
- ``show`` (a run summarised on the command line);
- the book's build: ``book_cache`` (the notebook cache keyed by the recorded data),
  ``book_figures`` (a glued figure's PNG for the PDF), ``citation`` (the cite page),
  ``book_words`` (the word budget of the built pages).

Torch-free: it reads loaded runs and analysis results only (``tests/test_layers.py``).
"""

__all__ = ["audit_plots", "book_cache", "book_figures", "book_words", "citation",
           "figure_style", "latency_plots", "plots", "show", "tables", "target_plots"]
