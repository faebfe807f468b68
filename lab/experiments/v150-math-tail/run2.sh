#!/bin/bash
# v150, second call: ncu (counters, not timing) of one launch of the split kernel on gqa-batch,
# with and without the arithmetic (base, nomath of build.sh), where the arithmetic cost 1.1-1.7%
# and more tiles in flight did not take it back (v149's ob3): DRAM busy, SM clock, warps, issue
# and stalls. Files ncu-gqa-base.txt and ncu-gqa-nomath.txt under $OUT.
# Usage: run2.sh PROGRAM_DIR.
set -u
B=$1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
S="--section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats --section InstructionStats --section MemoryWorkloadAnalysis"
for v in base nomath; do
  echo "== ncu $v gqa-batch ($(date +%T))"
  PA_TRIAL_NO_MERGE=1 timeout 150 ncu --clock-control none -k regex:split_decode --launch-skip 2 --launch-count 1 $S \
    $B/step10_tensor_cores-$v --workload gqa-batch --runs 3 2>/dev/null > $OUT/ncu-gqa-$v.txt || true
  grep -E "SM Frequency|DRAM Frequency|Duration|DRAM Throughput|L2 Cache Throughput|Issue Slots Busy|Executed Ipc A|Warp Cycles Per Issued|Achieved Active Warps|No Eligible|Executed Instructions  " $OUT/ncu-gqa-$v.txt | head -14
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
echo "end at $(date +%T)"
