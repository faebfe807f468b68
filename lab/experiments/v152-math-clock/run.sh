#!/bin/bash
# v152: does step 10's arithmetic cost gqa-batch its 1.1-1.7% (v149, v150) through the clock
# rather than through instructions or bytes in flight? Each of v150's programs (base: main's
# kernel; nomath: the same without its tile arithmetic) runs gqa-batch 400 times (rows.sh's row),
# three rounds alternating, while nvidia-smi samples the SM clock, the memory clock and the board
# power every 50 ms; after each row, a line with the samples' means while the loop ran.
# Usage: run.sh PROGRAM_DIR (v150's build); the full output under $OUT, the samples stay in /tmp
# (a device call brings back 8 files).
set -u; export OUT
B=$1
FULL=v152-full.txt
RUNS=400
source "$(dirname "$0")/../rows.sh"
for r in 1 2 3; do
  if (( r % 2 )); then order="base nomath"; else order="nomath base"; fi
  for v in $order; do
    f=/tmp/v152-samples-r$r-$v.csv
    nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 50 > $f &
    smi=$!
    row "r$r $v gqa-batch" step10_tensor_cores-$v --workload gqa-batch
    kill $smi; wait $smi 2>/dev/null
    python3 - "$f" <<'PY'
import sys
rows = []
for line in open(sys.argv[1]):
    try: rows.append([float(x) for x in line.split(',')])
    except ValueError: pass
busy = [x for x in rows if x[2] > 200]  # samples with the loop running (watts; idle is under 150)
mean = lambda i: sum(x[i] for x in busy) / max(len(busy), 1)
print(f"    samples {len(busy)}/{len(rows)}: SM {mean(0):.0f} MHz, memory {mean(1):.0f} MHz, power {mean(2):.0f} W"
      f" (max {max((x[2] for x in busy), default=0):.0f}), {mean(3):.0f} C")
PY
  done
done
rm -f $OUT/tmp.json
echo "end at $(date +%T)"
