#!/bin/bash
# v121, v122 and v123 in one device call (prepared 2026-12-04, not yet run). Programs, all step 10
# from 6dfbecb's source at head dim 128 unless named otherwise:
#   -m   main's source (no trial switch);
#   -e   v121, the first tiles' block-table loads before the context length
#        (lab/experiments/v121-early-table/trial.patch, -DPA_TRIAL_EARLY_TABLE); -ea the same at
#        every head dim (the adversarial set is at head dim 64);
#   -hk  v122, a warp of 8 heads or fewer skips the softmax of its padding rows 8-15: branch
#        next/half-rows (e2f9472: a second split kernel with ROWS = 1 for groups of at most
#        8), built at head dim 128: its ROWS = 1 kernel takes 172 registers, 5 programs an SM;
#   -hkc -hk with -maxrregcount=168 (6 programs an SM, no stack; in the pack, no longer timed:
#        -ehk's ROWS = 1 kernel takes 161 registers uncapped);
#   -ehk both kept forms at once: branch next/both (88b0535, next/early-table with
#        next/half-rows merged), head dim 128; its ROWS = 1 kernel takes 161 registers (6
#        programs an SM), its ROWS = 2 kernels 159, the wide one 168;
#   -w   v123, a group of one on the wide shape, one warp of 128 channels a program
#        (lab/experiments/v123-wide-group1/trial.patch, -DPA_TRIAL_WIDE_G1; host side only);
#   step09_memory_pipeline-s09: step 09 as main builds it (build/cuda at 6a26cec, every head dim),
#        timed on mha-batch in each round beside step 10's programs.
# First the checks on the GPU (adversarial sets, shapes, memcheck and initcheck), then three
# rounds of the rows issue 18 hangs on, alternating the programs, 50 runs a row, medians to
# 0.01 us from the JSON.
# Usage: run.sh BINDIR; outputs under $OUT.
set -u; export OUT
B=$1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
echo "start at $(date +%T)"
check() {  # label program args...
  local label=$1 prog=$2; shift 2
  $B/$prog "$@" >> $OUT/checks.txt 2>&1; echo "check $label $prog rc=$?"
}
for d in bf16 f16; do
  check "adversarial $d" step10_tensor_cores-ea --adversarial --dtype $d
  for v in e hk ehk; do check "adversarial d128 $d" step10_tensor_cores-$v --adversarial --head-dim 128 --dtype $d; done
done
for a in "--page 16" "--page 32" "--page 8" "--page 24" "--layout nhd" "--q-heads 64 --kv-heads 2 --dtype f16"; do
  for v in e hk ehk; do
    check "shape $a" step10_tensor_cores-$v --batch 4 --context 15,16,47,7000 --q-heads 16 --kv-heads 2 --head-dim 128 --dtype bf16 $a
  done
done
for g in "12 1" "20 1" "7 1" "8 8"; do  # groups whose second eight rows are live or padding (v122)
  set -- $g
  for v in hk ehk; do check "group $1/$2" step10_tensor_cores-$v --batch 3 --context 15,47,7000 --q-heads $1 --kv-heads $2 --head-dim 128 --dtype bf16; done
done
for d in bf16 f16; do check "adversarial d128 $d" step10_tensor_cores-w --adversarial --head-dim 128 --dtype $d; done
check "group 8/8" step10_tensor_cores-w --batch 3 --context 15,47,7000 --q-heads 8 --kv-heads 8 --head-dim 128 --dtype bf16
row() {  # label program args...
  local label=$1 prog=$2; shift 2
  $B/$prog "$@" --runs 50 --json $OUT/tmp.json >> $OUT/full.txt 2>&1; local rc=$?
  python3 - "$label" "$prog" "$rc" <<'PY'
import json, os, sys
d = json.load(open(os.environ['OUT'] + '/tmp.json'))
for r in d['results']:
    t = r['gpu_median_seconds']
    print(f"{sys.argv[1]:<22} {sys.argv[2]:<24} rc={sys.argv[3]} splits {r['num_splits']:>3} gpu {t*1e6 if t else float('nan'):8.2f} us ok {r['ok']}")
    with open(os.environ['OUT'] + '/rows.tsv', 'a') as f:
        f.write(f"{sys.argv[1].split(' ', 1)[1]}\t{sys.argv[2].rsplit('-', 1)[1]}\t{t*1e6 if t else float('nan'):.2f}\t{r['ok']}\n")
PY
}
for r in 1 2 3; do
  (( r == 3 && SECONDS > 330 )) && { echo "round 3 skipped: ${SECONDS} s gone"; break; }
  echo "round $r at $(date +%T)"
  for w in small-batch long-single mha-batch gqa-batch; do
    vs="m e hk ehk"; [[ $w == mha-batch ]] && vs="m e hk ehk w"
    for v in $vs; do row "r$r $w" step10_tensor_cores-$v --workload $w; done
    # Issue 18 asks step 10 to be no slower than step 09 on mha-batch: step 09 in the same rounds.
    [[ $w == mha-batch ]] && row "r$r $w" step09_memory_pipeline-s09 --workload $w
  done
  for v in m e hk ehk; do  # group 16 at gqa-batch's bytes: -hk's ROWS = 2 kernel (main's)
    row "r$r g16" step10_tensor_cores-$v --batch 64 --context 8192 --q-heads 128 --kv-heads 8 --head-dim 128 --dtype bf16
  done
  for v in m e ehk; do  # group 32: the wide shape, which -e's build holds at 168 registers where main's takes 236
    row "r$r g32" step10_tensor_cores-$v --batch 64 --context 8192 --q-heads 256 --kv-heads 8 --head-dim 128 --dtype bf16
  done
  for v in m e ehk; do row "r$r single 1024" step10_tensor_cores-$v --batch 1 --context 1024 --q-heads 32 --kv-heads 8 --head-dim 128 --dtype bf16; done
done
# The sanitizer last: the recorded run checks what lands again (scripts/gpu-bench --no-bench).
for t in memcheck initcheck; do
  for v in ea ehk; do  # -ehk's ROWS = 1 kernel is -hk's softmax with -ea's early reads
    (( SECONDS > 520 )) && { echo "$t $v skipped: ${SECONDS} s gone"; continue; }
    a="--adversarial --dtype bf16"; [[ $v == ehk ]] && a="$a --head-dim 128"
    compute-sanitizer --tool $t --error-exitcode 99 $B/step10_tensor_cores-$v $a --runs 0 --quiet >> $OUT/sanitizer.txt 2>&1
    echo "$t $v rc=$?"
  done
done
# Last, the table: each row's times over the rounds, by program (µs), and the failed rows.
python3 - <<'PY'
import collections, os
rows = collections.defaultdict(list)
bad = []
for line in open(os.environ['OUT'] + '/rows.tsv'):
    what, prog, t, ok = line.rstrip('\n').split('\t')
    rows[(what, prog)].append(float(t))
    if ok != 'True': bad.append((what, prog))
progs = ['m', 'e', 'hk', 'ehk', 'w', 's09']
print(f"{'row':<16}" + ''.join(f"{p:>22}" for p in progs))
for what in dict.fromkeys(w for w, _ in rows):
    cells = [' / '.join(f"{x:.2f}" for x in rows.get((what, p), [])) for p in progs]
    print(f"{what:<16}" + ''.join(f"{c:>22}" for c in cells))
print("not ok:", bad or "none")
PY
