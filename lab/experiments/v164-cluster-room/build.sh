#!/bin/bash
# v164 trial build: step 10 at head dim 128 with ../v99-cluster-merge/trial.patch applied in /tmp/wt99
# (branch next/v164-cluster-smem, from main at d27d905); build.sh cl -DPA_HEAD_DIMS=128 -DPA_TRIAL_CLUSTER
# makes build/v164/cl (and /tmp/var/step10_tensor_cores-cl).
set -e
cd /work/main/build/cuda
V=$1; shift
/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -DBOOST_ALL_NO_LIB -DPAGEDATTN_HAVE_CUDA=1 "$@" -I/tmp/wt99 -isystem=/usr/local/cuda/include --compress-mode=size -O3 -DNDEBUG --generate-code=arch=compute_90,code=[compute_90,sm_90] --expt-relaxed-constexpr -lineinfo -std=c++20 -x cu -c generated/kernels/step10.cuda.cu -o /tmp/var/step10-$V.cu.o
rm -f /tmp/var/libk10-$V.a; ar qc /tmp/var/libk10-$V.a kernels/CMakeFiles/pagedattn_kernel_10.dir/__/generated/kernels/step10.emu.cpp.o /tmp/var/step10-$V.cu.o
/usr/bin/c++ -O3 -DNDEBUG steps/CMakeFiles/step10_tensor_cores.dir/10_tensor_cores/main.cpp.o -o /tmp/var/step10_tensor_cores-$V -L/usr/local/cuda/targets/x86_64-linux/lib harness/libpagedattn_harness_core.a kernels/libpagedattn_kernels_10.a reference/libpagedattn_reference.a /tmp/var/libk10-$V.a common/libpagedattn_common.a /usr/lib/x86_64-linux-gnu/libboost_context.a /usr/local/cuda/lib/libcudart_static.a -ldl /usr/lib/x86_64-linux-gnu/librt.a -lcudadevrt -lcudart_static -lrt -lpthread -ldl
echo built /tmp/var/step10_tensor_cores-$V
mkdir -p /work/main/build/v164 && cp /tmp/var/step10_tensor_cores-$V /work/main/build/v164/$V
