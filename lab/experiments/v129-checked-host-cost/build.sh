#!/bin/bash
# Builds host_cost against build/cuda's libraries (as ninja links example01_decode) into build/v129/.
set -e
cd /work/main/build/cuda
mkdir -p ../v129
/usr/bin/c++ -O3 -DNDEBUG -std=c++20 -DPAGEDATTN_HAVE_CUDA=1 -I/work/main -isystem /usr/local/cuda/include -isystem /usr/include/eigen3 \
  -c ../../lab/experiments/v129-checked-host-cost/host_cost.cpp -o ../v129/host_cost.o
libs="harness/libpagedattn_harness_core.a api/libpagedattn_api.a reference/libpagedattn_reference.a kernels/libpagedattn_kernels.a $(for s in 02 03 04 05 06 07 08 09 10 11 12; do echo kernels/libpagedattn_kernel_$s.a; done) common/libpagedattn_common.a"
/usr/bin/c++ -O3 ../v129/host_cost.o -o ../v129/host_cost -L/usr/local/cuda/targets/x86_64-linux/lib $libs \
  /usr/lib/x86_64-linux-gnu/libboost_context.a /usr/local/cuda/lib/libcudart_static.a -ldl /usr/lib/x86_64-linux-gnu/librt.a -lcudadevrt -lcudart_static -lrt -lpthread -ldl
strip ../v129/host_cost
echo built build/v129/host_cost
