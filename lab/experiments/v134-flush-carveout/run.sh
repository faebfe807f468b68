#!/bin/bash
# v134: does the L2 flush's shared-memory carveout cost the timed kernel? The step programs of
# 1c8a129 linked with runtime.cu of branch next/flush-carveout, where PA_TRIAL_FLUSH_CARVEOUT=N
# sets the flush kernel's preferred carveout (N% shared; unset: the driver's default). Rounds
# alternate unset and 100. First `overhead` (overhead.cu): the timed region's fixed cost.
# Then v135's few_read and v136's deep programs (step10_tensor_cores-deep*, built by
# ../v136-deep-program/build.sh). QUICK=1: then two rounds of step 10's small-batch and
# long-single only. Usage: run.sh PROGRAM_DIR.
set -u; export OUT
B=$1
FULL=v134-full.txt
source "$(dirname "$0")/../rows.sh"
C=PA_TRIAL_FLUSH_CARVEOUT=100
timeout 60 $B/overhead
timeout 60 $B/few_read  # v135
D=PA_TRIAL_DEEP_SHAPE=1  # v136: a program a pair (12 stages, one an SM) and 6 stages (two an SM)
for r in 1 2; do
  vrow "" "r$r v136 main 8 splits" step10_tensor_cores-deep --workload small-batch
  vrow "$D" "r$r v136 deep12 1 split" step10_tensor_cores-deep --workload small-batch --splits 1
  vrow "$D" "r$r v136 deep12 2 splits" step10_tensor_cores-deep --workload small-batch --splits 2
  vrow "$D" "r$r v136 deep6 2 splits" step10_tensor_cores-deep6 --workload small-batch --splits 2
  vrow "$D" "r$r v136 deep6 4 splits" step10_tensor_cores-deep6 --workload small-batch --splits 4
  vrow "$D" "r$r v136 tg2 1 split" step10_tensor_cores-deeptg2 --workload small-batch --splits 1
  vrow "$D" "r$r v136 tg2 2 splits" step10_tensor_cores-deeptg2 --workload small-batch --splits 2
done
for p in deep deeptg2; do
  adv "$D" "v136 $p 1 split" step10_tensor_cores-$p --dtype bf16 --head-dim 128 --splits 1
done
for r in 1 2 $([[ -z ${QUICK:-} ]] && echo 3); do
  for w in small-batch long-single; do
    vrow "" "r$r default $w" step10_tensor_cores --workload $w
    vrow "$C" "r$r shared100 $w" step10_tensor_cores --workload $w
  done
done
[[ -n ${QUICK:-} ]] && { echo "end at $(date +%T)"; exit 0; }
for r in 1 2; do
  for p in step10_tensor_cores step09_memory_pipeline; do
    vrow "" "r$r default mha" $p --workload mha-batch
    vrow "$C" "r$r shared100 mha" $p --workload mha-batch
  done
  vrow "" "r$r default sb09" step09_memory_pipeline --workload small-batch
  vrow "$C" "r$r shared100 sb09" step09_memory_pipeline --workload small-batch
done
echo "end at $(date +%T)"
