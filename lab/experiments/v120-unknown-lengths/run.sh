#!/bin/bash
# v120 (ran 2026-12-05; v120.txt): step 10's split count where the caller does not give
# the lengths (total_context_len 0, the API's default). Step 10 then keeps step 09's count with the
# 512-token floor, which for a short capacity is one split, written directly with no merge; the
# rule step 10 takes for equal lengths (v118) would split toward 4 programs an SM, down to one
# tile a split, and add the merge. Which is faster at a few tiles? The recorded program with
# --splits (0 is the plan's count, here with the lengths given, so the v118 rule's), equal lengths.
# Usage: run.sh BINDIR [PROGRAM]; outputs under $OUT. PROGRAM: step10_tensor_cores (the recorded
# pack's) or step10_tensor_cores-m (v121's pack: the same source at head dim 128 only).
set -u; export OUT
B=$1; P=${2:-step10_tensor_cores}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
row() {  # batch context q-heads kv-heads splits-list
  $B/$P --batch $1 --context $2 --q-heads $3 --kv-heads $4 --head-dim 128 --dtype bf16 --splits $5 \
    --json $OUT/tmp.json >> $OUT/v120-full.txt 2>&1; echo "rc=$?" >> $OUT/v120-full.txt
  python3 - "$1" "$2" "$3" "$4" <<'PY'
import json, os, sys
d = json.load(open(os.environ['OUT'] + '/tmp.json'))
b, c, q, k = sys.argv[1:]
for r in d['results']:
    t = r['gpu_median_seconds']
    print(f"batch {b:>3} ctx {c:>5} heads {q:>2}/{k} splits {r['num_splits']:>3} gpu {t*1e6 if t else float('nan'):6.1f} us  ok {r['ok']}")
PY
}
for r in 1 2; do
  row 1 128 32 8 0,1,2,4
  row 1 256 32 8 0,1,2,4,8
  row 1 512 32 8 0,1,2,4,8,16
  row 4 128 8 2 0,1,2,4        # the example's shape (examples/01_decode)
  row 4 512 8 2 0,1,2,4,8,16
  row 8 128 32 8 0,1,2,4
  row 8 512 32 8 0,1,2,4,8,16
  row 32 128 32 8 0,1,2,4
  row 8 2048 64 8 0,4,8,16
done
