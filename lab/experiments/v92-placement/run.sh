#!/bin/bash
# v92 (prepared 2026-12-03, not yet run): which programs end last, and two ways to even the ends.
# Programs in build/trials/ (head dim 128 only, lab/experiments/v91-claimed-tails/build.sh with
# its output folder set to build/trials/), packed by pack.sh next to this script:
#   -m   main (1eaff3a) as is;
#   -tl  main + lab/experiments/v88-next-item-prefetch/timeline-trial.patch, with a line more in
#        trial_report: how many programs' rank on their SM is their index / SMs;
#   -rw  branch next/rank-weights (baa9772) + the same patch: PA_TRIAL_RANK_WEIGHTS=w0,w1,..
#        gives program p the weight w[p / SMs];
#   -dt  branch next/dynamic-tail (8d0b189): PA_TRIAL_TAIL=tail,unit claims.
# Weights for -rw come from -tl's per-rank mean ends on the same machine: w_r = 1000 * (least
# mean end) / (mean end of rank r), so a rank whose programs end later gets less work.
set -u
P=/tmp/q; mkdir -p $P && xz -dc build/trials-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t() {  # round, env (VAR=value or -), binary, workload -> one line
  [ $SECONDS -gt 480 ] && return
  local o=$( ( [ "$2" != - ] && export "$2"; $B/$3 --workload $4 --runs 20 ) 2>&1)
  local us=$(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')
  echo "$o" | grep -qiE 'mismatch|wrong|FAIL' && us="$us WRONG"
  printf "r%s %-44s %-22s %-14s %s\n" "$1" "$2" "$3" "$4" "$us"
  LAST="$o"
}
declare -A W
for w in ragged-skew gqa-batch-fp8; do
  n=step11_persistent; [ $w = gqa-batch-fp8 ] && n=step12_fp8_cache
  t 0 PA_TRIAL_TIMELINE=1 $n-tl $w
  echo "$LAST" | grep -E '^TIMELINE' | tail -4
  W[$w]=$(echo "$LAST" | grep 'TIMELINE by rank' | tail -1 | awk '{
    for (i = 1; i <= NF; ++i) if ($i ~ /^r[0-9]+$/) { m[++k] = $(i + 2) }
    least = m[1]; for (j = 1; j <= k; ++j) if (m[j] < least) least = m[j];
    for (j = 1; j <= k; ++j) printf "%s%d", (j > 1 ? "," : ""), 1000 * least / m[j] + 0.5 }')
  echo "weights for $w: ${W[$w]}"
done
for r in 1 2; do
  for w in ragged-skew gqa-batch-fp8; do
    n=step11_persistent; [ $w = gqa-batch-fp8 ] && n=step12_fp8_cache
    t $r - $n-m $w
    [ -n "${W[$w]}" ] && t $r PA_TRIAL_RANK_WEIGHTS=${W[$w]} $n-rw $w
    t $r - $n-dt $w
  done
  for tl in 6,6 8,4; do t $r PA_TRIAL_TAIL=$tl step12_fp8_cache-dt gqa-batch-fp8; done
  for tl in 2,2 4,4; do t $r PA_TRIAL_TAIL=$tl step11_persistent-dt ragged-skew; done
done
