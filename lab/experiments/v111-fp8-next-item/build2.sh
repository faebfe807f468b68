#!/bin/bash
# Builds v111's second call's programs on a fresh checkout (run from the repository root; about
# 15 minutes on two cores): step 12's program at head dim 128 from main (-m) and with trial.patch
# in modes 2 and 3 (-x2, -x3), stripped into /tmp/v111p/gpu-pack/bin and packed as
# build/v111-pack.tar.xz. Mode 1 (the first call's -xi) is in the patch too.
set -eu
root=$(pwd)
cmake --preset cuda >/dev/null
cmake --build build/cuda --target step12_fp8_cache
rm -rf /tmp/wt111 && git worktree add -f --detach /tmp/wt111 HEAD >/dev/null
(cd /tmp/wt111 && git apply "$root/lab/experiments/v111-fp8-next-item/trial.patch")
build=lab/experiments/v107-token-split/build.sh
bash $build 12 m /tmp/wt111 -DPA_HEAD_DIMS=128
bash $build 12 x2 /tmp/wt111 -DPA_HEAD_DIMS=128 -DPA_TRIAL_XITEM=2
bash $build 12 x3 /tmp/wt111 -DPA_HEAD_DIMS=128 -DPA_TRIAL_XITEM=3
rm -rf /tmp/v111p && mkdir -p /tmp/v111p/gpu-pack/bin
for v in m x2 x3; do strip -o /tmp/v111p/gpu-pack/bin/step12_fp8_cache-$v /tmp/var/step12_fp8_cache-$v; done
tar -C /tmp/v111p -cf - gpu-pack | xz -6 -T2 > build/v111-pack.tar.xz
ls -la build/v111-pack.tar.xz
