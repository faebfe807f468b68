#!/bin/bash
# v146: bench_ladder's benchmarks with the named workloads in rounds (harness/bench.h,
# register_named_rounds), from the pack of 7628fd8 (scripts/pack-gpu); the device call's command.
set -u; P=/tmp/p; mkdir -p $P && xz -dc build/gpu-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin; export LD_LIBRARY_PATH=$P/gpu-pack/lib
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
R=$OUT/r; mkdir -p $R
scripts/gpu-bench --bin $B --out $R --no-tests --no-sanitizer --no-torch; echo "gpu-bench rc $?"
ls -la $R $R/*/
python3 lab/experiments/v146-named-rounds/rounds.py $R/*.json
