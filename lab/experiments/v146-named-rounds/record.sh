#!/bin/bash
# The recorded run after v146 (docs/results/README.md, "To record a run"), in one call: on an H200
# only (the tables are the H200's); scripts/gpu-bench whole, tests, sanitizer, tour, extension,
# then the benchmarks, from build/gpu-pack.tar.xz (scripts/pack-gpu at the commit to record; its
# JSON's git_revision names it).
set -u
name="$(nvidia-smi --query-gpu=name --format=csv,noheader)"; echo "${name}"
case "${name}" in *H200*) ;; *) echo "not an H200: nothing run"; exit 0 ;; esac
P=/tmp/p; mkdir -p $P && xz -dc build/gpu-pack.tar.xz | tar -C $P -xf - || exit 3
B=$P/gpu-pack/bin; export LD_LIBRARY_PATH=$P/gpu-pack/lib
R=$OUT/r; mkdir -p $R
scripts/gpu-bench --bin $B --out $R; echo "gpu-bench rc $?"
python3 lab/experiments/v146-named-rounds/rounds.py $R/*.json
