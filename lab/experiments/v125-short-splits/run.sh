#!/bin/bash
# v125: the GPU half for branch next/short-splits (step 10 splitting short capacities without
# the lengths, steps 11/12 filling toward 4 programs an SM where the floor leaves too few).
# Rows of the branch's programs (the pack built from the branch, `scripts/pack-gpu
# build/short-pack.tar.xz`); each row prints the plan the GPU ran (grid, splits) and the median.
# Step 10's --splits rows time the counts main's rule picks (1 for 512 tokens without lengths,
# 2 for 32 x 128) on the same program. Usage: run.sh BINDIR; outputs under $OUT.
set -u; export OUT
B=$1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
row() {  # label program flags...
  local label=$1 prog=$2; shift 2
  o=$($B/$prog "$@" --runs 30 --json $OUT/tmp.json 2>&1); rc=$?
  { echo "== $label: $prog $*"; echo "$o"; } >> $OUT/v125-full.txt
  python3 - "$label" "$prog" "$rc" <<'PY'
import json, os, sys
label, prog, rc = sys.argv[1:]
try:
    d = json.load(open(os.environ['OUT'] + '/tmp.json'))
except Exception as e:
    print(f"{label:<28} {prog:<20} rc={rc} no json ({e})"); sys.exit()
for r in d['results']:
    t = r['gpu_median_seconds']
    print(f"{label:<28} {prog:<20} splits {str(r['num_splits']):>4} gpu {t*1e6 if t else float('nan'):7.1f} us  ok {r['ok']}  rc={rc}")
PY
  { echo "$o" | grep -m1 "launch on the GPU" || echo "$o" | grep -m1 "launch in the emulator"; } |
    sed -E 's/^ *launch ([^:]*): grid ([0-9]+ x [0-9]+ x [0-9]+)[^;]*; ?([^,;]*).*/    \1: grid \2; \3/'
}
one() { echo "--batch $1 --context $2 --q-heads $3 --kv-heads $4 --head-dim 128 --dtype bf16"; }
for r in 1 2; do
  row "r$r 1x512" step10_tensor_cores $(one 1 512 32 8) --splits 0,1
  row "r$r 1x1024" step10_tensor_cores $(one 1 1024 32 8) --splits 0,2
  row "r$r 32x128" step10_tensor_cores $(one 32 128 32 8) --splits 0,2
  row "r$r example 4x128 8/2" step10_tensor_cores $(one 4 128 8 2) --splits 0,1
  for n in 1024 4096 16384; do
    row "r$r 1x$n" step11_persistent $(one 1 $n 32 8)
    row "r$r 1x$n fp8" step12_fp8_cache $(one 1 $n 32 8) --kv-dtype e4m3
  done
  row "r$r 32x128" step11_persistent $(one 32 128 32 8)
  row "r$r 32x128 fp8" step12_fp8_cache $(one 32 128 32 8) --kv-dtype e4m3
  for w in small-batch long-single; do
    row "r$r $w" step10_tensor_cores --workload $w
    row "r$r $w" step11_persistent --workload $w
    row "r$r $w fp8" step12_fp8_cache --workload $w --kv-dtype e4m3
  done
  row "r$r gqa-batch" step10_tensor_cores --workload gqa-batch
  row "r$r ragged-skew" step11_persistent --workload ragged-skew
  row "r$r gqa-batch-fp8" step12_fp8_cache --workload gqa-batch-fp8
done
