#!/bin/bash
# v127: steps 11/12 with a program a (sequence, KV head) where the 512-token floor leaves too few
# programs but the pairs alone are enough (branch next/whole-pairs at 290fc7e), against main's
# fill toward 4 programs an SM (376cd20). Host code only: the kernels are main's. Programs at head
# dim 128 (lab/experiments/v107-token-split/build.sh N V WORKTREE -DPA_HEAD_DIMS=128):
#   step11_persistent-m, step12_fp8_cache-m   main's source;
#   step11_persistent-w, step12_fp8_cache-w   the branch's;
#   step10_tensor_cores                       main's step 10 (build/cuda), the one-split reference.
# Each row prints the plan the GPU ran (grid; the schedule's programs and cut pairs) and the
# median of 30 runs; two rounds alternating -m and -w. Usage: run.sh BINDIR; outputs under $OUT.
set -u; export OUT
B=$1
FULL=v127-full.txt
PLAN_SED='s/^ *launch ([^:]*): grid ([0-9]+ x [0-9]+ x [0-9]+).*in ([0-9]+ items; [0-9]+ \(sequence, KV head\) cut).*/    \1: grid \2; \3/'
source "$(dirname "$0")/../rows.sh"  # the machine's line, row()
shape() { echo "--batch $1 --context $2 --q-heads $3 --kv-heads $4 --head-dim 128 --dtype bf16"; }
# 32 sequences of 64 to 192 tokens (mean 128), one list entry a sequence.
ragged=$(python3 -c "print(','.join(str(64 + 32 * (i % 5)) for i in range(32)))")
for r in 1 2; do
  for v in m w; do
    row "r$r 32x128 $v" step11_persistent-$v $(shape 32 128 32 8)
    row "r$r 32x64 $v" step11_persistent-$v $(shape 32 64 32 8)
    row "r$r 32x128 ragged $v" step11_persistent-$v $(shape 32 $ragged 32 8)
    row "r$r 20x128 $v" step11_persistent-$v $(shape 20 128 32 8)
    row "r$r 32x128 fp8 $v" step12_fp8_cache-$v $(shape 32 128 32 8) --kv-dtype e4m3
    row "r$r 32x64 fp8 $v" step12_fp8_cache-$v $(shape 32 64 32 8) --kv-dtype e4m3
    # Unchanged by the rule (pairs too few, or more than the wave, or the floor enough):
    row "r$r 16x128 $v" step11_persistent-$v $(shape 16 128 32 8)
    row "r$r 96x128 $v" step11_persistent-$v $(shape 96 128 32 8)
    row "r$r 1x1024 $v" step11_persistent-$v $(shape 1 1024 32 8)
    row "r$r ragged-skew $v" step11_persistent-$v --workload ragged-skew
    row "r$r small-batch $v" step11_persistent-$v --workload small-batch
  done
  row "r$r 32x128 step10" step10_tensor_cores $(shape 32 128 32 8)
  row "r$r 32x64 step10" step10_tensor_cores $(shape 32 64 32 8)
  row "r$r 32x128 ragged step10" step10_tensor_cores $(shape 32 $ragged 32 8)
  row "r$r 20x128 step10" step10_tensor_cores $(shape 20 128 32 8)
done
echo "end at $(date +%T)"
