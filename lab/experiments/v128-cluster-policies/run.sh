#!/bin/bash
# v128: v99's second form (the splits of a pair as one cluster, merged in distributed shared
# memory; `../v99-cluster-merge/trial.patch` on 040a6e0, step 10 built at head dim 128 with
# -DPA_TRIAL_CLUSTER), which never ran: the cluster scheduling policy (PA_TRIAL_SPREAD=1 spread,
# 2 load balancing, unset the default), more shared memory a program (PA_TRIAL_SMEM, fewer
# programs an SM) and the clusters the GPU holds at once (the program's "v99:" line). QUICK=1:
# without the 56 KB rows, group 32 and the ragged batch.
# Asked: were v99's clusters slow because they were packed on few SMs? Usage: run.sh PROGRAM.
set -u; export OUT
B=$(dirname "$1"); P=$(basename "$1")
FULL=v128-full.txt
source "$(dirname "$0")/../rows.sh"
C=PA_TRIAL_CLUSTER=1
sb="--workload small-batch"
for r in 1 2; do
  vrow "" "r$r main" $P $sb
  vrow "$C" "r$r cluster" $P $sb
  vrow "$C PA_TRIAL_SPREAD=1" "r$r cluster spread" $P $sb
  vrow "$C PA_TRIAL_SPREAD=2" "r$r cluster balance" $P $sb
  [[ -n ${QUICK:-} ]] && continue
  vrow "$C PA_TRIAL_SMEM=57344" "r$r cluster smem56k" $P $sb
  vrow "$C PA_TRIAL_SPREAD=1 PA_TRIAL_SMEM=57344" "r$r cluster spread smem56k" $P $sb
done
for e in main cluster spread; do
  case $e in main) v="";; cluster) v=$C;; spread) v="$C PA_TRIAL_SPREAD=1";; esac
  vrow "$v" "$e 4 splits" $P $sb --splits 4
  [[ -n ${QUICK:-} ]] && continue
  vrow "$v" "$e g32" $P --batch 8 --context 4096 --q-heads 256 --kv-heads 8 --head-dim 128 --dtype bf16
  vrow "$v" "$e ragged f16" $P --batch 5 --context 700,4096,1,2500,3333 --q-heads 32 --kv-heads 8 --head-dim 128 --dtype f16 --splits 8
done
grep -h "^v99:" $OUT/$FULL | sort | uniq -c
o=$(env $C PA_TRIAL_SPREAD=1 timeout 100 $1 --adversarial --dtype bf16 --head-dim 128 2>&1); echo "adversarial clusters spread rc=$? $(echo "$o" | tail -n 2 | tr '\n' ' ')"
