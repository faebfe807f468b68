#!/bin/bash
# v132: step 10 with the heads as the N of m16n8k16 for groups of at most 8 (the trial binary,
# built by build.sh at head dim 128; PA_TRIAL_M=1 runs main's 16-row form from the same binary),
# rounds alternating the two forms, step 09 beside them on mha-batch; then the adversarial sets
# and compute-sanitizer on the trial form. Usage: run.sh TRIAL_DIR PACK_BIN_DIR.
set -u; export OUT
T=$1; S=$2
FULL=v132-full.txt
B=$T
source "$(dirname "$0")/../rows.sh"
n=step10_tensor_cores-n
M=PA_TRIAL_M=1
for r in 1 2; do
  vrow "" "r$r N small-batch" $n --workload small-batch
  vrow "$M" "r$r M small-batch" $n --workload small-batch
  vrow "" "r$r N mha-batch" $n --workload mha-batch
  vrow "$M" "r$r M mha-batch" $n --workload mha-batch
  ( B=$S; row "r$r step09 mha-batch" step09_memory_pipeline --workload mha-batch )
  vrow "" "r$r N gqa-batch" $n --workload gqa-batch
  vrow "$M" "r$r M gqa-batch" $n --workload gqa-batch
done
vrow "" "N small-batch" $n --workload small-batch
vrow "$M" "M small-batch" $n --workload small-batch
vrow "" "N long-single" $n --workload long-single
vrow "$M" "M long-single" $n --workload long-single
for g in 2 4; do
  vrow "" "N g$g" $n --workload gqa-batch --q-heads $((8 * g))
  vrow "$M" "M g$g" $n --workload gqa-batch --q-heads $((8 * g))
done
for d in bf16 f16; do
  o=$(timeout 120 $T/$n --adversarial --dtype $d --head-dim 128 2>&1); echo "adversarial N $d rc=$? $(echo "$o" | tail -n 1)"
done
for tool in memcheck racecheck; do
  o=$(timeout 120 compute-sanitizer --tool $tool --error-exitcode 99 $T/$n --adversarial --dtype bf16 --head-dim 128 --runs 0 2>&1); echo "$tool N rc=$? $(echo "$o" | grep -E "SUMMARY" | sort | uniq -c | tr '\n' ' ')"
done
echo "end at $(date +%T)"
