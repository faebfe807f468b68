#!/bin/bash
# v121, v122 and v123 in one device call (prepared 2026-12-04, not yet run). Programs, all step 10
# from 6dfbecb's source at head dim 128 unless named otherwise:
#   -m   main's source (no trial switch);
#   -e   v121, the first tiles' block-table loads before the context length
#        (lab/experiments/v121-early-table/trial.patch, -DPA_TRIAL_EARLY_TABLE); -ea the same at
#        every head dim (the adversarial set is at head dim 64);
#   -hk  v122, a warp of 8 heads or fewer skips the softmax of its padding rows 8-15: branch
#        next/half-rows (e2f9472: a second split kernel with ROWS = 1 for groups of at most
#        8), built at head dim 128: its ROWS = 1 kernel takes 172 registers, 5 programs an SM;
#   -hkc -hk with -maxrregcount=168 (6 programs an SM, no stack; the flag holds every kernel of
#        the program, so only groups of 16 or fewer are timed with it);
#   -w   v123, a group of one on the wide shape, one warp of 128 channels a program
#        (lab/experiments/v123-wide-group1/trial.patch, -DPA_TRIAL_WIDE_G1; host side only).
# First the checks on the GPU (adversarial sets, shapes, memcheck and initcheck), then three
# rounds of the rows issue 18 hangs on, alternating the programs, 50 runs a row, medians to
# 0.01 us from the JSON.
# Usage: run.sh BINDIR; outputs under $OUT.
set -u; export OUT
B=$1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
check() {  # label program args...
  local label=$1 prog=$2; shift 2
  $B/$prog "$@" >> $OUT/checks.txt 2>&1; echo "check $label $prog rc=$?"
}
for d in bf16 f16; do
  check "adversarial $d" step10_tensor_cores-ea --adversarial --dtype $d
  for v in e hk; do check "adversarial d128 $d" step10_tensor_cores-$v --adversarial --head-dim 128 --dtype $d; done
done
for a in "--page 16" "--page 32" "--page 8" "--page 24" "--layout nhd" "--q-heads 64 --kv-heads 2 --dtype f16"; do
  for v in e hk; do
    check "shape $a" step10_tensor_cores-$v --batch 4 --context 15,16,47,7000 --q-heads 16 --kv-heads 2 --head-dim 128 --dtype bf16 $a
  done
done
for g in "12 1" "20 1" "7 1" "8 8"; do  # groups whose second eight rows are live or padding (v122)
  set -- $g
  check "group $1/$2" step10_tensor_cores-hk --batch 3 --context 15,47,7000 --q-heads $1 --kv-heads $2 --head-dim 128 --dtype bf16
done
for d in bf16 f16; do check "adversarial d128 $d" step10_tensor_cores-w --adversarial --head-dim 128 --dtype $d; done
check "group 8/8" step10_tensor_cores-w --batch 3 --context 15,47,7000 --q-heads 8 --kv-heads 8 --head-dim 128 --dtype bf16
for t in memcheck initcheck; do
  for v in ea hk; do
    a="--adversarial --dtype bf16"; [[ $v == hk ]] && a="$a --head-dim 128"
    compute-sanitizer --tool $t --error-exitcode 99 $B/step10_tensor_cores-$v $a --runs 0 --quiet >> $OUT/sanitizer.txt 2>&1
    echo "$t $v rc=$?"
  done
done
row() {  # label program args...
  local label=$1 prog=$2; shift 2
  $B/$prog "$@" --runs 50 --json $OUT/tmp.json >> $OUT/full.txt 2>&1; local rc=$?
  python3 - "$label" "$prog" "$rc" <<'PY'
import json, os, sys
d = json.load(open(os.environ['OUT'] + '/tmp.json'))
for r in d['results']:
    t = r['gpu_median_seconds']
    print(f"{sys.argv[1]:<22} {sys.argv[2]:<24} rc={sys.argv[3]} splits {r['num_splits']:>3} gpu {t*1e6 if t else float('nan'):8.2f} us ok {r['ok']}")
PY
}
for r in 1 2 3; do
  for w in small-batch long-single mha-batch gqa-batch; do
    vs="m e hk hkc"; [[ $w == mha-batch ]] && vs="m e hk hkc w"
    for v in $vs; do row "r$r $w" step10_tensor_cores-$v --workload $w; done
  done
  for v in m e hk hkc; do  # group 16 at gqa-batch's bytes: -hk's ROWS = 2 kernel (main's)
    row "r$r g16" step10_tensor_cores-$v --batch 64 --context 8192 --q-heads 128 --kv-heads 8 --head-dim 128 --dtype bf16
  done
  for v in m e; do  # group 32: the wide shape, which -e's build holds at 168 registers where main's takes 236
    row "r$r g32" step10_tensor_cores-$v --batch 64 --context 8192 --q-heads 256 --kv-heads 8 --head-dim 128 --dtype bf16
  done
  for v in m e; do row "r$r single 1024" step10_tensor_cores-$v --batch 1 --context 1024 --q-heads 32 --kv-heads 8 --head-dim 128 --dtype bf16; done
done
