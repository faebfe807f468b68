#include "common/workload.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <numeric>
#include <utility>

#include <sys/mman.h>

#include "common/error.h"
#include "common/paged_cache.h"
#include "common/parallel.h"
#include "common/report.h"

namespace pa {

namespace {
/// From this size on, CacheBytes maps address space instead of asking calloc.
constexpr std::size_t kReserveBytes = std::size_t{64} << 20;

/// The failure of a reservation, naming its size (docs/design/CATALOGUE.md R6).
[[noreturn]] void refuse_reservation(std::size_t bytes) {
  throw MemoryError(cat("CacheBytes: cannot reserve ", bytes, " bytes (", format_bytes(static_cast<double>(bytes)),
                        ") of host memory"));
}

std::byte* reserve_zeroed(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  if (bytes < kReserveBytes) {
    void* memory = std::calloc(bytes, 1);
    if (!memory) refuse_reservation(bytes);
    return static_cast<std::byte*>(memory);
  }
  // MAP_NORESERVE: no swap is set aside, so the kernel's overcommit check lets a reservation
  // larger than memory through; a page takes memory when first written (a read maps the
  // shared zero page).
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) refuse_reservation(bytes);
  return static_cast<std::byte*>(memory);
}

void release_zeroed(std::byte* memory, std::size_t bytes) noexcept {
  if (!memory) return;
  if (bytes < kReserveBytes) std::free(memory);
  else munmap(memory, bytes);
}
}  // namespace

CacheBytes::CacheBytes(std::size_t size) : data_(reserve_zeroed(size)), size_(size) {}

CacheBytes::CacheBytes(const CacheBytes& other) : data_(reserve_zeroed(other.size_)), size_(other.size_) {
  if (size_) std::memcpy(data_, other.data_, size_);
}

CacheBytes& CacheBytes::operator=(const CacheBytes& other) {
  if (this != &other) *this = CacheBytes(other);
  return *this;
}

CacheBytes::CacheBytes(CacheBytes&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

CacheBytes& CacheBytes::operator=(CacheBytes&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(size_, other.size_);
  return *this;
}

CacheBytes::~CacheBytes() { release_zeroed(data_, size_); }

bool operator==(const CacheBytes& a, const CacheBytes& b) {
  return a.size_ == b.size_ && (a.size_ == 0 || std::memcmp(a.data_, b.data_, a.size_) == 0);
}

namespace {

constexpr std::uint64_t golden_gamma = 0x9e3779b97f4a7c15ull;  // splitmix64's increment

/// Tensor tags: each tensor draws from its own stream of the seed.
enum class Stream : std::uint64_t { query = 1, keys = 2, values = 3, tables = 4, contexts = 5 };

/// The key of one stream of \p seed.
std::uint64_t stream_key(std::uint64_t seed, Stream stream) {
  return mix64(mix64(seed) ^ (static_cast<std::uint64_t>(stream) * golden_gamma));
}

/// 24 random bits as a float in [-1, 1), exactly (24 bits fit a float's significand).
inline float to_pm1(std::uint64_t bits24) { return static_cast<float>(bits24) * 0x1p-23f - 1.0f; }

/// Element \p index of a stream as a float in [-1, 1): counter-based, so any element can be
/// computed alone, by any thread, in any order. One 64-bit hash feeds two elements (its top
/// 24 bits the even one, the next 24 the odd one), which halves the fill's hashing.
inline float uniform_pm1(std::uint64_t key, std::uint64_t index) {
  const std::uint64_t bits = mix64(key + (index / 2 + 1) * golden_gamma);
  return to_pm1((index & 1) ? (bits >> 16) & 0xffffff : bits >> 40);
}

/// A draw in [0, bound) from a splitmix64 sequence, without modulo bias (rejection).
std::uint64_t draw_below(std::uint64_t& state, std::uint64_t bound) {
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  for (;;) {
    state += golden_gamma;
    const std::uint64_t value = mix64(state);
    if (value < limit) return value % bound;
  }
}

// Typed stores, so the fill loop picks the conversion once, not once per element.
struct StoreF32 {
  float* data;
  void operator()(std::size_t index, float value) const { data[index] = value; }
};
struct StoreF16 {
  f16_t* data;
  void operator()(std::size_t index, float value) const { data[index] = float_to_f16(value); }
};
struct StoreBF16 {
  bf16_t* data;
  void operator()(std::size_t index, float value) const { data[index] = float_to_bf16(value); }
};

/// The fp8 write path: the value divided by its cache's scale, rounded to nearest even and
/// saturated to +-448 (NaN stays NaN, 0x7f).
struct StoreE4M3 {
  e4m3_t* data;
  float scale;
  void operator()(std::size_t index, float value) const { data[index] = float_to_e4m3(value / scale); }
};

/// \p scale: the dequantisation scale of an e4m3 cache (ignored by the other types).
template <class Function>
void with_store(void* data, DType dtype, float scale, Function&& function) {
  switch (dtype) {
    case DType::f32: function(StoreF32{static_cast<float*>(data)}); break;
    case DType::f16: function(StoreF16{static_cast<f16_t*>(data)}); break;
    case DType::bf16: function(StoreBF16{static_cast<bf16_t*>(data)}); break;
    case DType::e4m3: function(StoreE4M3{static_cast<e4m3_t*>(data), scale}); break;
  }
}

bool is_prime(int value) {
  if (value < 2) return false;
  for (int divisor = 2; divisor * divisor <= value; ++divisor)
    if (value % divisor == 0) return false;
  return true;
}

/// The largest prime below \p limit (or \p limit itself when there is none).
int prime_below(int limit) {
  for (int value = limit - 1; value >= 2; --value)
    if (is_prime(value)) return value;
  return limit;
}

void check_spec(const WorkloadSpec& spec) {
  const char* function = "make_workload";
  PA_REQUIRE(spec.num_q_heads > 0, function, "spec.num_q_heads", "> 0", spec.num_q_heads);
  PA_REQUIRE(spec.num_kv_heads > 0, function, "spec.num_kv_heads", "> 0", spec.num_kv_heads);
  PA_REQUIRE(spec.num_q_heads % spec.num_kv_heads == 0, function, "spec.num_q_heads % spec.num_kv_heads",
             "0 (each KV head serves a whole group of query heads)",
             cat(spec.num_q_heads % spec.num_kv_heads, " (", spec.num_q_heads, " / ", spec.num_kv_heads, ")"));
  PA_REQUIRE(spec.head_dim > 0, function, "spec.head_dim", "> 0", spec.head_dim);
  PA_REQUIRE(spec.block_size > 0, function, "spec.block_size", "> 0", spec.block_size);
  PA_REQUIRE(spec.context_lens.size() <= static_cast<std::size_t>(INT32_MAX), function,
             "spec.context_lens.size()", "<= 2^31-1", spec.context_lens.size());
  for (std::size_t seq = 0; seq < spec.context_lens.size(); ++seq)
    PA_REQUIRE(spec.context_lens[seq] >= 0, function, cat("spec.context_lens[", seq, "]"), ">= 0",
               spec.context_lens[seq]);
  PA_REQUIRE(spec.spare_blocks >= 0, function, "spec.spare_blocks", ">= 0", spec.spare_blocks);
  PA_REQUIRE(spec.table_slack >= 0, function, "spec.table_slack", ">= 0", spec.table_slack);
  PA_REQUIRE(std::isfinite(spec.query_multiplier), function, "spec.query_multiplier", "a finite value",
             spec.query_multiplier);
  const int num_seqs = static_cast<int>(spec.context_lens.size());
  PA_REQUIRE(spec.nan_sequence >= -1 && spec.nan_sequence < num_seqs, function, "spec.nan_sequence",
             cat("-1 (none) or a sequence in [0, ", num_seqs, ")"), spec.nan_sequence);
  if (spec.nan_sequence >= 0)
    PA_REQUIRE(spec.context_lens[static_cast<std::size_t>(spec.nan_sequence)] > 0, function,
               "spec.nan_sequence", "a sequence with at least one token (a NaN needs a valid slot)",
               cat(spec.nan_sequence, " (context 0)"));
}

/// Fills one cache: valid slots (slot < valid_slots[page]) get seeded values in [-1, 1],
/// the rest \p filler; a page whose valid_slots is -1 (a sparse pool's page no table uses and
/// no canary) is not touched. A value depends on the seed and the element's logical position
/// (page, head, slot, channel) only, so the hnd and nhd layouts hold the same tokens.
void fill_cache(CacheBytes& cache, const DecodeProblem& problem,
                const std::vector<std::int32_t>& valid_slots, std::uint64_t key, float filler,
                float scale, int num_threads) {
  const std::int64_t heads = problem.num_kv_heads;
  const std::int64_t block_size = problem.block_size;
  const std::int64_t head_dim = problem.head_dim;
  const std::int64_t page_elems = heads * block_size * head_dim;
  // Fixed chunks of about 64K elements: the unit of parallel work. The values do not depend
  // on the chunking, only the speed does.
  const std::int64_t pages_per_chunk = std::max<std::int64_t>(1, (std::int64_t{1} << 16) / page_elems);
  const std::int64_t num_chunks = (problem.num_blocks + pages_per_chunk - 1) / pages_per_chunk;
  const CacheLayout layout = problem.layout;
  with_store(cache.data(), problem.cache_dtype(), scale, [&](auto store) {
    parallel_for(num_chunks, num_threads, [&](std::int64_t chunk) {
      const std::int64_t first = chunk * pages_per_chunk;
      const std::int64_t last = std::min(problem.num_blocks, first + pages_per_chunk);
      for (std::int64_t page = first; page < last; ++page) {
        const std::int64_t valid = valid_slots[static_cast<std::size_t>(page)];
        if (valid < 0) continue;  // untouched (sparse)
        for (std::int64_t head = 0; head < heads; ++head) {
          for (std::int64_t slot = 0; slot < block_size; ++slot) {
            const std::int64_t base = layout.offset(page, head, slot, 0);
            const std::uint64_t logical = static_cast<std::uint64_t>(((page * heads + head) * block_size + slot) * head_dim);
            if (slot >= valid) {
              for (std::int64_t channel = 0; channel < head_dim; ++channel)
                store(static_cast<std::size_t>(base + channel * layout.dim_stride), filler);
              continue;
            }
            // uniform_pm1(key, logical + channel), one hash per pair of elements.
            std::uint64_t bits = 0;
            for (std::int64_t channel = 0; channel < head_dim; ++channel) {
              const std::uint64_t index = logical + static_cast<std::uint64_t>(channel);
              if (channel == 0 || (index & 1) == 0) bits = mix64(key + (index / 2 + 1) * golden_gamma);
              const float value = to_pm1((index & 1) ? (bits >> 16) & 0xffffff : bits >> 40);
              store(static_cast<std::size_t>(base + channel * layout.dim_stride), value);
            }
          }
        }
      }
    });
  });
}

}  // namespace

Workload make_workload(const WorkloadSpec& spec) { return make_workload(spec, 0); }

Workload make_workload(const WorkloadSpec& spec, int num_threads) {
  const char* function = "make_workload";
  check_spec(spec);
  PA_REQUIRE(num_threads >= 0, function, "num_threads", ">= 0 (0: automatic)", num_threads);
  const int num_seqs = static_cast<int>(spec.context_lens.size());
  const int block_size = spec.block_size;

  // Pages each sequence needs, and how many of them it shares with the sequence before it.
  // An aliased odd sequence is a fork of the even one before it: they share every page that
  // is full in both (the common prefix), so two tables list the same physical page.
  std::vector<std::int64_t> needed(static_cast<std::size_t>(num_seqs));
  std::vector<std::int64_t> shared(static_cast<std::size_t>(num_seqs), 0);
  std::int64_t pages_used = 0;
  std::int64_t longest = 0;
  std::int64_t most_pages = 0;
  for (int seq = 0; seq < num_seqs; ++seq) {
    const std::size_t s = static_cast<std::size_t>(seq);
    needed[s] = pages_for(spec.context_lens[s], block_size);
    if (spec.alias && seq % 2 == 1)
      shared[s] = std::min(spec.context_lens[s - 1] / block_size, spec.context_lens[s] / block_size);
    pages_used += needed[s] - shared[s];
    longest = std::max<std::int64_t>(longest, spec.context_lens[s]);
    most_pages = std::max(most_pages, needed[s]);
  }
  const std::int64_t num_blocks = pages_used + spec.spare_blocks;
  PA_REQUIRE(num_blocks <= std::int64_t{INT32_MAX} + 1, function, "pages used + spec.spare_blocks",
             "<= 2^31 (block-table entries are int32)", num_blocks);
  PA_REQUIRE(most_pages + spec.table_slack <= INT32_MAX, function, "longest row + spec.table_slack",
             "<= 2^31-1", most_pages + spec.table_slack);

  Workload workload;
  workload.spec = spec;
  DecodeProblem& problem = workload.problem;
  problem = make_problem(num_seqs, spec.num_q_heads, spec.num_kv_heads, spec.head_dim, block_size,
                         static_cast<int>(most_pages + spec.table_slack), static_cast<int>(longest),
                         num_blocks, spec.dtype);
  if (spec.layout == LayoutKind::nhd)
    problem.layout = CacheLayout::nhd(spec.num_kv_heads, block_size, spec.head_dim);
  if (spec.fp8_kv) {
    problem.fp8_kv = true;
    problem.k_scale = kFp8KeyScale;
    problem.v_scale = kFp8ValueScale;
  }
  problem.total_context_len = std::accumulate(spec.context_lens.begin(), spec.context_lens.end(), std::int64_t{0});
  validate(problem, function);

  // The pages, from a block allocator as a serving engine would get them.
  const std::uint64_t table_seed = stream_key(spec.seed, Stream::tables);
  BlockAllocator allocator = [&] {
    if (!spec.pages_near_top)
      return BlockAllocator(num_blocks, spec.scatter ? PageOrder::shuffled : PageOrder::ascending, table_seed);
    // The tables get exactly the top pages_used ids (highest first, or shuffled among
    // themselves); the spare pages are the lowest ids.
    std::vector<PageId> order(static_cast<std::size_t>(num_blocks));
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<PageId>(num_blocks - 1 - static_cast<std::int64_t>(i));
    if (spec.scatter) seeded_shuffle(std::span<PageId>(order).first(static_cast<std::size_t>(pages_used)), table_seed);
    return BlockAllocator(order);
  }();
  std::vector<std::vector<PageId>> tables(static_cast<std::size_t>(num_seqs));
  for (int seq = 0; seq < num_seqs; ++seq) {
    const std::size_t s = static_cast<std::size_t>(seq);
    for (std::int64_t i = 0; i < shared[s]; ++i) {
      const PageId page = tables[s - 1][static_cast<std::size_t>(i)];
      allocator.share(page);
      tables[s].push_back(page);
    }
    const std::vector<PageId> own = allocator.allocate(needed[s] - shared[s]);
    tables[s].insert(tables[s].end(), own.begin(), own.end());
  }
  allocator.check_invariants();

  // Block tables [num_seqs][max_blocks_per_seq] and context lengths [num_seqs].
  const std::size_t row_len = static_cast<std::size_t>(problem.max_blocks_per_seq);
  workload.block_tables.assign(static_cast<std::size_t>(num_seqs) * row_len, spec.poison ? INT32_MAX : 0);
  workload.context_lens.resize(static_cast<std::size_t>(num_seqs));
  for (std::size_t s = 0; s < tables.size(); ++s) {
    std::copy(tables[s].begin(), tables[s].end(), workload.block_tables.begin() + static_cast<std::ptrdiff_t>(s * row_len));
    workload.context_lens[s] = spec.context_lens[s];
  }

  // Valid slots of each page: a prefix [0, valid). A shared page is valid where any of its
  // sequences reads it (the union, which for prefixes is the maximum). A sparse pool marks the
  // pages it leaves untouched -1; the pages either side of a used one stay 0: canaries, all poison.
  std::vector<std::int32_t> valid_slots(static_cast<std::size_t>(num_blocks), spec.sparse ? -1 : 0);
  for (std::size_t s = 0; s < tables.size(); ++s) {
    for (std::size_t i = 0; i < tables[s].size(); ++i) {
      const auto page = static_cast<std::size_t>(tables[s][i]);
      const std::int64_t in_page = std::min<std::int64_t>(block_size, spec.context_lens[s] - static_cast<std::int64_t>(i) * block_size);
      valid_slots[page] = std::max(valid_slots[page], static_cast<std::int32_t>(in_page));
      if (page > 0) valid_slots[page - 1] = std::max(valid_slots[page - 1], 0);
      if (page + 1 < valid_slots.size()) valid_slots[page + 1] = std::max(valid_slots[page + 1], 0);
    }
  }
  const std::int64_t pages_written =
      std::count_if(valid_slots.begin(), valid_slots.end(), [](std::int32_t valid) { return valid >= 0; });

  // Tensors. Automatic threading: one thread for small workloads (thread start-up would
  // cost more than the fill), every hardware thread for large ones.
  const std::int64_t cache_elems = problem.cache_elems();
  const std::int64_t elems_written = pages_written * problem.layout.block_stride;
  int threads = num_threads;
  if (threads == 0)
    threads = 2 * elems_written < (std::int64_t{1} << 20) ? 1 : hardware_threads();
  const float filler = spec.poison ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
  const std::size_t elem = dtype_size(spec.dtype);
  const std::size_t cache_elem = dtype_size(problem.cache_dtype());
  workload.key_cache = CacheBytes(static_cast<std::size_t>(cache_elems) * cache_elem);    // problem.layout over num_blocks pages
  workload.value_cache = CacheBytes(static_cast<std::size_t>(cache_elems) * cache_elem);  // same
  fill_cache(workload.key_cache, problem, valid_slots, stream_key(spec.seed, Stream::keys), filler, problem.k_scale, threads);
  fill_cache(workload.value_cache, problem, valid_slots, stream_key(spec.seed, Stream::values), filler, problem.v_scale, threads);

  const std::int64_t query_elems = problem.query_elems();
  workload.query.resize(static_cast<std::size_t>(query_elems) * elem);  // [num_seqs][num_q_heads][head_dim]
  const std::uint64_t query_key = stream_key(spec.seed, Stream::query);
  for (std::int64_t i = 0; i < query_elems; ++i) {
    // "+ 0.0f" turns the -0 of a negative draw times 0 into +0: q = 0 is all zero bits.
    const float value = uniform_pm1(query_key, static_cast<std::uint64_t>(i)) * spec.query_multiplier + 0.0f;
    store_from_float(workload.query.data(), spec.dtype, static_cast<std::size_t>(i), value);
  }

  if (spec.nan_sequence >= 0) {
    // The NaN goes to slot 0, head 0, channel 0 of the sequence's first page that no other
    // sequence holds, so only this sequence's rows may turn NaN.
    const std::size_t s = static_cast<std::size_t>(spec.nan_sequence);
    const auto own = std::find_if(tables[s].begin(), tables[s].end(),
                                  [&](PageId page) { return allocator.ref_count(page) == 1; });
    PA_REQUIRE(own != tables[s].end(), function, "spec.nan_sequence",
               "a sequence with a page no other sequence shares",
               cat(spec.nan_sequence, " (every page is shared)"));
    store_from_float(workload.key_cache.data(), problem.cache_dtype(),
                     static_cast<std::size_t>(problem.layout.offset(*own, 0, 0, 0)),
                     std::numeric_limits<float>::quiet_NaN());
  }
  return workload;
}

DecodeView Workload::host_view(void* out, void* workspace, std::size_t workspace_bytes) const {
  DecodeView view;
  view.problem = problem;
  view.query = query.data();
  view.key_cache = key_cache.data();
  view.value_cache = value_cache.data();
  view.block_tables = block_tables.data();
  view.context_lens = context_lens.data();
  view.out = out;
  view.workspace = workspace;
  view.workspace_bytes = workspace_bytes;
  return view;
}

std::uint64_t Workload::bytes_moved() const {
  const std::uint64_t elem = dtype_size(problem.dtype);
  const std::uint64_t token_bytes =
      std::uint64_t(problem.num_kv_heads) * std::uint64_t(problem.head_dim) * 2 * dtype_size(problem.cache_dtype());
  std::uint64_t bytes = 0;
  for (const std::int32_t len : context_lens) {
    bytes += std::uint64_t(len) * token_bytes;                                  // K and V read
    bytes += 4 * static_cast<std::uint64_t>(pages_for(len, problem.block_size));  // table entries used
  }
  bytes += 2 * static_cast<std::uint64_t>(problem.query_elems()) * elem;  // q read, out written
  bytes += 4 * static_cast<std::uint64_t>(problem.num_seqs);             // context lengths
  return bytes;
}

WorkloadSpec debug_spec() {
  WorkloadSpec spec;
  spec.name = "debug";
  spec.num_q_heads = 4;
  spec.num_kv_heads = 2;
  spec.head_dim = 64;
  spec.block_size = 16;
  spec.context_lens = {37, 0, 1, 15, 16, 17};  // a few pages, empty, one token, page-1/page/page+1
  spec.dtype = DType::f32;
  spec.seed = 1;
  return spec;
}

WorkloadSpec tour_spec() {
  WorkloadSpec spec = debug_spec();
  spec.name = "tour";
  spec.num_q_heads = 8;
  spec.num_kv_heads = 2;
  spec.head_dim = 128;
  spec.context_lens = {200, 1, 15, 17, 0, 97};
  spec.dtype = DType::bf16;
  return spec;
}

std::vector<WorkloadSpec> adversarial_specs(const AdversarialOptions& options) {
  const char* function = "adversarial_specs";
  PA_REQUIRE(options.head_dim > 0, function, "options.head_dim", "> 0", options.head_dim);
  PA_REQUIRE(options.block_size > 0, function, "options.block_size", "> 0", options.block_size);
  PA_REQUIRE(options.max_context > 0, function, "options.max_context", "> 0", options.max_context);
  const int page = options.block_size;
  const int max_context = options.max_context;
  const auto clamp = [max_context](std::vector<int> lens) {
    for (int& len : lens) len = std::min(len, max_context);
    return lens;
  };
  const int prime = prime_below(max_context);
  const int small_prime = prime_below(std::min(max_context, 4 * page));
  const std::vector<int> ragged = clamp({0, 1, page - 1, page, page + 1, prime, max_context});

  std::vector<WorkloadSpec> specs;
  const auto add = [&](std::string name, int q_heads, int kv_heads, std::vector<int> lens) -> WorkloadSpec& {
    WorkloadSpec spec;
    spec.name = std::move(name);
    spec.num_q_heads = q_heads;
    spec.num_kv_heads = kv_heads;
    spec.head_dim = options.head_dim;
    spec.block_size = page;
    spec.context_lens = std::move(lens);
    spec.dtype = options.dtype;
    spec.seed = options.seed + specs.size();
    spec.scatter = true;
    spec.poison = true;
    specs.push_back(spec);
    return specs.back();
  };

  add("ragged-gqa", 8, 2, ragged);
  add("ragged-mha", 4, 4, clamp({page + 1, 1, small_prime, page}));
  add("ragged-mqa", 4, 1, std::vector<int>(ragged.rbegin(), ragged.rend()));
  // Pairs (0,1), (2,3), (4,5): the odd one forks the even one. 6 and 7 full pages share 6;
  // 2 and 2 full pages share 2 (the parent's whole table, last page included); a pair of
  // equal lengths shares all but the partial last page.
  add("aliased", 8, 2, clamp({6 * page + 4, 7 * page + 8, 2 * page, 2 * page + 5, 2 * page + 5, 2 * page + 5}))
      .alias = true;
  WorkloadSpec& top = add("top-of-pool", 4, 2, clamp({page + 1, max_context, 1, page - 1}));
  top.pages_near_top = true;
  top.spare_blocks = 5;
  add("equal-logits", 4, 2, clamp({1, page, page + 1, prime})).query_multiplier = 0.0f;
  // Large logits: |q| <= m and |k| <= 1 bound |q.k * scale| by m * sqrt(head_dim); one logit's
  // spread is about m / 3, so with m = 6e5 / sqrt(head_dim) the batch's largest logits land
  // near 1e5. f16 cannot hold q above 65504: there m stops at 6e4.
  float multiplier = 6e5f / std::sqrt(static_cast<float>(options.head_dim));
  if (options.dtype == DType::f16) multiplier = std::min(multiplier, 6e4f);
  add("large-logits", 4, 2, clamp({1, page + 1, prime, max_context})).query_multiplier = multiplier;
  add("nhd", 8, 2, clamp({page - 1, page + 1, prime, 1, 0})).layout = LayoutKind::nhd;
  add("nan-in-seq-2", 4, 2, clamp({page + 1, 1, small_prime, page})).nan_sequence = 2;
  for (WorkloadSpec& spec : specs) spec.fp8_kv = options.fp8_kv;
  return specs;
}

namespace {
struct NamedWorkload {
  const char* name;
  int num_q_heads;
  int num_kv_heads;
};
// docs/design/BENCHMARKS.md's table, in its order (contexts are set in named_spec()).
constexpr NamedWorkload named_table[] = {
    {"gqa-batch", 32, 8},   {"mha-batch", 32, 32},   {"long-single", 32, 8},
    {"small-batch", 64, 8}, {"ragged-skew", 32, 8},  {"ragged-uniform", 32, 8},
    {"gqa-batch-fp8", 32, 8},
};
}  // namespace

std::vector<std::string> named_workloads() {
  std::vector<std::string> names;
  for (const NamedWorkload& entry : named_table) names.emplace_back(entry.name);
  return names;
}

WorkloadSpec named_spec(std::string_view name) {
  const auto entry = std::find_if(std::begin(named_table), std::end(named_table),
                                  [&](const NamedWorkload& candidate) { return name == candidate.name; });
  if (entry == std::end(named_table)) {
    std::string names;
    for (const std::string& known : named_workloads()) names += cat(names.empty() ? "" : ", ", known);
    throw_argument("named_spec", "name", cat("one of ", names), cat('\'', name, '\''));
  }
  WorkloadSpec spec;
  spec.name = entry->name;
  spec.num_q_heads = entry->num_q_heads;
  spec.num_kv_heads = entry->num_kv_heads;
  spec.head_dim = 128;
  spec.block_size = 16;
  spec.dtype = DType::bf16;
  spec.seed = 1;
  spec.scatter = true;
  spec.spare_blocks = 8;
  spec.table_slack = 1;
  if (name == "gqa-batch" || name == "gqa-batch-fp8") spec.context_lens.assign(64, 8192);
  spec.fp8_kv = name == "gqa-batch-fp8";  // q bf16, K/V e4m3 (step 12)
  if (name == "mha-batch") spec.context_lens.assign(16, 8192);
  if (name == "long-single") spec.context_lens.assign(1, 32768);
  if (name == "small-batch") spec.context_lens.assign(8, 4096);
  if (name == "ragged-skew") {
    spec.context_lens.assign(64, 512);
    spec.context_lens[0] = 65536;
  }
  if (name == "ragged-uniform") {
    // 64 lengths uniform in [128, 16384], drawn from seed 1.
    std::uint64_t state = stream_key(1, Stream::contexts);
    spec.context_lens.resize(64);
    for (int& len : spec.context_lens) len = 128 + static_cast<int>(draw_below(state, 16384 - 128 + 1));
  }
  return spec;
}

}  // namespace pa
