#!/bin/bash
# v94: the merge waits for its own (sequence, KV head)'s pieces (a count a pair, raised by each
# piece's program, release/acquire) instead of the whole split kernel (griddepcontrol.wait).
# -m: main at 50dd79a, -fl: the same with trial.patch (-DPA_TRIAL_FLAGS); head dim 128 only.
set -u
P=/tmp/q94; mkdir -p $P && xz -dc build/v94-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t() {  # round, binary, workload
  [ $SECONDS -gt 150 ] && return
  local o=$($B/$2 --workload $3 --runs 20 2>&1)
  local us=$(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')
  echo "$o" | grep -qiE 'mismatch|wrong|FAIL' && us="$us WRONG"
  printf "r%s %-24s %-14s %s\n" "$1" "$2" "$3" "$us"
}
for r in 1 2; do
  for v in m fl; do
    t $r step10_tensor_cores-$v small-batch
    t $r step11_persistent-$v ragged-skew
    t $r step12_fp8_cache-$v gqa-batch-fp8
  done
done
for s in step10_tensor_cores step11_persistent step12_fp8_cache; do
  [ $SECONDS -gt 170 ] && break
  o=$(timeout 30 $B/$s-fl --adversarial --dtype bf16 2>&1); echo "adversarial $s-fl rc=$? $(echo "$o" | tail -n 1)"
done
