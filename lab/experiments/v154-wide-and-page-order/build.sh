#!/bin/bash
# v154's programs in build/v154, from the worktree /tmp/wt154 (branch next/v154-wide-order: v149's
# trial.patch, then this folder's trial.patch), linked with the objects of build/cuda (a built tree
# of main), head dim 128 only (build.sh [NAMES]: those programs only, default all ten):
#   step10  main's kernel; PA_TRIAL_WIDE=1 in the environment gives every group the wide shape
#           (kWideShape: one warp of all 128 channels, 32-token tiles, 2 stages);
#           PA_TRIAL_ASCENDING=1 hands the workload's pages out in ascending order, not shuffled;
#   nomath  the same with no q·Kᵀ, softmax or P·V in the tile loop (v149's PA_TRIAL_NO_MATH);
#   s3      kShape with 3 stages (v149's PA_TRIAL_STAGES=3), the stages v155 needs;
#   ahead   v155: 3 stages, and each iteration scores tile + 1 (q·Kᵀ) before the softmax and P·V
#           of this tile, so the scores' tensor-core chain overlaps the softmax's (PA_TRIAL_QK_AHEAD);
#   kvahead v156: v155's order at 2 stages, each tile's K copied a tile ahead of its V (iteration t
#           issues K(t + 2) and V(t + 1), one group, and waits for K(t + 1) and V(t)) (PA_TRIAL_KV_AHEAD);
#   dummy   v157: nomath plus, each tile, as many mma (48 a warp) as main's q·Kᵀ and P·V, on the
#           query's registers in four chains, their results kept only by a store that never
#           happens: the tensor pipe in use without main's chain of work (PA_TRIAL_DUMMY_MMA);
#   nosoft  v158: main's q·Kᵀ and P·V with the scores packed as the weights as they are, no
#           softmax (wrong results; PA_TRIAL_NO_SOFTMAX);
#   diet    v159: main with a lighter softmax: the max of the raw scores (scaled once), no mask
#           on a full tile, the scale folded into the exponent's fma (PA_TRIAL_SOFTMAX_DIET);
#   diet2   v160: diet, and each row's sum by an mma of the tile's weights with a B of ones (an
#           extra n8 accumulator rescaled with the output's), not 16 unpacks and adds a lane
#           a tile and the four lanes' shuffles at the end (PA_TRIAL_SUM_MMA);
#   lazy    v161: diet2, and the running max moved (shuffles, rescale) only when a lane holds a
#           score more than 8 over it in base 2, so a tile's weights may reach 256: no
#           shuffles on the way from the scores to P·V in the usual tile (PA_TRIAL_LAZY);
#   noexp   v162: main with a full-rate max in place of each weight's ex2 (wrong results;
#           PA_TRIAL_NO_EXP): what the exponentials cost;
#   ex2x2   v163: main with the two weights of a register from one ex2 of the 16-bit pair
#           (ex2.approx.ftz.bf16x2, ex2.approx.f16x2): half the exponentials (PA_TRIAL_EX2X2);
#   step09  build/cuda's step 09 (for v153's run2.sh).
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
W=/tmp/wt154
if [[ ! -d $W ]]; then  # the branch holds both patches committed; else make it from main
  if git -C /work/main rev-parse -q --verify next/v154-wide-order >/dev/null; then
    git -C /work/main worktree add -q $W next/v154-wide-order
  else
    git -C /work/main worktree add -q -b next/v154-wide-order $W main &&
      git -C $W apply $HERE/../v149-step10-floor/trial.patch && git -C $W commit -qam "v149 trial.patch" &&
      git -C $W apply $HERE/trial.patch
  fi
fi
cd /work/main/build/cuda
mkdir -p /tmp/var154 ../v154
/usr/bin/c++ -DBOOST_ALL_NO_LIB -DPAGEDATTN_HAVE_CUDA=1 -I$W -I/work/main/build/cuda/generated -isystem /usr/local/cuda/include \
  -O3 -DNDEBUG -Wall -Wextra -std=c++20 -c $W/common/workload.cpp -o /tmp/var154/workload.o
build() {  # NAME flags...
  local V=$1; shift
  local F="-DBOOST_ALL_NO_LIB -DPAGEDATTN_HAVE_CUDA=1 -DPA_HEAD_DIMS=128 -DPA_TRIAL_WIDE_ENV $*"
  /usr/bin/c++ $F -I$W -isystem /usr/local/cuda/include -O3 -DNDEBUG -Wall -Wextra -Wno-unused -std=c++20 \
    -c generated/kernels/step10.emu.cpp -o /tmp/var154/step10-$V.emu.o &
  /usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler $F -I$W -isystem=/usr/local/cuda/include --compress-mode=size -O3 \
    -DNDEBUG --generate-code=arch=compute_90,code=[compute_90,sm_90] --expt-relaxed-constexpr -lineinfo -std=c++20 \
    -Xptxas -v -x cu -c generated/kernels/step10.cuda.cu -o /tmp/var154/step10-$V.cu.o 2> /tmp/var154/ptxas-$V.txt
  wait
  rm -f /tmp/var154/libk10-$V.a; ar qc /tmp/var154/libk10-$V.a /tmp/var154/step10-$V.emu.o /tmp/var154/step10-$V.cu.o
  /usr/bin/c++ -O3 -DNDEBUG steps/CMakeFiles/step10_tensor_cores.dir/10_tensor_cores/main.cpp.o /tmp/var154/workload.o \
    -o ../v154/$V -L/usr/local/cuda/targets/x86_64-linux/lib harness/libpagedattn_harness_core.a \
    kernels/libpagedattn_kernels_10.a reference/libpagedattn_reference.a /tmp/var154/libk10-$V.a common/libpagedattn_common.a \
    /usr/lib/x86_64-linux-gnu/libboost_context.a /usr/local/cuda/lib/libcudart_static.a -ldl /usr/lib/x86_64-linux-gnu/librt.a \
    -lcudadevrt -lcudart_static -lrt -lpthread -ldl
  echo built build/v154/$V
}
declare -A FLAGS=([step10]="" [nomath]="-DPA_TRIAL_NO_MATH" [s3]="-DPA_TRIAL_STAGES=3"
                  [ahead]="-DPA_TRIAL_QK_AHEAD -DPA_TRIAL_STAGES=3" [kvahead]="-DPA_TRIAL_KV_AHEAD"
                  [dummy]="-DPA_TRIAL_NO_MATH -DPA_TRIAL_DUMMY_MMA" [nosoft]="-DPA_TRIAL_NO_SOFTMAX"
                  [diet]="-DPA_TRIAL_SOFTMAX_DIET" [diet2]="-DPA_TRIAL_SOFTMAX_DIET -DPA_TRIAL_SUM_MMA"
                  [lazy]="-DPA_TRIAL_SOFTMAX_DIET -DPA_TRIAL_SUM_MMA -DPA_TRIAL_LAZY"
                  [noexp]="-DPA_TRIAL_NO_EXP" [ex2x2]="-DPA_TRIAL_EX2X2")
for v in ${*:-step10 nomath s3 ahead kvahead dummy nosoft diet diet2 lazy}; do build $v ${FLAGS[$v]}; done
cp steps/step09_memory_pipeline ../v154/step09
ls -la ../v154
