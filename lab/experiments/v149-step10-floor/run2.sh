#!/bin/bash
# v149, second call: the full batches with v149's programs (build.sh), on one machine. On
# small-batch 3 stages lost with or without one barrier; on a full batch the programs are long
# (256 tiles) and 3-4 an SM, so the bytes in flight while the arithmetic runs (one tile a program
# with 2 stages, two with ob3) may matter where they did not on small-batch. Three rounds of
# gqa-batch (base, ob3, nomath: the arithmetic's cost on a full batch; the variants in a
# different order each round), then ncu (counters, not timing) of one launch of the split
# kernel of base and of ob3 on small-batch, where ob3 lost 1.3 us: occupancy, DRAM, warp states
# (ncu-base.txt, ncu-ob3.txt under $OUT); last, two rounds of mha-batch (base, ob3).
# Usage: run2.sh PROGRAM_DIR (the JSON and full output under $OUT).
set -u; export OUT
B=$1
FULL=v149b-full.txt
source "$(dirname "$0")/../rows.sh"
variants=(base ob3 nomath)
for r in 1 2 3; do
  for i in 0 1 2; do
    v=${variants[$(( (i + r - 1) % 3 ))]}
    row "r$r $v gqa-batch" step10_tensor_cores-$v --workload gqa-batch
  done
done
S="--section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats --section WarpStateStats"
for v in base ob3; do
  echo "== ncu $v small-batch ($(date +%T))"
  timeout 150 ncu --clock-control none -k regex:split_decode --launch-skip 2 --launch-count 1 $S \
    $B/step10_tensor_cores-$v --workload small-batch --runs 3 2>/dev/null > $OUT/ncu-$v.txt || true
  grep -E "Duration|Registers Per|Warp Cycles Per Issued|Issue Slots Busy|Achieved Active Warps|Achieved Occupancy|DRAM Throughput|No Eligible|Stall" $OUT/ncu-$v.txt | head -14
done
for r in 1 2; do
  for v in base ob3; do row "r$r $v mha-batch" step10_tensor_cores-$v --workload mha-batch; done
done
echo "end at $(date +%T)"
