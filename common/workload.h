#pragma once
/// \file
/// Seeded workloads: the tour's default, a debug size for the emulator, the adversarial set of
/// docs/design/CORRECTNESS.md and the named benchmark workloads of docs/design/BENCHMARKS.md.
///
/// A workload is built the way a serving engine builds its cache: sequences get pages from the
/// block allocator (pa::BlockAllocator, common/paged_cache.h), whose free list is shuffled by
/// the seed, so block tables are scattered; aliased workloads fork sequences so that they share
/// their prefix pages. Every slot the kernel must not read (past a context's end in its last
/// page, every page no table uses, every table entry past a row's used prefix) is poisoned:
/// NaN in the caches, INT32_MAX in the tables. The same spec with `poison = false` writes zeros
/// (and 0 entries) there instead and is otherwise identical, bit for bit.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/kernel_api.h"
#include "common/problem.h"

namespace pa {

/// The host bytes of one KV cache, zeroed when made, from memory that takes physical pages only
/// where it is written: calloc below 64 MiB, above it a reservation of address space (mmap with
/// MAP_NORESERVE, so that a pool larger than the machine's memory can be reserved). Nothing
/// writes the bytes on the way (a std::vector would fill every element, touching every page,
/// and under UBSan take seconds a gigabyte), so a sparse pool of gigabytes costs only the pages
/// the workload writes (WorkloadSpec::sparse). Copies are deep.
class CacheBytes {
 public:
  CacheBytes() = default;
  /// \p size zero bytes. Throws MemoryError naming the size when they cannot be had.
  explicit CacheBytes(std::size_t size);
  CacheBytes(const CacheBytes& other);
  CacheBytes& operator=(const CacheBytes& other);
  CacheBytes(CacheBytes&& other) noexcept;
  CacheBytes& operator=(CacheBytes&& other) noexcept;
  ~CacheBytes();

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::byte* begin() { return data_; }
  std::byte* end() { return data_ + size_; }
  const std::byte* begin() const { return data_; }
  const std::byte* end() const { return data_ + size_; }
  /// The same bytes (a comparison reads every page of both).
  friend bool operator==(const CacheBytes& a, const CacheBytes& b);

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

/// Which cache layout a workload uses (see CacheLayout).
enum class LayoutKind : std::uint8_t { hnd, nhd };

/// Everything that decides a workload. Two equal specs give bit-identical workloads.
struct WorkloadSpec {
  std::string name = "custom";
  int num_q_heads = 4;
  int num_kv_heads = 2;
  int head_dim = 64;
  int block_size = 16;
  std::vector<int> context_lens = {37, 1, 16, 100};  ///< one entry per sequence
  DType dtype = DType::f32;
  std::uint64_t seed = 1;
  LayoutKind layout = LayoutKind::hnd;
  bool scatter = true;     ///< pages handed out in a seeded random order (else 0, 1, 2, ...)
  bool alias = false;      ///< odd sequences fork from the one before: they share its full prefix pages
  bool pages_near_top = false;  ///< tables use the highest page ids of the pool
  int spare_blocks = 3;    ///< pool pages no table uses (poisoned)
  int table_slack = 1;     ///< block-table entries past the longest row's need (poisoned)
  bool poison = true;      ///< NaN / INT32_MAX where the kernel must not read; false: zeros
  float query_multiplier = 1.0f;  ///< scales q: 0 makes every logit equal; large tests +-1e5 logits
  int nan_sequence = -1;   ///< >= 0: NaN into one valid K element of that sequence, in a page it holds alone
  /// Writes only the pages some table uses and a canary page either side of each (poisoned
  /// like every slot the kernel must not read); the other pages of the pool are never touched
  /// and read as zeros. With many spare_blocks this is a pool of billions of elements that
  /// costs only its used pages (CacheBytes): the pools over 2^31 and 2^32 elements of
  /// tests/step_checks.h. The GPU copy poisons the untouched pages (DeviceWorkload).
  bool sparse = false;
  /// K and V stored as fp8 e4m3 (DecodeProblem::fp8_kv) with scales kFp8KeyScale and
  /// kFp8ValueScale: the write path divides each value by its cache's scale and rounds it to
  /// e4m3, saturating at +-448. q and out stay dtype.
  bool fp8_kv = false;
};

/// The scales of a workload's fp8 caches. Values are drawn in [-1, 1]: K's scale maps 1 to 448,
/// the largest e4m3 value (the calibration a serving engine does: amax / 448); V's is twice
/// that (1 maps to 224), so that a kernel that swaps the two scales is off by 2x, not unseen.
inline constexpr float kFp8KeyScale = 1.0f / 448.0f;
inline constexpr float kFp8ValueScale = 2.0f / 448.0f;

/// A built workload: the problem plus every host tensor, in problem.dtype.
struct Workload {
  WorkloadSpec spec;
  DecodeProblem problem;
  std::vector<std::byte> query;         ///< [num_seqs][num_q_heads][head_dim]
  CacheBytes key_cache;                 ///< problem.cache_elems() elements
  CacheBytes value_cache;               ///< same
  std::vector<std::int32_t> block_tables;  ///< [num_seqs][max_blocks_per_seq]
  std::vector<std::int32_t> context_lens;  ///< [num_seqs]

  /// A view over the host tensors, with the given output and workspace.
  DecodeView host_view(void* out = nullptr, void* workspace = nullptr,
                       std::size_t workspace_bytes = 0) const;
  /// Bytes a decode step must move (docs/design/BENCHMARKS.md): K and V of every context
  /// token, q, out and the block-table entries used.
  std::uint64_t bytes_moved() const;
  /// Bytes of the output tensor.
  std::size_t out_bytes() const { return static_cast<std::size_t>(problem.query_elems()) * dtype_size(problem.dtype); }
};

/// Builds \p spec (validates it; throws ArgumentError naming the field). Every value is a hash
/// of (seed, tensor, logical page, head, slot, channel), so filling can run on any number of
/// threads, and hnd and nhd workloads hold the same tokens.
Workload make_workload(const WorkloadSpec& spec);
/// The same with the fill spread over \p num_threads threads (0: one thread below about a
/// million elements, else every hardware thread). Every element's value is drawn from its
/// logical position alone, as above, so any thread count gives the same bytes.
Workload make_workload(const WorkloadSpec& spec, int num_threads);

/// The emulator's default: small enough that every step finishes in well under a second.
WorkloadSpec debug_spec();
/// The tour's workload (the debug size, bf16, a GQA layout).
WorkloadSpec tour_spec();

/// Options of the adversarial set.
struct AdversarialOptions {
  DType dtype = DType::f32;
  int head_dim = 64;
  int block_size = 16;
  int max_context = 300;  ///< "the maximum" context of the set (the emulator keeps it small)
  std::uint64_t seed = 7;
  bool fp8_kv = false;    ///< every spec with fp8 e4m3 K/V (WorkloadSpec::fp8_kv); q and out stay dtype
};
/// The adversarial set of docs/design/CORRECTNESS.md: contexts 0, 1, page-1, page, page+1, a
/// prime and the maximum in one ragged batch; scattered and aliased tables; pages near the top
/// of the pool; head ratios MHA, GQA and MQA; all-equal logits (q = 0); logits near +-1e5; a NaN
/// in one sequence's valid K. Every spec poisons the slots the kernel must not read.
std::vector<WorkloadSpec> adversarial_specs(const AdversarialOptions& options = {});

/// The named benchmark workloads of docs/design/BENCHMARKS.md ("gqa-batch", "mha-batch",
/// "long-single", "small-batch", "ragged-skew", "ragged-uniform", "gqa-batch-fp8"), bf16, page
/// 16, head dim 128; "gqa-batch-fp8" is gqa-batch with fp8 e4m3 K/V.
WorkloadSpec named_spec(std::string_view name);
/// Their names, in docs/design/BENCHMARKS.md's order.
std::vector<std::string> named_workloads();

}  // namespace pa
