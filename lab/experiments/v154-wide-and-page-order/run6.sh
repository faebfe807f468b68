#!/bin/bash
# v162 (one call): are the exponentials what the softmax costs (v158's nosoft took 1.3 µs of
# small-batch and 6 of gqa-batch; v159-v161's fewer instructions took nothing)? main (step10)
# against noexp (a full-rate max in place of each weight's ex2: wrong results) and nosoft (v158):
# small-batch in three rounds (order rotating), gqa-batch in two, mha-batch and group 16 in one.
# Usage: run6.sh PROGRAM_DIR (build/v154; `build.sh noexp` makes the new one).
set -u; export OUT
B=$1
FULL=v162-full.txt
source "$(dirname "$0")/../rows.sh"
progs=(step10 noexp nosoft)
for r in 1 2 3; do
  for i in 0 1 2; do v=${progs[$(( (i + r - 1) % 3 ))]}; row "r$r $v small-batch" $v --workload small-batch; done
done
for r in 1 2; do
  for v in "${progs[@]}"; do row "r$r $v gqa-batch" $v --workload gqa-batch; done
done
for v in "${progs[@]}"; do row "$v mha-batch" $v --workload mha-batch; done
for v in "${progs[@]}"; do row "$v group 16" $v --workload gqa-batch --q-heads 128; done
rm -f $OUT/tmp.json
echo "end at $(date +%T)"
