#!/bin/bash
# v88: (1) steps 11/12 with the next item's reads prefetched (-la, branch next/item-lookahead)
# against main (-m), both built by hand at head dim 128 only (-DPA_HEAD_DIMS=128);
# (2) step 10's program timeline on small-batch / long-single (-t: globaltimer at each program's
# start and end, the merge's start, after its wait and end; printed every 7th launch), and step
# 11's on ragged-skew and small-batch (-t, the same marks);
# (3) step 10 group 32 with the wide shape at 3 stages (PA_TRIAL_WIDE3=1) against 2.
set -u
P=/tmp/q; mkdir -p $P && xz -dc build/quick-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t() {  # round, env, binary, args
  [ $SECONDS -gt 520 ] && return
  local s=$SECONDS
  local r=$(env $2 $B/$3 $4 --runs 20 2>&1)
  local us=$(echo "$r" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')
  echo "$r" | grep -qiE 'mismatch|wrong|FAIL' && us="$us WRONG"
  local st=$(echo "$r" | grep -oE '[0-9] stages' | tail -1)
  printf "r%s %-18s %-24s %-36s %-24s %s (%ss)\n" "$1" "$2" "$3" "$4" "$us" "$st" "$((SECONDS - s))"
  echo "$r" | grep TIMELINE | tail -3
}
for r in 1 2; do
  for v in -m -la; do t $r X=0 step11_persistent$v "--workload ragged-skew"; done
  for v in -m -la; do t $r X=0 step12_fp8_cache$v "--workload gqa-batch-fp8"; done
  for w in "" PA_TRIAL_WIDE3=1; do t $r "X=0 $w" step10_tensor_cores-t "--workload gqa-batch --q-heads 256"; done
  [ $r = 1 ] && { t 1 PA_TRIAL_TIMELINE=1 step10_tensor_cores-t "--workload small-batch"; t 1 PA_TRIAL_TIMELINE=1 step10_tensor_cores-t "--workload long-single";
    t 1 PA_TRIAL_TIMELINE=1 step11_persistent-t "--workload ragged-skew"; t 1 PA_TRIAL_TIMELINE=1 step11_persistent-t "--workload small-batch"; }
  for v in -m -la; do t $r X=0 step11_persistent$v "--workload small-batch"; done
done
for v in -m -la; do t 3 X=0 step11_persistent$v "--workload ragged-skew"; done
for v in -m -la; do t 3 X=0 step12_fp8_cache$v "--workload gqa-batch-fp8"; done
