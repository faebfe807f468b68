#!/bin/bash
# v152: does step 10's arithmetic cost gqa-batch its 1.1-1.7% (v149, v150) through the clock
# rather than through instructions or bytes in flight? Each of v150's programs (base: main's
# kernel; nomath: the same without its tile arithmetic) runs gqa-batch 400 times, three rounds
# alternating, while nvidia-smi samples the SM clock, the memory clock and the board power every
# 50 ms; a line a run gives the program's median time and the samples' mean clock and power.
# Usage: run.sh PROGRAM_DIR (v150's build); the samples stay in /tmp (a device call brings back 8 files).
set -u
B=$1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw,power.limit --format=csv,noheader
for r in 1 2 3; do
  if (( r % 2 )); then order="base nomath"; else order="nomath base"; fi
  for v in $order; do
    f=/tmp/v152-samples-r$r-$v.csv
    nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 50 > $f &
    smi=$!
    sleep 0.3
    PA_TRIAL_NO_MERGE=1 timeout 120 $B/step10_tensor_cores-$v --workload gqa-batch --runs 400 --json $OUT/tmp.json > /dev/null 2>&1
    rc=$?
    kill $smi; wait $smi 2>/dev/null
    python3 - "$r" "$v" "$rc" "$f" <<'PY'
import json, os, sys
r, v, rc, f = sys.argv[1:]
rows = []
for line in open(f):
    try: rows.append([float(x) for x in line.split(',')])
    except ValueError: pass
busy = [x for x in rows if x[2] > 200]  # samples with the kernel loop running (watts)
t = json.load(open(os.environ['OUT'] + '/tmp.json'))['results'][0]['gpu_median_seconds'] * 1e6
mean = lambda i: sum(x[i] for x in busy) / max(len(busy), 1)
print(f"r{r} {v:<7} rc={rc} gpu {t:7.2f} us  samples {len(busy):3d}/{len(rows):3d}  SM {mean(0):6.0f} MHz  mem {mean(1):5.0f} MHz"
      f"  power {mean(2):5.0f} W  max {max((x[2] for x in busy), default=0):5.0f} W  temp {mean(3):3.0f} C")
PY
  done
done
rm -f $OUT/tmp.json
echo "end at $(date +%T)"
