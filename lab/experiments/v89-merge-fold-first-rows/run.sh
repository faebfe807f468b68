#!/bin/bash
# v89: programs built by hand at head dim 128 only (-DPA_HEAD_DIMS=128), from 601d896 (-m) and:
#  -n: merge_row folding each round's partials from their largest max (weights that do not wait
#      on each other), and the slices the same way (kernels/merge.cuh);
#  -f: -n, and the work list with program p's first item at row p, each item naming the next
#      (no table of first rows read before the first item), steps 11 and 12.
set -u
P=/tmp/q; mkdir -p $P && xz -dc build/quick-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t() {  # round, binary, args
  [ $SECONDS -gt 540 ] && return
  local s=$SECONDS
  local r=$($B/$2 $3 --runs 20 2>&1)
  local us=$(echo "$r" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')
  echo "$r" | grep -qiE 'mismatch|wrong|FAIL' && us="$us WRONG"
  printf "r%s %-24s %-26s %-24s (%ss)\n" "$1" "$2" "$3" "$us" "$((SECONDS - s))"
}
t 1 step10_tensor_cores-m "--workload gqa-batch"
for r in 1 2; do
  for v in -m -n -f; do t $r step11_persistent$v "--workload ragged-skew"; done
  for v in -m -n -f; do t $r step12_fp8_cache$v "--workload gqa-batch-fp8"; done
  for v in -m -n; do t $r step10_tensor_cores$v "--workload long-single"; done
  for v in -m -n -f; do t $r step11_persistent$v "--workload long-single"; done
  for v in -m -n -f; do t $r step11_persistent$v "--workload small-batch"; done
done
