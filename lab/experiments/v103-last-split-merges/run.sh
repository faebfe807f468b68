#!/bin/bash
# v103 (prepared 2026-12-03, not yet run): step 10 with no merge kernel at up to 8 splits: the
# last split program of a (sequence, KV head) to finish merges its splits (a count a pair in
# global memory, CUDA's threadFenceReduction pattern), four channels a thread with every split's
# loads issued before any is added (PA_TRIAL_LAST=1), against the same program with the merge
# kernel (unset). v88/v95: `small-batch` spends 0.6 us between the last split and the merge's
# wait and 1.0-1.3 us in the merge; issue 18 needs about 0.9 us of it. trial.patch on 6f99d18,
# -DPA_TRIAL_LAST -DPA_HEAD_DIMS=128, the program in build/v99-pack.tar.xz. About 90 seconds.
set -u
P=/tmp/q99; mkdir -p $P && xz -dc build/v99-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin/step10_tensor_cores-last
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t() {  # round, last (0/1), args...
  local r=$1 c=$2; shift 2
  local o rc
  o=$( ( [ $c = 1 ] && export PA_TRIAL_LAST=1; $B "$@" --runs 20 ) 2>&1); rc=$?
  local us=$(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')
  echo "$o" | grep -qiE 'mismatch|wrong|FAIL' && us="$us WRONG"
  [ $rc -ne 0 ] && us="$us rc=$rc $(echo "$o" | grep -iE 'error|fail|mismatch|refused' | head -2 | tr '\n' ' ')"
  printf "r%s last %s %-72s %s\n" "$r" "$c" "$*" "$us"
}
for r in 1 2 3; do
  t $r 0 --workload small-batch
  t $r 1 --workload small-batch
done
for c in 0 1; do
  t 1 $c --workload small-batch --splits 4
  t 1 $c --batch 8 --context 4096 --q-heads 256 --kv-heads 8 --head-dim 128 --dtype bf16
  t 1 $c --batch 5 --context 700,4096,1,2500,3333 --q-heads 32 --kv-heads 8 --head-dim 128 --dtype f16 --splits 8
  t 1 $c --batch 3 --context 4096 --q-heads 8 --kv-heads 8 --head-dim 128 --dtype bf16 --splits 7
done
o=$( (export PA_TRIAL_LAST=1; timeout 100 $B --adversarial --dtype bf16) 2>&1); echo "adversarial last rc=$? $(echo "$o" | tail -n 2 | tr '\n' ' ')"
o=$( (export PA_TRIAL_LAST=1; timeout 100 $B --adversarial --dtype f16) 2>&1); echo "adversarial last f16 rc=$? $(echo "$o" | tail -n 2 | tr '\n' ' ')"
