#!/bin/bash
# v147: PyTorch SDPA on the named workloads of equal lengths (sdpa.py), and in the same call
# bench_ladder's rows of steps 09 and 10 and the bare reads on them, three rounds, from the pack
# of 7628fd8 (scripts/pack-gpu).
set -u; P=/tmp/p; mkdir -p $P && xz -dc build/gpu-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin; export LD_LIBRARY_PATH=$P/gpu-pack/lib
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
python3 lab/experiments/v147-sdpa-anchor/sdpa.py 2>&1 | tee $OUT/v147-sdpa.txt
$B/bench_ladder --benchmark_filter='^(step09_memory_pipeline|step10_tensor_cores)/gpu/(gqa-batch|mha-batch|long-single|small-batch)/iterations|^bare_read/gpu/(gqa-batch|mha-batch|long-single|small-batch)/once/iterations' \
  --benchmark_out=$OUT/v147-ladder.json --benchmark_out_format=json > $OUT/v147-ladder.txt 2>&1; echo "bench_ladder rc $?"
python3 lab/experiments/v146-named-rounds/rounds.py $OUT/v147-ladder.json
