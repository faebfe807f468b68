#!/bin/bash
# v82 calls 2-4, as run on the device after run.sh (call 1), all with the pack built from
# 09542d7 + v82-lean-copies.patch (scripts/pack-gpu). Call 1's times were lost: its grep matched
# the plan line ("programs "), so call 2 ran them again with a pattern for the result row.
set -u
P=/tmp/p; [ -d $P/gpu-pack ] || (mkdir -p $P && xz -dc build/gpu-pack.tar.xz | tar -C $P -xf -)
B=$P/gpu-pack/bin; export LD_LIBRARY_PATH=$P/gpu-pack/lib
case "${1:-2}" in
2)  # call2-times.txt
  for r in 1 2; do
    for w in gqa-batch mha-batch small-batch long-single; do for s in 09_memory_pipeline 10_tensor_cores; do
      echo "r$r [$w] $($B/step${s} --workload $w --runs 20 2>&1 | grep -E ' (us|ms) +[0-9]' | tail -1)"
    done; done
    for a in "--workload gqa-batch-fp8" "--workload gqa-batch-fp8 --head-dim 64" "--workload gqa-batch-fp8 --head-dim 80" \
             "--workload gqa-batch-fp8 --head-dim 256" "--workload gqa-batch-fp8 --q-heads 256"; do
      echo "r$r [$a] $($B/step12_fp8_cache $a --runs 20 2>&1 | grep -E ' (us|ms) +[0-9]' | tail -1)"
    done
  done ;;
3)  # the JSON and call3-gpu-bench.log
  scripts/gpu-bench --bin $B --out $OUT/r --no-tests --no-sanitizer --no-torch ;;
4)  # call4-*.log
  scripts/gpu-bench --bin $B --out $OUT/r --no-bench ;;
esac
