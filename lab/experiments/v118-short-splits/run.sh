#!/bin/bash
# v118: step 10 on one sequence of 1k-32k tokens (long-single's heads: 32 query heads over 8, head
# dim 128, bf16) at split counts around the plan's, which takes splits of 512 tokens or more
# (kMinTokensPerSplit) and so leaves 16-256 programs of 16 tiles on the machine under 32k.
# Usage: run.sh BINDIR; outputs under $OUT.
set -u; export OUT
B=$1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
row() {  # context q-heads splits-list
  $B/step10_tensor_cores --batch 1 --context $1 --q-heads $2 --kv-heads 8 --head-dim 128 --dtype bf16 --splits $3 \
    --json $OUT/tmp.json >> $OUT/v118-full.txt 2>&1; echo "rc=$?" >> $OUT/v118-full.txt
  python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(__import__('os').environ['OUT'] + '/tmp.json'))
for r in d['results']:
    t = r['gpu_median_seconds']
    print(f"ctx {sys.argv[1]:>6} q {sys.argv[2]:>3} splits {r['num_splits']:>4} gpu {t*1e6 if t else float('nan'):7.1f} us  emu {r['emulator_status']} gpu {str(r['gpu_status'])[:10]} ok {r['ok']}")
PY
}
for r in 1 2; do
  row 1024 32 0,4,8,16,32
  row 2048 32 0,8,16,32,64
  row 4096 32 0,8,16,32,64,128
  row 8192 32 0,16,32,64,128
  row 16384 32 0,32,64,128
  row 32768 32 0,64,128
  row 4096 64 0,8,16,32,64
done
