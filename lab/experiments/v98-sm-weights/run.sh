#!/bin/bash
# v98: steps 11/12 with programs that take their work by SM (%smid, then their rank among the
# SM's programs: -sm, trial.patch with -DPA_TRIAL_SMSLOTS) and a plan that gives the SMs v95
# found fast under load a larger portion (PA_TRIAL_FAST_SMS, PA_TRIAL_FAST_WEIGHT per mille).
# The first call (output-static-shared.txt) had the slot in static shared memory, which moved the
# stages off their 128-byte lines (v91); the slot now goes through global memory.
# -b: the same tree without the SM slots. The fast SMs are found first on this machine, from
# -b's own timeline (SM mean end under 96% of the median). Head dim 128 only.
set -u
P=/tmp/q98; mkdir -p $P && xz -dc build/v98-pack.tar.xz | tar -C $P -xf - || exit 3
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
  o=$( ( [ "$2" != - ] && export PA_TRIAL_FAST_SMS=$2 PA_TRIAL_FAST_WEIGHT=$3; $B/$4 --workload $5 --runs 20 ) 2>&1); rc=$?
  local us=$(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')
  echo "$o" | grep -qiE 'mismatch|wrong|FAIL' && us="$us WRONG"
  [ $rc -ne 0 ] && us="$us rc=$rc"
  printf "r%s w %-5s %-24s %-15s %s\n" "$1" "$([ "$2" = - ] && echo - || echo $3)" "$4" "$5" "$us"
}
for r in 1 2; do
  t $r - 0 step11_persistent-b ragged-skew
  t $r - 0 step11_persistent-sm ragged-skew
  for w in 1080 1120 1160; do t $r "$F11" $w step11_persistent-sm ragged-skew; done
  t $r - 0 step12_fp8_cache-b gqa-batch-fp8
  t $r - 0 step12_fp8_cache-sm gqa-batch-fp8
  for w in 1060 1100 1140; do t $r "$F12" $w step12_fp8_cache-sm gqa-batch-fp8; done
done
for w in ragged-uniform gqa-batch; do
  t 1 - 0 step11_persistent-b $w
  t 1 "$F11" 1120 step11_persistent-sm $w
done
echo "-- timelines with the weights"
(export PA_TRIAL_FAST_SMS=$F11 PA_TRIAL_FAST_WEIGHT=1120 PA_TRIAL_TIMELINE=1; $B/step11_persistent-sm --workload ragged-skew --runs 20 2>&1 | grep -E "TIMELINE (split|by SM|merge)" | tail -3)
(export PA_TRIAL_FAST_SMS=$F12 PA_TRIAL_FAST_WEIGHT=1100 PA_TRIAL_TIMELINE=1; $B/step12_fp8_cache-sm --workload gqa-batch-fp8 --runs 20 2>&1 | grep -E "TIMELINE (split|by SM|merge)" | tail -3)
