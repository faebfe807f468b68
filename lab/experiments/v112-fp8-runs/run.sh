#!/bin/bash
# v112: step 12's copies on the runs (each 16-token half of a tile one run of bytes of a page:
# one page lookup a half, a lane's copies of a half one address plus constants) against main.
# PACKDIR holds step12_fp8_cache-r (the change, every head dim) and step12_fp8_cache-m (main at
# head dim 128). Checks shapes on the GPU (both paths: the runs at pages >= 16 in HND with one
# warp; the lookups at page 8, NHD, head dims 80 and 256), the adversarial set, memcheck and
# racecheck on the named workload, then gqa-batch-fp8 three rounds alternating. Outputs under
# $OUT. Usage: run.sh PACKDIR
set -u
B=$1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
check() {
  o=$($B/step12_fp8_cache-r "$@" 2>&1); rc=$?
  echo "== $*" >> $OUT/v112-checks.txt; echo "$o" >> $OUT/v112-checks.txt
  echo "check rc=$rc $*"
}
base="--batch 3 --context 1,17,3000 --q-heads 8 --kv-heads 2"
for d in 64 128 80 256; do check $base --head-dim $d --dtype bf16; done
for p in 8 32 64; do check $base --head-dim 128 --page $p --dtype f16; done
check $base --head-dim 128 --layout nhd --dtype bf16
check --batch 2 --context 4095,70000 --q-heads 32 --kv-heads 8 --head-dim 128 --dtype bf16
check --adversarial --dtype bf16
check --adversarial --dtype f16
for tool in memcheck racecheck; do
  o=$(timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $B/step12_fp8_cache-r --workload gqa-batch-fp8 --runs 1 2>&1); rc=$?
  echo "$o" >> $OUT/v112-sanitizer.txt
  echo "$tool gqa-batch-fp8: rc=$rc $(echo "$o" | grep -E '(ERROR|RACECHECK) SUMMARY' | tail -1)"
done
for r in 1 2 3; do
  for v in m r; do
    o=$($B/step12_fp8_cache-$v --workload gqa-batch-fp8 --runs 30 2>&1); rc=$?
    echo "$o" >> $OUT/v112-full.txt
    echo "r$r $v $(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}') rc=$rc"
  done
done
