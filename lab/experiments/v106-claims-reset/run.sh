#!/bin/bash
# v106 (prepared 2026-12-03, not yet run): what does zeroing step 12's claims count on the stream
# before each launch cost (d340700: gpu::zero_async, a cudaMemsetAsync of 4 bytes), against
# v102's way, where the kernel's last failing claim sets the count back to 0? And claims against
# none, in the same program. trial.patch on d340700 (PA_TRIAL_NOCLAIMS=1: a plan without claims;
# PA_TRIAL_LASTRESET=1: the count zeroed at a workspace's first launch only), built at head dim
# 128 with lab/experiments/v91-claimed-tails/build.sh 12 cr; the program in
# build/v106-pack.tar.xz. Three rounds, alternating. About a minute.
set -u
# Given a folder (run.sh DIR), the program is DIR/step12_fp8_cache-cr (v109's pack carried it).
if [ -n "${1:-}" ]; then
  B=$1/step12_fp8_cache-cr
else
  P=/tmp/q106; mkdir -p $P && xz -dc build/v106-pack.tar.xz | tar -C $P -xf - || exit 3
  B=$P/gpu-pack/bin/step12_fp8_cache-cr
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t() {  # round, mode, workload
  local o rc
  o=$( (case $2 in none) export PA_TRIAL_NOCLAIMS=1;; last-reset) export PA_TRIAL_LASTRESET=1;; esac
        $B --workload $3 --runs 50) 2>&1); rc=$?
  local us=$(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')
  echo "$o" | grep -qiE 'mismatch|wrong|FAIL' && us="$us WRONG"
  [ $rc -ne 0 ] && us="$us rc=$rc"
  printf "r%s %-10s %-15s %s\n" "$1" "$2" "$3" "$us"
}
for r in 1 2 3; do
  for m in none memset last-reset; do t $r $m gqa-batch-fp8; done
done
(export PA_TRIAL_LASTRESET=1; $B --workload gqa-batch-fp8 --runs 50 2>&1 | grep -iE 'claimed|ok|fail' | head -3 | cut -c1-300)
