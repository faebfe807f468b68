#!/bin/bash
# v99, second form (prepared 2026-12-03, not yet run): the same trial with the cluster
# scheduling policy as a choice (PA_TRIAL_SPREAD=1: cudaClusterSchedulingPolicySpread, 2:
# cudaClusterSchedulingPolicyLoadBalancing), the
# dynamic shared memory a program raised (PA_TRIAL_SMEM=bytes: fewer programs an SM, so a GPC
# holds fewer clusters), and the program printing how many clusters the GPU holds at once
# (cudaOccupancyMaxActiveClusters). Asked: were the clusters of the first call slow because the
# scheduler packed them on few SMs or GPCs? build/v99-pack.tar.xz (this form). About two minutes.
set -u
P=/tmp/q99; mkdir -p $P && xz -dc build/v99-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin/step10_tensor_cores-cl
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t() {  # round, environment (- for none), args...
  local r=$1 e=$2; shift 2
  local o rc
  o=$( ( [ "$e" != - ] && export $e; $B "$@" --runs 20 ) 2>&1); rc=$?
  local us=$(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')
  echo "$o" | grep -qiE 'mismatch|wrong|FAIL' && us="$us WRONG"
  [ $rc -ne 0 ] && us="$us rc=$rc $(echo "$o" | grep -iE 'error|fail|mismatch|refused' | head -2 | tr '\n' ' ')"
  printf "r%s %-58s %-36s %s | %s\n" "$r" "$e" "$*" "$us" "$(echo "$o" | grep '^v99:' | head -1)"
}
C=PA_TRIAL_CLUSTER=1
for r in 1 2; do
  t $r - --workload small-batch
  t $r "$C" --workload small-batch
  t $r "$C PA_TRIAL_SPREAD=1" --workload small-batch
  t $r "$C PA_TRIAL_SMEM=57344" --workload small-batch
  t $r "$C PA_TRIAL_SPREAD=1 PA_TRIAL_SMEM=57344" --workload small-batch
  t $r "$C PA_TRIAL_SPREAD=2" --workload small-batch
done
for e in - "$C PA_TRIAL_SPREAD=1"; do
  t 1 "$e" --workload small-batch --splits 4
  t 1 "$e" --batch 8 --context 4096 --q-heads 256 --kv-heads 8 --head-dim 128 --dtype bf16
  t 1 "$e" --batch 5 --context 700,4096,1,2500,3333 --q-heads 32 --kv-heads 8 --head-dim 128 --dtype f16 --splits 8
done
o=$( (export $C PA_TRIAL_SPREAD=1; timeout 100 $B --adversarial --dtype bf16) 2>&1); echo "adversarial clusters spread rc=$? $(echo "$o" | tail -n 2 | tr '\n' ' ')"
