#!/bin/bash
# v154 and v155 (one call). (v155) step 10 scoring the next tile (q·Kᵀ) before this tile's
# softmax and P·V, at 3 stages, beside main and main at 3 stages, on small-batch, gqa-batch,
# mha-batch and long-single. (A) the wide shape for group 8 - one warp of all 128 channels,
# computing the tile's scores once where kShape's two warps compute them twice - at 8, 12 and 14
# splits on small-batch (7 programs an SM fit, so 12 and 14 splits are still one wave), beside
# main at 8 and 6. (B) the page order: main and the no-arithmetic program on small-batch and
# gqa-batch with the workload's pages shuffled (as benchmarked) and in ascending order: how much
# of the distance to the bare read is the scattered pages' DRAM pattern? (C) v153's run2.sh (the
# mma clock step by input type and group). Usage: run.sh PROGRAM_DIR (build/v154; build.sh).
set -u; export OUT
B=$1
FULL=v154-full.txt
HERE=$(cd "$(dirname "$0")" && pwd)
source $HERE/../rows.sh
adv "" "ahead bf16" ahead --dtype bf16 --head-dim 128
adv "" "ahead f16" ahead --dtype f16 --head-dim 128
echo "== v155: the scores a tile ahead ($(date +%T))"
for r in 1 2 3; do
  for v in step10 s3 ahead; do row "r$r $v small-batch" $v --workload small-batch; done
done
for r in 1 2; do
  for v in step10 ahead; do row "r$r $v gqa-batch" $v --workload gqa-batch; done
done
for v in step10 ahead; do row "$v mha-batch" $v --workload mha-batch; done
for v in step10 ahead; do row "$v long-single" $v --workload long-single; done
adv PA_TRIAL_WIDE=1 "wide bf16" step10 --dtype bf16 --head-dim 128
adv PA_TRIAL_WIDE=1 "wide f16" step10 --dtype f16 --head-dim 128
echo "== A: small-batch, main and the wide shape ($(date +%T))"
for r in 1 2 3; do
  row "r$r main 8" step10 --workload small-batch
  vrow PA_TRIAL_WIDE=1 "r$r wide 8" step10 --workload small-batch
  vrow PA_TRIAL_WIDE=1 "r$r wide 12" step10 --workload small-batch --splits 12
  vrow PA_TRIAL_WIDE=1 "r$r wide 14" step10 --workload small-batch --splits 14
  row "r$r main 6" step10 --workload small-batch --splits 6
done
echo "== B: page order ($(date +%T))"
for r in 1 2; do
  for w in small-batch gqa-batch; do
    row "r$r main $w" step10 --workload $w
    vrow PA_TRIAL_ASCENDING=1 "r$r main asc $w" step10 --workload $w
    row "r$r nomath $w" nomath --workload $w
    vrow PA_TRIAL_ASCENDING=1 "r$r nomath asc $w" nomath --workload $w
  done
done
vrow PA_TRIAL_WIDE=1 "wide gqa-batch" step10 --workload gqa-batch
echo "== C: v153 run2 ($(date +%T))"
FULL=v153c-full.txt bash $HERE/../v153-clock-by-form/run2.sh $B
rm -f $OUT/tmp.json
echo "end at $(date +%T)"
