#!/bin/bash
# v159-v161 (one call, prepared): main (step10) against a lighter softmax (diet: the max of
# the raw scores scaled once, no mask on a full tile, the scale folded into the exponent's fma),
# diet with each row's sum by an mma of the weights with ones (diet2), and diet2 moving the
# running max only when a score is over 2^8 times its weight (lazy), after v158 put two
# thirds of the arithmetic's cost on the softmax: the adversarial sets on the GPU, small-batch in
# three rounds (order rotating), gqa-batch in two, mha-batch, long-single and group 16 in one.
# Usage: run5.sh PROGRAM_DIR (build/v154; `build.sh step10 diet diet2 lazy` makes them).
set -u; export OUT
B=$1
FULL=v159-full.txt
source "$(dirname "$0")/../rows.sh"
adv "" "diet bf16" diet --dtype bf16 --head-dim 128
adv "" "diet f16" diet --dtype f16 --head-dim 128
adv "" "diet2 bf16" diet2 --dtype bf16 --head-dim 128
adv "" "diet2 f16" diet2 --dtype f16 --head-dim 128
adv "" "lazy bf16" lazy --dtype bf16 --head-dim 128
adv "" "lazy f16" lazy --dtype f16 --head-dim 128
progs=(step10 diet diet2 lazy)
for r in 1 2 3; do
  for i in 0 1 2 3; do v=${progs[$(( (i + r - 1) % 4 ))]}; row "r$r $v small-batch" $v --workload small-batch; done
done
for r in 1 2; do
  for v in "${progs[@]}"; do row "r$r $v gqa-batch" $v --workload gqa-batch; done
done
for v in "${progs[@]}"; do row "$v mha-batch" $v --workload mha-batch; done
for v in "${progs[@]}"; do row "$v long-single" $v --workload long-single; done
for v in "${progs[@]}"; do row "$v group 16" $v --workload gqa-batch --q-heads 128; done
rm -f $OUT/tmp.json
echo "end at $(date +%T)"
