#!/bin/bash
# v86: two trials in one call, programs built from ff773b6 + temporary switches (not committed):
# (Its per-run seconds column printed nothing: bc is not installed on that machine.)
#  - `-l256`: cp.async with the L2 prefetch-size hint (.L2::256B), steps 10-12, against the plain
#    cp.async.cg (`-c` for steps 11/12: the plain copies built the same way, by hand);
#  - PA_TRIAL_ITEM_COST=c (steps 11 and 12's plan): an item after a program's first costs c tiles
#    of its portion, so programs that switch items take fewer tiles.
# (Step 12 runs bf16 workloads through step 11's program and plan, so step 12's programs stand for
# step 11's here: the pack must stay under the 64 MiB a call carries.) --runs 20, bf16 (fp8 K/V for step 12's fp8 workload).
set -u
P=/tmp/q; mkdir -p $P && xz -dc build/quick-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t() {  # round, cost, binary, args; skipped past 530 s, to end inside the call's 600
  [ $SECONDS -gt 530 ] && return
  local s=$(date +%s.%N)
  local r=$(PA_TRIAL_ITEM_COST=$2 $B/$3 $4 --runs 20 2>&1)
  local us=$(echo "$r" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')
  local items=$(echo "$r" | grep -oE '[0-9]+ or fewer a program, in [0-9]+ items' | tail -1)
  echo "$r" | grep -qiE 'mismatch|wrong|FAIL' && us="$us WRONG"
  printf "r%s c%s %-26s %-26s %-22s %s (%.0fs)\n" "$1" "$2" "$3" "$4" "$us" "$items" "$(echo "$(date +%s.%N) - $s" | bc)"
}
for r in 1 2; do
  for v in "" -l256; do
    t $r 0 step10_tensor_cores$v "--workload mha-batch"
    t $r 0 step10_tensor_cores$v "--workload small-batch"
    t $r 0 step10_tensor_cores$v "--workload gqa-batch"
  done
  for c in 0 1 2; do t $r $c step12_fp8_cache-c "--workload gqa-batch-fp8"; done
  for c in 0 1; do t $r $c step12_fp8_cache-l256 "--workload gqa-batch-fp8"; done
  for c in 0 1 2 3; do t $r $c step12_fp8_cache-c "--workload ragged-skew"; done
  t $r 0 step12_fp8_cache-l256 "--workload ragged-skew"
  for v in -c -l256; do t $r 0 step12_fp8_cache$v "--workload mha-batch"; done
  for v in "" -l256; do t $r 0 step10_tensor_cores$v "--workload long-single"; done
done
