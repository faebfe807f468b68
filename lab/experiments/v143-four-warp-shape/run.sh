#!/bin/bash
# v143: step 10 with kShape {32, 32, 2} (four warps of 32 channels a program at head dim 128,
# each computing the tile's scores; branch next/shape32, PA_TRIAL_SHAPE32) against main's
# {32, 64, 2} (v139's base program, main's kernel), and step 09, on mha-batch (v100: step 10's
# 12 warps an SM twice as busy as step 09's 24) and the group-8 workloads. Built by
# ../v136-deep-program/build.sh (WT=/tmp/ws32 s32 -DPA_HEAD_DIMS=128 -DPA_TRIAL_SHAPE32).
# Rounds alternate. Usage: run.sh PROGRAM_DIR.
set -u; export OUT
B=$1
FULL=v143-full.txt
PLAN_SED='s/^ *launch ([^:]*): grid ([0-9]+ x [0-9]+ x [0-9]+) programs of ([0-9]+) threads.*, ([0-9]+) programs an SM.*/    \1: grid \2, \3 threads, \4 an SM/'
source "$(dirname "$0")/../rows.sh"
for r in 1 2 3; do
  row "r$r step09 mha-batch" step09_memory_pipeline --workload mha-batch
  row "r$r base mha-batch" step10_tensor_cores-base --workload mha-batch
  row "r$r s32 mha-batch" step10_tensor_cores-s32 --workload mha-batch
done
for r in 1 2 3; do
  row "r$r base small-batch" step10_tensor_cores-base --workload small-batch
  row "r$r s32 small-batch" step10_tensor_cores-s32 --workload small-batch
done
for r in 1 2; do
  row "r$r base gqa-batch" step10_tensor_cores-base --workload gqa-batch
  row "r$r s32 gqa-batch" step10_tensor_cores-s32 --workload gqa-batch
done
row "base long-single" step10_tensor_cores-base --workload long-single
row "s32 long-single" step10_tensor_cores-s32 --workload long-single
adv "" "s32 bf16" step10_tensor_cores-s32 --dtype bf16 --head-dim 128
echo "end at $(date +%T)"
