#!/bin/bash
# v139: step 10 with its pages looked up two tiles ahead (PA_TRIAL_AHEAD, branch
# next/lookup-ahead) against the same tree without it, both built at head dim 128 by
# ../v136-deep-program/build.sh (WT=/tmp/wla; names ahead, base). v138's profile of main's
# program on small-batch had 9-10% of its warps' stall samples at the branch into the next
# tile's copies, waiting on the block-table loads made one tile before. Rounds alternate.
# Usage: run.sh PROGRAM_DIR.
set -u; export OUT
B=$1
FULL=v139-full.txt
source "$(dirname "$0")/../rows.sh"
for r in 1 2 3; do
  for w in small-batch mha-batch long-single; do
    row "r$r base $w" step10_tensor_cores-base --workload $w
    row "r$r ahead $w" step10_tensor_cores-ahead --workload $w
  done
done
adv "" "ahead bf16" step10_tensor_cores-ahead --dtype bf16 --head-dim 128
adv "" "ahead f16 3 splits" step10_tensor_cores-ahead --dtype f16 --head-dim 128 --splits 3
echo "end at $(date +%T)"
