#!/bin/bash
mkdir -p /tmp/g && { [ -x /tmp/g/g/bin/step12_fp8_cache ] || xz -dc build/gpu15/g.tar.xz | tar -C /tmp/g -xf -; } || exit 1
export LD_LIBRARY_PATH=/tmp/g/g/lib
B=/tmp/g/g/bin
cd "$OUT"
for w in gqa-batch-fp8 gqa-batch; do
  timeout 200 ncu --clock-control none -k regex:persistent_decode -c 1 --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats --section ComputeWorkloadAnalysis --section InstructionStats \
    $B/step12_fp8_cache --workload $w --runs 1 > ncu-$w.txt 2>&1; echo "$w rc=$?"
  grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Issued Warp Per|No Eligible|Executed Instructions  |Stall|Block Limit|Warp Cycles Per Issued|Compute \(SM\) Throughput|Memory Throughput" ncu-$w.txt | head -30
done
