#!/bin/bash
# v158 (one call): after v157 (the clock step alone costs little), which part of step 10's tile
# arithmetic costs the time: main (step10), no arithmetic (nomath), v157's mma on registers
# (dummy), and main's q·Kᵀ and P·V with no softmax (nosoft): small-batch in three rounds
# (order rotating), gqa-batch in one. Usage: run4.sh PROGRAM_DIR (build/v154).
set -u; export OUT
B=$1
FULL=v158-full.txt
source "$(dirname "$0")/../rows.sh"
progs=(step10 nomath dummy nosoft)
for r in 1 2 3; do
  for i in 0 1 2 3; do v=${progs[$(( (i + r - 1) % 4 ))]}; row "r$r $v small-batch" $v --workload small-batch; done
done
for v in "${progs[@]}"; do row "$v gqa-batch" $v --workload gqa-batch; done
rm -f $OUT/tmp.json
echo "end at $(date +%T)"
