#!/bin/bash
# v100 (prepared 2026-12-03, not yet run): why step 10 trails step 09 on mha-batch (group 1) by
# 0.2-0.8% in every recorded run (v87: 491.2 against 487.3 us), while both run one split of 8192
# tokens, 512 programs. Times, three rounds alternating, then ncu of one launch of each split
# kernel: DRAM and L2 throughput, issue and warp activity, stall reasons, instructions.
# Programs: step09 -m and step10 -cl (the v99 program; without PA_TRIAL_CLUSTER it is step 10 as
# on main), head dim 128, in build/v99-pack.tar.xz; or, given a folder (run.sh DIR), the step
# programs of a pack from scripts/pack-gpu in DIR. About three minutes.
set -u
if [ -n "${1:-}" ]; then
  B=$1; S09=step09_memory_pipeline; S10=step10_tensor_cores
else
  P=/tmp/q99; mkdir -p $P && xz -dc build/v99-pack.tar.xz | tar -C $P -xf - || exit 3
  B=$P/gpu-pack/bin; S09=step09_memory_pipeline-m; S10=step10_tensor_cores-cl
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t() {  # round, binary, workload
  local o=$($B/$2 --workload $3 --runs 20 2>&1)
  printf "r%s %-26s %-12s %s\n" "$1" "$2" "$3" "$(echo "$o" | grep -E ' (us|ms) +[0-9]' | tail -1 | awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}')"
}
for r in 1 2 3; do
  for b in $S09 $S10; do t $r $b mha-batch; done
done
for b in $S09 $S10; do t 1 $b gqa-batch; done
M='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,smsp__inst_executed.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,launch__occupancy_limit_registers,launch__registers_per_thread,sm__maximum_warps_per_active_cycle_pct'
prof() {  # kernel regex, binary + args
  local k=$1; shift
  echo "== ncu $k: $*"
  timeout 150 ncu --clock-control none --kernel-name "regex:$k" --launch-skip 2 --launch-count 1 --metrics "$M" --csv --page raw $B/$* --runs 3 2>/dev/null > /tmp/ncu.csv
  python3 - <<'PY'
import csv
rows = list(csv.reader(open('/tmp/ncu.csv')))
i = next((k for k, r in enumerate(rows) if r and r[0] == 'ID'), None)
if i is None: print('no ncu rows'); raise SystemExit
head, units, vals = rows[i], rows[i + 1], rows[i + 2]
out = []
for h, u, v in zip(head, units, vals):
    # --page raw prints every metric it has (device attributes too): keep the ones asked for
    if not h.startswith(('smsp__average_warps_issue_stalled', 'smsp__issue_active.avg', 'dram__', 'lts__',
                         'sm__warps_active.avg', 'gpu__time_duration', 'smsp__inst_executed.sum',
                         'l1tex__data_bank', 'launch__registers_per_thread', 'launch__occupancy_limit_registers',
                         'sm__maximum_warps_per_active_cycle_pct')): continue
    try: x = float(v.replace(',', ''))
    except ValueError: continue
    name = h.replace('smsp__average_warps_issue_stalled_', 'stall ').replace('_per_issue_active.ratio', '')
    out.append((name, x, u))
for n, x, u in sorted(out, key=lambda t: (not t[0].startswith('stall'), -t[1])):
    if n.startswith('stall') and x < 0.02: continue
    print(f'  {n:60s} {x:14.3f} {u}')
PY
}
prof pipelined_split $S09 --workload mha-batch
prof tensor_core_split $S10 --workload mha-batch
