#!/bin/bash
# v115: v113's trial (step 10's copies on the runs) built with -maxrregcount=168, so that 6
# programs fit an SM as in main (an 80-byte stack: spills), -rc, against main -m, head dim 128.
# One check on the GPU, then small-batch and long-single two rounds, gqa-batch one.
# Usage: run.sh PACKDIR; outputs under $OUT.
set -u
B=$1
o=$($B/step10_tensor_cores-rc --batch 4 --context 15,16,47,3000 --q-heads 16 --kv-heads 2 --head-dim 128 --dtype bf16 2>&1); echo "check rc=$?"
echo "$o" >> $OUT/v115-full.txt
for r in 1 2; do
  for w in small-batch long-single; do
    for v in m rc; do
      o=$($B/step10_tensor_cores-$v --workload $w --runs 30 2>&1)
      echo "$o" >> $OUT/v115-full.txt
      echo "r$r $w $v $(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')"
    done
  done
done
for v in m rc; do
  o=$($B/step10_tensor_cores-$v --workload gqa-batch --runs 30 2>&1)
  echo "$o" >> $OUT/v115-full.txt
  echo "gqa-batch $v $(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')"
done
