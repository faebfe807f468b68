#!/bin/bash
# v156 (one call): step 10 with each tile's K copied a tile ahead of its V, so that iteration t
# scores tile t + 1 before tile t's softmax and P·V at 2 stages (kvahead), beside main (step10):
# the adversarial sets on the GPU, then small-batch in three rounds alternating, gqa-batch in two,
# mha-batch, long-single and group 16 in one. Usage: run2.sh PROGRAM_DIR (build/v154; build.sh).
set -u; export OUT
B=$1
FULL=v156-full.txt
HERE=$(cd "$(dirname "$0")" && pwd)
source $HERE/../rows.sh
adv "" "kvahead bf16" kvahead --dtype bf16 --head-dim 128
adv "" "kvahead f16" kvahead --dtype f16 --head-dim 128
for r in 1 2 3; do
  if (( r % 2 )); then order="step10 kvahead"; else order="kvahead step10"; fi
  for v in $order; do row "r$r $v small-batch" $v --workload small-batch; done
done
for r in 1 2; do
  for v in step10 kvahead; do row "r$r $v gqa-batch" $v --workload gqa-batch; done
done
for v in step10 kvahead; do row "$v mha-batch" $v --workload mha-batch; done
for v in step10 kvahead; do row "$v long-single" $v --workload long-single; done
for v in step10 kvahead; do row "$v group 16" $v --workload gqa-batch --q-heads 128; done
rm -f $OUT/tmp.json
echo "end at $(date +%T)"
