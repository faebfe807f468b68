#!/bin/bash
# v82 call 1: the lean copies (TileCopies: one block-size test a tile, a copy or zero fill a unit by
# cp.async's ignore-src) and fp8 conversions of either half: the GPU tests of steps 10-12, the four
# sanitizer tools on step 12's fp8 set, then times against v80/v81 with step 09 as the machine's gauge.
set -u
P=/tmp/p; mkdir -p $P && xz -dc build/gpu-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin; export LD_LIBRARY_PATH=$P/gpu-pack/lib
$B/test_gpu_steps "[step10],[step11],[step12]" > $OUT/tests.txt 2>&1; echo "test_gpu_steps [step10-12] rc $?"; tail -2 $OUT/tests.txt
for t in memcheck initcheck racecheck synccheck; do
  compute-sanitizer --tool $t --error-exitcode 99 $B/step12_fp8_cache --adversarial --dtype bf16 --kv-dtype e4m3 --runs 0 --quiet >> $OUT/sanitizer.txt 2>&1; echo "$t step12 fp8 bf16 rc $?"
  compute-sanitizer --tool $t --error-exitcode 99 $B/step10_tensor_cores --adversarial --runs 0 --quiet >> $OUT/sanitizer.txt 2>&1; echo "$t step10 rc $?"
done
for r in 1 2; do
  for w in gqa-batch mha-batch small-batch long-single; do
    for s in 09_memory_pipeline 10_tensor_cores; do
      echo "r$r [$w] $($B/step${s} --workload $w --runs 20 2>&1 | grep -E '(us|ms) ' | tail -1)"
    done
  done
  for args in "--workload gqa-batch-fp8" "--workload gqa-batch-fp8 --head-dim 64" "--workload gqa-batch-fp8 --head-dim 80" "--workload gqa-batch-fp8 --head-dim 256" "--workload gqa-batch-fp8 --q-heads 256"; do
    echo "r$r [$args] $($B/step12_fp8_cache $args --runs 20 2>&1 | grep -E '(us|ms) ' | tail -1)"
  done
done
timeout 150 ncu --clock-control none --section LaunchStats --section Occupancy --metrics smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed -k regex:fp8_persistent -c 1 $B/step12_fp8_cache --workload gqa-batch-fp8 --runs 1 > $OUT/ncu-step12.txt 2>&1; echo "ncu12 rc $?"
grep -E "inst_executed.sum|dram__throughput|Registers Per|Achieved Occupancy" $OUT/ncu-step12.txt
