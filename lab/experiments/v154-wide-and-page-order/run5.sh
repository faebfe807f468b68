#!/bin/bash
# v159 (one call, prepared): main (step10) against a lighter softmax (diet: the max of the raw
# scores scaled once, no mask on a full tile, the scale folded into the exponent's fma), after
# v158 put two thirds of the arithmetic's cost on the softmax: the adversarial sets on the GPU,
# small-batch in three rounds alternating, gqa-batch in two, mha-batch, long-single and group 16
# in one. Usage: run5.sh PROGRAM_DIR (build/v154; build.sh step10 diet makes what it needs).
set -u; export OUT
B=$1
FULL=v159-full.txt
source "$(dirname "$0")/../rows.sh"
adv "" "diet bf16" diet --dtype bf16 --head-dim 128
adv "" "diet f16" diet --dtype f16 --head-dim 128
for r in 1 2 3; do
  if (( r % 2 )); then order="step10 diet"; else order="diet step10"; fi
  for v in $order; do row "r$r $v small-batch" $v --workload small-batch; done
done
for r in 1 2; do
  for v in step10 diet; do row "r$r $v gqa-batch" $v --workload gqa-batch; done
done
for v in step10 diet; do row "$v mha-batch" $v --workload mha-batch; done
for v in step10 diet; do row "$v long-single" $v --workload long-single; done
for v in step10 diet; do row "$v group 16" $v --workload gqa-batch --q-heads 128; done
rm -f $OUT/tmp.json
echo "end at $(date +%T)"
