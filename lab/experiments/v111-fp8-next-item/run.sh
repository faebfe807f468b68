#!/bin/bash
# v111: step 12's persistent program reading each item's descriptor, and copying in the next
# item's first tile, while the item before runs (trial.patch, -DPA_TRIAL_XITEM; a claim made one
# item ahead), against main (3b0a5cd+, the same program without the macro). Programs built at head
# dim 128 with ../v107-token-split/build.sh 12 {m,xi}. Checks on the GPU first (odd lengths, a
# medium batch, each against the oracle in the emulator and on the GPU), compute-sanitizer's
# memcheck and racecheck on the named workload, then gqa-batch-fp8 three rounds alternating. Usage: run.sh PACKDIR; outputs under $OUT.
set -u
B=$1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
MED="--batch 8 --context 8192,8000,7777,8192,6000,8192,5000,8192 --q-heads 32 --kv-heads 8 --head-dim 128"
for args in "--batch 3 --context 1,17,3000 --q-heads 8 --kv-heads 2 --head-dim 128 --dtype bf16" \
            "--batch 3 --context 1,17,3000 --q-heads 8 --kv-heads 2 --head-dim 128 --dtype f16" "$MED --dtype bf16"; do
  o=$($B/step12_fp8_cache-xi $args 2>&1); rc=$?
  echo "$o" >> $OUT/v111-full.txt
  printf "check xi %-100s rc=%s\n" "$args" "$rc"
done
# the named workload (too big for the emulator: the GPU against the oracle only), its programs
# chaining items and claims
for tool in memcheck racecheck; do
  o=$(timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B/step12_fp8_cache-xi --workload gqa-batch-fp8 --runs 1 2>&1); rc=$?
  echo "$o" >> $OUT/v111-sanitizer.txt
  printf "%-9s xi gqa-batch-fp8: rc=%s %s\n" "$tool" "$rc" "$(echo "$o" | grep -E 'ERROR SUMMARY' | tail -1)"
done
t() {  # round, variant, workload
  local o rc; o=$($B/step12_fp8_cache-$2 --workload $3 --runs 30 2>&1); rc=$?
  echo "$o" >> $OUT/v111-full.txt
  printf "r%s %-4s %-15s %s rc=%s\n" "$1" "$2" "$3" "$(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')" "$rc"
}
for r in 1 2 3; do for v in m xi; do t $r $v gqa-batch-fp8; done; done
