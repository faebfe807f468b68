#!/bin/bash
# v149 trial builds: step 10 (emulator and GPU objects) from the worktree /tmp/wt149 (branch
# next/v149-floor, trial.patch on main), linked with the objects of build/cuda (a configured and
# built tree of main), head dim 128 only. Usage: build.sh NAME [flags: -DPA_TRIAL_NO_MATH,
# -DPA_TRIAL_STAGES=3]. Writes build/v149/step10_tensor_cores-NAME; with no NAME given, builds
# the five programs run.sh times, plus v134's overhead and v135's few_read (the same machine's
# floors). WT, BRANCH, PATCH and DEST (relative to build/) let a later trial (v150, v151) build
# with its own patch, applied over this one's, into its own folder the same way.
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
if [[ $# -eq 0 ]]; then
  "$0" base
  "$0" nomath -DPA_TRIAL_NO_MATH
  "$0" s3 -DPA_TRIAL_STAGES=3
  "$0" nomath3 -DPA_TRIAL_NO_MATH -DPA_TRIAL_STAGES=3
  "$0" ob3 -DPA_TRIAL_ONE_BARRIER -DPA_TRIAL_STAGES=3
  nvcc -O3 -std=c++20 -arch=sm_90 $HERE/../v134-flush-carveout/overhead.cu -o /work/main/build/v149/overhead
  nvcc -O3 -std=c++20 -arch=sm_90 $HERE/../v135-few-programs/few_read.cu -o /work/main/build/v149/few_read
  ls -la /work/main/build/v149
  exit 0
fi
cd /work/main/build/cuda
V=$1; shift
W=${WT:-/tmp/wt149}
D=${DEST:-v149}
# A later trial's PATCH goes on top of this one's.
[[ -d $W ]] || { git -C /work/main worktree add -q -b ${BRANCH:-next/v149-floor} $W main && git -C $W apply $HERE/trial.patch && { [[ -z ${PATCH:-} ]] || git -C $W apply $PATCH; }; }
mkdir -p /tmp/var149 ../$D
F="-DBOOST_ALL_NO_LIB -DPAGEDATTN_HAVE_CUDA=1 -DPA_HEAD_DIMS=128 $*"
# -Wno-unused: the no-math build leaves the tile's offsets and the scale unused
/usr/bin/c++ $F -I$W -isystem /usr/local/cuda/include -O3 -DNDEBUG -Wall -Wextra -Wno-unused -std=c++20 -c generated/kernels/step10.emu.cpp -o /tmp/var149/$D-step10-$V.emu.o &
/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler $F -I$W -isystem=/usr/local/cuda/include --compress-mode=size -O3 -DNDEBUG --generate-code=arch=compute_90,code=[compute_90,sm_90] --expt-relaxed-constexpr -lineinfo -std=c++20 -Xptxas -v -x cu -c generated/kernels/step10.cuda.cu -o /tmp/var149/$D-step10-$V.cu.o 2> /tmp/var149/$D-ptxas-$V.txt
wait
rm -f /tmp/var149/$D-libk10-$V.a; ar qc /tmp/var149/$D-libk10-$V.a /tmp/var149/$D-step10-$V.emu.o /tmp/var149/$D-step10-$V.cu.o
/usr/bin/c++ -O3 -DNDEBUG steps/CMakeFiles/step10_tensor_cores.dir/10_tensor_cores/main.cpp.o -o ../$D/step10_tensor_cores-$V -L/usr/local/cuda/targets/x86_64-linux/lib harness/libpagedattn_harness_core.a kernels/libpagedattn_kernels_10.a reference/libpagedattn_reference.a /tmp/var149/$D-libk10-$V.a common/libpagedattn_common.a /usr/lib/x86_64-linux-gnu/libboost_context.a /usr/local/cuda/lib/libcudart_static.a -ldl /usr/lib/x86_64-linux-gnu/librt.a -lcudadevrt -lcudart_static -lrt -lpthread -ldl
grep -A3 "Compiling entry.*split_decode" /tmp/var149/$D-ptxas-$V.txt | grep -m2 "Used" || true
echo built build/$D/step10_tensor_cores-$V
