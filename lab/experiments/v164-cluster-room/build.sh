#!/bin/bash
# v164 trial build: v128's build (../v128-cluster-policies/build.sh: step 10 at head dim 128 from
# the worktree /tmp/wt99, linked with build/cuda's objects), with ../v99-cluster-merge/trial.patch
# applied in /tmp/wt99 on branch next/v164-cluster-smem (from main at d27d905); copied to
# build/v164 for the device call. Usage: build.sh cl -DPA_HEAD_DIMS=128 -DPA_TRIAL_CLUSTER
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
if [[ ! -d /tmp/wt99 ]]; then git -C /work/main worktree add -q /tmp/wt99 next/v164-cluster-smem; fi
mkdir -p /tmp/var /work/main/build/v164
bash "$HERE/../v128-cluster-policies/build.sh" "$@"
cp /tmp/var/step10_tensor_cores-$1 /work/main/build/v164/$1
