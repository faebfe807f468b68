// Step 01 benchmarks: what the host-side bookkeeping of a paged cache costs.
//
//   allocate/free   pages through the free list (the scheduler's cost per page)
//   append_token    one token's K/V into the cache (page allocation included)
//   write_slots     one batched decode step through the write path
//   fork + COW      prefix sharing: fork, one append that copies the shared page, free
//   gather          a sequence's K/V read through its block table into contiguous tensors
//
//   build/cpu/steps/bench01_paged_cache [--benchmark_filter=gather] [--benchmark_format=json]
//
// Shapes: 8 KV heads x 128 channels, bf16, pages of 16 tokens (one layer of a Llama-3-8B).

#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "common/paged_cache.h"

namespace {

constexpr int kv_heads = 8;
constexpr int head_dim = 128;
constexpr int block_size = 16;

pa::CacheConfig bench_config(std::int64_t num_blocks) {
  pa::CacheConfig config;
  config.num_kv_heads = kv_heads;
  config.block_size = block_size;
  config.head_dim = head_dim;
  config.num_blocks = num_blocks;
  config.dtype = pa::DType::bf16;
  config.page_order = pa::PageOrder::shuffled;
  config.seed = 1;
  return config;
}

/// A row of [num_kv_heads][head_dim] small values.
std::vector<float> bench_row(std::int64_t elems, float base) {
  std::vector<float> row(static_cast<std::size_t>(elems));
  for (std::size_t i = 0; i < row.size(); ++i) row[i] = base + static_cast<float>(i % 7);
  return row;
}

/// Bytes of K and V of one token.
std::int64_t token_bytes(const pa::PagedKVCache& cache) {
  return 2 * cache.row_elems() * static_cast<std::int64_t>(pa::dtype_size(cache.config().dtype));
}

void BM_AllocateFree(benchmark::State& state) {
  const std::int64_t pages = state.range(0);
  pa::BlockAllocator allocator(1 << 16, pa::PageOrder::shuffled, 1);
  for (auto _ : state) {
    std::vector<pa::PageId> taken = allocator.allocate(pages);
    benchmark::DoNotOptimize(taken.data());
    for (pa::PageId page : taken) allocator.free(page);
  }
  state.SetItemsProcessed(state.iterations() * pages);
  state.counters["pages"] = static_cast<double>(pages);
}
BENCHMARK(BM_AllocateFree)->Arg(1)->Arg(64)->Arg(4096);

void BM_AppendToken(benchmark::State& state) {
  const std::int64_t tokens = state.range(0);
  pa::PagedKVCache cache(bench_config(pa::pages_for(tokens, block_size) + 1));
  const std::vector<float> k = bench_row(cache.row_elems(), 1.0f);
  const std::vector<float> v = bench_row(cache.row_elems(), 2.0f);
  for (auto _ : state) {
    // A fresh sequence each iteration: the timing includes one page allocation per 16 tokens
    // and the final free, as a sequence's life in a server would.
    const int seq = cache.add_sequence();
    for (std::int64_t t = 0; t < tokens; ++t) cache.append_token(seq, k, v);
    cache.free_sequence(seq);
  }
  state.SetItemsProcessed(state.iterations() * tokens);
  state.SetBytesProcessed(state.iterations() * tokens * token_bytes(cache));
}
BENCHMARK(BM_AppendToken)->Arg(16)->Arg(1024);

void BM_WriteSlots(benchmark::State& state) {
  const std::int64_t batch = state.range(0);
  pa::PagedKVCache cache(bench_config(batch + 1));
  std::vector<std::int64_t> slots;
  for (std::int64_t i = 0; i < batch; ++i) {
    const int seq = cache.add_sequence();
    slots.push_back(cache.append_slot(seq).slot);  // one reserved slot per sequence
  }
  const std::vector<float> rows = bench_row(batch * cache.row_elems(), 3.0f);  // [batch][heads][dim]
  for (auto _ : state) cache.write_slots(slots, rows, rows);
  state.SetItemsProcessed(state.iterations() * batch);
  state.SetBytesProcessed(state.iterations() * batch * token_bytes(cache));
}
BENCHMARK(BM_WriteSlots)->Arg(8)->Arg(256);

void BM_ForkCopyOnWrite(benchmark::State& state) {
  const std::int64_t tokens = state.range(0);  // the parent ends mid-page, so the append copies
  pa::PagedKVCache cache(bench_config(pa::pages_for(tokens, block_size) + 2));
  const std::vector<float> k = bench_row(cache.row_elems(), 1.0f);
  const int parent = cache.add_sequence();
  for (std::int64_t t = 0; t < tokens; ++t) cache.append_token(parent, k, k);
  for (auto _ : state) {
    const int child = cache.fork(parent);
    const pa::AppendResult result = cache.append_token(child, k, k);
    benchmark::DoNotOptimize(result.copied_from);
    cache.free_sequence(child);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["table_pages"] = static_cast<double>(pa::pages_for(tokens, block_size));
}
BENCHMARK(BM_ForkCopyOnWrite)->Arg(block_size * 4 + 3)->Arg(block_size * 256 + 3);

void BM_Gather(benchmark::State& state) {
  const std::int64_t tokens = state.range(0);
  pa::PagedKVCache cache(bench_config(pa::pages_for(tokens, block_size)));
  const std::vector<float> k = bench_row(cache.row_elems(), 1.0f);
  const int seq = cache.add_sequence();
  for (std::int64_t t = 0; t < tokens; ++t) cache.append_token(seq, k, k);
  for (auto _ : state) {
    pa::GatheredSequence gathered = cache.gather(seq);
    benchmark::DoNotOptimize(gathered.keys.data());
  }
  state.SetItemsProcessed(state.iterations() * tokens);
  state.SetBytesProcessed(state.iterations() * tokens * token_bytes(cache));  // bytes read from the pool
}
BENCHMARK(BM_Gather)->Arg(256)->Arg(4096);

}  // namespace

BENCHMARK_MAIN();
