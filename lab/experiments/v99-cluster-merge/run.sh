#!/bin/bash
# v99: step 10 with the splits of a (KV head, sequence) launched as one thread-block cluster and
# merged in distributed shared memory at the kernel's end (PA_TRIAL_CLUSTER=1), against the same
# program with the split kernel + overlapped merge kernel (unset). trial.patch on fea4006,
# -DPA_TRIAL_CLUSTER -DPA_HEAD_DIMS=128, build/v99-pack.tar.xz. One short call.
set -u
P=/tmp/q99; mkdir -p $P && xz -dc build/v99-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin/step10_tensor_cores-cl
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t() {  # round, cluster (0/1), args...
  local r=$1 c=$2; shift 2
  local o rc
  o=$( ( [ $c = 1 ] && export PA_TRIAL_CLUSTER=1; $B "$@" --runs 20 ) 2>&1); rc=$?
  local us=$(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')
  echo "$o" | grep -qiE 'mismatch|wrong|FAIL' && us="$us WRONG"
  [ $rc -ne 0 ] && us="$us rc=$rc $(echo "$o" | grep -iE 'error|fail|mismatch' | head -2 | tr '\n' ' ')"
  printf "r%s cluster %s %-60s %s\n" "$r" "$c" "$*" "$us"
}
for r in 1 2 3; do
  t $r 0 --workload small-batch
  t $r 1 --workload small-batch
done
for c in 0 1; do
  t 1 $c --workload small-batch --splits 4
  t 1 $c --workload small-batch --splits 2
  t 1 $c --batch 8 --context 4096 --q-heads 256 --kv-heads 8 --dtype bf16
  t 1 $c --batch 5 --context 700,4096,1,2500,3333 --q-heads 32 --kv-heads 8 --dtype f16 --splits 8
done
o=$( (export PA_TRIAL_CLUSTER=1; timeout 100 $B --adversarial --dtype bf16) 2>&1); echo "adversarial cluster rc=$? $(echo "$o" | tail -n 2 | tr '\n' ' ')"
