#!/bin/bash
# step 12 (branch fp8 at 3163e8e) on the GPU: tests, sanitizers, benchmarks
mkdir -p /tmp/g && xz -dc build/gpu15/g.tar.xz | tar -C /tmp/g -xf - || exit 1
export LD_LIBRARY_PATH=/tmp/g/g/lib
B=/tmp/g/g/bin
cd "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
$B/fp8_against_cuda > fp8_against_cuda.log 2>&1; echo "fp8_against_cuda rc=$?"; tail -2 fp8_against_cuda.log
$B/test_gpu_steps "[step12]" --durations yes > t12.log 2>&1; echo "step12 tests rc=$?"; tail -3 t12.log
$B/test_gpu_steps "[step11]" > t11.log 2>&1; echo "step11 tests rc=$?"; tail -2 t11.log
for t in memcheck initcheck racecheck synccheck; do for d in bf16 f16; do
  compute-sanitizer --tool $t --error-exitcode 99 $B/step12_fp8_cache --adversarial --dtype $d --runs 0 --quiet >> san.log 2>&1; echo "$t $d rc=$?"; done; done
grep -c "ERROR SUMMARY: 0 errors" san.log
$B/bench_ladder --benchmark_filter='(step1[0-2]_[a-z0-9_]+/gpu/(gqa-batch|gqa-batch-fp8|small-batch|ragged-skew|mha-batch)/iterations)|bare_read/gpu/gqa-batch/once' --benchmark_out=b.json --benchmark_out_format=json > b.log 2>&1; echo "bench rc=$?"
python3 - <<'PY'
import json
d=json.load(open('b.json'))
print('roof', d['context'].get('roof_gbps'))
for b in d['benchmarks']:
    print(f"{b['name'].replace('/iterations:1/manual_time',''):45s} {b.get('real_time',0)*1e3:8.1f} us {b.get('pct_datasheet',0):5.1f}% {b.get('error_message','')[:80]} | {b.get('label','')[:160]}")
PY
