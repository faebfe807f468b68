#!/bin/bash
# v141: step 10 with no merge kernel at up to 8 splits, the last split program of a (sequence,
# KV head) merging it (branch next/pair-merge, PA_TRIAL_PAIRMERGE=1 at run time), against the same
# program with the merge kernel (the variable unset): v103's idea with the checked mode's tagged
# count, acq_rel fences (-pm) or __threadfence (-pmsc), and loads two items at a time. Built by
# ../v136-deep-program/build.sh (WT=/tmp/wpm pm -DPA_HEAD_DIMS=128 -DPA_TRIAL_PAIRMERGE [-DPA_TRIAL_SC]).
# Rounds alternate. Usage: run.sh PROGRAM_DIR.
set -u; export OUT
B=$1
FULL=v141-full.txt
source "$(dirname "$0")/../rows.sh"
PM=PA_TRIAL_PAIRMERGE=1
for r in 1 2 3 4; do
  vrow "" "r$r main small-batch" step10_tensor_cores-pm --workload small-batch
  vrow $PM "r$r pm small-batch" step10_tensor_cores-pm --workload small-batch
  vrow $PM "r$r pmsc small-batch" step10_tensor_cores-pmsc --workload small-batch
done
ab_shapes $PM pm step10_tensor_cores-pm
for w in mha-batch long-single; do
  vrow "" "main $w" step10_tensor_cores-pm --workload $w
  vrow $PM "pm $w" step10_tensor_cores-pm --workload $w
done
adv $PM "pm bf16" step10_tensor_cores-pm --dtype bf16 --head-dim 128
adv $PM "pm f16" step10_tensor_cores-pm --dtype f16 --head-dim 128
echo "end at $(date +%T)"
