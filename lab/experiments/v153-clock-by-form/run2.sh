#!/bin/bash
# v153, second form: does the clock step depend on the inputs' type or on the mma a byte? ncu
# (run.sh's probe, three launches each) of step 10's split kernel on gqa-batch in bf16 and in
# f16, at group 1 (mha-batch) and at group 32 (gqa-batch's bytes, 256 query heads: four times
# group 8's mma a byte), and step 09 at group 1. Usage: run2.sh PROGRAM_DIR (build/v153h).
set -u; export OUT
B=$1
FULL=v153c-full.txt
PROBES_ONLY=1 source "$(dirname "$0")/run.sh" "$B"
probe s10-bf16 "" step10 gqa-batch
probe s10-f16 "" step10 gqa-batch --dtype f16
probe s10-g1 "" step10 mha-batch
probe s09-g1 "" step09 mha-batch
probe s10-g32 "" step10 gqa-batch --q-heads 256
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
echo "end at $(date +%T)"
