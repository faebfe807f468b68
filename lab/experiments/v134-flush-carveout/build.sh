#!/bin/bash
# v134 builds: steps 09 and 10 of build/cuda (a configured build of main) linked with runtime.cu
# of branch next/flush-carveout (worktree: git worktree add /tmp/wtf next/flush-carveout), and
# overhead.cu; all to build/v134/, which run.sh takes.
set -e
W=${WT:-/tmp/wtf}
[[ -d $W ]] || git -C /work/main worktree add -q $W next/flush-carveout
cd /work/main/build/cuda
mkdir -p /tmp/var/f ../v134
/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -DBOOST_ALL_NO_LIB -DPAGEDATTN_HAVE_CUDA=1 -DPAGEDATTN_CUDA_ARCHITECTURES=\"90\" -I$W -I/work/main/build/cuda/generated -isystem=/usr/local/cuda/include -O3 -DNDEBUG --generate-code=arch=compute_90,code=[compute_90,sm_90] --expt-relaxed-constexpr -lineinfo -std=c++20 -x cu -c $W/common/cuda/runtime.cu -o /tmp/var/f/runtime.cu.o
cp common/libpagedattn_common.a /tmp/var/f/libcommon.a
ar d /tmp/var/f/libcommon.a runtime.cu.o && ar q /tmp/var/f/libcommon.a /tmp/var/f/runtime.cu.o && ranlib /tmp/var/f/libcommon.a
for s in 09 10; do
  n=$(ls steps/ | grep "^step${s}_" | head -1)
  /usr/bin/c++ -O3 -DNDEBUG steps/CMakeFiles/$n.dir/${s}_*/main.cpp.o -o ../v134/$n -L/usr/local/cuda/targets/x86_64-linux/lib harness/libpagedattn_harness_core.a kernels/libpagedattn_kernels_$s.a reference/libpagedattn_reference.a kernels/libpagedattn_kernel_$s.a /tmp/var/f/libcommon.a /usr/lib/x86_64-linux-gnu/libboost_context.a /usr/local/cuda/lib/libcudart_static.a -ldl /usr/lib/x86_64-linux-gnu/librt.a -lcudadevrt -lcudart_static -lrt -lpthread -ldl
done
nvcc -O3 -std=c++20 -arch=sm_90 /work/main/lab/experiments/v134-flush-carveout/overhead.cu -o ../v134/overhead
nvcc -O3 -std=c++20 -arch=sm_90 /work/main/lab/experiments/v135-few-programs/few_read.cu -o ../v134/few_read  # v135
ls -la ../v134
