#!/bin/bash
# v111, second call (prepared 2026-12-04, not yet run: the session's device time ran out). Modes
# of trial.patch: 2 prefetches across a program's own items only and claims as main does, when
# its run is done (-x2); 3 also makes the claim in the second-last iteration of a program's last
# item and prefetches it (-x3); against main (-m). build2.sh builds and packs them. Checks each
# on the GPU, compute-sanitizer's memcheck and racecheck on -x3 with the named workload, then
# gqa-batch-fp8 three rounds alternating. Usage: run2.sh PACKDIR; outputs under $OUT. About two
# minutes.
set -u
B=$1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
for v in x2 x3; do
  o=$($B/step12_fp8_cache-$v --batch 3 --context 1,17,3000 --q-heads 8 --kv-heads 2 --head-dim 128 --dtype bf16 2>&1); rc=$?
  echo "$o" >> $OUT/v111b-full.txt
  echo "check $v rc=$rc"
done
for tool in memcheck racecheck; do
  o=$(timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B/step12_fp8_cache-x3 --workload gqa-batch-fp8 --runs 1 2>&1); rc=$?
  echo "$o" >> $OUT/v111b-sanitizer.txt
  echo "$tool x3 gqa-batch-fp8: rc=$rc $(echo "$o" | grep -E '(ERROR|RACECHECK) SUMMARY' | tail -1)"
done
for r in 1 2 3; do
  for v in m x2 x3; do
    o=$($B/step12_fp8_cache-$v --workload gqa-batch-fp8 --runs 30 2>&1); rc=$?
    echo "$o" >> $OUT/v111b-full.txt
    echo "r$r $v $(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}') rc=$rc"
  done
done
