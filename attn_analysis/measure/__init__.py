"""Measure: the GPU side of the data flow (the first stage), the only part that imports torch.

One concept a module: :mod:`.env` (the environment lock), :mod:`.machine` (the
fingerprint, the GPU's identity and state), :mod:`.timing` (the three timers: per call, cold L2, graph
replay), :mod:`.processes` (the timers repeated in fresh processes), :mod:`.profiler`
(the kernels of a call or a graph replay),
:mod:`.placement` (fresh inputs behind a random pad, protocol 2), :mod:`.candidates` (the
registry of implementations and the correctness gate), :mod:`.peers` and :mod:`.controls`
(third-party kernels and the A/A twin and spin controls, as plugins),
:mod:`.triton_attention` (our Triton kernel: launch, tuning, checks; its kernels in
:mod:`.triton_kernels`), :mod:`.gluon_attention` (our FA3-style Gluon kernel for Hopper,
measured on the H100 and the H200: launch, checks, the schedule in torch; its configurations in
:mod:`.gluon_config`, its kernel in :mod:`.gluon_kernels` and :mod:`.gluon_tile`; both
kernels check their tensors with :mod:`.attention_args`),
:mod:`.ceilings` (copy and matmul ceilings),
:mod:`.run_lock` (one sweep per run folder), :mod:`.plan` (what a sweep measures),
:mod:`.device_memory` (the device's memory, read before a sweep starts),
:mod:`.prebuild` (compiling before the first trial), :mod:`.tuning_cache` (what a machine
compiled and tuned, kept for the next sweep), :mod:`.compile_settings` (Inductor's
settings for the compiled candidates), :mod:`.forkserver_warm` (what the fork server does
once for every trial), :mod:`.budget` (where a process's time goes),
:mod:`.fresh_interpreter` (code run in a new interpreter, for the start-up probes),
:mod:`.sweep` (the resumable runner), :mod:`.trial` (one trial process: the randomized
rounds) and :mod:`.unit_records` (the journal units a trial builds from what it
measured). It writes through :mod:`attn_analysis.record` and nothing below it imports it (``tests/test_layers.py``). Import the modules themselves; torch is
imported by the modules that need it, not here.
"""

__all__ = ["env", "machine", "timing", "processes", "profiler", "placement", "candidates", "peers", "controls", "triton_attention", "triton_kernels",
           "gluon_attention", "gluon_config", "gluon_kernels", "gluon_tile", "attention_args",
           "ceilings", "run_lock", "plan", "device_memory", "prebuild", "tuning_cache",
           "compile_settings", "forkserver_warm", "budget", "fresh_interpreter", "sweep", "trial",
           "unit_records"]
