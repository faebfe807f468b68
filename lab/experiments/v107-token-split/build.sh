#!/bin/bash
# How v107's trial programs were built (paths as on the build machine; build/cuda built first):
#   build.sh N V WORKTREE [flags...]  ->  /tmp/var/<stepNN program>-V
# As lab/experiments/v91-claimed-tails/build.sh, but the emulator's object of the step is
# compiled from WORKTREE too (with the flags that are -D definitions), so the program's emulator
# runs the trial's kernel source as its GPU path does. -maxrregcount and other nvcc flags go to
# nvcc only.
N=$1; V=$2; WT=$3; shift 3
defs=(); for f in "$@"; do [[ $f == -D* ]] && defs+=("$f"); done
cd /work/main/build/cuda
mkdir -p /tmp/var
g++ -O3 -DNDEBUG -std=c++20 -DBOOST_ALL_NO_LIB -DPAGEDATTN_HAVE_CUDA=1 "${defs[@]}" -I$WT -isystem /usr/local/cuda/include -c generated/kernels/step$N.emu.cpp -o /tmp/var/step$N-$V.emu.o || exit 1
/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -DBOOST_ALL_NO_LIB -DPAGEDATTN_HAVE_CUDA=1 "$@" -I$WT -isystem=/usr/local/cuda/include -O3 -DNDEBUG --generate-code=arch=compute_90,code=[compute_90,sm_90] --expt-relaxed-constexpr -lineinfo -std=c++20 -x cu -c generated/kernels/step$N.cuda.cu -o /tmp/var/step$N-$V.cu.o || exit 1
rm -f /tmp/var/libk$N-$V.a; ar qc /tmp/var/libk$N-$V.a /tmp/var/step$N-$V.emu.o /tmp/var/step$N-$V.cu.o
name=$(ls steps/ | grep "^step${N}_")
/usr/bin/c++ -O3 -DNDEBUG steps/CMakeFiles/$name.dir/*/main.cpp.o -o /tmp/var/$name-$V -L/usr/local/cuda/targets/x86_64-linux/lib harness/libpagedattn_harness_core.a kernels/libpagedattn_kernels_$N.a reference/libpagedattn_reference.a /tmp/var/libk$N-$V.a common/libpagedattn_common.a /usr/lib/x86_64-linux-gnu/libboost_context.a /usr/local/cuda/lib/libcudart_static.a -ldl /usr/lib/x86_64-linux-gnu/librt.a -lcudadevrt -lcudart_static -lrt -lpthread -ldl && echo built /tmp/var/$name-$V
