#!/bin/bash
# v119 (ran 2026-12-05; v119.txt): steps 11 and 12 on one short sequence with at least
# PA_TRIAL_FILL programs an SM (trial.patch), as step 10's plan takes about 4 an SM for equal
# lengths since v118. v117: steps 11 and 12 take 32.6-33.6 us from 1k to 16k tokens (portions of
# 16 tiles or more: 16 to 256 programs), step 10 now 9.1-23.
# The programs: build.sh 11 f /tmp/wt119 -DPA_HEAD_DIMS=128 -DPA_TRIAL_FILL, and 12 likewise
# (lab/experiments/v107-token-split/build.sh), packed with their lib/ folder.
# Usage: run.sh BINDIR; outputs under $OUT.
set -u; export OUT
B=$1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
row() {  # label fill program flags...
  local label=$1 fill=$2 prog=$3; shift 3
  if [[ $fill == 0 ]]; then unset PA_TRIAL_FILL; else export PA_TRIAL_FILL=$fill; fi
  o=$($B/$prog "$@" 2>&1); rc=$?
  echo "$o" >> $OUT/v119-full.txt
  echo "$label fill $fill $prog rc=$rc $(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')"
}
one() { echo "--batch 1 --context $1 --q-heads 32 --kv-heads 8 --head-dim 128 --dtype bf16"; }
for r in 1 2; do
  for n in 1024 4096 16384; do
    for f in 0 2 4; do
      row "r$r ctx $n" $f step12_fp8_cache-f $(one $n) --kv-dtype e4m3
      row "r$r ctx $n" $f step11_persistent-f $(one $n)
    done
  done
  for w in long-single small-batch gqa-batch-fp8 ragged-skew; do  # fill leaves these alone (as many programs already)
    for f in 0 4; do row "r$r $w" $f step12_fp8_cache-f --workload $w; done
  done
done
unset PA_TRIAL_FILL
for f in 2 4; do export PA_TRIAL_FILL=$f
  $B/step12_fp8_cache-f --adversarial --head-dim 128 --dtype bf16 --kv-dtype e4m3 > /dev/null 2>&1; echo "adversarial fp8 fill $f rc=$?"
  $B/step11_persistent-f --adversarial --head-dim 128 --dtype f16 > /dev/null 2>&1; echo "adversarial step11 fill $f rc=$?"
done
