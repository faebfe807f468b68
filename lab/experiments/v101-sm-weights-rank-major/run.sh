#!/bin/bash
# v101 (prepared 2026-12-03, not yet run): v98 again with the SM slots rank-major (-smr: slot =
# rank * 132 + smid, -DPA_TRIAL_RANKMAJOR, and PA_TRIAL_RANKMAJOR=1 for the plan's weights), so that
# consecutive portions land on different SMs as the block scheduler places them. v98's SM-major
# slots (smid * programs_per_sm + rank) cost 2-5% by themselves (an SM's programs all holding
# neighbouring portions), which hid what the weights do. Asked: with the placement's cost gone,
# do larger portions for the SMs that end early bring the last end forward? -b and -sm as v98.
# Programs in build/v101-pack.tar.xz (v98's and -smr, head dim 128). About three minutes.
set -u
P=/tmp/q101; mkdir -p $P && xz -dc build/v101-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
fast_of() {  # binary workload: the SMs whose programs end under 96% of the median SM's
  local pairs=$(PA_TRIAL_TIMELINE=1 $B/$1 --workload $2 --runs 20 2>&1 | grep "TIMELINE sm-means" | tail -1 | tr ' ' '\n' | grep -E '^[0-9]+:')
  local median=$(echo "$pairs" | cut -d: -f2 | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
  echo "$pairs" | awk -F: -v m="$median" '$2 < 0.96 * m {o = o (o == "" ? "" : ",") $1} END {print o}'
}
F11=$(fast_of step11_persistent-b ragged-skew); echo "fast SMs (ragged-skew): $F11"
F12=$F11  # the same SMs on both (the first call found them so)
t() {  # round, fast list (- none), weight, binary, workload
  local o rc
  o=$( ( [ "$2" != - ] && export PA_TRIAL_FAST_SMS=$2 PA_TRIAL_FAST_WEIGHT=$3 PA_TRIAL_RANKMAJOR=1; $B/$4 --workload $5 --runs 20 ) 2>&1); rc=$?
  local us=$(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')
  echo "$o" | grep -qiE 'mismatch|wrong|FAIL' && us="$us WRONG"
  [ $rc -ne 0 ] && us="$us rc=$rc"
  printf "r%s w %-5s %-24s %-15s %s\n" "$1" "$([ "$2" = - ] && echo - || echo $3)" "$4" "$5" "$us"
}
for r in 1 2; do
  t $r - 0 step11_persistent-b ragged-skew
  t $r - 0 step11_persistent-smr ragged-skew
  for w in 1080 1120 1160; do t $r "$F11" $w step11_persistent-smr ragged-skew; done
  t $r - 0 step12_fp8_cache-b gqa-batch-fp8
  t $r - 0 step12_fp8_cache-smr gqa-batch-fp8
  for w in 1060 1100 1140; do t $r "$F12" $w step12_fp8_cache-smr gqa-batch-fp8; done
done
for w in ragged-uniform gqa-batch; do
  t 1 - 0 step11_persistent-b $w
  t 1 "$F11" 1120 step11_persistent-smr $w
done
echo "-- timelines with the weights"
(export PA_TRIAL_FAST_SMS=$F11 PA_TRIAL_FAST_WEIGHT=1120 PA_TRIAL_RANKMAJOR=1 PA_TRIAL_TIMELINE=1; $B/step11_persistent-smr --workload ragged-skew --runs 20 2>&1 | grep -E "TIMELINE (split|by SM|merge)" | tail -3)
(export PA_TRIAL_FAST_SMS=$F12 PA_TRIAL_FAST_WEIGHT=1100 PA_TRIAL_RANKMAJOR=1 PA_TRIAL_TIMELINE=1; $B/step12_fp8_cache-smr --workload gqa-batch-fp8 --runs 20 2>&1 | grep -E "TIMELINE (split|by SM|merge)" | tail -3)
