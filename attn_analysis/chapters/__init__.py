"""Chapters: one module per chapter of the book that computes more than a table (the stage
after analysis). A notebook calls its chapter's module, glues what it returns and shows one
figure or short table. :mod:`.audit` (inputs, calibration, timing checks) and
:mod:`.claims` and :mod:`.kernel_claims` (the reports' claims, checked; :mod:`.claim_table`
lays them out) serve the
audit chapter; :mod:`.fixed_shape`, :mod:`.matrix` and :mod:`.cross_device` serve the
fixed-shape, matrix and cross-device chapters; :mod:`.gluon_kernel` the state-of-the-art
chapter's section on our Gluon kernel; :mod:`.inputs` checks the recorded runs and check files a chapter reads.
Torch-free (``tests/test_layers.py``).
"""

__all__ = ["audit", "claims", "claim_table", "cross_device", "fixed_shape", "gluon_kernel",
           "inputs", "kernel_claims", "matrix", "state_of_the_art"]
