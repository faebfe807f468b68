#!/bin/bash
# v150: where step 10's arithmetic costs its time on small-batch (v149 on an H100: the split
# kernel alone 49.7 us with it, 47.9 without). The programs of build.sh (head dim 128): base
# (main's kernel), nomath (no q·Kᵀ, softmax or P·V in any tile), mlast (the arithmetic of each
# program's last tile alone), mbutlast (that of every tile but the last); the last three give
# wrong results and time only. If mbutlast runs at nomath's pace and mlast at base's, the cost is
# the last tile's arithmetic after its bytes have come (a tail); if mbutlast runs at base's pace,
# it is spread over the tiles. Three rounds, the variants in a different order each round, each
# with and without the merge (PA_TRIAL_NO_MERGE=1); then long-single, and gqa-batch for base and
# nomath (is the arithmetic hidden on a full batch?).
# Usage: run.sh PROGRAM_DIR (the JSON and full output under $OUT).
set -u; export OUT
B=$1
FULL=v150-full.txt
source "$(dirname "$0")/../rows.sh"
N=PA_TRIAL_NO_MERGE=1
variants=(base nomath mlast mbutlast)
for r in 1 2 3; do
  for i in 0 1 2 3; do
    v=${variants[$(( (i + r - 1) % 4 ))]}
    vrow "" "r$r $v" step10_tensor_cores-$v --workload small-batch
    vrow "$N" "r$r $v no merge" step10_tensor_cores-$v --workload small-batch
  done
done
for v in "${variants[@]}"; do vrow "$N" "$v long-single no merge" step10_tensor_cores-$v --workload long-single; done
for v in base nomath; do vrow "$N" "$v gqa-batch no merge" step10_tensor_cores-$v --workload gqa-batch; done
echo "end at $(date +%T)"
