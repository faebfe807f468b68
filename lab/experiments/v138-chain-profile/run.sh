#!/bin/bash
# v138: where one of step 10's programs spends a tile. v136 had a program a pair (12 stages, one
# an SM, nothing waiting on memory) take 1.65-1.69 us a 32-token tile on an H100, where its
# instructions should need about a third of that. ncu (counters, not timing) of one launch of
# the split kernel: that program at 1 split, and main's plan (8 splits, 4 programs an SM), both
# on small-batch: warp states, scheduler and instruction statistics, and the stall samples of
# every SASS instruction (source page, CSV). Usage: run.sh PROGRAM_DIR; files under $OUT.
set -u
B=$1
S="--section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats --section InstructionStats --section SourceCounters"
prof() {  # name env program flags...
  local name=$1 vars=$2; shift 2
  echo "== $name: $* ($(date +%T))"
  env $vars timeout 200 ncu --clock-control none -k regex:split_decode --launch-skip 2 --launch-count 1 $S \
    $B/"$@" --runs 3 2>/dev/null > $OUT/ncu-$name.txt || true
  env $vars timeout 200 ncu --clock-control none -k regex:split_decode --launch-skip 2 --launch-count 1 --section SourceCounters \
    --page source --print-source sass --csv $B/"$@" --runs 3 2>/dev/null > $OUT/src-$name.csv || true
  grep -E "Duration|Registers Per|Warp Cycles Per Issued|Issue Slots Busy|Executed Instructions  |Achieved Active Warps|DRAM Throughput|No Eligible" $OUT/ncu-$name.txt | head -12
  wc -c $OUT/src-$name.csv
}
prof deep1 PA_TRIAL_DEEP_SHAPE=1 step10_tensor_cores-deep --workload small-batch --splits 1
prof main8 "" step10_tensor_cores-deep --workload small-batch
echo "end at $(date +%T)"
