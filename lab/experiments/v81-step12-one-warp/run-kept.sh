#!/bin/bash
# v81 kept form: step 12's GPU tests, compute-sanitizer on its fp8 set, and its times.
set -u
D=/tmp/v82; mkdir -p $D && xz -dc build/gpu82/bins.tar.xz | tar -C $D -xf - || exit 3
$D/test_gpu_steps "[step12]" > $OUT/tests.txt 2>&1; echo "test_gpu_steps [step12] rc $?"; tail -2 $OUT/tests.txt
for t in memcheck initcheck racecheck synccheck; do
  compute-sanitizer --tool $t --error-exitcode 99 $D/step12_fp8_cache --adversarial --dtype bf16 --kv-dtype e4m3 --runs 0 --quiet >> $OUT/sanitizer.txt 2>&1; echo "$t fp8 bf16 rc $?"
done
for args in "--workload gqa-batch-fp8" "--workload gqa-batch-fp8 --q-heads 256" "--workload gqa-batch-fp8 --head-dim 256"; do
  echo "[$args] $($D/step12_fp8_cache $args --runs 20 2>&1 | grep -E 'fp8_cache' | grep -E '(us|ms) ' | tail -1)"
done
