#!/bin/bash
# v118, second call: step 10 with choose_splits of kWavePrograms (about 4 programs an SM for
# equal lengths, splits of a tile or more), built from the working tree: the adversarial set on the GPU,
# compute-sanitizer on its adversarial set, the plan's choice on one sequence of 1k-128k tokens
# and on the named workloads it touches, and the split counts around it (--splits).
# Usage: run2.sh BINDIR; outputs under $OUT.
set -u; export OUT
B=$1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
for dt in bf16 f16; do  # the GPU against the oracle and the emulator (test_gpu_steps is over the call's 64 MiB)
  $B/step10_tensor_cores --adversarial --dtype $dt >> $OUT/v118-tests.txt 2>&1; echo "adversarial $dt rc=$? $(grep -c 'ok' $OUT/v118-tests.txt)"
done
for t in memcheck racecheck initcheck synccheck; do
  compute-sanitizer --tool $t --error-exitcode 99 $B/step10_tensor_cores --adversarial --dtype bf16 --runs 0 --quiet >> $OUT/v118-sanitizer.txt 2>&1
  echo "$t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/v118-sanitizer.txt | tail -1)"
done
row() {  # label, then the step program's flags
  local label=$1; shift
  $B/step10_tensor_cores "$@" --json $OUT/tmp.json >> $OUT/v118-full2.txt 2>&1; echo "rc=$?" >> $OUT/v118-full2.txt
  python3 - "$label" <<'PY'
import json, os, sys
d = json.load(open(os.environ['OUT'] + '/tmp.json'))
for r in d['results']:
    t = r['gpu_median_seconds']
    print(f"{sys.argv[1]:>12} splits {r['num_splits']:>4} gpu {t*1e6 if t else float('nan'):7.1f} us  ok {r['ok']}")
PY
}
one() { echo "--batch 1 --context $1 --q-heads 32 --kv-heads 8 --head-dim 128 --dtype bf16"; }
for r in 1 2; do
  for n in 1024 2048 4096 8192 16384; do row "ctx $n" $(one $n) --splits 0; done
  row "ctx 16384" $(one 16384) --splits 49,66
  row long-single --workload long-single --splits 0,64,66
  row "ctx 65536" $(one 65536) --splits 0,66,99
  row "ctx 131072" $(one 131072) --splits 0,66,99
  row small-batch --workload small-batch --splits 0
done
