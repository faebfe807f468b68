#!/bin/bash
# v93: is step 10's group-32 row slow in bench_ladder because of the rows before it (steps 08 and
# 09 at group 32, 11 ms and 4 ms a launch)? Runs the row alone, after step 11's rows, after steps
# 08-09's group-32 rows, and alone again, sampling the SM clock every 200 ms.
# The pack: bench_ladder of build/cuda, stripped, with its libbenchmark.so.1debian (the GPU
# machine has no Google Benchmark), in build/g32-pack.tar.xz.
rm -rf /tmp/g; mkdir -p /tmp/g && xz -dc build/g32-pack.tar.xz | tar -C /tmp/g -xf - || exit 3
B=/tmp/g/bench_ladder; export LD_LIBRARY_PATH=/tmp/g
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 200 > /tmp/smi.txt &
S=$!
f() { echo "== $1"; $B --benchmark_filter="$1" 2>&1 | grep -E '^step|^bare' | awk '{print $1, $2, $3, $NF}'; }
f 'step10_tensor_cores/gpu/group-32/'
f 'step1[01].*/gpu/(group-32|gqa-batch)/'
f 'step(08|09|10|11)_[a-z_]+/gpu/group-32/'
f 'step10_tensor_cores/gpu/group-32/'
kill $S
awk -F, '{print $1}' /tmp/smi.txt | sort | uniq -c | sort -rn | head -8
