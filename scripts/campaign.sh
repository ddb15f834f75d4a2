#!/usr/bin/env bash
# The GPU campaign in one device call, resumable across calls.
#
# Usage (on the GPU machine, from the repository root):
#   bash scripts/campaign.sh RUN_ID [extra `python -m attn_analysis sweep` arguments]
# Records into $RUNS/RUN_ID (RUNS default data/runs; resuming whatever is already there) and
# leaves a tarball of the run folder in $OUT (the device tool returns at most 8 files, 2
# folders deep). The sweep spreads its processes over every visible GPU (--gpus to choose).
# The sweep gets SIGINT before the call's limit, so a cut-short run still comes back
# consistent and the next call resumes it.
set -uo pipefail
RUN=${1:?usage: campaign.sh RUN_ID [sweep args]}; shift
RUNS=${RUNS:-data/runs}
DIR=$RUNS/$RUN
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
# The device image sets PYTHONDONTWRITEBYTECODE and its torch ships no bytecode, so every
# interpreter (the sweep, its memory probe, the fork server) compiled ~870 modules from
# source: ~7 s each. A pip install writes bytecode at install time; here the first import
# writes it under the prefix (slower once), and every later interpreter reads it
# (benchmarks/readme-command/probes/sweep_cost_probe.py:
# import torch 15.3 s, then 3.3-3.7 s, against 6.5-7.6 s).
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/attn-pycache}
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.limit \
  --format=csv > "$OUT/nvidia-smi-start.csv" 2>&1 || true
# Writing that bytecode first, one process per core, is what a pip install would have done
# (scripts/compile_bytecode.py); its time counts in the command's.
python3 scripts/compile_bytecode.py > "$OUT/sweep.log" 2>&1
timeout -s INT -k 30 "${SWEEP_TIMEOUT_S:-500}" \
  python3 -m attn_analysis sweep --out "$DIR" "$@" >> "$OUT/sweep.log" 2>&1
code=$?
echo "sweep exit code $code after $(( $(date +%s) - start )) s" | tee -a "$OUT/sweep.log"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu \
  --format=csv > "$OUT/nvidia-smi-end.csv" 2>&1 || true
tar czf "$OUT/$RUN.tar.gz" -C "$RUNS" "$RUN"
ls -la "$OUT/$RUN.tar.gz"
tail -c 3000 "$OUT/sweep.log" | tr '\r' '\n' | tail -20
python3 -m attn_analysis verify "$DIR" && python3 -m attn_analysis show "$DIR" | tail -80
exit 0
