#pragma once
/// \file
/// The checks every kernel step must pass, written once for both backends: test_steps.cpp
/// runs them in the emulator (CI), test_gpu_steps.cpp on the GPU (labelled gpu).

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/harness.h"
#include "kernels/registry.h"
#include "tests/catch_compat.h"

namespace pa::testing {

/// Runs one kernel on one workload on \p backend (the GPU path poisons, launches, downloads).
inline RunOutput run_on(Backend backend, int step, const Workload& workload, const KernelOptions& options = {}) {
  const KernelEntry& entry = kernel(step, backend);
  return backend == Backend::cuda ? run_gpu(entry, workload, options) : run_emulator(entry, workload, options);
}

/// "step S on B, workload 'W' (problem, seed, knobs)": what a failed check ran; in the emulator
/// in a shuffled thread order (PAGEDATTN_EMU_SHUFFLE, emu::ScopedThreadOrder), the order and how
/// to repeat it too.
inline std::string describe_run(Backend backend, int step, const Workload& workload, const KernelOptions& options) {
  const bool shuffled = backend == Backend::emulator && emu::thread_order().shuffled;
  return cat("step ", step, " on ", backend_name(backend), ", workload '", workload.spec.name, "' (",
             describe(workload.problem), ", seed ", workload.spec.seed, ", threads ", options.threads_per_block,
             ", splits ", options.num_splits, ", partition ", options.partition_tokens, ", tile ", options.tile_tokens,
             ", variant ", options.variant, ")", shuffled ? cat(", ", emu::describe(emu::thread_order())) : "");
}

/// Requires \p run to match the oracle (tolerance, NaN rules, 3x the plain loop's error).
inline void require_matches_oracle(const RunOutput& run, Backend backend, int step, const Workload& workload,
                                   const KernelOptions& options) {
  const CompareResult result = check_against_oracle(workload, oracle_rows(workload), run.out, kernel(step, backend).weights_in_storage_type);
  INFO(describe_run(backend, step, workload, options) << ": " << result.summary());
  REQUIRE(result.ok);
}

/// Requires the run to match the oracle.
inline void require_oracle_match(Backend backend, int step, const Workload& workload, const KernelOptions& options = {}) {
  require_matches_oracle(run_on(backend, step, workload, options), backend, step, workload, options);
}

/// Whether \p step runs storage type \p dtype (KernelEntry::runs_f32).
inline bool runs(int step, DType dtype) { return dtype != DType::f32 || kernel(step, Backend::emulator).runs_f32; }

/// The adversarial set of docs/design/CORRECTNESS.md in one storage type (with \p fp8_kv, q and
/// out in it and K/V in fp8 e4m3); a step that does not run \p dtype must refuse each workload,
/// naming `dtype`.
inline void check_adversarial(Backend backend, int step, DType dtype, int max_context = 300, bool fp8_kv = false) {
  if (!runs(step, dtype)) {
    WorkloadSpec spec = debug_spec();
    spec.dtype = dtype;
    PA_REQUIRE_THROWS_AS_WITH(run_on(backend, step, make_workload(spec)), ArgumentError, "dtype");
    return;
  }
  AdversarialOptions options;
  options.dtype = dtype;
  options.max_context = max_context;
  options.fp8_kv = fp8_kv;
  for (const WorkloadSpec& spec : adversarial_specs(options)) require_oracle_match(backend, step, make_workload(spec));
}

/// NaN where the kernel must not read gives the same bits as zeros there (docs/design/CORRECTNESS.md
/// rule 1); with \p fp8_kv, in fp8 K/V (NaN is 0x7f there).
inline void check_poison_is_invisible(Backend backend, int step, DType dtype, bool fp8_kv = false) {
  AdversarialOptions options;
  options.dtype = dtype;
  options.fp8_kv = fp8_kv;
  for (WorkloadSpec spec : adversarial_specs(options)) {
    if (spec.nan_sequence >= 0) continue;  // a NaN inside a context is meant to be read
    const RunOutput poisoned = run_on(backend, step, make_workload(spec));
    spec.poison = false;
    const Workload zeroed = make_workload(spec);
    const RunOutput zeros = run_on(backend, step, zeroed);
    const CompareResult same = compare_bitwise(zeroed.problem, zeros.out.data(), poisoned.out.data());
    INFO(describe_run(backend, step, zeroed, {}) << ", poisoned against zeros: " << same.summary());
    REQUIRE(same.ok);
  }
}

/// Every head dim the ladder supports, query-head groups of 3, 8 and 32, and page sizes 1 to 64 (12: a page size that is not a
/// power of two takes the kernels' division path instead of the shift).
inline void check_shapes(Backend backend, int step) {
  for (int head_dim : {64, 80, 96, 112, 128, 256}) {
    for (DType dtype : {runs(step, DType::f32) ? DType::f32 : DType::f16, DType::bf16}) {
      WorkloadSpec spec = debug_spec();
      spec.name = "head-dim-" + std::to_string(head_dim);
      spec.head_dim = head_dim;
      spec.dtype = dtype;
      spec.context_lens = {33, 0, 17};
      require_oracle_match(backend, step, make_workload(spec));
    }
  }
  // Query-head groups past 4 (docs/design/CATALOGUE.md N7): 3, 8, and 32 over one KV head (MQA).
  for (const auto& [q_heads, kv_heads] : {std::pair{24, 8}, std::pair{16, 2}, std::pair{32, 1}}) {
    WorkloadSpec spec = debug_spec();
    spec.name = cat("group-", q_heads / kv_heads);
    spec.num_q_heads = q_heads;
    spec.num_kv_heads = kv_heads;
    spec.dtype = DType::bf16;
    spec.context_lens = {33, 0, 17};
    require_oracle_match(backend, step, make_workload(spec));
  }
  for (int page : {1, 8, 12, 16, 32, 64}) {
    WorkloadSpec spec = debug_spec();
    if (!runs(step, spec.dtype)) spec.dtype = DType::bf16;
    spec.name = "page-" + std::to_string(page);
    spec.block_size = page;
    spec.context_lens = {page - 1 > 0 ? page - 1 : 1, page, page + 1, 2 * page + 3};
    require_oracle_match(backend, step, make_workload(spec));
  }
}

/// The shuffled thread orders the determinism check runs in the emulator: seeds 1 and 2, and the
/// seed PAGEDATTN_EMU_SHUFFLE names, if it names one.
inline std::vector<emu::ThreadOrder> shuffled_orders() {
  std::vector<emu::ThreadOrder> orders = {{true, 1}, {true, 2}};
  const emu::ThreadOrder ambient = emu::thread_order();
  if (ambient.shuffled && ambient.seed != 1 && ambient.seed != 2) orders.push_back(ambient);
  return orders;
}

/// Requires \p run to have the same bits as \p expected (\p what: how it differs, for the message).
inline void require_same_bits(const Workload& workload, const RunOutput& expected, const RunOutput& run,
                              const std::string& what) {
  const CompareResult same = compare_bitwise(workload.problem, expected.out.data(), run.out.data());
  INFO(what << ": " << same.summary());
  REQUIRE(same.ok);
}

/// Knobs never change the answer beyond rounding; the same input gives the same bits twice and,
/// in the emulator, in every thread order: each knob's run in the fixed order and in one shuffled
/// order, the default run in the fixed order twice and in every order of shuffled_orders() (a
/// result that depends on which thread got somewhere first differs between orders).
inline void check_knobs_and_determinism(Backend backend, int step, const std::vector<KernelOptions>& knobs,
                                        bool fp8_kv = false) {
  WorkloadSpec spec = debug_spec();
  spec.dtype = DType::bf16;
  spec.fp8_kv = fp8_kv;
  spec.context_lens = {700, 1, 0, 129, 64};
  const Workload workload = make_workload(spec);
  const bool emulated = backend == Backend::emulator;
  const std::vector<emu::ThreadOrder> shuffled = emulated ? shuffled_orders() : std::vector<emu::ThreadOrder>{};
  std::optional<emu::ScopedThreadOrder> fixed;  // the runs not given an order below
  if (emulated) fixed.emplace(emu::ThreadOrder{});
  // A run in a given thread order, and what a message says of it.
  auto run_in = [&](const emu::ThreadOrder& order, const KernelOptions& options) {
    const emu::ScopedThreadOrder scope(order);
    return run_on(backend, step, workload, options);
  };
  auto in_order = [&](const emu::ThreadOrder& order, const KernelOptions& options) {
    return cat(describe_run(backend, step, workload, options), " in the ", emu::describe(order), " against the fixed order");
  };
  for (std::size_t k = 0; k < knobs.size(); ++k) {
    const RunOutput run = run_on(backend, step, workload, knobs[k]);
    require_matches_oracle(run, backend, step, workload, knobs[k]);
    if (!emulated) continue;
    const emu::ThreadOrder order{true, 1 + k};
    require_same_bits(workload, run, run_in(order, knobs[k]), in_order(order, knobs[k]));
  }
  const RunOutput first = run_on(backend, step, workload);
  require_same_bits(workload, first, run_on(backend, step, workload), "a second run");
  if (!emulated) return;
  for (const emu::ThreadOrder& order : shuffled) require_same_bits(workload, first, run_in(order, {}), in_order(order, {}));
}

/// Settings of the knobs a step declares (KernelEntry::knobs): threads, splits either side of
/// the merge's paths, a partition, tiles. Variants are checked by the rung that has them, on the
/// shapes they are compiled for.
inline std::vector<KernelOptions> knobs_of(int step) {
  const unsigned knobs = kernel(step, Backend::emulator).knobs;
  std::vector<KernelOptions> options;
  auto with = [&](auto set) {
    KernelOptions o;
    set(o);
    options.push_back(o);
  };
  if (knobs & knob_threads)
    for (int threads : {32, 64, 256}) with([&](KernelOptions& o) { o.threads_per_block = threads; });
  if (knobs & knob_splits) {
    for (int splits : {1, 2, 3, 7, 8, 9, 64}) with([&](KernelOptions& o) { o.num_splits = splits; });
    with([&](KernelOptions& o) {
      if (knobs & knob_threads) o.threads_per_block = 64;
      o.num_splits = 5;
    });
  }
  if (knobs & knob_partition) with([](KernelOptions& o) { o.partition_tokens = 100; });
  if (knobs & knob_tile)
    for (int tile : {1, 2, 4}) {
      with([&](KernelOptions& o) { o.tile_tokens = tile; });
      with([&](KernelOptions& o) {
        o.threads_per_block = 64;
        o.tile_tokens = tile;
      });
    }
  return options;
}

/// An unsupported head dim is refused before any launch, naming the argument and the choices;
/// so is a knob the step does not have, a tile that is not compiled, and a negative thread count.
inline void check_refusals(Backend backend, int step) {
  WorkloadSpec spec = debug_spec();
  spec.head_dim = 72;
  const Workload workload = make_workload(spec);
  const KernelEntry& entry = kernel(step, backend);
  PA_REQUIRE_THROWS_AS_WITH(run_on(backend, step, workload), ArgumentError,
                            cat(entry.name, ": head_dim: expected one of the head dims this kernel is built for: "
                                            "64, 80, 96, 112, 128, 256, got 72"));
  const Workload good = make_workload(debug_spec());
  KernelOptions options;
  options.tile_tokens = 3;  // not compiled where there is a tile knob; no such knob elsewhere
  PA_REQUIRE_THROWS_AS_WITH(run_on(backend, step, good, options), ArgumentError, "options.tile_tokens");
  PA_REQUIRE_THROWS_AS_WITH(run_on(backend, step, good, options), ArgumentError,
                            (entry.knobs & knob_tile) ? "one of 1, 2, 4" : "no such knob");
  if ((entry.knobs & knob_splits) == 0) {
    options = {};
    options.num_splits = 2;
    PA_REQUIRE_THROWS_AS_WITH(run_on(backend, step, good, options), ArgumentError, "options.num_splits");
  }
  if (entry.knobs & knob_threads) {
    options = {};
    options.threads_per_block = -32;  // not 0, "the kernel chooses"
    PA_REQUIRE_THROWS_AS_WITH(run_on(backend, step, good, options), ArgumentError,
                              "options.threads_per_block: expected >= 0");
  }
}

/// Every ablation variant of \p step (options.variant 1 .. entry.variants) matches the oracle,
/// on the shapes they are all compiled for: bf16 at head dim 128, groups of 4 and of 1.
inline void check_variants(Backend backend, int step, const std::vector<int>& context_lens) {
  for (int kv_heads : {2, 8}) {
    WorkloadSpec spec = debug_spec();
    spec.num_q_heads = 8;
    spec.num_kv_heads = kv_heads;
    spec.head_dim = 128;
    spec.dtype = DType::bf16;
    spec.context_lens = context_lens;
    const Workload w = make_workload(spec);
    for (int variant = 1; variant <= kernel(step, backend).variants; ++variant) {
      KernelOptions options;
      options.variant = variant;
      require_oracle_match(backend, step, w, options);
    }
  }
}

/// Checked mode (DecodeView::checked, on by default): before any launch, a context length
/// outside [0, max_context_len] and a block-table entry of a used prefix outside
/// [0, num_blocks) are refused with an ArgumentError naming the kernel, the sequence, the entry,
/// the value and the range; an entry past the used prefix is padding and runs.
inline void check_bad_tables_refused(Backend backend, int step) {
  WorkloadSpec spec = debug_spec();
  if (!runs(step, spec.dtype)) spec.dtype = DType::bf16;
  spec.context_lens = {37, 20, 16};  // pages of 16: rows use 3, 2 and 1 entries of 4
  const Workload good = make_workload(spec);
  const DecodeProblem& p = good.problem;
  const std::string name = kernel(step, backend).name;
  const std::string pool = std::to_string(p.num_blocks);
  const auto at = [&](int seq, int entry) { return static_cast<std::size_t>(seq * p.max_blocks_per_seq + entry); };
  const auto refused = [&](const Workload& bad, const std::vector<std::string>& texts) {
    INFO("step " << step << " on " << backend_name(backend));
    for (const std::string& text : texts) PA_REQUIRE_THROWS_AS_WITH(run_on(backend, step, bad), ArgumentError, text);
  };
  REQUIRE(p.max_blocks_per_seq == 4);
  {
    Workload bad = good;
    bad.context_lens[1] = -3;
    refused(bad, {name + ": context_lens[1]: expected the length of sequence 1 in [0, max_context_len = 37]",
                  "got -3"});
  }
  {
    Workload bad = good;  // a context one token longer than its block-table row holds
    bad.problem.max_context_len = static_cast<int>(p.row_capacity());
    bad.problem.total_context_len = 0;
    bad.context_lens[2] = static_cast<std::int32_t>(p.row_capacity()) + 1;
    refused(bad, {name + ": context_lens[2]", "a block-table row holds 4 pages of 16 = 64 tokens", "got 65"});
  }
  {
    Workload bad = good;
    bad.block_tables[at(0, 2)] = -1;
    refused(bad, {name + ": block_tables[0][2]: expected a page in [0, num_blocks = " + pool + ")",
                  "holds its tokens 32..36 of context_lens[0] = 37", "got -1"});
  }
  {
    Workload bad = good;
    bad.block_tables[at(1, 1)] = static_cast<std::int32_t>(p.num_blocks);
    refused(bad, {name + ": block_tables[1][1]", "[0, num_blocks = " + pool + ")", "got " + pool});
  }
  {
    Workload bad = good;  // the lengths' sum is checked against the hint in the same pass
    bad.problem.total_context_len += 1;
    refused(bad, {name + ": total_context_len", "the sum of context_lens = 73"});
  }
  Workload padded = good;  // entries past each used prefix are never read: anything goes there
  padded.block_tables[at(0, 3)] = -1;
  padded.block_tables[at(1, 2)] = static_cast<std::int32_t>(p.num_blocks);
  padded.block_tables[at(2, 1)] = INT32_MIN;
  require_oracle_match(backend, step, padded);
}

/// A sparse pool of \p pool_pages pages of 8 KV heads x 16 slots x head dim 128 (16384 elements
/// a page) whose tables use its top pages, scattered: 140,000 pages are 2.29e9 elements (over
/// 2^31), 280,000 are 4.59e9 (over 2^32), as in docs/design/CATALOGUE.md R7. Only the used
/// pages and a canary page either side of each are written (WorkloadSpec::sparse): the host
/// reserves the gigabytes without touching them, and the oracle reads only the used pages.
inline WorkloadSpec huge_pool_spec(std::int64_t pool_pages, DType dtype) {
  WorkloadSpec spec;
  spec.name = cat("pool-of-", pool_pages, "-pages");
  spec.num_q_heads = 16;
  spec.num_kv_heads = 8;
  spec.head_dim = 128;
  spec.block_size = 16;
  spec.context_lens = {17, 1, 0, 40, 33};  // 9 pages: a few short sequences, ragged
  spec.dtype = dtype;
  spec.seed = 31;
  spec.pages_near_top = true;
  spec.sparse = true;
  spec.spare_blocks = static_cast<int>(pool_pages - 9);
  return spec;
}

/// Pools over 2^31 and over 2^32 elements (docs/design/CATALOGUE.md R7) against the oracle, every
/// used page's offset past the limit: the one over 2^31 in f32 (bf16 for a step without f32),
/// the one over 2^32 in bf16. A page x stride product in 32 bits (signed or unsigned) sends the
/// reads to low pages and fails here. The limits that do stay 32-bit are refused by the step's
/// plan before anything runs, naming them: more than 2^31 pages (block-table entries are int32)
/// and a page of 2^31 elements or more (offsets inside a page are 32-bit, DecodeArgs::kv_offset).
inline void check_huge_pools(Backend backend, int step) {
  const struct {
    std::int64_t pages;
    DType dtype;
    std::int64_t limit;
  } pools[] = {{140000, runs(step, DType::f32) ? DType::f32 : DType::bf16, std::int64_t{1} << 31},
               {280000, DType::bf16, std::int64_t{1} << 32}};
  for (const auto& pool : pools) {
    const Workload w = make_workload(huge_pool_spec(pool.pages, pool.dtype));
    REQUIRE(w.problem.num_blocks == pool.pages);
    for (std::size_t i = 0; i < w.block_tables.size(); ++i) {
      const std::int64_t entry = static_cast<std::int64_t>(i) % w.problem.max_blocks_per_seq;
      const std::int64_t seq = static_cast<std::int64_t>(i) / w.problem.max_blocks_per_seq;
      if (entry < pages_for(w.context_lens[static_cast<std::size_t>(seq)], w.problem.block_size))
        REQUIRE(w.block_tables[i] * w.problem.layout.block_stride > pool.limit);
    }
    INFO("every used page of this pool starts past element " << pool.limit
                                                             << ": a page offset computed in 32 bits reads another page");
    require_oracle_match(backend, step, w);
  }
  const KernelEntry& entry = kernel(step, backend);
  const DeviceLimits device = backend == Backend::cuda ? gpu::device_info().limits : DeviceLimits::pretend_h200();
  DecodeProblem too_many = make_problem(1, 8, 8, 128, 16, 4, 64, (std::int64_t{1} << 31) + 1, DType::bf16);
  PA_REQUIRE_THROWS_AS_WITH(entry.plan(too_many, {}, device), ArgumentError,
                            cat(entry.name, ": num_blocks: expected <= 2^31 (block-table entries are int32)"));
  DecodeProblem page_too_big = make_problem(1, 8, 8, 128, 16, 4, 64, 4, DType::bf16);
  page_too_big.layout.block_stride = std::int64_t{1} << 31;
  PA_REQUIRE_THROWS_AS_WITH(entry.plan(page_too_big, {}, device), ArgumentError,
                            cat(entry.name, ": layout.block_stride: expected < 2^31 elements"));
}

/// An empty batch launches nothing and raises nothing (docs/design/CATALOGUE.md H11): a launch
/// would be a grid with no programs, which a GPU rejects and the emulator reports as a fault; the
/// emulator's launch count says none was tried.
inline void check_empty_batch(Backend backend, int step) {
  WorkloadSpec spec = debug_spec();
  if (!runs(step, spec.dtype)) spec.dtype = DType::bf16;
  spec.context_lens = {};
  const RunOutput run = run_on(backend, step, make_workload(spec));
  REQUIRE(run.out.empty());  // no sequences, no output; and no error from either backend
  if (backend == Backend::emulator) REQUIRE(run.traffic.launches == 0);
}

/// The index of channel \p channel of token \p token of sequence \p seq, KV head \p kv_head, in
/// the workload's K and V caches, found through its block table.
inline std::size_t cache_index(const Workload& w, int seq, int token, int kv_head, int channel) {
  const DecodeProblem& p = w.problem;
  const std::int32_t page =
      w.block_tables[static_cast<std::size_t>(seq) * static_cast<std::size_t>(p.max_blocks_per_seq) +
                     static_cast<std::size_t>(token / p.block_size)];
  return static_cast<std::size_t>(p.layout.offset(page, kv_head, token % p.block_size, channel));
}

/// The first element of \p out (the workload's output) for which \p bad(seq, q_head, channel,
/// value) holds, described; "" when there is none.
template <class Bad>
std::string first_bad_element(const Workload& w, const std::vector<std::byte>& out, Bad bad) {
  const DecodeProblem& p = w.problem;
  std::size_t i = 0;
  for (int seq = 0; seq < p.num_seqs; ++seq)
    for (int head = 0; head < p.num_q_heads; ++head)
      for (int channel = 0; channel < p.head_dim; ++channel, ++i) {
        const float value = load_as_float(out.data(), p.dtype, i);
        if (bad(seq, head, channel, value))
          return cat("(seq ", seq, ", head ", head, ", dim ", channel, ") holds ", value);
      }
  return "";
}

/// A sequence of context 0 gives a row of exact zeros (docs/design/CATALOGUE.md N2) and its
/// block-table row is never read: every entry of it is poison (INT32_MAX), which the emulator
/// reports as an out-of-bounds page if a kernel reads it. Empty sequences come first, between
/// others and last. With \p fp8_kv, K and V in fp8.
inline void check_empty_contexts(Backend backend, int step, bool fp8_kv = false) {
  WorkloadSpec spec = debug_spec();
  if (!runs(step, spec.dtype)) spec.dtype = DType::bf16;
  spec.fp8_kv = fp8_kv;
  spec.context_lens = {0, 21, 0, 1, 0};
  const Workload w = make_workload(spec);
  const auto empty = [&](int seq) { return w.context_lens[static_cast<std::size_t>(seq)] == 0; };
  for (int seq : {0, 2, 4})
    for (int entry = 0; entry < w.problem.max_blocks_per_seq; ++entry)
      REQUIRE(w.block_tables[static_cast<std::size_t>(seq * w.problem.max_blocks_per_seq + entry)] == INT32_MAX);
  const RunOutput run = run_on(backend, step, w);
  const std::string nonzero = first_bad_element(w, run.out, [&](int seq, int, int, float value) {
    return empty(seq) && !(value == 0.0f);
  });
  INFO(describe_run(backend, step, w, {}) << ": an empty sequence's element " << nonzero);
  REQUIRE(nonzero.empty());
  require_matches_oracle(run, backend, step, w, {});
}

/// Every valid logit very negative (docs/design/CATALOGUE.md N6): q is -8192 in every channel
/// and K is 1.5 or 2 in every channel of every token but one a sequence, whose K is 1. At head
/// dim 64 (scale 1/8) its logit is -65536 and the others' -98304 or -131072, all exact in
/// float, so the softmax is that token alone and out is its V, bit for bit. A kernel that starts
/// its running max, or masks, at a finite sentinel above -65536 (FlashInfer's -5e4) returns
/// zeros or NaN here instead. With \p fp8_kv, K and V in fp8 with scales of 1 (1, 1.5 and 2 are
/// e4m3 values), so the logits are the same; out is then the top token's V rounded to \p dtype.
inline void check_very_negative_logits(Backend backend, int step, DType dtype, bool fp8_kv = false) {
  WorkloadSpec spec = debug_spec();
  spec.name = "logits-near-minus-1e5";
  spec.dtype = dtype;
  spec.fp8_kv = fp8_kv;
  spec.context_lens = {1, 17, 40, 5};
  Workload w = make_workload(spec);
  w.problem.k_scale = w.problem.v_scale = 1.0f;  // 1 already unless fp8_kv
  const DecodeProblem& p = w.problem;
  REQUIRE(p.head_dim == 64);
  for (std::size_t i = 0; i < static_cast<std::size_t>(p.query_elems()); ++i) store_from_float(w.query.data(), dtype, i, -8192.0f);
  const auto top = [&](int seq) { return w.context_lens[static_cast<std::size_t>(seq)] / 2; };  // the token with K = 1
  for (int seq = 0; seq < p.num_seqs; ++seq)
    for (int token = 0; token < w.context_lens[static_cast<std::size_t>(seq)]; ++token)
      for (int kv_head = 0; kv_head < p.num_kv_heads; ++kv_head)
        for (int channel = 0; channel < p.head_dim; ++channel)
          store_from_float(w.key_cache.data(), p.cache_dtype(), cache_index(w, seq, token, kv_head, channel),
                           token == top(seq) ? 1.0f : token % 2 == 0 ? 1.5f : 2.0f);
  const RunOutput run = run_on(backend, step, w);
  require_matches_oracle(run, backend, step, w, {});
  const std::string wrong = first_bad_element(w, run.out, [&](int seq, int head, int channel, float value) {
    const std::size_t v = cache_index(w, seq, top(seq), p.kv_head_of(head), channel);
    return float_bits(value) != float_bits(round_to(dtype, load_as_float(w.value_cache.data(), p.cache_dtype(), v)));
  });
  INFO(describe_run(backend, step, w, {}) << ": out is not the top token's V: " << wrong);
  REQUIRE(wrong.empty());
}

/// NaN in one valid V element (docs/design/CATALOGUE.md N8 on the V side; the adversarial set's
/// nan-in-seq-2 plants its NaN in K): token 3 of sequence 1, KV head 1, channel 5. It reaches
/// channel 5 of that sequence's query heads of KV head 1 and nothing else; every other element
/// matches the oracle. With \p fp8_kv, K and V in fp8 (the NaN is 0x7f).
inline void check_nan_in_value(Backend backend, int step, bool fp8_kv = false) {
  WorkloadSpec spec = debug_spec();  // 4 query heads over 2 KV heads: heads 2 and 3 read KV head 1
  if (!runs(step, spec.dtype)) spec.dtype = DType::bf16;
  spec.fp8_kv = fp8_kv;
  spec.context_lens = {37, 20, 16};
  Workload w = make_workload(spec);
  store_from_float(w.value_cache.data(), w.problem.cache_dtype(), cache_index(w, 1, 3, 1, 5),
                   std::numeric_limits<float>::quiet_NaN());
  const RunOutput run = run_on(backend, step, w);
  require_matches_oracle(run, backend, step, w, {});
  const std::string wrong = first_bad_element(w, run.out, [&](int seq, int head, int channel, float value) {
    return std::isnan(value) != (seq == 1 && w.problem.kv_head_of(head) == 1 && channel == 5);
  });
  INFO(describe_run(backend, step, w, {}) << ": the NaN reached, or missed, " << wrong);
  REQUIRE(wrong.empty());
}

/// A step whose logits live in shared memory (04, 05) runs at its length cap, the longest
/// context its plan accepts on the device, and refuses one token more naming max_context_len and
/// that cap (docs/design/CATALOGUE.md N4 "the maximum", R3); every other step must plan 2^22
/// tokens, so a cap that appears where none belongs fails too.
inline void check_length_cap(Backend backend, int step) {
  const KernelEntry& entry = kernel(step, backend);
  const DeviceLimits device = backend == Backend::cuda ? gpu::device_info().limits : DeviceLimits::pretend_h200();
  const DType dtype = runs(step, DType::f32) ? DType::f32 : DType::bf16;
  const auto problem_of = [&](int len) {
    const auto pages = static_cast<int>(pages_for(len, 16));
    return make_problem(1, 1, 1, 64, 16, pages, len, pages, dtype);
  };
  const auto plans = [&](int len) {
    try {
      entry.plan(problem_of(len), {}, device);
      return true;
    } catch (const ArgumentError&) {
      return false;
    }
  };
  // Steps 04 and 05 hold a context's logits in shared memory, so the context is capped; every
  // other step streams it, and plans 2^22 tokens.
  if (step != 4 && step != 5) {
    REQUIRE(plans(1 << 22));
    return;
  }
  REQUIRE_FALSE(plans(1 << 22));
  int fits = 1, too_long = 1 << 22;
  REQUIRE(plans(fits));
  while (too_long - fits > 1) {
    const int middle = fits + (too_long - fits) / 2;
    (plans(middle) ? fits : too_long) = middle;
  }
  PA_REQUIRE_THROWS_AS_WITH(entry.plan(problem_of(too_long), {}, device), ArgumentError,
                            cat(entry.name, ": max_context_len: expected at most ", fits, " tokens"));
  PA_REQUIRE_THROWS_AS_WITH(entry.plan(problem_of(too_long), {}, device), ArgumentError, cat("got ", too_long));
  WorkloadSpec spec = debug_spec();
  spec.name = cat("context-", fits, "-at-the-cap");
  spec.num_q_heads = 1;
  spec.num_kv_heads = 1;
  spec.dtype = dtype;
  spec.context_lens = {fits, 1};
  require_oracle_match(backend, step, make_workload(spec));
}

/// Contexts at a split's end and one token either side (docs/design/CATALOGUE.md N4). A step with a
/// split knob: 3 splits over a longest context of 3P make splits of exactly P tokens, P = 64 (a
/// split ends with a page) and P = 40 (in the middle of a page and of a 32-token tile). A step
/// with portions instead (steps 11 and 12, whose work is whole tiles of 32 tokens at this head
/// dim): portions of P = 64 and 32 tokens, so pairs are cut into pieces of whole tiles and merged,
/// and the contexts P ± 1, 2P ± 1 end one token before or after a tile's, and a piece's, end.
inline void check_split_boundaries(Backend backend, int step) {
  const KernelEntry& entry = kernel(step, backend);
  if ((entry.knobs & (knob_splits | knob_partition)) == 0) return;  // one program a context: no ends inside it
  if ((entry.knobs & knob_splits) == 0) {
    for (int portion : {64, 32}) {
      WorkloadSpec spec = debug_spec();
      spec.name = cat("portion-ends-", portion);
      spec.dtype = DType::bf16;
      spec.fp8_kv = entry.runs_fp8_kv;
      spec.context_lens = {portion - 1, portion, portion + 1, 2 * portion - 1, 2 * portion, 2 * portion + 1, 3 * portion};
      KernelOptions options;
      options.partition_tokens = portion;
      const Workload w = make_workload(spec);
      const RunOutput run = run_on(backend, step, w, options);
      INFO(run.plan.description);
      REQUIRE(run.plan.description.find("tiles of 32 tokens") != std::string::npos);
      REQUIRE(run.plan.description.find("; 0 (sequence, KV head) cut") == std::string::npos);  // some are cut
      require_matches_oracle(run, backend, step, w, options);
    }
    return;
  }
  for (int split : {64, 40}) {
    WorkloadSpec spec = debug_spec();
    spec.name = cat("split-ends-", split);
    spec.dtype = DType::bf16;
    spec.context_lens = {split - 1, split, split + 1, 2 * split - 1, 2 * split, 2 * split + 1, 3 * split};
    KernelOptions options;
    options.num_splits = 3;
    const Workload w = make_workload(spec);
    const RunOutput run = run_on(backend, step, w, options);
    INFO(run.plan.description);
    REQUIRE(run.plan.splits == 3);
    REQUIRE(run.plan.description.find(cat("3 splits of ", split, " tokens")) != std::string::npos);
    require_matches_oracle(run, backend, step, w, options);
  }
}

// ----- fp8 K/V (step 12) ----------------------------------------------------------------------

/// Head dims 64-256 (q in f16 and bf16), groups of 3, 8 and 32, pages 1 to 64, both layouts,
/// all with fp8 K/V. (Step 12's copies take the runs at pages of 16 or more in the HND layout and
/// look each row up elsewhere: both are here.)
inline void check_fp8_shapes(Backend backend, int step) {
  for (int head_dim : {64, 80, 96, 112, 128, 256})
    for (DType dtype : {DType::f16, DType::bf16}) {
      WorkloadSpec spec = debug_spec();
      spec.name = cat("fp8-head-dim-", head_dim);
      spec.head_dim = head_dim;
      spec.dtype = dtype;
      spec.fp8_kv = true;
      spec.context_lens = {33, 0, 17, 130};
      require_oracle_match(backend, step, make_workload(spec));
    }
  for (const auto& [q_heads, kv_heads] : {std::pair{24, 8}, std::pair{16, 2}, std::pair{32, 1}}) {
    WorkloadSpec spec = debug_spec();
    spec.name = cat("fp8-group-", q_heads / kv_heads);
    spec.num_q_heads = q_heads;
    spec.num_kv_heads = kv_heads;
    spec.dtype = DType::bf16;
    spec.fp8_kv = true;
    spec.context_lens = {33, 0, 17};
    require_oracle_match(backend, step, make_workload(spec));
  }
  for (int page : {1, 8, 12, 16, 32, 64}) {
    WorkloadSpec spec = debug_spec();
    spec.dtype = DType::bf16;
    spec.fp8_kv = true;
    spec.name = cat("fp8-page-", page);
    spec.block_size = page;
    spec.context_lens = {page - 1 > 0 ? page - 1 : 1, page, page + 1, 2 * page + 3};
    require_oracle_match(backend, step, make_workload(spec));
  }
  for (LayoutKind layout : {LayoutKind::hnd, LayoutKind::nhd})
    for (int page : {16, 32}) {
      WorkloadSpec spec = debug_spec();
      spec.dtype = DType::bf16;
      spec.fp8_kv = true;
      spec.layout = layout;
      spec.name = cat("fp8-", layout == LayoutKind::nhd ? "nhd" : "hnd", "-page-", page);
      spec.block_size = page;
      spec.context_lens = {15, 16, 47, 100};
      require_oracle_match(backend, step, make_workload(spec));
    }
}

/// check_huge_pools' two sparse pools with fp8 K/V: every used page starts past element (byte)
/// 2^31, then 2^32, so a page offset computed in 32 bits reads another page.
inline void check_huge_fp8_pools(Backend backend, int step) {
  for (const auto& [pages, limit] : {std::pair<std::int64_t, std::int64_t>{140000, std::int64_t{1} << 31},
                                     std::pair<std::int64_t, std::int64_t>{280000, std::int64_t{1} << 32}}) {
    WorkloadSpec spec = huge_pool_spec(pages, DType::bf16);
    spec.fp8_kv = true;
    const Workload w = make_workload(spec);
    for (std::size_t i = 0; i < w.block_tables.size(); ++i) {
      const std::int64_t entry = static_cast<std::int64_t>(i) % w.problem.max_blocks_per_seq;
      const std::int64_t seq = static_cast<std::int64_t>(i) / w.problem.max_blocks_per_seq;
      if (entry < pages_for(w.context_lens[static_cast<std::size_t>(seq)], w.problem.block_size))
        REQUIRE(w.block_tables[i] * w.problem.layout.block_stride > limit);
    }
    require_oracle_match(backend, step, w);
  }
}

/// Every step before \p first_fp8_step refuses fp8 K/V in its plan, naming `fp8_kv`.
inline void check_fp8_refused_below(Backend backend, int first_fp8_step) {
  WorkloadSpec spec = debug_spec();
  spec.dtype = DType::bf16;
  spec.fp8_kv = true;
  const Workload workload = make_workload(spec);
  for (const int step : kernel_steps()) {
    if (step >= first_fp8_step) continue;
    CAPTURE(step);
    REQUIRE_FALSE(kernel(step, backend).runs_fp8_kv);
    PA_REQUIRE_THROWS_AS_WITH(run_on(backend, step, workload), ArgumentError,
                              cat(kernel(step, backend).name, ": fp8_kv: expected false"));
  }
}

}  // namespace pa::testing
