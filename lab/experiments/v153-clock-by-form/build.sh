#!/bin/bash
# v153's programs in build/v153: step 09 and step 10 of build/cuda (a built tree of main), v150's
# base and nomath (build/v150, v150's build.sh), and v132's heads-as-N form at head dim 128 (its
# trial.patch on main in the worktree /tmp/wtn, built by v132's build.sh).
set -e
cd /work/main
L=lab/experiments
[[ -d /tmp/wtn ]] || { git worktree add -q -b next/v153-clock /tmp/wtn main && git -C /tmp/wtn apply $PWD/$L/v132-heads-as-n/trial.patch; }
bash $L/v132-heads-as-n/build.sh n -DPA_HEAD_DIMS=128
mkdir -p build/v153
cp build/cuda/steps/step09_memory_pipeline build/v153/step09
cp build/cuda/steps/step10_tensor_cores build/v153/step10
cp build/v150/step10_tensor_cores-base build/v153/base
cp build/v150/step10_tensor_cores-nomath build/v153/nomath
cp /tmp/var/step10_tensor_cores-n build/v153/n
ls -la build/v153
# build/v153h: the short form's programs with v149's for run3.sh, under the 64 MiB a call carries
# (step10 there is v149's base, main's kernel at head dim 128); needs build/v149 (v149's build.sh).
mkdir -p build/v153h
cp build/v153/step09 build/v153/n build/v153h/
cp build/v149/step10_tensor_cores-base build/v153h/step10
cp build/v149/step10_tensor_cores-nomath build/v153h/nomath
cp build/v149/step10_tensor_cores-{base,nomath,ob3} build/v149/overhead build/v153h/
ls -la build/v153h
