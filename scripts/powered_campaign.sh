#!/usr/bin/env bash
# The powered campaigns of issue 45 (configs.POWERED_PLANS), one device call each, on a
# multi-GPU host: the sweep spreads its processes over every visible GPU, one per GPU at
# a time, each pinned (CUDA_VISIBLE_DEVICES).
#
# Usage, on the GPU machine from the repository root, after the peers were staged
# (source scripts/peers_install.sh):
#   bash scripts/powered_campaign.sh PLAN PREFIX K
# PLAN: powered-v1-reports or powered-v2-long; K: the shard 1..N (N is the plan's
# `shards`): records shard K/N into $RUNS/PREFIX-PLAN-sK (RUNS default data/runs),
# resuming what is there, and leaves $OUT/PREFIX-PLAN-sK.tar.gz. Once every shard is
# back: python -m attn_analysis merge data/runs/PREFIX-PLAN PREFIX-PLAN-s1 ... -sN.
#   bash scripts/powered_campaign.sh neighbours-v1 PREFIX concurrent|serial
# records the neighbours control into PREFIX-neighbours-v1-concurrent (a process on every
# GPU at a time) or -serial (one at a time over the same GPUs, --one-at-a-time).
set -uo pipefail
USAGE="usage: powered_campaign.sh PLAN PREFIX K|concurrent|serial"
PLAN=${1:?$USAGE}; PREFIX=${2:?$USAGE}; PART=${3:?$USAGE}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
ARGS=$(python3 -c 'import sys; from attn_analysis.configs import sweep_arguments
print(" ".join(sweep_arguments(sys.argv[1])))' "$PLAN") || exit 2
case $PART in
  concurrent) exec bash scripts/campaign.sh "$PREFIX-$PLAN-concurrent" $ARGS --gpus all ;;
  serial) exec bash scripts/campaign.sh "$PREFIX-$PLAN-serial" $ARGS --gpus all --one-at-a-time ;;
esac
N=$(python3 -c 'import sys; from attn_analysis.configs import POWERED_PLANS
print(POWERED_PLANS[sys.argv[1]]["shards"])' "$PLAN") || exit 2
exec bash scripts/campaign.sh "$PREFIX-$PLAN-s$PART" $ARGS --shard "$PART/$N"
