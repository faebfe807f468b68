#!/bin/bash
# v137: v136's two token groups of warps (tg2) at occupancies that hold a whole wave: 4 stages
# (64 KB, 128 threads, 164 registers: 3 programs an SM, 396 resident) and 6 stages (96 KB: 2 an
# SM), against main's 8 splits (512 programs of 2 warps, 4 an SM) on small-batch and
# long-single. Programs built by ../v136-deep-program/build.sh (deeptg4, deeptg6) into
# build/v134/; PA_TRIAL_DEEP_SHAPE=1 selects the trial shape, --splits its split count.
# Usage: run.sh PROGRAM_DIR (the JSON and full output under $OUT).
set -u; export OUT
B=$1
FULL=v137-full.txt
source "$(dirname "$0")/../rows.sh"
D=PA_TRIAL_DEEP_SHAPE=1
for r in 1 2 3; do
  vrow "" "r$r main small-batch" step10_tensor_cores-deeptg4 --workload small-batch
  vrow "" "r$r main 6 splits" step10_tensor_cores-deeptg4 --workload small-batch --splits 6
  for s in 4 5 6 8; do vrow "$D" "r$r tg4 $s splits" step10_tensor_cores-deeptg4 --workload small-batch --splits $s; done
  for s in 2 4; do vrow "$D" "r$r tg6 $s splits" step10_tensor_cores-deeptg6 --workload small-batch --splits $s; done
done
for r in 1 2; do
  vrow "" "r$r main long-single" step10_tensor_cores-deeptg4 --workload long-single
  for s in 32 48; do vrow "$D" "r$r tg4 long $s" step10_tensor_cores-deeptg4 --workload long-single --splits $s; done
done
adv "$D" tg4 step10_tensor_cores-deeptg4 --dtype bf16 --head-dim 128
adv "$D" "tg4 f16 5 splits" step10_tensor_cores-deeptg4 --dtype f16 --head-dim 128 --splits 5
echo "end at $(date +%T)"
