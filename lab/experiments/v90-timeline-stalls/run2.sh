#!/bin/bash
# v90, second call: step 12's fp8 program timeline (-t, merge marks moved past 8192 merge
# programs), and step 12 with its register cap at 152 (-c152: 13 programs an SM by registers,
# 120-byte stack) against 168 (-m), gqa-batch-fp8, three rounds.
set -u
P=/tmp/q; mkdir -p $P && xz -dc build/quick-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
echo "== timeline: step12 gqa-batch-fp8"; PA_TRIAL_TIMELINE=1 $B/step12_fp8_cache-t --workload gqa-batch-fp8 --runs 20 2>&1 | grep -E 'TIMELINE| (us|ms) +[0-9]|rror' | tail -5
for r in 1 2 3; do for v in -m -c152; do
  o=$($B/step12_fp8_cache$v --workload gqa-batch-fp8 --runs 20 2>&1)
  echo "r$r $v $(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}') $(echo "$o" | grep -oE '[0-9]+ programs an SM' | tail -1) $(echo "$o" | grep -qiE 'mismatch|wrong|FAIL' && echo WRONG)"
done; done
