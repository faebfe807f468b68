#!/bin/bash
# v81: step 12 with one warp of 128 channels on 32-token tiles (variant) against 4995dbd's (base).
set -u
D=/tmp/v81; mkdir -p $D && xz -dc build/gpu81/bins.tar.xz | tar -C $D -xf - || exit 3
for v in variant base; do for dt in bf16 f16; do
  $D/$v/step12_fp8_cache --adversarial --kv-dtype e4m3 --dtype $dt --runs 1 > $OUT/check-$v-$dt.txt 2>&1; echo "check $v $dt rc $?"
done; done
for round in 1 2; do for v in base variant; do
  for args in "--workload gqa-batch-fp8" "--workload gqa-batch-fp8 --q-heads 64" "--workload gqa-batch-fp8 --q-heads 128" "--workload gqa-batch-fp8 --head-dim 64"; do
    f=$OUT/run-r$round-$v-$(echo $args | tr -c 'a-z0-9' '_').txt
    $D/$v/step12_fp8_cache $args --runs 20 > $f 2>&1
    echo "r$round $v [$args] $(grep -E 'fp8_cache' $f | grep -E '(us|µs|ms) ' | tail -1)"
  done
done; done | tee $OUT/times.txt
timeout 100 ncu --clock-control none --section LaunchStats --section Occupancy --metrics smsp__sass_inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed -k regex:fp8_persistent -c 1 $D/variant/step12_fp8_cache --workload gqa-batch-fp8 --runs 1 > $OUT/ncu-variant.txt 2>&1; echo "ncu rc $?"
grep -E "Registers Per|Theoretical Occ|Achieved Occ|inst_executed|dram__|Block Limit (Reg|Shared)" $OUT/ncu-variant.txt
