#!/bin/bash
# v80 call A: tests, sanitizer (+ step 12 fp8), tour, torch; then ncu instruction mixes.
set -u
P=/tmp/p; mkdir -p $P && xz -dc build/gpu-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin; export LD_LIBRARY_PATH=$P/gpu-pack/lib
R=$OUT/r; mkdir -p $R
scripts/gpu-bench --bin $B --out $R --no-bench; echo "gpu-bench rc $?"
L=$R/gpu-sanitizer-fp8.log; : > $L
for dt in bf16 f16; do for t in memcheck initcheck racecheck synccheck; do
  compute-sanitizer --tool $t --error-exitcode 99 $B/step12_fp8_cache --adversarial --dtype $dt --kv-dtype e4m3 --runs 0 --quiet >> $L 2>&1
  echo "$t step12 --kv-dtype e4m3 --dtype $dt rc $?" | tee -a $L
done; done
N=$OUT/ncu; mkdir -p $N
timeout 120 ncu --clock-control none --section InstructionStats --section LaunchStats --section Occupancy --metrics sass__inst_executed_per_opcode --print-metric-instances details -k regex:fp8_persistent -c 1 $B/step12_fp8_cache --workload gqa-batch-fp8 --runs 1 > $N/step12-fp8.txt 2>&1; echo "ncu12 rc $?"
timeout 120 ncu --clock-control none --section InstructionStats --section LaunchStats --metrics sass__inst_executed_per_opcode --print-metric-instances details -k regex:persistent_decode -c 1 $B/step11_persistent --workload gqa-batch --runs 1 > $N/step11-bf16.txt 2>&1; echo "ncu11 rc $?"
grep -E "passed|failed|FAIL|ok " $R/*.log 2>/dev/null | tail -5
