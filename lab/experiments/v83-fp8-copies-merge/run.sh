#!/bin/bash
# v83 call 1 (run from the repository root on the device, build/gpu-pack.tar.xz carried): step 12's
# own lean copies (Fp8Copies) and full tiles unmasked, step 11's one-round merge (a program a head
# and 32 channels). The GPU tests of steps 10-12, the four sanitizer tools on step 11's adversarial
# set and step 12's fp8 set, then times, step 09 and 10 as the machine's gauge.
set -u
P=/tmp/p; mkdir -p $P && xz -dc ${PACK:-build/gpu-pack.tar.xz} | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin; export LD_LIBRARY_PATH=$P/gpu-pack/lib
$B/test_gpu_steps "[step10],[step11],[step12]" > $OUT/tests.txt 2>&1; echo "test_gpu_steps [step10-12] rc $?"; tail -2 $OUT/tests.txt
for t in memcheck initcheck racecheck synccheck; do
  compute-sanitizer --tool $t --error-exitcode 99 $B/step12_fp8_cache --adversarial --dtype bf16 --kv-dtype e4m3 --runs 0 --quiet >> $OUT/sanitizer.txt 2>&1; echo "$t step12 fp8 bf16 rc $?"
  compute-sanitizer --tool $t --error-exitcode 99 $B/step11_persistent --adversarial --runs 0 --quiet >> $OUT/sanitizer.txt 2>&1; echo "$t step11 rc $?"
done
t() { echo "r$1 [$2 $3] $($B/step$2 $3 --runs 20 2>&1 | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')"; }
for r in 1 2; do
  for w in gqa-batch small-batch long-single; do t $r 09_memory_pipeline "--workload $w"; t $r 10_tensor_cores "--workload $w"; done
  for w in ragged-skew ragged-uniform long-single small-batch; do t $r 11_persistent "--workload $w"; done
  for a in "" " --head-dim 64" " --head-dim 80" " --head-dim 256" " --q-heads 256"; do t $r 12_fp8_cache "--workload gqa-batch-fp8$a"; done
done
