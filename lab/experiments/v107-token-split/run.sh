#!/bin/bash
# v107: step 10's program for groups of at most 16 at head dim 128 (kShape: two warps, 32-token
# tiles) with warps that split a tile's tokens (warp w the 16-token chunk w, all 128 channels,
# the two warps' states merged at the end through shared memory) instead of its channels (each
# warp computing the whole tile's scores for its 64 channels). Programs built by build.sh at
# head dim 128: -m main (3b0a5cd), -tk the trial (trial.patch, -DPA_TRIAL_TOKENS, held to 168
# registers like main's, so 6 programs an SM). Step 11 calls the same function for its items.
# Writes everything under $OUT, prints the table. Usage: run.sh PACKDIR
set -u
B=$1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t() {  # round, program, workload or shape...
  local r=$1 b=$2; shift 2
  local o rc; o=$($B/$b "$@" --runs 30 2>&1); rc=$?
  echo "$o" >> $OUT/v107-full.txt
  local us=$(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')
  [ $rc -ne 0 ] && us="$us rc=$rc"
  printf "r%s %-24s %-40s %s\n" "$r" "$b" "$*" "$us"
}
# correctness on the GPU first: odd lengths, splits, groups 1-16, both 16-bit types
for dt in bf16 f16; do
  for shape in "--batch 3 --context 1,17,300 --q-heads 8 --kv-heads 2" "--batch 4 --context 5,33,64,700 --q-heads 4 --kv-heads 4 --splits 3" \
               "--batch 2 --context 1000,15 --q-heads 16 --kv-heads 1 --splits 2" "--batch 3 --context 0,40,96 --q-heads 6 --kv-heads 2 --splits 4"; do
    for b in step10_tensor_cores-tk step11_persistent-tk; do
      o=$($B/$b $shape --head-dim 128 --dtype $dt 2>&1); rc=$?
      echo "$o" >> $OUT/v107-full.txt
      printf "check %-22s %s %-60s rc=%s\n" "$b" "$dt" "$shape" "$rc"
    done
  done
done
for r in 1 2; do
  for w in mha-batch gqa-batch small-batch; do
    for v in m tk; do t $r step10_tensor_cores-$v --workload $w; done
  done
  for w in ragged-skew mha-batch; do
    for v in m tk; do t $r step11_persistent-$v --workload $w; done
  done
done
for v in m tk; do t 1 step10_tensor_cores-$v --workload gqa-batch --q-heads 128; done  # group 16
