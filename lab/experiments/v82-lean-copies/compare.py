#!/usr/bin/env python3
"""v82: the median times of this run (the lean copies, -dirty) against the recorded v80 run.

    python3 lab/experiments/v82-lean-copies/compare.py   (from the repository root)
"""
import json
import pathlib

HERE = pathlib.Path(__file__).parent
BEFORE = HERE.parents[1] / "runs" / "nvidia-h200-20261202-4995dbd4d7.json"
if not BEFORE.exists():
    BEFORE = HERE.parents[2] / "docs" / "results" / "nvidia-h200-20261202-4995dbd4d7.json"
AFTER = HERE / "nvidia-h200-20261203-09542d76f1-dirty.json"


def times(path):
    out = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("real_time"):
            scale = 1000.0 if b.get("time_unit") == "ms" else 1.0
            out[b["name"].replace("/iterations:1/manual_time", "")] = b["real_time"] * scale
    return out


before, after = times(BEFORE), times(AFTER)
workloads = ["gqa-batch", "mha-batch", "long-single", "small-batch", "ragged-skew", "ragged-uniform", "gqa-batch-fp8"]
workloads += [f"group-{g}" for g in (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 32)]
workloads += [f"head-dim-{d}" for d in (64, 80, 96, 112, 128, 256)]
print(f"{'benchmark':48s} {'v80 (us)':>9s} {'v82 (us)':>9s} {'v82/v80':>8s}")
for step in ["step09_memory_pipeline", "step10_tensor_cores", "step11_persistent", "step12_fp8_cache", "bare_read"]:
    for w in workloads:
        key = f"{step}/gpu/{w}" + ("/once" if step == "bare_read" else "")
        if key in before and key in after:
            print(f"{key:48s} {before[key]:9.1f} {after[key]:9.1f} {after[key] / before[key]:8.3f}")
