#!/bin/bash
# v92 quick: the two per-rank timelines alone (step 12 gqa-batch-fp8, step 11 ragged-skew), from the same pack.
P=/tmp/q; mkdir -p $P && xz -dc build/trials-pack.tar.xz | tar -C $P -xf - gpu-pack/bin/step12_fp8_cache-tl gpu-pack/bin/step11_persistent-tl || exit 3
B=$P/gpu-pack/bin
for x in "step12_fp8_cache-tl gqa-batch-fp8" "step11_persistent-tl ragged-skew"; do set -- $x
  PA_TRIAL_TIMELINE=1 $B/$1 --workload $2 --runs 8 2>&1 | grep -E '^TIMELINE|( us|ms) +[0-9]' | tail -5
done
