#!/bin/bash
# The prepared runs of the thirty-sixth and thirty-seventh sessions in one device call (each start of a machine
# costs a minute or more, and H200s came rarely): v151's run.sh, v152's run.sh (the clock and
# power while gqa-batch runs with and without the arithmetic), v150's run2.sh (ncu of gqa-batch
# with and without the arithmetic) and, on an H200, v149's run3.sh. Needs the three
# build folders (each experiment's build.sh): carry ["build/v149", "build/v150", "build/v151"]
# (about 40 MB). Usage: run-prepared.sh; outputs v151.txt, v152.txt, v150b.txt, v149d.txt, their full
# outputs and ncu reports under $OUT (eight files at most).
set -u
L=$(cd "$(dirname "$0")/.." && pwd)
bash $L/v151-pair-wait/run.sh build/v151 2>&1 | grep -v "^    on the GPU" | tee $OUT/v151.txt
bash $L/v152-math-clock/run.sh build/v150 2>&1 | tee $OUT/v152.txt
rm -f $OUT/v152-full.txt  # v152.txt has its rows; a call brings back 8 files
bash $L/v150-math-tail/run2.sh build/v150 2>&1 | tee $OUT/v150b.txt
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash $L/v149-step10-floor/run3.sh build/v149 2>&1 | grep -v "^    on the GPU" | tee $OUT/v149d.txt
fi
rm -f $OUT/tmp.json
