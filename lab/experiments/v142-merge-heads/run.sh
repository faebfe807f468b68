#!/bin/bash
# v142: step 10's merge kernel (at most 8 splits) with H query heads a program (H x head_dim
# threads; main has 1 a program, 128 threads, 512 programs on small-batch), set by
# PA_TRIAL_MERGE_HEADS=H at run time in v141's program (branch next/pair-merge, built by
# ../v136-deep-program/build.sh with WT=/tmp/wpm pm -DPA_HEAD_DIMS=128 -DPA_TRIAL_PAIRMERGE).
# H = 1 is main's merge in the trial's kernel. Rounds alternate. Usage: run.sh PROGRAM_DIR.
set -u; export OUT
B=$1
FULL=v142-full.txt
source "$(dirname "$0")/../rows.sh"
for r in 1 2 3; do
  vrow "" "r$r main small-batch" step10_tensor_cores-pm --workload small-batch
  for h in 1 2 4 8; do
    vrow PA_TRIAL_MERGE_HEADS=$h "r$r h$h small-batch" step10_tensor_cores-pm --workload small-batch
  done
done
for shape in "--workload small-batch --splits 4" "--batch 5 --context 700,4096,1,2500,3333 --q-heads 32 --kv-heads 8 --head-dim 128 --dtype f16 --splits 8"; do
  vrow "" "main ${shape:0:40}" step10_tensor_cores-pm $shape
  vrow PA_TRIAL_MERGE_HEADS=8 "h8 ${shape:0:40}" step10_tensor_cores-pm $shape
done
adv PA_TRIAL_MERGE_HEADS=8 "h8 bf16" step10_tensor_cores-pm --dtype bf16 --head-dim 128
echo "end at $(date +%T)"
