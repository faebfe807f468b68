#!/bin/bash
# Builds build/diag/oracle_time against the CUDA build's libraries (build/cuda, built first);
# runs here, no GPU needed: `build/diag/oracle_time old WORKLOAD...` times oracle_rows on the
# workload's sample (the bench's call) and the sequential loop it replaced, and compares their bits.
set -eu
cd "$(git rev-parse --show-toplevel)"
mkdir -p build/diag
L=$(find build/cuda -name "libpagedattn_*.a" | grep -v "bench\|catch" | tr '\n' ' ')
g++ -O2 -std=c++20 -I. -isystem /usr/local/cuda/include -isystem /usr/include/eigen3 \
  lab/experiments/v131-oracle-threads/oracle_time.cpp -Wl,--start-group $L -Wl,--end-group \
  -L/usr/local/cuda/lib64 -lcudart_static -lboost_context -lpthread -ldl -lrt -o build/diag/oracle_time
echo "build/diag/oracle_time"
