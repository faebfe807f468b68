#!/bin/bash
# v151: step 10's merge (2-8 splits) waiting for its own pair's count instead of the whole split
# grid. One program (build.sh), the trial off and on (PA_TRIAL_PAIRWAIT=1) row by row: small-batch
# in five rounds, the order alternating; v103's shapes (ab_shapes: 4 splits, group 32, a ragged
# f16 batch at 8 splits, 7 splits on 3 sequences, 16 x 2048); then the adversarial set on the GPU
# with the trial on, bf16 and f16. Usage: run.sh PROGRAM_DIR (the JSON and full output under $OUT).
set -u; export OUT
B=$1
FULL=v151-full.txt
source "$(dirname "$0")/../rows.sh"
W=PA_TRIAL_PAIRWAIT=1
for r in 1 2 3 4 5; do
  if (( r % 2 )); then
    vrow "" "r$r main" step10_tensor_cores-pw --workload small-batch
    vrow "$W" "r$r pair wait" step10_tensor_cores-pw --workload small-batch
  else
    vrow "$W" "r$r pair wait" step10_tensor_cores-pw --workload small-batch
    vrow "" "r$r main" step10_tensor_cores-pw --workload small-batch
  fi
done
ab_shapes "$W" "pair wait" step10_tensor_cores-pw
adv "$W" "pair wait bf16" step10_tensor_cores-pw --dtype bf16 --head-dim 128
adv "$W" "pair wait f16" step10_tensor_cores-pw --dtype f16 --head-dim 128
echo "end at $(date +%T)"
