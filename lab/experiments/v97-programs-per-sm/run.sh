#!/bin/bash
# v97: steps 11/12 planned with fewer programs an SM than the occupancy's (PA_TRIAL_PER_SM, v95's
# programs in build/v95-pack.tar.xz, timelines off). v95 found that at the occupancy's count the
# ends of equal programs spread between SMs (24 SMs end 10-13% early), and at 4 an SM they do not
# but every program is slower: is there a count between that is faster than both?
set -u
P=/tmp/q95; mkdir -p $P && xz -dc build/v95-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t() {  # round, programs an SM (- for the plan's), binary, workload
  local o=$( ( [ "$2" != - ] && export PA_TRIAL_PER_SM=$2; $B/$3 --workload $4 --runs 20 ) 2>&1)
  local us=$(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')
  echo "$o" | grep -qiE 'mismatch|wrong|FAIL' && us="$us WRONG"
  printf "r%s per_sm %-3s %-24s %-15s %s\n" "$1" "$2" "$3" "$4" "$us"
}
for r in 1 2; do
  for k in - 5 4; do t $r $k step11_persistent-tl2 ragged-skew; done
  for k in - 11 10 9; do t $r $k step12_fp8_cache-tl2 gqa-batch-fp8; done
done
for w in ragged-uniform gqa-batch small-batch long-single; do
  for k in - 5; do t 1 $k step11_persistent-tl2 $w; done
done
