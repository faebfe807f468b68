#!/bin/bash
# v136 trial build: step 10 (emulator and GPU objects) from the worktree /tmp/wtd (branch
# next/deep-shape, added when missing), linked with the objects of build/cuda (a configured build
# of main). Usage: build.sh NAME [flags, e.g. -DPA_HEAD_DIMS=128 -DPA_TRIAL_DEEP=12]. Writes
# build/v134/step10_tensor_cores-NAME (the folder v134's run carries).
set -e
cd /work/main/build/cuda
V=$1; shift
mkdir -p /tmp/var
W=${WT:-/tmp/wtd}
[[ -d $W ]] || git -C /work/main worktree add -q $W next/deep-shape
/usr/bin/c++ -DBOOST_ALL_NO_LIB -DPAGEDATTN_HAVE_CUDA=1 "$@" -I$W -isystem /usr/local/cuda/include -O3 -DNDEBUG -Wall -Wextra -Werror -std=c++20 -c generated/kernels/step10.emu.cpp -o /tmp/var/step10-$V.emu.o &
/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -DBOOST_ALL_NO_LIB -DPAGEDATTN_HAVE_CUDA=1 "$@" -I$W -isystem=/usr/local/cuda/include --compress-mode=size -O3 -DNDEBUG --generate-code=arch=compute_90,code=[compute_90,sm_90] --expt-relaxed-constexpr -lineinfo -std=c++20 -Xptxas -v -x cu -c generated/kernels/step10.cuda.cu -o /tmp/var/step10-$V.cu.o 2> /tmp/var/ptxas-$V.txt
wait
rm -f /tmp/var/libk10-$V.a; ar qc /tmp/var/libk10-$V.a /tmp/var/step10-$V.emu.o /tmp/var/step10-$V.cu.o
/usr/bin/c++ -O3 -DNDEBUG steps/CMakeFiles/step10_tensor_cores.dir/10_tensor_cores/main.cpp.o -o ../v134/step10_tensor_cores-$V -L/usr/local/cuda/targets/x86_64-linux/lib harness/libpagedattn_harness_core.a kernels/libpagedattn_kernels_10.a reference/libpagedattn_reference.a /tmp/var/libk10-$V.a common/libpagedattn_common.a /usr/lib/x86_64-linux-gnu/libboost_context.a /usr/local/cuda/lib/libcudart_static.a -ldl /usr/lib/x86_64-linux-gnu/librt.a -lcudadevrt -lcudart_static -lrt -lpthread -ldl
echo built build/v134/step10_tensor_cores-$V
