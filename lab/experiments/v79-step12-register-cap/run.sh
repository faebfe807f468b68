#!/bin/bash
mkdir -p /tmp/h && xz -dc build/gpu17/s.tar.xz | tar -C /tmp/h -xf - || exit 1
export LD_LIBRARY_PATH=/tmp/h/s/lib
B=/tmp/h/s/bin
cd "$OUT"
$B/test_gpu_steps "[step12]" --durations yes > t12.log 2>&1; echo "step12 tests rc=$?"; tail -2 t12.log
for t in memcheck initcheck racecheck synccheck; do
  compute-sanitizer --tool $t --error-exitcode 99 $B/step12_fp8_cache --adversarial --dtype bf16 --runs 0 --quiet >> san.log 2>&1; echo "$t rc=$?"; done
for r in 1 2; do for b in step12_old step12_fp8_cache; do
  for extra in "" "--head-dim 64" "--head-dim 256" "--q-heads 128" "--q-heads 256"; do
    t=$($B/$b --workload gqa-batch-fp8 $extra --runs 20 2>&1 | grep -E "^12 " | awk '{print $(NF-3), $(NF-2), $NF}')
    echo "$b [$extra] $t"
  done; done; done
cuobjdump --dump-resource-usage $B/step12_fp8_cache 2>/dev/null | grep -A1 "fp8_persistent" | grep -oE "REG:[0-9]+ STACK:[0-9]+ SHARED:[0-9]+ LOCAL:[0-9]+" | sort | uniq -c
