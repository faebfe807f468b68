#!/bin/bash
mkdir -p /tmp/g && xz -dc build/gpu16/s.tar.xz | tar -C /tmp/g -xf - || exit 1

export LD_LIBRARY_PATH=/tmp/g/s/lib
B=/tmp/g/s/bin
cd "$OUT"
for r in 1 2; do for b in step12_fp8_cache step12_lb; do
  echo "== $b run $r"; $B/$b --workload gqa-batch-fp8 --runs 20 2>&1 | tail -2
done; done
$B/step12_lb --adversarial --dtype bf16 --runs 0 --quiet > adv.log 2>&1; echo "adversarial rc=$?"; tail -2 adv.log
timeout 100 ncu --clock-control none -k regex:persistent_decode -c 1 --section SpeedOfLight --section Occupancy --section SchedulerStats --section LaunchStats --section InstructionStats $B/step12_lb --workload gqa-batch-fp8 --runs 1 > ncu-lb.txt 2>&1
grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|Executed Instructions  |Block Limit (Reg|Shared)|Local" ncu-lb.txt | head
