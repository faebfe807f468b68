#pragma once
/// \file
/// The host-side paged KV cache, kept the way a serving engine keeps it (step 01).
///
/// The pool holds `num_blocks` pages; a page holds the K (or V) vectors of `block_size` tokens
/// of every KV head. A BlockAllocator hands out page ids from a free list and counts how many
/// sequences hold each page. A PagedKVCache owns the K and V pools, the allocator and, per
/// sequence, a block table (page ids in token order) and a context length. Token `t` of a
/// sequence lives in page `block_table[t / block_size]`, slot `t % block_size`; its *slot
/// mapping* is `page * block_size + t % block_size`, the one number the write path needs.
///
/// Sequences can fork (prefix sharing): the child lists the same pages and every distinct page
/// gains one reference. The first write into a page that another sequence still holds copies
/// the page first (copy-on-write), so no sequence ever sees another's tokens change.
///
/// Nothing here is thread-safe: one engine thread owns a cache.

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/problem.h"

namespace pa {

/// A page id: an index into the pool. int32, like a block-table entry.
using PageId = std::int32_t;

/// splitmix64's output function: a fast, well-mixed hash of a 64-bit counter. Seeded
/// shuffles and the workload fill draw from it, so a seed gives the same pages and the same
/// values with every compiler and standard library (`std::shuffle`'s results differ).
constexpr std::uint64_t mix64(std::uint64_t value) {
  value ^= value >> 30;
  value *= 0xbf58476d1ce4e5b9ull;
  value ^= value >> 27;
  value *= 0x94d049bb133111ebull;
  value ^= value >> 31;
  return value;
}

/// Puts \p values in a random order decided only by \p seed (Fisher–Yates over mix64).
void seeded_shuffle(std::span<PageId> values, std::uint64_t seed);

/// The order in which a fresh BlockAllocator hands out its pages.
enum class PageOrder : std::uint8_t {
  ascending,  ///< 0, 1, 2, ...: tables look contiguous (easy to read, hides indexing bugs)
  shuffled,   ///< a seeded permutation: tables are scattered over the pool, as after hours of serving
  top_first,  ///< num_blocks-1, num_blocks-2, ...: pages near the top of the pool, where
              ///< 32-bit offset bugs show first
};

/// A fixed pool of page ids with a free list and reference counts.
///
/// A page is either *free* (reference count 0, on the free list exactly once) or *used*
/// (count > 0: the number of sequences that hold it). allocate() pops pages off the free list
/// with count 1, share() adds a holder, free() drops one and returns the page to the free list
/// when the last holder lets go. A freed page is the next one handed out (a stack), so a
/// page's old contents are reused at once, as in a busy engine.
///
/// Every refusal throws AllocatorError naming the function and the page or count; a refused
/// call changes nothing.
class BlockAllocator {
 public:
  /// A pool of \p num_blocks pages (at most 2^31, block-table entries are int32) handed out in
  /// \p order; \p seed decides the shuffled order. Throws ArgumentError on a bad count.
  explicit BlockAllocator(std::int64_t num_blocks, PageOrder order = PageOrder::ascending,
                          std::uint64_t seed = 0);
  /// A pool of `hand_out_order.size()` pages handed out exactly in the order given, which must
  /// be a permutation of [0, size). Throws ArgumentError naming a repeated or out-of-range entry.
  explicit BlockAllocator(std::span<const PageId> hand_out_order);

  /// Takes \p count free pages (reference count 1 each), in free-list order. With fewer than
  /// \p count free, throws AllocatorError ("asked for 5 pages, 3 free") and takes none; a count
  /// above the whole pool is refused as one no freeing can satisfy ("asked for 100 pages, more
  /// than the pool's 64").
  std::vector<PageId> allocate(std::int64_t count);
  /// Takes one free page; throws AllocatorError when none is free.
  PageId allocate_one();
  /// Takes the free page \p page (reference count 1), wherever it is on the free list; the
  /// other free pages keep their order. Throws AllocatorError when it is used or outside the pool.
  void take(PageId page);
  /// Drops one reference to \p page; at zero the page goes back on the free list. Throws
  /// AllocatorError on a free page ("double free of page 17") or an id outside the pool.
  void free(PageId page);
  /// Drops one reference to each page of \p pages, as one call: every entry is checked before
  /// any page is freed, and a refused call frees none. A page listed twice is refused, not
  /// merged ("page 17 listed twice, at pages[2] and pages[5]"): a caller that names a page twice
  /// has lost track of its holders, and dropping two references could free a page another
  /// sequence still reads. So is a free page ("double free of page 17") or an id outside the pool.
  void free(std::span<const PageId> pages);
  /// Adds one reference to a used \p page (a forked sequence now holds it too). Throws
  /// AllocatorError on a free page or an id outside the pool.
  void share(PageId page);

  /// Holders of \p page (0 when free). Throws AllocatorError on an id outside the pool.
  std::int32_t ref_count(PageId page) const;
  /// Pages on the free list.
  std::int64_t num_free() const { return static_cast<std::int64_t>(free_list_.size()); }
  /// Pages held by at least one sequence.
  std::int64_t num_used() const { return num_blocks() - num_free(); }
  /// Pages in the pool.
  std::int64_t num_blocks() const { return static_cast<std::int64_t>(ref_counts_.size()); }

  /// Checks that every page is either free with count 0 and on the free list once, or used
  /// with count > 0 and not on the free list. Throws AllocatorError naming the first page that
  /// breaks this.
  void check_invariants() const;
  /// Empty when every page is free; otherwise "3 pages still held: 4 (refs 1), 9 (refs 2), ..."
  /// (at most 16 pages named, then a count).
  std::string leak_report() const;

 private:
  void check_page(PageId page, const char* function) const;

  std::vector<std::int32_t> ref_counts_;  // [num_blocks] holders of each page
  std::vector<PageId> free_list_;         // free pages; back() is handed out next
};

/// Shape, storage type and layout of a PagedKVCache, and how its allocator orders pages.
struct CacheConfig {
  int num_kv_heads = 2;           ///< KV heads stored per token
  int block_size = 16;            ///< tokens per page
  int head_dim = 64;              ///< channels per head
  std::int64_t num_blocks = 64;   ///< pages in the pool
  DType dtype = DType::f32;       ///< storage type; rows are rounded to it on write
  /// e4m3 storage (fp8, step 12) only: the scales of the K and V pools. The write path divides
  /// each value by its pool's scale and rounds it to e4m3, saturating at +-448 (NaN stays NaN);
  /// gather() multiplies it back. 1 for every other type.
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  /// Strides of both pools; all zero (the default) means CacheLayout::hnd.
  CacheLayout layout{0, 0, 0, 1};
  PageOrder page_order = PageOrder::ascending;  ///< order of the allocator's free list
  std::uint64_t seed = 0;         ///< decides the order when page_order is shuffled
  /// Pages one block-table row holds (the kernels' max_blocks_per_seq): no sequence may grow
  /// past it. 0: only the pool limits a sequence.
  int max_blocks_per_seq = 0;
};

/// What append_slot() did to make room for one token.
struct AppendResult {
  std::int64_t position = 0;  ///< the token's position in its sequence (the old context length)
  std::int64_t slot = 0;      ///< page * block_size + offset: where its K/V go
  PageId page = 0;            ///< the page that holds it
  bool new_page = false;      ///< a page was allocated (the last one was full, or there was none)
  PageId copied_from = -1;    ///< >= 0: the last page was shared, so it was first copied from
                              ///< this page to `page` (copy-on-write)
};

/// One sequence's K and V as contiguous tensors (what a cache without pages would hold).
struct GatheredSequence {
  int num_kv_heads = 0;
  std::int64_t context_len = 0;
  int head_dim = 0;
  std::vector<float> keys;    ///< [num_kv_heads][context_len][head_dim]
  std::vector<float> values;  ///< [num_kv_heads][context_len][head_dim]
};

/// Memory held by the paged cache next to a contiguous cache that reserves `reserved_len`
/// tokens for every sequence (the lesson of step 01). Bytes count K and V together.
struct MemoryReport {
  std::int64_t num_sequences = 0;    ///< live sequences
  std::int64_t tokens = 0;           ///< sum of context lengths (what sequences see)
  std::int64_t bytes_per_token = 0;  ///< 2 (K and V) * num_kv_heads * head_dim * element size
  int block_size = 0;                ///< tokens per page
  std::int64_t page_bytes = 0;       ///< bytes_per_token * block_size
  std::int64_t pool_pages = 0;       ///< pages in the pool
  std::int64_t pages_held = 0;       ///< distinct pages some sequence holds
  std::int64_t table_entries = 0;    ///< sum of block-table lengths (a shared page counts per table)
  std::int64_t filled_slots = 0;     ///< slots of held pages that hold a token of some sequence
  std::int64_t reserved_len = 0;     ///< tokens a contiguous cache reserves per sequence
  std::int64_t paged_bytes = 0;      ///< pages_held * page_bytes
  std::int64_t paged_wasted_bytes = 0;       ///< (pages_held * block_size - filled_slots) * bytes_per_token
  std::int64_t contiguous_bytes = 0;         ///< num_sequences * reserved_len * bytes_per_token
  std::int64_t contiguous_wasted_bytes = 0;  ///< contiguous_bytes - tokens * bytes_per_token

  /// Pages prefix sharing saved: table_entries - pages_held.
  std::int64_t pages_saved_by_sharing() const { return table_entries - pages_held; }
  /// 100 * paged_wasted_bytes / paged_bytes (0 when nothing is held).
  double paged_waste_percent() const;
  /// 100 * contiguous_wasted_bytes / contiguous_bytes (0 when nothing is reserved).
  double contiguous_waste_percent() const;
  /// A small aligned table: bytes held, bytes wasted and % wasted for both caches.
  std::string table() const;
  /// The same numbers as one JSON object.
  std::string json() const;
};

/// K and V pools, a BlockAllocator and the block table and length of every live sequence.
///
/// Every function checks its arguments and throws ArgumentError (bad sequence id, row size,
/// position, slot) or AllocatorError (out of pages) naming the function and the argument; a
/// refused call leaves the cache as it was.
class PagedKVCache {
 public:
  /// An empty cache. Fresh pools hold NaN in every slot, so reading a slot nobody wrote shows.
  /// Throws ArgumentError naming a bad field of \p config.
  explicit PagedKVCache(const CacheConfig& config);

  /// The admission check of a request that will grow to \p context_len tokens: the
  /// pages_for(context_len) pages it needs must fit in the whole pool and in one block-table
  /// row (config().max_blocks_per_seq). Throws AllocatorError naming the tokens, the pages
  /// needed and the limit when they cannot, however many pages are freed later, so such a
  /// request is refused up front instead of failing halfway. Reserves nothing: pages free now
  /// may be taken before the request grows. Returns the pages needed.
  std::int64_t check_admission(std::int64_t context_len) const;

  /// A new sequence with no tokens and no pages; returns its id (ids are never reused).
  int add_sequence();
  /// A new sequence of \p context_len tokens over pages the caller names (for example a table
  /// rebuilt from a snapshot, or a sliding window that lists a page twice). The table must hold
  /// exactly pages_for(context_len) entries. The sequence takes one reference on each distinct
  /// page listed: a used page is shared, a free one is taken off the free list. Its slots keep
  /// whatever the pages hold.
  int add_sequence(std::span<const PageId> block_table, std::int64_t context_len);

  /// Grows \p seq by one token and returns the slot its K/V go to, without writing them (the
  /// scheduler's half of the write path; write_slots() is the kernel's half). Allocates a page
  /// when the last one is full; when the last page is shared, copies it to a fresh page first
  /// (copy-on-write). Until the slot is written it holds the page's old contents. A sequence
  /// whose row is full (config().max_blocks_per_seq pages) is refused with AllocatorError.
  AppendResult append_slot(int seq);
  /// append_slot() and writes the token: \p k_row and \p v_row are
  /// `[num_kv_heads][head_dim]` floats, rounded to the storage type.
  AppendResult append_token(int seq, std::span<const float> k_row, std::span<const float> v_row);
  /// A new sequence that shares every page of \p seq (each distinct page gains one reference,
  /// even if the table lists it twice) and has its length; returns the new id.
  int fork(int seq);
  /// Drops \p seq's reference on each distinct page it holds and forgets the sequence.
  void free_sequence(int seq);

  /// Where token \p position (in [0, context_len)) of \p seq lives: page * block_size + offset.
  std::int64_t slot_mapping(int seq, std::int64_t position) const;
  /// The write path of vLLM's `reshape_and_cache`: row i of \p k_rows and \p v_rows (each
  /// `[slots.size()][num_kv_heads][head_dim]` floats) goes to slot `slots[i]`. A slot of -1 is
  /// padding and is skipped. Every slot is checked before anything is written: it must lie in
  /// [0, num_blocks * block_size), in a page some sequence holds, and appear once in the call.
  void write_slots(std::span<const std::int64_t> slots, std::span<const float> k_rows,
                   std::span<const float> v_rows);
  /// \p seq's K and V read through its block table into contiguous tensors.
  GatheredSequence gather(int seq) const;

  /// \p seq's block table: page ids in token order.
  const std::vector<PageId>& block_table(int seq) const;
  /// \p seq's length in tokens.
  std::int64_t context_len(int seq) const;
  /// Ids of the live sequences, ascending.
  std::vector<int> sequences() const;

  /// Allocator invariants, then: every table has pages_for(context_len) entries, each a used
  /// page, and each page's reference count equals the number of sequences listing it. Throws
  /// AllocatorError naming the sequence and the page.
  void check_invariants() const;
  /// Empty when no sequence is live and every page is free; otherwise names the live sequences
  /// and the pages still held.
  std::string leak_report() const;
  /// Paged bytes against a contiguous cache reserving \p reserved_len tokens per sequence
  /// (0: the longest live sequence, the contiguous cache's best case).
  MemoryReport memory_report(std::int64_t reserved_len = 0) const;

  /// The configuration, with the layout filled in.
  const CacheConfig& config() const { return config_; }
  /// The allocator (read only).
  const BlockAllocator& allocator() const { return allocator_; }
  /// The allocator, writable: for tests and demos that break the bookkeeping on purpose to
  /// show check_invariants() catching it.
  BlockAllocator& mutable_allocator() { return allocator_; }
  /// The K pool, `config().layout` over num_blocks pages, in the storage type.
  const std::vector<std::byte>& key_pool() const { return key_pool_; }
  /// The V pool, same layout as the K pool.
  const std::vector<std::byte>& value_pool() const { return value_pool_; }
  /// Elements of one token row: num_kv_heads * head_dim.
  std::int64_t row_elems() const { return std::int64_t{config_.num_kv_heads} * config_.head_dim; }

 private:
  struct Sequence {
    std::vector<PageId> block_table;  // page of token t: block_table[t / block_size]
    std::int64_t context_len = 0;
  };
  Sequence& live(int seq, const char* function);
  const Sequence& live(int seq, const char* function) const;
  void check_rows(std::span<const float> rows, std::int64_t num_rows, const char* function,
                  const char* argument) const;
  void write_row(std::int64_t slot, const float* k_row, const float* v_row);
  void copy_page(PageId from, PageId to);
  AppendResult grow(Sequence& sequence);

  CacheConfig config_;
  std::int64_t page_span_ = 0;         // elements from a page's first to its last element + 1
  BlockAllocator allocator_;
  std::vector<std::byte> key_pool_;    // cache_elems elements of config_.dtype
  std::vector<std::byte> value_pool_;  // same
  std::map<int, Sequence> sequences_;  // live sequences by id
  int next_id_ = 0;
};

}  // namespace pa
