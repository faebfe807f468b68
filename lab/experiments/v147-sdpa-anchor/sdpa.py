"""v147: PyTorch's scaled_dot_product_attention (contiguous K/V, no pages) on the named workloads
of equal lengths, timed as bench_ladder times a rung (docs/design/BENCHMARKS.md): CUDA events
around one call, the L2 flushed before each by reading a buffer twice its size, two warm-ups, the
median of 20; bytes = K + V + q + out. Each backend that takes the shape, and SDPA's own choice.

    python3 sdpa.py            # prints one line a (workload, backend), a table last
"""
import statistics
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

# name: (batch, context, q heads, kv heads), head dim 128, bf16 (common/workload.cpp, named_spec)
WORKLOADS = {
    "gqa-batch": (64, 8192, 32, 8),
    "mha-batch": (16, 8192, 32, 32),
    "long-single": (1, 32768, 32, 8),
    "small-batch": (8, 4096, 64, 8),
}
HEAD_DIM = 128
RUNS = 20

props = torch.cuda.get_device_properties(0)
l2 = props.L2_cache_size
flush = torch.ones(2 * l2 // 4, dtype=torch.float32, device="cuda")  # twice the L2, never written
sink = torch.zeros((), device="cuda")
datasheet = {"H100": 3352.0, "H200": 4814.0}  # GB/s, as common/cuda/runtime.cu names them
sheet = next((v for k, v in datasheet.items() if k in props.name), None)
print(f"{props.name}, {props.multi_processor_count} SMs, L2 {l2 >> 20} MiB, torch {torch.__version__}, "
      f"cuDNN {torch.backends.cudnn.version()}, datasheet {sheet} GB/s")


def median_ms(call):
    for _ in range(2):
        call()
    times = []
    for _ in range(RUNS):
        sink.add_(flush.sum())  # reads the whole buffer: what was in the L2 is gone
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


rows = []
for name, (batch, context, q_heads, kv_heads) in WORKLOADS.items():
    q = torch.randn(batch, q_heads, 1, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(batch, kv_heads, context, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
    v = torch.randn_like(k)
    nbytes = (k.numel() + v.numel() + 2 * q.numel()) * 2
    gqa = q_heads != kv_heads
    reference = None
    for label, backends in (("default", None), ("flash", [SDPBackend.FLASH_ATTENTION]),
                            ("efficient", [SDPBackend.EFFICIENT_ATTENTION]), ("cudnn", [SDPBackend.CUDNN_ATTENTION])):
        def call():
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
        try:
            if backends is None:
                out = call()
                ms = median_ms(call)
            else:
                with sdpa_kernel(backends):
                    out = call()
                    ms = median_ms(call)
        except Exception as error:  # a backend that does not take the shape
            print(f"{name:12} {label:9} refused: {str(error).splitlines()[0][:120]}")
            rows.append((name, label, None, None))
            continue
        torch.cuda.synchronize()
        if reference is None:
            reference = out.float()
        error = (out.float() - reference).abs().max().item()
        gbps = nbytes / (ms * 1e-3) / 1e9
        pct = 100 * gbps / sheet if sheet else float("nan")
        print(f"{name:12} {label:9} {ms * 1e3:8.1f} µs  {gbps:7.0f} GB/s  {pct:5.1f}% of datasheet  "
              f"max |Δ| against default {error:.2e}")
        rows.append((name, label, ms * 1e3, pct))
print()
print("| workload | " + " | ".join(["default", "flash", "efficient", "cudnn"]) + " |")
print("|---|--:|--:|--:|--:|")
for name in WORKLOADS:
    cells = [f"{pct:.1f}% ({us:.1f})" if us else "–" for n, _, us, pct in rows if n == name]
    print(f"| `{name}` | " + " | ".join(cells) + " |")
sys.exit(0)
