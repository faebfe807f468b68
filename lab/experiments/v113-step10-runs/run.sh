#!/bin/bash
# v113: step 10's TileCopies on the runs (v112's idea for step 10's programs of PARTS warps:
# one page lookup a 16-token half-tile, a lane's copies of the half one address plus constants),
# trial.patch with -DPA_TRIAL_RUNS (-r) against the same source without it (-m), both at head
# dim 128. Checks shapes on the GPU, then the rows of issue 18 two rounds alternating.
# Usage: run.sh PACKDIR; outputs under $OUT.
set -u
B=$1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
for a in "--page 16" "--page 32" "--page 8" "--layout nhd" "--q-heads 64 --kv-heads 2 --dtype f16"; do
  o=$($B/step10_tensor_cores-r --batch 4 --context 15,16,47,70000 --q-heads 16 --kv-heads 2 --head-dim 128 --dtype bf16 $a 2>&1); rc=$?
  echo "$o" >> $OUT/v113-checks.txt
  echo "check rc=$rc $a"
done
for r in 1 2; do
  for w in small-batch long-single mha-batch gqa-batch; do
    for v in m r; do
      o=$($B/step10_tensor_cores-$v --workload $w --runs 30 2>&1)
      echo "$o" >> $OUT/v113-full.txt
      echo "r$r $w $v $(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')"
    done
  done
done
