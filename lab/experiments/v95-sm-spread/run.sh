#!/bin/bash
# v95 (ran 2026-12-03, output.txt): do programs of equal loads end apart because of their
# SM (between SMs) or among the programs of one SM (within)? One short call (about two minutes).
# PA_TRIAL_PER_SM=k (the patch) plans k programs an SM instead of the occupancy's.
# Programs: 5caf07b + timeline-by-sm.patch (v88's timeline trial, its extra step-10 shape taken
# out, and a per-SM report), head dim 128 only, built with lab/experiments/v91-claimed-tails/
# build.sh N tl2 WORKTREE -DPA_HEAD_DIMS=128 and packed into build/v95-pack.tar.xz (stripped).
set -u
P=/tmp/q95; mkdir -p $P && xz -dc build/v95-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t() {  # binary, workload[, programs an SM]: the time, then the last report's lines
  local o=$( ( [ -n "${3:-}" ] && export PA_TRIAL_PER_SM=$3; PA_TRIAL_TIMELINE=1 $B/$1 --workload $2 --runs 20 ) 2>&1)
  echo "== $1 $2 ${3:+PA_TRIAL_PER_SM=$3} $(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')"
  echo "$o" | grep -E "^TIMELINE" | tail -n 10
}
t step10_tensor_cores-tl2 small-batch
t step12_fp8_cache-tl2 gqa-batch-fp8
t step11_persistent-tl2 ragged-skew
t step10_tensor_cores-tl2 gqa-batch
t step10_tensor_cores-tl2 mha-batch
# fewer, larger programs an SM (the plan's slots; the launch's occupancy unchanged): does the
# spread within an SM shrink, and the time with it?
t step12_fp8_cache-tl2 gqa-batch-fp8 8
t step12_fp8_cache-tl2 gqa-batch-fp8 6
t step12_fp8_cache-tl2 gqa-batch-fp8 4
t step11_persistent-tl2 ragged-skew 4
t step11_persistent-tl2 ragged-skew 3
