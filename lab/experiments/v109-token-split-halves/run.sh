#!/bin/bash
# v109: v107's warps that split a tile's tokens, with the end balanced: each warp finishes half the
# channels (leaves the other half, its max and sum in shared memory, folds the other warp's state
# into its own half and writes it), where v107's warp 0 finished all of them alone.
# Programs (head dim 128, lab/experiments/v107-token-split/build.sh): step10_tensor_cores-m
# (main, 3b0a5cd), -tk (v107), -th (this: trial.patch, on 3b0a5cd), and main's step 09.
# Writes everything under $OUT, prints the table. Usage: run.sh PACKDIR
set -u
B=$1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t() {  # round, program, workload or shape...
  local r=$1 b=$2; shift 2
  local o rc; o=$($B/$b "$@" --runs 30 2>&1); rc=$?
  echo "$o" >> $OUT/v109-full.txt
  local us=$(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')
  [ $rc -ne 0 ] && us="$us rc=$rc"
  printf "r%s %-24s %-28s %s\n" "$r" "$b" "$*" "$us"
}
for dt in bf16 f16; do
  for shape in "--batch 3 --context 1,17,300 --q-heads 8 --kv-heads 2" "--batch 4 --context 5,33,64,700 --q-heads 4 --kv-heads 4 --splits 3" \
               "--batch 2 --context 1000,15 --q-heads 16 --kv-heads 1 --splits 2" "--batch 3 --context 0,40,96 --q-heads 6 --kv-heads 2 --splits 4"; do
    o=$($B/step10_tensor_cores-th $shape --head-dim 128 --dtype $dt 2>&1); rc=$?
    echo "$o" >> $OUT/v109-full.txt
    printf "check th %s %-66s rc=%s\n" "$dt" "$shape" "$rc"
  done
done
for r in 1 2; do
  t $r step09_memory_pipeline --workload mha-batch
  for w in mha-batch small-batch gqa-batch; do
    for v in m th; do t $r step10_tensor_cores-$v --workload $w; done
  done
done
for w in mha-batch small-batch; do t 1 step10_tensor_cores-tk --workload $w; done
