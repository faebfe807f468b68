#!/bin/bash
# v151 trial build: v149's build.sh with this trial's patch (over v149's: the pair-wait merge,
# switched on at run time by PA_TRIAL_PAIRWAIT=1), in the worktree /tmp/wt151 (branch
# next/v151-pair-wait), into build/v151/step10_tensor_cores-pw (head dim 128). Needs a built
# build/cuda (scripts/setup and scripts/pack-gpu).
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
WT=/tmp/wt151 BRANCH=next/v151-pair-wait PATCH=$HERE/trial.patch DEST=v151 "$HERE/../v149-step10-floor/build.sh" pw
