#!/bin/bash
# How the trial programs of v88-v91 were built (run from anywhere; paths as on the build machine):
#   build.sh N V WORKTREE [nvcc args...]  ->  /tmp/var/<stepNN program>-V
# N: the step (10, 11, 12); V: a suffix; WORKTREE: a checkout with the change (and an #ifndef
# guard around PA_HEAD_DIMS in kernels/decode_common.cuh for -DPA_HEAD_DIMS=128). It compiles
# the build's generated/kernels/stepNN.cuda.cu against WORKTREE, archives it with the build's
# emulator object of that step, and links the step program as ninja does.
N=$1; V=$2; WT=$3; shift 3
cd /work/main/build/cuda
/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -DBOOST_ALL_NO_LIB -DPAGEDATTN_HAVE_CUDA=1 "$@" -I$WT -isystem=/usr/local/cuda/include -O3 -DNDEBUG --generate-code=arch=compute_90,code=[compute_90,sm_90] --expt-relaxed-constexpr -lineinfo -std=c++20 -x cu -c generated/kernels/step$N.cuda.cu -o /tmp/var/step$N-$V.cu.o || exit 1
rm -f /tmp/var/libk$N-$V.a; ar qc /tmp/var/libk$N-$V.a kernels/CMakeFiles/pagedattn_kernel_$N.dir/__/generated/kernels/step$N.emu.cpp.o /tmp/var/step$N-$V.cu.o
name=$(ls steps/ | grep "^step${N}_")
/usr/bin/c++ -O3 -DNDEBUG steps/CMakeFiles/$name.dir/*/main.cpp.o -o /tmp/var/$name-$V -L/usr/local/cuda/targets/x86_64-linux/lib harness/libpagedattn_harness_core.a kernels/libpagedattn_kernels_$N.a reference/libpagedattn_reference.a /tmp/var/libk$N-$V.a common/libpagedattn_common.a /usr/lib/x86_64-linux-gnu/libboost_context.a /usr/local/cuda/lib/libcudart_static.a -ldl /usr/lib/x86_64-linux-gnu/librt.a -lcudadevrt -lcudart_static -lrt -lpthread -ldl && echo built /tmp/var/$name-$V
