#!/bin/bash
# v164: v128's clusters (the splits of a pair as one cluster merged in distributed shared memory,
# no merge kernel; ../v99-cluster-merge/trial.patch on main) with the room an SM gives a program
# capped by shared memory, so the clusters cannot pile onto some SMs: PA_TRIAL_SMEM=57344 (4
# programs an SM at most: 528 slots for small-batch's 512) and 45056 (5), under the default and
# the load-balancing policies (PA_TRIAL_SPREAD=2). Asked: v128's load-balanced clusters were
# 0.5 µs behind main where they save the merge kernel's 2 µs; is the rest their placement?
# Usage: run.sh PROGRAM (build/v164/cl).
set -u; export OUT
B=$(dirname "$1"); P=$(basename "$1")
FULL=v164-full.txt
source "$(dirname "$0")/../rows.sh"
C=PA_TRIAL_CLUSTER=1
sb="--workload small-batch"
for r in 1 2 3; do
  vrow "" "r$r main" $P $sb
  vrow "$C PA_TRIAL_SPREAD=2" "r$r cl balance" $P $sb
  vrow "$C PA_TRIAL_SMEM=57344" "r$r cl 4/SM" $P $sb
  vrow "$C PA_TRIAL_SPREAD=2 PA_TRIAL_SMEM=57344" "r$r cl balance 4/SM" $P $sb
  vrow "$C PA_TRIAL_SPREAD=2 PA_TRIAL_SMEM=45056" "r$r cl balance 5/SM" $P $sb
done
for e in main bal4; do
  case $e in main) v="";; bal4) v="$C PA_TRIAL_SPREAD=2 PA_TRIAL_SMEM=57344";; esac
  vrow "$v" "$e 4 splits" $P $sb --splits 4
  vrow "$v" "$e g32" $P --batch 8 --context 4096 --q-heads 256 --kv-heads 8 --head-dim 128 --dtype bf16
  vrow "$v" "$e ragged f16" $P --batch 5 --context 700,4096,1,2500,3333 --q-heads 32 --kv-heads 8 --head-dim 128 --dtype f16 --splits 8
done
grep -h "^v99:" $OUT/$FULL | sort | uniq -c
adv "$C PA_TRIAL_SPREAD=2 PA_TRIAL_SMEM=57344" "clusters balance 4/SM bf16" $P --dtype bf16 --head-dim 128
rm -f $OUT/tmp.json
echo "end at $(date +%T)"
