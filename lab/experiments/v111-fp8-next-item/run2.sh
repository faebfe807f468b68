#!/bin/bash
# v111, second form (prepared 2026-12-04, not yet run: the session's device time ran out):
# -xo prefetches across a program's own items only and claims as main does, when its run is
# done (trial.patch with -DPA_TRIAL_XITEM -DPA_TRIAL_XITEM_OWN), against -m. Build both at head
# dim 128 with ../v107-token-split/build.sh 12 {m,xo} <worktree> -DPA_HEAD_DIMS=128 [...], strip
# them into <PACKDIR>. Usage: run2.sh PACKDIR; outputs under $OUT. About a minute.
set -u
B=$1
$B/step12_fp8_cache-xo --batch 3 --context 1,17,3000 --q-heads 8 --kv-heads 2 --head-dim 128 --dtype bf16 > $OUT/check.txt 2>&1
echo "check xo rc=$?"
for r in 1 2 3; do
  for v in m xo; do
    o=$($B/step12_fp8_cache-$v --workload gqa-batch-fp8 --runs 30 2>&1)
    echo "$o" >> $OUT/v111b-full.txt
    echo "r$r $v $(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')"
  done
done
