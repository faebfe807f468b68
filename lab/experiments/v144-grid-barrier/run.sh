#!/bin/bash
# v144: step 10 at 2-8 splits as one cooperative launch: after a grid barrier
# (cooperative_groups' grid sync) every program merges its share of the rows, and no merge
# kernel runs (branch next/grid-barrier, PA_TRIAL_COOP=1 at run time), against the same program
# with main's overlapped merge kernel (the variable unset). Built by ../v136-deep-program/build.sh
# (WT=/tmp/wgb coop -DPA_HEAD_DIMS=128 -DPA_TRIAL_COOP). Rounds alternate. Usage: run.sh PROGRAM_DIR.
set -u; export OUT
B=$1
FULL=v144-full.txt
source "$(dirname "$0")/../rows.sh"
C=PA_TRIAL_COOP=1
for r in 1 2 3 4; do
  vrow "" "r$r main small-batch" step10_tensor_cores-coop --workload small-batch
  vrow $C "r$r coop small-batch" step10_tensor_cores-coop --workload small-batch
done
ab_shapes $C coop step10_tensor_cores-coop
adv $C "coop bf16" step10_tensor_cores-coop --dtype bf16 --head-dim 128
adv $C "coop f16" step10_tensor_cores-coop --dtype f16 --head-dim 128
echo "end at $(date +%T)"
