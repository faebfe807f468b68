#!/bin/bash
# v157 (one call): is what step 10's arithmetic costs the tensor pipe's clock step, or its chain
# of work? main (step10), no arithmetic (nomath), and no arithmetic with as many mma a tile on
# registers alone (dummy): small-batch in three rounds alternating, gqa-batch in one; then ncu's
# SM clock of one launch of each (v153's probe). Usage: run3.sh PROGRAM_DIR (build/v154).
set -u; export OUT
B=$1
FULL=v157-full.txt
PROBES_ONLY=1 source "$(dirname "$0")/../v153-clock-by-form/run.sh" "$B"
FULL=v157-full.txt
progs=(step10 nomath dummy)
for r in 1 2 3; do
  for i in 0 1 2; do v=${progs[$(( (i + r - 1) % 3 ))]}; row "r$r $v small-batch" $v --workload small-batch; done
done
for v in "${progs[@]}"; do row "$v gqa-batch" $v --workload gqa-batch; done
for w in small-batch gqa-batch; do
  for v in "${progs[@]}"; do probe $v "" $v $w; done
done
rm -f $OUT/tmp.json
echo "end at $(date +%T)"
