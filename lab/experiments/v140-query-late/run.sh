#!/bin/bash
# v140: step 10 with the query's loads after the first tiles' copies (PA_TRIAL_QLATE, branch
# next/query-late) against the same tree without it (v139's base), head dim 128, built by
# ../v136-deep-program/build.sh (WT=/tmp/wql qlate -DPA_HEAD_DIMS=128 -DPA_TRIAL_QLATE). v138's
# profile: 32 loads a lane of the query go out before a program's first copies. Rounds
# alternate. Usage: run.sh PROGRAM_DIR.
set -u; export OUT
B=$1
FULL=v140-full.txt
source "$(dirname "$0")/../rows.sh"
for r in 1 2 3 4 5 6; do
  row "r$r base small-batch" step10_tensor_cores-base --workload small-batch
  row "r$r qlate small-batch" step10_tensor_cores-qlate --workload small-batch
done
for r in 1 2; do
  for w in long-single mha-batch; do
    row "r$r base $w" step10_tensor_cores-base --workload $w
    row "r$r qlate $w" step10_tensor_cores-qlate --workload $w
  done
done
adv "" "qlate bf16" step10_tensor_cores-qlate --dtype bf16 --head-dim 128
echo "end at $(date +%T)"
