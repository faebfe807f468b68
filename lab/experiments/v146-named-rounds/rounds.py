"""v146: each round's time of the rows the open targets hang on, from a bench_ladder JSON with
named_rounds (harness/bench.h): `python3 rounds.py RUN.json`."""
import collections
import json
import sys

data = json.load(open(sys.argv[1]))
context = data["context"]
print(sys.argv[1], "roof", context.get("roof_gbps"), "GB/s, rounds", context.get("named_rounds"))
rows = collections.defaultdict(list)
for bench in data["benchmarks"]:
    name = bench["name"].split("/iterations")[0]
    step = name.split("/")[0]
    workload = "/".join(name.split("/")[2:])
    if workload in ("gqa-batch", "mha-batch", "small-batch", "long-single", "ragged-skew", "gqa-batch-fp8", "gqa-batch/once",
                    "small-batch/once", "mha-batch/once") and step in ("step09_memory_pipeline", "step10_tensor_cores",
                                                                       "step11_persistent", "step12_fp8_cache", "bare_read"):
        if bench.get("error_occurred"):
            continue
        rows[name].append((bench["real_time"] * 1e3, bench.get("sm_mhz", 0), bench.get("pct_datasheet", 0)))
print(f"{'row':55} {'µs (SM MHz) a round':40} median  % datasheet")
for name in sorted(rows, key=lambda n: (n.split("/")[2], n)):
    times = rows[name]
    middle = sorted(times)[(len(times) - 1) // 2]
    print(f"{name:55} {'  '.join(f'{t:7.1f} ({m:.0f})' for t, m, _ in times):40} {middle[0]:7.1f} {middle[2]:6.1f}")
