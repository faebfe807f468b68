// Step 00 benchmark: how long the oracle takes, so a reader knows what a check costs.
//
// The oracle is a correctness tool, not a contender: it reads every element through the
// block table one at a time and computes in double. What matters here is that it stays fast
// enough for the tests and the tour (docs/design/BENCHMARKS.md, "CPU side"). The plain float loop runs
// alongside for scale. Counter: tokens/s, context tokens (the sum of context_lens over the
// batch) per second; every query head attends to each of them.
//
// Run:  bench00_reference
//       bench00_reference --benchmark_filter=paged --benchmark_min_time=0.5

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <numeric>
#include <vector>

#include "common/dtype.h"
#include "common/kernel_api.h"
#include "common/problem.h"
#include "common/workload.h"
#include "reference/oracle.h"

namespace {

/// One benchmark shape: a batch of equal contexts.
struct Size {
  int num_seqs;
  int num_q_heads;
  int num_kv_heads;
  int head_dim;
  int context;
};

/// The batch of one benchmark shape, built like every workload (common/workload.h): equal
/// contexts, pages handed out in a seeded shuffle (a scattered table, as in serving).
pa::Workload build(const Size& size, pa::DType dtype) {
  pa::WorkloadSpec spec;
  spec.name = "bench00";
  spec.num_q_heads = size.num_q_heads;
  spec.num_kv_heads = size.num_kv_heads;
  spec.head_dim = size.head_dim;
  spec.block_size = 16;
  spec.dtype = dtype;
  spec.seed = 12345;
  spec.context_lens.assign(static_cast<std::size_t>(size.num_seqs), size.context);
  return pa::make_workload(spec);
}

const Size kSizes[] = {
    {4, 8, 2, 64, 256},      // small GQA batch
    {8, 32, 8, 128, 1024},   // a slice of gqa-batch
    {1, 32, 8, 128, 4096},   // one long sequence
};

void set_counters(benchmark::State& state, const pa::Workload& t) {
  // Context tokens of the batch per second of CPU time.
  const double tokens = std::accumulate(t.context_lens.begin(), t.context_lens.end(), 0.0);
  state.counters["tokens/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(pa::describe(t.problem));
}

void BM_paged_oracle(benchmark::State& state) {
  const pa::Workload t = build(kSizes[state.range(0)], static_cast<pa::DType>(state.range(1)));
  const pa::DecodeView view = t.host_view();
  for (auto _ : state) {
    std::vector<double> out = pa::reference::paged_attention(view);
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(state, t);
}

void BM_plain_float_loop(benchmark::State& state) {
  const pa::Workload t = build(kSizes[state.range(0)], static_cast<pa::DType>(state.range(1)));
  const pa::DecodeView view = t.host_view();
  for (auto _ : state) {
    std::vector<float> out = pa::reference::plain_float_attention(view);
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(state, t);
}

void all_sizes(benchmark::internal::Benchmark* bench) {
  bench->ArgNames({"size", "dtype"});
  for (int size = 0; size < static_cast<int>(std::size(kSizes)); ++size) {
    bench->Args({size, static_cast<int>(pa::DType::f32)});
    bench->Args({size, static_cast<int>(pa::DType::bf16)});
  }
  bench->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(BM_paged_oracle)->Apply(all_sizes);
BENCHMARK(BM_plain_float_loop)->Apply(all_sizes);

BENCHMARK_MAIN();
