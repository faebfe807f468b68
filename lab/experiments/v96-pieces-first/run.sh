#!/bin/bash
# v96 (ran 2026-12-03, output.txt): step 11 with each program's pieces of cut pairs run
# before its whole pairs (PA_TRIAL_PIECES_FIRST=1, the plan), and v94's merge that waits on a
# count a pair (-po, -DPA_TRIAL_FLAGS) instead of the whole kernel. Together the cut pairs'
# pieces are done about a third of the way before the programs end, and their merge can run
# in the slots of the programs that end first, behind the others' whole pairs.
# -m: main (50dd79a, kernels as 5caf07b); -pm: trial.patch without the flags (the order only, by
# the environment); -po: trial.patch with the flags. Head dim 128 only; build/v96-pack.tar.xz.
set -u
P=/tmp/q96; mkdir -p $P && xz -dc build/v96-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t() {  # round, env (VAR=value or -), binary, workload
  [ $SECONDS -gt 240 ] && return
  local o=$( ( [ "$2" != - ] && export $2; $B/$3 --workload $4 --runs 20 ) 2>&1)
  local us=$(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')
  echo "$o" | grep -qiE 'mismatch|wrong|FAIL' && us="$us WRONG"
  printf "r%s %-50s %-22s %-14s %s\n" "$1" "$2" "$3" "$4" "$us"
}
F=PA_TRIAL_PIECES_FIRST=1
for r in 1 2; do
  t $r - step11_persistent-m ragged-skew
  t $r $F step11_persistent-po ragged-skew
  for lead in 30 60 100; do
    t $r "$F PA_TRIAL_PIECE_LEAD=$lead" step11_persistent-po ragged-skew
  done
  t $r "$F PA_TRIAL_PIECE_LEAD=60" step11_persistent-pm ragged-skew
done
for w in ragged-uniform long-single small-batch gqa-batch; do
  t 1 - step11_persistent-m $w
  t 1 "$F PA_TRIAL_PIECE_LEAD=60" step11_persistent-po $w
done
o=$( (export $F PA_TRIAL_PIECE_LEAD=60; timeout 60 $B/step11_persistent-po --adversarial --dtype bf16) 2>&1); echo "adversarial -po rc=$? $(echo "$o" | tail -n 1)"
