#!/bin/bash
# The recorded run after v146 in one call, benchmarks first: on an H200 only (the tables are the
# H200's). scripts/gpu-bench twice from build/gpu-pack.tar.xz: the benchmarks alone into $OUT/r
# (the run's JSON and its folder), then the tests, sanitizer, tour and extension into $OUT/c
# (their logs go into the run's folder here, as for v133's run), so a call cut short still
# brings the benchmarks back. Each half's printout is kept as bench-summary.txt and
# checks-summary.txt.
set -u
name="$(nvidia-smi --query-gpu=name --format=csv,noheader)"; echo "${name}"
case "${name}" in *H200*) ;; *) echo "not an H200: nothing run"; exit 0 ;; esac
P=/tmp/p; mkdir -p $P && xz -dc build/gpu-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin; export LD_LIBRARY_PATH=$P/gpu-pack/lib
R=$OUT/r; C=$OUT/c; mkdir -p $R $C
scripts/gpu-bench --bin $B --out $R --no-tests --no-sanitizer --no-torch > $R/bench-summary.txt 2>&1
echo "benchmarks rc $?"; tail -n 4 $R/bench-summary.txt
python3 lab/experiments/v146-named-rounds/rounds.py $R/*.json
scripts/gpu-bench --bin $B --out $C --no-bench > $C/checks-summary.txt 2>&1
echo "checks rc $?"; grep -A12 "summary (" $C/checks-summary.txt | head -14
