#!/bin/bash
# v92 calls 2 and 3: claimed-tail settings (PA_TRIAL_TAIL=tail,unit) on the -dt programs of run.sh's pack.
P=/tmp/q; [ -d $P/gpu-pack ] || { mkdir -p $P && xz -dc build/trials-pack.tar.xz | tar -C $P -xf -; }
B=$P/gpu-pack/bin
g() { grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}'; }
if [ "${1:-}" != wide ]; then  # call 2
  for r in 1 2; do for tl in 0,0 6,6 6,3 8,8 10,5 12,6 12,12 4,4 16,8; do
    o=$(PA_TRIAL_TAIL=$tl $B/step12_fp8_cache-dt --workload gqa-batch-fp8 --runs 20 2>&1)
    echo "r$r $tl $(echo "$o" | g) $(echo "$o" | grep -ciE 'mismatch|wrong|FAIL')"; done; done
  for tl in 0,0 1,1 2,1 3,3 2,2; do
    echo "skew $tl $(PA_TRIAL_TAIL=$tl $B/step11_persistent-dt --workload ragged-skew --runs 20 2>&1 | g)"; done
else  # call 3: every workload at head dim 128
  for r in 1 2; do
    for w in gqa-batch mha-batch small-batch ragged-uniform long-single; do for tl in 0,0 4,4 6,6 3,3; do
      echo "s11 r$r $w $tl $(PA_TRIAL_TAIL=$tl $B/step11_persistent-dt --workload $w --runs 20 2>&1 | g)"; done; done
    for w in gqa-batch-fp8 small-batch ragged-skew long-single; do for tl in 0,0 4,4 5,5 3,3 2,2; do
      echo "s12 r$r $w $tl $(PA_TRIAL_TAIL=$tl $B/step12_fp8_cache-dt --workload $w --runs 20 2>&1 | g)"; done; done
  done
fi
