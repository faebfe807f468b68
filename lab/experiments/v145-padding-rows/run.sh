#!/bin/bash
# v145: step 10 whose online softmax skips the padding rows 8-15 of a warp that holds 8 heads or
# fewer (their weights 0; branch next/rows8, PA_TRIAL_ROWS8) against main's kernel (v139's base)
# and step 09, on mha-batch (group 1: v100, step 10's issue slots twice as busy) and the group-8
# workloads. Built by ../v136-deep-program/build.sh (WT=/tmp/wr8 rows8 -DPA_HEAD_DIMS=128
# -DPA_TRIAL_ROWS8). Rounds alternate. Usage: run.sh PROGRAM_DIR.
set -u; export OUT
B=$1
FULL=v145-full.txt
source "$(dirname "$0")/../rows.sh"
for r in 1 2 3; do
  row "r$r step09 mha-batch" step09_memory_pipeline --workload mha-batch
  row "r$r base mha-batch" step10_tensor_cores-base --workload mha-batch
  row "r$r rows8 mha-batch" step10_tensor_cores-rows8 --workload mha-batch
done
for r in 1 2 3; do
  row "r$r base small-batch" step10_tensor_cores-base --workload small-batch
  row "r$r rows8 small-batch" step10_tensor_cores-rows8 --workload small-batch
done
row "base gqa-batch" step10_tensor_cores-base --workload gqa-batch
row "rows8 gqa-batch" step10_tensor_cores-rows8 --workload gqa-batch
adv "" "rows8 bf16" step10_tensor_cores-rows8 --dtype bf16 --head-dim 128
echo "end at $(date +%T)"
