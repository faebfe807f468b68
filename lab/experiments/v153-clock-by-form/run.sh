#!/bin/bash
# v153: which arithmetic lowers the SM clock? v152's ncu had step 10's split kernel on gqa-batch
# at 1.83 GHz (elapsed cycles over duration) with its tile arithmetic and 1.98 GHz without it,
# while nvidia-smi read 1980 MHz throughout. Here ncu (--clock-control none, a few metrics, three
# launches after two) of the split kernel of: step 09 (CUDA cores, no mma), step 10 (main), v150's
# base and nomath (head dim 128), and v132's heads-as-N form (half the mma and exponentials at
# group 8) with main's form from the same program (PA_TRIAL_M=1); on gqa-batch and small-batch.
# Then each program's median time on both (rows.sh's row(), 30 launches).
# QUICK=1: the ncu lines of step09, step10, nomath and n only.
# Usage: run.sh PROGRAM_DIR (build/v153: step09, step10, base, nomath, n, copied by build.sh).
set -u; export OUT
B=$1
FULL=v153-full.txt
source "$(dirname "$0")/../rows.sh"
ncu --query-metrics --chip gh100 2>/dev/null | grep -iE "^sm__(inst_executed_pipe_tensor|pipe_tensor)" | cut -c1-80 | head -6
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__cycles_elapsed.max,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum
T=$(ncu --query-metrics --chip gh100 2>/dev/null | grep -oE "^sm__inst_executed_pipe_tensor_op_hmma\b" | head -1)
[[ -n $T ]] && M=$M,$T.sum
probe() {  # label vars program workload [flags]: one line a profiled launch
  local label=$1 vars=$2 prog=$3 w=$4; shift 4
  env $vars timeout 120 ncu --clock-control none -k regex:split_decode --launch-skip 2 --launch-count 3 --csv \
    --metrics $M $B/$prog --workload $w "$@" --runs 6 2>/dev/null > /tmp/ncu-$label-$w.csv
  python3 - /tmp/ncu-$label-$w.csv "$label" "$w" <<'PY'
import csv, sys
path, label, w = sys.argv[1:]
rows = list(csv.reader(open(path)))
h = [i for i, r in enumerate(rows) if r[:1] == ['ID']]  # the program's own output comes first
if not h: print(f"{label:<8} {w:<12} no ncu rows"); sys.exit()
head, data = rows[h[0]], [r for r in rows[h[0] + 1:] if len(r) == len(rows[h[0]])]
ix = {n: head.index(n) for n in ('ID', 'Metric Name', 'Metric Unit', 'Metric Value')}
# to seconds, hertz and plain counts, whatever units ncu chose
scale = {'nsecond': 1e-9, 'usecond': 1e-6, 'msecond': 1e-3, 'second': 1, 'ns': 1e-9, 'us': 1e-6, 'ms': 1e-3,
         'cycle/nsecond': 1e9, 'cycle/usecond': 1e6, 'cycle/msecond': 1e3, 'cycle/second': 1,
         'ghz': 1e9, 'mhz': 1e6, 'khz': 1e3, 'hz': 1}
by = {}
for r in data:
    v = float(r[ix['Metric Value']].replace(',', '') or 'nan')
    by.setdefault(r[ix['ID']], {})[r[ix['Metric Name']]] = v * scale.get(r[ix['Metric Unit']].strip().lower(), 1)
for i, m in by.items():
    f = lambda k: m.get(k, float('nan'))
    hm = [k for k in m if 'tensor' in k]
    print(f"{label:<8} {w:<12} {f('gpu__time_duration.sum')*1e6:8.2f} us  SM {f('sm__cycles_elapsed.avg.per_second')/1e9:5.3f} GHz"
          f"  cycles max {f('sm__cycles_elapsed.max'):9.0f}  DRAM {f('dram__throughput.avg.pct_of_peak_sustained_elapsed'):5.1f}%"
          f"  inst {f('smsp__inst_executed.sum')/1e6:6.1f} M" + (f"  hmma {f(hm[0])/1e6:5.2f} M" if hm else ''))
PY
}
[[ -n ${PROBES_ONLY:-} ]] && return 0
for w in gqa-batch small-batch; do
  echo "== ncu $w ($(date +%T))"
  probe s09 "" step09 $w
  probe s10 "" step10 $w
  [[ -z ${QUICK:-} ]] && probe base "" base $w
  probe nomath "" nomath $w
  probe nform "" n $w
  [[ -z ${QUICK:-} ]] && probe mform PA_TRIAL_M=1 n $w
done
[[ -n ${QUICK:-} ]] && { rm -f $OUT/tmp.json; echo "end at $(date +%T)"; exit 0; }
echo "== times ($(date +%T))"
for w in gqa-batch small-batch; do
  for p in step09 step10 base nomath n; do row "$p $w" $p --workload $w; done
  vrow PA_TRIAL_M=1 "mform $w" n --workload $w
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
rm -f $OUT/tmp.json
echo "end at $(date +%T)"
