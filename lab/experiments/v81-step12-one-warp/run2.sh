#!/bin/bash
set -u
D=/tmp/v81; mkdir -p $D && xz -dc build/gpu81/bins.tar.xz | tar -C $D -xf - || exit 3
for round in 1 2; do for v in base variant; do
  for args in "--workload gqa-batch-fp8 --head-dim 256" "--workload gqa-batch-fp8 --q-heads 256" "--workload gqa-batch-fp8 --head-dim 80" "--workload gqa-batch-fp8 --head-dim 112" "--workload gqa-batch-fp8 --q-heads 8"; do
    echo "r$round $v [$args] $($D/$v/step12_fp8_cache $args --runs 20 2>&1 | grep -E 'fp8_cache' | grep -E '(us|ms) ' | tail -1)"
  done
done; done
