#!/bin/bash
# v99, second form (prepared 2026-12-03, not yet run): the same trial with the cluster
# scheduling policy as a choice (PA_TRIAL_SPREAD=1: cudaClusterSchedulingPolicySpread) and the
# program printing how many clusters the GPU holds at once (cudaOccupancyMaxActiveClusters).
# Asked: were the clusters of the first call slow because the scheduler packed them on few SMs?
# build/v99-pack.tar.xz rebuilt from trial.patch (this form). About two minutes.
set -u
P=/tmp/q99; mkdir -p $P && xz -dc build/v99-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin/step10_tensor_cores-cl
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t() {  # round, mode (0 no clusters, 1 clusters, 2 clusters spread), args...
  local r=$1 c=$2; shift 2
  local o rc
  o=$( ( [ $c -ge 1 ] && export PA_TRIAL_CLUSTER=1; [ $c = 2 ] && export PA_TRIAL_SPREAD=1; $B "$@" --runs 20 ) 2>&1); rc=$?
  local us=$(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')
  echo "$o" | grep -qiE 'mismatch|wrong|FAIL' && us="$us WRONG"
  [ $rc -ne 0 ] && us="$us rc=$rc $(echo "$o" | grep -iE 'error|fail|mismatch|refused' | head -2 | tr '\n' ' ')"
  printf "r%s mode %s %-72s %s %s\n" "$r" "$c" "$*" "$us" "$(echo "$o" | grep '^v99:' | head -1)"
}
for r in 1 2; do
  for c in 0 1 2; do t $r $c --workload small-batch; done
done
for c in 0 2; do
  t 1 $c --workload small-batch --splits 4
  t 1 $c --workload gqa-batch --splits 2
  t 1 $c --batch 8 --context 4096 --q-heads 256 --kv-heads 8 --head-dim 128 --dtype bf16
  t 1 $c --batch 5 --context 700,4096,1,2500,3333 --q-heads 32 --kv-heads 8 --head-dim 128 --dtype f16 --splits 8
done
o=$( (export PA_TRIAL_CLUSTER=1 PA_TRIAL_SPREAD=1; timeout 100 $B --adversarial --dtype bf16) 2>&1); echo "adversarial clusters spread rc=$? $(echo "$o" | tail -n 2 | tr '\n' ' ')"
