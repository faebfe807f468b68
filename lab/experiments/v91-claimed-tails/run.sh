#!/bin/bash
# v91: the last tiles of each program's run claimed at run time (branch next/dynamic-tail,
# built by hand at head dim 128 only, -d); PA_TRIAL_TAIL="tail,unit": each program's last `tail`
# tiles go to items of at most `unit` tiles that programs claim (an atomic counter) once their
# own runs are done. Unset: the plan as on main (and -m: main's program, 601d896).
# And step 10's group 32 against gqa-batch in the step program on one machine (the recorded
# runs' bench_ladder had group 32 9% slower than gqa-batch; v88's step program 484-485 µs).
set -u
P=/tmp/q; mkdir -p $P && xz -dc build/quick-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t() {  # round, tail, binary, workload
  [ $SECONDS -gt 200 ] && return
  local o=$( ( [ -n "$2" ] && export PA_TRIAL_TAIL=$2; $B/$3 --workload $4 ${5:-} --runs 20 ) 2>&1)
  local us=$(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')
  echo "$o" | grep -qiE 'mismatch|wrong|FAIL' && us="$us WRONG"
  printf "r%s %-8s %-22s %-30s %-24s %s\n" "$1" "${2:--}" "$3" "$4 ${5:-}" "$us" "$(echo "$o" | grep -oE 'in [0-9]+ items' | tail -1)"
}
for r in 1 2; do
  t $r "" step12_fp8_cache-m gqa-batch-fp8
  for tl in "" 12,2 20,4; do t $r "$tl" step12_fp8_cache-d gqa-batch-fp8; done
  t $r "" step11_persistent-m ragged-skew
  for tl in "" 4,1 4,2; do t $r "$tl" step11_persistent-d ragged-skew; done
  t $r "" step10_tensor_cores-m gqa-batch
  t $r "" step10_tensor_cores-m gqa-batch "--q-heads 256"
done
