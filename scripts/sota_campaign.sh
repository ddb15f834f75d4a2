#!/usr/bin/env bash
# The state-of-the-art campaigns (issue "The title question answered against the state of
# the art"): the peers (attn_analysis.measure.peers) beside PyTorch's paths and our kernel, under
# protocol 2, one device call each, resumable across calls (scripts/campaign.sh).
#
# Usage, on the GPU machine from the repository root, after the peers were staged:
#   source scripts/peers_install.sh && bash scripts/sota_campaign.sh CAMPAIGN PREFIX
# CAMPAIGN is one of target, reports, long, confirm (their plans: configs.CAMPAIGN_PLANS);
# PREFIX names the device (h100, h200), so the run lands in data/runs/PREFIX-sota-CAMPAIGN
# and comes back as $OUT/PREFIX-sota-CAMPAIGN.tar.gz. The Gluon campaigns
# (configs.GLUON_PLANS: gluon-target, gluon-long, gluon-v2-target) land in data/runs/PREFIX-CAMPAIGN.
set -uo pipefail
USAGE="usage: sota_campaign.sh target|reports|long|confirm|gluon-target|gluon-long|gluon-v2-target PREFIX"
CAMPAIGN=${1:?$USAGE}
PREFIX=${2:?$USAGE}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
ARGS=$(python3 -c 'import sys; from attn_analysis.configs import sweep_arguments
print(" ".join(sweep_arguments(sys.argv[1])))' "$CAMPAIGN") || exit 2
case $CAMPAIGN in gluon-*) RUN=$PREFIX-$CAMPAIGN ;; *) RUN=$PREFIX-sota-$CAMPAIGN ;; esac
exec bash scripts/campaign.sh "$RUN" $ARGS
