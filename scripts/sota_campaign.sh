#!/usr/bin/env bash
# The state-of-the-art campaigns (issue "The title question answered against the state of
# the art"): the peers (attn_analysis.peers) beside PyTorch's paths and our kernel, under
# protocol 2, one device call each, resumable across calls (scripts/campaign.sh).
#
# Usage, on the GPU machine from the repository root, after the peers were staged:
#   source scripts/peers_install.sh && bash scripts/sota_campaign.sh CAMPAIGN PREFIX
# CAMPAIGN is one of target, reports, long; PREFIX names the device (h100, h200), so the run
# lands in data/runs/PREFIX-sota-CAMPAIGN and comes back as $OUT/PREFIX-sota-CAMPAIGN.tar.gz.
set -uo pipefail
CAMPAIGN=${1:?usage: sota_campaign.sh target|reports|long PREFIX}
PREFIX=${2:?usage: sota_campaign.sh target|reports|long PREFIX}
PEERS="fa4 flashinfer cudnn_frontend xformers"
PLUGINS="--plugin attn_analysis.peers --plugin attn_analysis.controls"
case "$CAMPAIGN" in
  # Every built-in, every peer, the A/A twin, the layout control and two spin controls;
  # all three timing modes; 4 processes.
  target) ARGS="--matrix fixed-v1 --trials 4 --candidates sdpa sdpa_flash sdpa_efficient \
sdpa_cudnn sdpa_math eager eager_compiled flex triton $PEERS sdpa_twin sdpa_bshd sdpa_spin0 \
sdpa_spin1000" ;;
  # The reports' ten configurations: SDPA and its two fused backends, our kernel, the peers.
  reports) ARGS="--matrix reports-v1 --modes graph --candidates sdpa sdpa_flash sdpa_cudnn \
triton $PEERS sdpa_bshd" ;;
  # S = 128 to 8192 (x4 steps), D = 64 and 128, causal and not, 16k tokens, hidden 2048.
  long) ARGS="--matrix long-grid-v1 --modes graph --candidates sdpa $PEERS" ;;
  *) echo "CAMPAIGN must be one of target, reports, long; got $CAMPAIGN"; exit 2 ;;
esac
exec bash scripts/campaign.sh "$PREFIX-sota-$CAMPAIGN" $PLUGINS $ARGS
