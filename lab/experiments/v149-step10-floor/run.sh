#!/bin/bash
# v149: where step 10's time over the bare read goes on small-batch, on one machine. The programs
# of build.sh (head dim 128): base (main's kernel), nomath (the same copies, waits and barriers,
# no q·Kᵀ, softmax or P·V: wrong results, the copies' time), s3 and nomath3 (the same with 3
# stages); PA_TRIAL_NO_MERGE=1 launches the split kernel alone. Also the same machine's floors:
# v134's overhead (empty launches, a 134 MB read) and v135's few_read (cp.async of 4 KB pieces
# by 64-512 programs). Three rounds, the variants in a different order each round; the split
# kernel alone for base, nomath and nomath3; ob3: 3 stages, one barrier a tile (wait, barrier,
# then the refill of the stage the last tile used).
# Usage: run.sh PROGRAM_DIR (the JSON and full output under $OUT).
set -u; export OUT
B=$1
FULL=v149-full.txt
source "$(dirname "$0")/../rows.sh"
N=PA_TRIAL_NO_MERGE=1
variants=(base nomath s3 nomath3 ob3)
for r in 1 2 3; do
  for i in 0 1 2 3 4; do
    v=${variants[$(( (i + r - 1) % 5 ))]}
    vrow "" "r$r $v" step10_tensor_cores-$v --workload small-batch
    case $v in base|nomath|nomath3) vrow "$N" "r$r $v no merge" step10_tensor_cores-$v --workload small-batch;; esac
  done
done
for v in base s3 ob3; do vrow "" "$v long-single" step10_tensor_cores-$v --workload long-single; done
timeout 60 $B/overhead | grep -v "^ *$"
timeout 90 $B/few_read | grep -v "^ *$"
adv "" "ob3 bf16" step10_tensor_cores-ob3 --dtype bf16 --head-dim 128
echo "end at $(date +%T)"
