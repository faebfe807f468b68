// Step 00 benchmark: how long the oracle takes, so a reader knows what a check costs.
//
// The oracle is a correctness tool, not a contender: it reads every element through the
// block table one at a time and computes in double. What matters here is that it stays fast
// enough for the tests and the tour (BENCHMARKS.md, "CPU side"). The plain float loop runs
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

/// Host tensors with pages handed out in a seeded shuffle (a scattered table, as in serving).
struct Tensors {
  pa::DecodeProblem problem;
  std::vector<std::byte> query;            // [num_seqs][num_q_heads][head_dim]
  std::vector<std::byte> key_cache;        // [num_blocks][num_kv_heads][block_size][head_dim]
  std::vector<std::byte> value_cache;      // same
  std::vector<std::int32_t> block_tables;  // [num_seqs][max_blocks_per_seq]
  std::vector<std::int32_t> context_lens;  // [num_seqs]

  pa::DecodeView view() const {
    pa::DecodeView view;
    view.problem = problem;
    view.query = query.data();
    view.key_cache = key_cache.data();
    view.value_cache = value_cache.data();
    view.block_tables = block_tables.data();
    view.context_lens = context_lens.data();
    return view;
  }
  std::int64_t context_tokens() const {
    return std::accumulate(context_lens.begin(), context_lens.end(), std::int64_t{0});
  }
};

Tensors build(const Size& size, pa::DType dtype) {
  constexpr int kBlockSize = 16;
  const int pages_per_seq = static_cast<int>(pa::pages_for(size.context, kBlockSize));
  const std::int64_t num_blocks = std::int64_t{pages_per_seq} * size.num_seqs;
  Tensors t;
  t.problem = pa::make_problem(size.num_seqs, size.num_q_heads, size.num_kv_heads, size.head_dim, kBlockSize,
                               pages_per_seq, size.context, num_blocks, dtype);
  const pa::DecodeProblem& p = t.problem;
  const std::size_t elem = pa::dtype_size(dtype);
  t.query.resize(static_cast<std::size_t>(p.query_elems()) * elem);
  t.key_cache.resize(static_cast<std::size_t>(p.cache_elems()) * elem);
  t.value_cache.resize(t.key_cache.size());

  // A small linear congruential generator is enough for timing data.
  std::uint64_t state = 12345;
  auto next_value = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<double>(state >> 40) / static_cast<double>(1ull << 24) * 2.0 - 1.0);
  };
  for (std::size_t i = 0; i < static_cast<std::size_t>(p.query_elems()); ++i)
    pa::store_from_float(t.query.data(), dtype, i, next_value());
  for (std::size_t i = 0; i < static_cast<std::size_t>(p.cache_elems()); ++i) {
    pa::store_from_float(t.key_cache.data(), dtype, i, next_value());
    pa::store_from_float(t.value_cache.data(), dtype, i, next_value());
  }
  std::vector<std::int32_t> pages(static_cast<std::size_t>(num_blocks));
  std::iota(pages.begin(), pages.end(), 0);
  for (std::size_t i = pages.size(); i > 1; --i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(pages[i - 1], pages[(state >> 33) % i]);
  }
  t.block_tables = pages;  // row s is pages [s * pages_per_seq, (s + 1) * pages_per_seq)
  t.context_lens.assign(static_cast<std::size_t>(size.num_seqs), size.context);
  return t;
}

const Size kSizes[] = {
    {4, 8, 2, 64, 256},      // small GQA batch
    {8, 32, 8, 128, 1024},   // a slice of gqa-batch
    {1, 32, 8, 128, 4096},   // one long sequence
};

void set_counters(benchmark::State& state, const Tensors& t) {
  // Context tokens of the batch per second of CPU time.
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(t.context_tokens()), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(pa::describe(t.problem));
}

void BM_paged_oracle(benchmark::State& state) {
  const Tensors t = build(kSizes[state.range(0)], static_cast<pa::DType>(state.range(1)));
  const pa::DecodeView view = t.view();
  for (auto _ : state) {
    std::vector<double> out = pa::reference::paged_attention(view);
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(state, t);
}

void BM_plain_float_loop(benchmark::State& state) {
  const Tensors t = build(kSizes[state.range(0)], static_cast<pa::DType>(state.range(1)));
  const pa::DecodeView view = t.view();
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
