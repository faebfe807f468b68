#!/bin/bash
# v127 from a full pack (scripts/pack-gpu) of a tree that holds next/whole-pairs: the pack's own
# step11_persistent and step12_fp8_cache plan with the branch's rule (-w); the same programs with
# --partition (-p) cut each (sequence, KV head) into portions as main's fill toward the wave does
# (32 x 128 and the ragged batch: 2-tile portions, main 528 programs of about 1.9 tiles; 32 x 64:
# 1 tile, main's 512 exactly; 20 x 128: 1 tile, 640 programs where main has 528 of about 1.2);
# step10_tensor_cores's one split beside them. Usage: run-pack.sh BINDIR; outputs under $OUT.
set -u; export OUT
B=$1
FULL=v127-pack-full.txt
PLAN_SED='s/^ *launch ([^:]*): grid ([0-9]+ x [0-9]+ x [0-9]+).*in ([0-9]+ items; [0-9]+ \(sequence, KV head\) cut).*/    \1: grid \2; \3/'
source "$(dirname "$0")/../rows.sh"  # the machine's line, row()
shape() { echo "--batch $1 --context $2 --q-heads $3 --kv-heads $4 --head-dim 128 --dtype bf16"; }
ragged=$(python3 -c "print(','.join(str(64 + 32 * (i % 5)) for i in range(32)))")
for r in 1 2; do
  for v in w p; do
    portion() { [[ $v == p ]] && echo "--partition $1"; }
    row "r$r 32x128 $v" step11_persistent $(shape 32 128 32 8) $(portion 64)
    row "r$r 32x64 $v" step11_persistent $(shape 32 64 32 8) $(portion 32)
    row "r$r 32x128 ragged $v" step11_persistent $(shape 32 $ragged 32 8) $(portion 64)
    row "r$r 20x128 $v" step11_persistent $(shape 20 128 32 8) $(portion 32)
    row "r$r 32x128 fp8 $v" step12_fp8_cache $(shape 32 128 32 8) --kv-dtype e4m3 $(portion 64)
    row "r$r 32x64 fp8 $v" step12_fp8_cache $(shape 32 64 32 8) --kv-dtype e4m3 $(portion 32)
  done
  row "r$r 32x128 step10" step10_tensor_cores $(shape 32 128 32 8)
  row "r$r 32x64 step10" step10_tensor_cores $(shape 32 64 32 8)
  row "r$r 32x128 ragged step10" step10_tensor_cores $(shape 32 $ragged 32 8)
  row "r$r 20x128 step10" step10_tensor_cores $(shape 20 128 32 8)
done
# Rows the rule leaves alone, for the machine's speed against v126 (step 11 small-batch 40.7 us
# and ragged-skew 103.5 there):
row "small-batch" step11_persistent --workload small-batch
row "ragged-skew" step11_persistent --workload ragged-skew
# Issue 18's two rows on this machine, with the knobs the pack's programs take: step 10's
# small-batch against its split count (the plan's is 8), and mha-batch against step 09's.
row "small-batch splits" step10_tensor_cores --workload small-batch --splits 4,6,7,8,9,10,12,16
row "mha-batch" step10_tensor_cores --workload mha-batch
row "mha-batch" step09_memory_pipeline --workload mha-batch
row "mha-batch splits 2" step10_tensor_cores --workload mha-batch --splits 2
echo "end at $(date +%T)"
