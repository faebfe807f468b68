#!/bin/bash
# v110: how far apart does one machine put the rows the open targets hang on, run after run?
# bench_ladder of the recorded run's pack (3b0a5cd), five repetitions of each row, interleaved
# at random (Google Benchmark's --benchmark_enable_random_interleaving), each repetition the
# usual median of 20 launches: step 09 and 10 on mha-batch (issue 18: no named workload slower
# than the rung before), step 10 on small-batch (75%) and gqa-batch, step 12 on gqa-batch-fp8
# (1.8x step 10's gqa-batch). Usage: run.sh PACKDIR [REPETITIONS [EXTRA_ROWS_REGEX]]; the JSON
# goes under $OUT, the table to stdout. The second call added step 11's ragged-skew and step 10's
# long-single at 10 repetitions.
set -u
B=$1; REPS=${2:-5}; EXTRA=${3:-}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
LD_LIBRARY_PATH=$B/../lib $B/bench_ladder \
  --benchmark_filter="^(step09_memory_pipeline/gpu/mha-batch|step10_tensor_cores/gpu/(mha-batch|small-batch|gqa-batch)|step12_fp8_cache/gpu/gqa-batch-fp8${EXTRA:+|$EXTRA})/iterations" \
  --benchmark_repetitions=$REPS --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=false \
  --benchmark_format=json --benchmark_out=$OUT/v110-$REPS.json --benchmark_out_format=json > $OUT/v110-$REPS-stdout.txt 2> $OUT/v110-$REPS-stderr.txt
echo "bench_ladder rc=$?"
python3 - "$OUT/v110-$REPS.json" <<'PY'
import json, sys, statistics
d = json.load(open(sys.argv[1]))
rows = {}
for b in d["benchmarks"]:
    if b.get("run_type") != "iteration" or b.get("error_occurred"):
        continue
    name = b["run_name"].split("/iterations")[0]
    t = b["real_time"] * {"ms": 1000.0, "us": 1.0, "ns": 1e-3}[b["time_unit"]]
    rows.setdefault(name, []).append((b.get("repetition_index", 0), t, b.get("sm_mhz", 0)))
print(f"{'row':52s} {'each repetition (us, in order)':44s} min    median max")
for name, reps in rows.items():
    ts = [t for _, t, _ in sorted(reps)]
    print(f"{name:52s} {' '.join(f'{t:7.1f}' for t in ts):44s} {min(ts):6.1f} {statistics.median(ts):6.1f} {max(ts):6.1f}")
PY
