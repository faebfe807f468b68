#!/bin/bash
# v90: no change measured, two questions for what comes next.
#  (1) the program timeline of step 12's fp8 kernel on gqa-batch-fp8 (-t: globaltimer at each
#      program's start and end and the merge's, as v88's step 10/11 -t), and of step 11 on
#      ragged-skew again on this machine;
#  (2) ncu's stall reasons a warp (per issue-active cycle) on step 12's fp8 kernel, step 10's
#      split kernel on small-batch and on gqa-batch (-m: 601d896 built at head dim 128).
set -u
P=/tmp/q; mkdir -p $P && xz -dc build/quick-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
for w in "step12_fp8_cache-t --workload gqa-batch-fp8" "step11_persistent-t --workload ragged-skew"; do
  echo "== timeline: $w"; PA_TRIAL_TIMELINE=1 $B/$w --runs 20 2>&1 | grep -E 'TIMELINE| (us|ms) +[0-9]' | tail -4
done
M='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,smsp__inst_executed.sum'
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
    if '__' not in h: continue
    try: x = float(v.replace(',', ''))
    except ValueError: continue
    name = h.replace('smsp__average_warps_issue_stalled_', 'stall ').replace('_per_issue_active.ratio', '')
    out.append((name, x, u))
for n, x, u in sorted(out, key=lambda t: (not t[0].startswith('stall'), -t[1])):
    if n.startswith('stall') and x < 0.02: continue
    print(f'  {n:60s} {x:12.3f} {u}')
PY
}
prof fp8_persistent step12_fp8_cache-m --workload gqa-batch-fp8
prof tensor_core_split step10_tensor_cores-m --workload small-batch
prof tensor_core_split step10_tensor_cores-m --workload gqa-batch
