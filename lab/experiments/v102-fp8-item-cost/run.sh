#!/bin/bash
# v102 (prepared 2026-12-03, not yet run): does step 12's fp8 plan undercharge an item after a
# program's first? v95's fit for fp8: such items took 3.05 us a tile against 2.87 for first
# items, after a gap of 2.4-2.8 us (bf16 `ragged-skew`: 1.1), about 10 us an item in all, where
# the plan counts kItemCost = 2 tiles (about 5.7 us); v86 measured the cost only up to 2 on fp8.
# -ic: v98's tree (timeline report, weights) with PA_TRIAL_ITEM_COST=c planning c tiles an item,
# and step 12's report of one- and more-item programs' mean ends. Head dim 128, programs in
# build/v101-pack.tar.xz. Then -ct (v92's claims, from branch next/dynamic-tail with the same
# switch, tail-claims.patch) with and without claims at item costs 2-4. About three minutes.
set -u
P=/tmp/q101; mkdir -p $P && xz -dc build/v101-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t() {  # round, item cost, binary, workload
  local o rc
  o=$( (export PA_TRIAL_ITEM_COST=$2; $B/$3 --workload $4 --runs 20) 2>&1); rc=$?
  local us=$(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')
  echo "$o" | grep -qiE 'mismatch|wrong|FAIL' && us="$us WRONG"
  [ $rc -ne 0 ] && us="$us rc=$rc"
  printf "r%s item cost %s %-22s %-15s %s\n" "$1" "$2" "$3" "$4" "$us"
}
for r in 1 2; do
  for c in 2 3 4 5 6; do t $r $c step12_fp8_cache-ic gqa-batch-fp8; done
  for c in 1 2 3 4; do t $r $c step11_persistent-ic ragged-skew; done
done
# With v92's claims (branch next/dynamic-tail + the item-cost switch: -ct): a program's last 4
# tiles as an item claimed at run time by programs already done, at item costs 2-4.
tc() {  # round, tail (- none), item cost
  local o rc
  o=$( ( [ "$2" != - ] && export PA_TRIAL_TAIL=$2; export PA_TRIAL_ITEM_COST=$3; $B/step12_fp8_cache-ct --workload gqa-batch-fp8 --runs 20 ) 2>&1); rc=$?
  local us=$(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')
  echo "$o" | grep -qiE 'mismatch|wrong|FAIL' && us="$us WRONG"
  [ $rc -ne 0 ] && us="$us rc=$rc"
  printf "r%s claims %-5s item cost %s step12_fp8_cache-ct gqa-batch-fp8 %s\n" "$1" "$2" "$3" "$us"
}
for r in 1 2; do
  for c in 2 3 4; do tc $r - $c; tc $r 4,4 $c; done
done
for c in 2 4; do
  echo "-- fp8 timeline at item cost $c"
  (export PA_TRIAL_ITEM_COST=$c PA_TRIAL_TIMELINE=1; $B/step12_fp8_cache-ic --workload gqa-batch-fp8 --runs 20 2>&1 | grep -E "TIMELINE(11| split| items)" | tail -5 | cut -c1-300)
done
