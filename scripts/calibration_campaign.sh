#!/usr/bin/env bash
# The calibration campaign (issue "Statistics a referee cannot fault"): the baseline, the
# A/A twin and the extra-heads positive controls at the target, one process per trial
# (configs.CALIBRATION_PLANS), one device call at a time, resumable across calls
# (scripts/campaign.sh).
#
# Usage, on the GPU machine from the repository root:
#   bash scripts/calibration_campaign.sh PLAN PREFIX [SEED]
# PLAN is a key of configs.CALIBRATION_PLANS (calibration-v3); PREFIX names the device
# (h100, h200), so the run lands in data/runs/PREFIX-PLAN and comes back as
# $OUT/PREFIX-PLAN.tar.gz. SEED (default 0) is the run's `--seed`: trial t draws from
# SEED + t, so a further run of a plan that is pooled with earlier ones takes a SEED past
# their trials, and its processes share no seed with theirs. The trial processes' time
# budgets (journal/trial units) are printed at the end.
set -uo pipefail
PLAN=${1:?usage: calibration_campaign.sh PLAN PREFIX [SEED]}
PREFIX=${2:?usage: calibration_campaign.sh PLAN PREFIX [SEED]}
SEED=${3:-0}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
ARGS=$(python3 -c 'import sys; from attn_analysis.configs import sweep_arguments
print(" ".join(sweep_arguments(sys.argv[1])))' "$PLAN") || exit 2
bash scripts/campaign.sh "$PREFIX-$PLAN" $ARGS --seed "$SEED"
python3 scripts/process_budget.py "data/runs/$PREFIX-$PLAN" || true
