#!/bin/bash
# v85: step 12's copies with shuffled lookups (a lane reads the block-table entry of token 32r + lane
# of a tile, a copy takes its page by __shfl_sync), built from 552e675 + the change (programs only,
# build/quick-pack.tar.xz). step 12's GPU tests, two sanitizer tools on its fp8 set, then times with
# step 10's gqa-batch as the gauge.
set -u
P=/tmp/q; mkdir -p $P && xz -dc build/quick-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin; export LD_LIBRARY_PATH=$P/gpu-pack/lib
$B/test_gpu_steps "[step12]" > $OUT/tests.txt 2>&1; echo "test_gpu_steps [step12] rc $?"; tail -2 $OUT/tests.txt
for t in memcheck racecheck; do
  compute-sanitizer --tool $t --error-exitcode 99 $B/step12_fp8_cache --adversarial --dtype bf16 --kv-dtype e4m3 --runs 0 --quiet >> $OUT/sanitizer.txt 2>&1; echo "$t step12 fp8 bf16 rc $?"
done
t() { echo "r$1 [$2 $3] $($B/step$2 $3 --runs 20 2>&1 | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')"; }
for r in 1 2; do t $r 10_tensor_cores "--workload gqa-batch"; t $r 12_fp8_cache "--workload gqa-batch-fp8"; done
for a in " --head-dim 64" " --head-dim 80" " --head-dim 256" " --q-heads 256"; do t 1 12_fp8_cache "--workload gqa-batch-fp8$a"; done
