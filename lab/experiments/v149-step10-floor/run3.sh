#!/bin/bash
# v149 on an H200 (the issue's machine): the decomposition of run.sh in short, three rounds of
# small-batch for base and nomath with and without the merge, and ob3; three rounds of gqa-batch
# for base and nomath; the bare read and empty launches of v134's overhead.
# Usage: run3.sh PROGRAM_DIR (the JSON and full output under $OUT).
set -u; export OUT
B=$1
FULL=v149d-full.txt
source "$(dirname "$0")/../rows.sh"
N=PA_TRIAL_NO_MERGE=1
variants=(base nomath ob3)
for r in 1 2 3; do
  for i in 0 1 2; do
    v=${variants[$(( (i + r - 1) % 3 ))]}
    vrow "" "r$r $v" step10_tensor_cores-$v --workload small-batch
    case $v in base|nomath) vrow "$N" "r$r $v no merge" step10_tensor_cores-$v --workload small-batch;; esac
  done
  for v in base nomath; do row "r$r $v gqa-batch" step10_tensor_cores-$v --workload gqa-batch; done
done
timeout 60 $B/overhead | grep -v "^ *$"
echo "end at $(date +%T)"
