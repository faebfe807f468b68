#include "common/paged_cache.h"

#include <algorithm>
#include <cstring>
#include <iomanip>
#include <limits>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "common/error.h"

namespace pa {
namespace {

constexpr std::uint64_t golden_gamma = 0x9e3779b97f4a7c15ull;  // splitmix64's increment
constexpr std::int64_t max_pool_pages = std::int64_t{INT32_MAX} + 1;  // int32 table entries

/// Throws AllocatorError in throw_argument's format: "function: argument: expected E, got A".
[[noreturn]] void throw_allocator(std::string_view function, std::string_view argument,
                                  std::string_view expected, std::string_view actual) {
  throw AllocatorError(cat(function, ": ", argument, ": expected ", expected, ", got ", actual));
}

/// A uniform draw in [0, bound) from a splitmix64 stream, without modulo bias (rejection).
std::uint64_t draw_below(std::uint64_t& state, std::uint64_t bound) {
  const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() -
                              std::numeric_limits<std::uint64_t>::max() % bound;
  for (;;) {
    state += golden_gamma;
    const std::uint64_t value = mix64(state);
    if (value < limit) return value % bound;
  }
}

/// "0, 2, 3" for at most \p limit values, then ", ... (N in all)".
template <class Range>
std::string list_some(const Range& values, std::size_t limit = 10) {
  std::string text;
  std::size_t shown = 0;
  for (const auto& value : values) {
    if (shown == limit) {
      text += cat(", ... (", values.size(), " in all)");
      break;
    }
    text += cat(shown == 0 ? "" : ", ", value);
    ++shown;
  }
  return text.empty() ? "none" : text;
}

/// The distinct pages of a table, ascending (a table may list a page twice).
std::vector<PageId> distinct_pages(const std::vector<PageId>& table) {
  std::vector<PageId> pages = table;
  std::sort(pages.begin(), pages.end());
  pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
  return pages;
}

}  // namespace

void seeded_shuffle(std::span<PageId> values, std::uint64_t seed) {
  std::uint64_t state = mix64(seed ^ 0x5eed5eed5eed5eedull);
  for (std::size_t i = values.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(draw_below(state, i));
    std::swap(values[i - 1], values[j]);
  }
}

// -------------------------------------------------------------------------------------------
// BlockAllocator
// -------------------------------------------------------------------------------------------

BlockAllocator::BlockAllocator(std::int64_t num_blocks, PageOrder order, std::uint64_t seed) {
  PA_REQUIRE(num_blocks >= 0 && num_blocks <= max_pool_pages, "BlockAllocator", "num_blocks",
             "in [0, 2^31] (block-table entries are int32)", num_blocks);
  std::vector<PageId> hand_out(static_cast<std::size_t>(num_blocks));
  for (std::size_t i = 0; i < hand_out.size(); ++i) {
    hand_out[i] = static_cast<PageId>(order == PageOrder::top_first ? num_blocks - 1 - static_cast<std::int64_t>(i)
                                                                     : static_cast<std::int64_t>(i));
  }
  if (order == PageOrder::shuffled) seeded_shuffle(hand_out, seed);
  ref_counts_.assign(hand_out.size(), 0);
  // back() is handed out first, so the free list holds the order reversed.
  free_list_.assign(hand_out.rbegin(), hand_out.rend());
}

BlockAllocator::BlockAllocator(std::span<const PageId> hand_out_order) {
  const std::int64_t num_blocks = static_cast<std::int64_t>(hand_out_order.size());
  PA_REQUIRE(num_blocks <= max_pool_pages, "BlockAllocator", "hand_out_order.size()",
             "<= 2^31 (block-table entries are int32)", num_blocks);
  std::vector<std::int64_t> seen_at(hand_out_order.size(), -1);
  for (std::size_t i = 0; i < hand_out_order.size(); ++i) {
    const PageId page = hand_out_order[i];
    PA_REQUIRE(page >= 0 && page < num_blocks, "BlockAllocator", cat("hand_out_order[", i, "]"),
               cat("a page in [0, ", num_blocks, ")"), page);
    PA_REQUIRE(seen_at[static_cast<std::size_t>(page)] < 0, "BlockAllocator",
               cat("hand_out_order[", i, "]"), "a page not listed before",
               cat(page, " (also at hand_out_order[", seen_at[static_cast<std::size_t>(page)], "])"));
    seen_at[static_cast<std::size_t>(page)] = static_cast<std::int64_t>(i);
  }
  ref_counts_.assign(hand_out_order.size(), 0);
  free_list_.assign(hand_out_order.rbegin(), hand_out_order.rend());
}

void BlockAllocator::check_page(PageId page, const char* function) const {
  if (page < 0 || page >= num_blocks())
    throw_allocator(function, "page", cat("a page id in [0, ", num_blocks(), ")"), cat(page));
}

std::vector<PageId> BlockAllocator::allocate(std::int64_t count) {
  PA_REQUIRE(count >= 0, "BlockAllocator::allocate", "count", ">= 0", count);
  // Check before taking anything: a refused request must leave the pool as it was.
  if (count > num_blocks())
    throw AllocatorError(cat("BlockAllocator::allocate: asked for ", count, " pages, more than the pool's ",
                             num_blocks(), " (no amount of freeing makes room)"));
  if (count > num_free())
    throw AllocatorError(cat("BlockAllocator::allocate: asked for ", count, count == 1 ? " page, " : " pages, ",
                             num_free(), " free"));
  std::vector<PageId> pages(static_cast<std::size_t>(count));
  for (PageId& page : pages) {
    page = free_list_.back();
    free_list_.pop_back();
    ref_counts_[static_cast<std::size_t>(page)] = 1;
  }
  return pages;
}

PageId BlockAllocator::allocate_one() { return allocate(1).front(); }

void BlockAllocator::take(PageId page) {
  check_page(page, "BlockAllocator::take");
  if (ref_counts_[static_cast<std::size_t>(page)] != 0)
    throw AllocatorError(cat("BlockAllocator::take: page ", page, " is not free (ref count ",
                             ref_counts_[static_cast<std::size_t>(page)], ")"));
  // Linear, but order-preserving: the other free pages still come out as before.
  free_list_.erase(std::find(free_list_.begin(), free_list_.end(), page));
  ref_counts_[static_cast<std::size_t>(page)] = 1;
}

void BlockAllocator::free(PageId page) {
  check_page(page, "BlockAllocator::free");
  std::int32_t& count = ref_counts_[static_cast<std::size_t>(page)];
  if (count == 0) throw AllocatorError(cat("BlockAllocator::free: double free of page ", page));
  if (--count == 0) free_list_.push_back(page);
}

void BlockAllocator::free(std::span<const PageId> pages) {
  const char* function = "BlockAllocator::free";
  // Check every entry before freeing any: a refused call must not free half a list.
  std::unordered_map<PageId, std::size_t> first_index;
  first_index.reserve(pages.size());
  for (std::size_t i = 0; i < pages.size(); ++i) {
    const PageId page = pages[i];
    if (page < 0 || page >= num_blocks())
      throw_allocator(function, cat("pages[", i, "]"), cat("a page id in [0, ", num_blocks(), ")"), cat(page));
    const auto [seen, inserted] = first_index.emplace(page, i);
    if (!inserted)
      throw AllocatorError(cat(function, ": page ", page, " listed twice, at pages[", seen->second, "] and pages[", i,
                               "]; nothing freed"));
    if (ref_counts_[static_cast<std::size_t>(page)] == 0)
      throw AllocatorError(cat(function, ": pages[", i, "]: double free of page ", page, "; nothing freed"));
  }
  for (PageId page : pages) free(page);
}

void BlockAllocator::share(PageId page) {
  check_page(page, "BlockAllocator::share");
  std::int32_t& count = ref_counts_[static_cast<std::size_t>(page)];
  if (count == 0)
    throw AllocatorError(cat("BlockAllocator::share: page ", page,
                             " is free (only a used page can gain a holder)"));
  if (count == INT32_MAX)
    throw AllocatorError(cat("BlockAllocator::share: page ", page, " already has 2^31-1 holders"));
  ++count;
}

std::int32_t BlockAllocator::ref_count(PageId page) const {
  check_page(page, "BlockAllocator::ref_count");
  return ref_counts_[static_cast<std::size_t>(page)];
}

void BlockAllocator::check_invariants() const {
  const char* function = "BlockAllocator::check_invariants";
  std::vector<char> on_free_list(ref_counts_.size(), 0);
  for (std::size_t i = 0; i < free_list_.size(); ++i) {
    const PageId page = free_list_[i];
    if (page < 0 || page >= num_blocks())
      throw AllocatorError(cat(function, ": free list entry ", i, " is page ", page,
                               ", outside [0, ", num_blocks(), ")"));
    if (on_free_list[static_cast<std::size_t>(page)])
      throw AllocatorError(cat(function, ": page ", page, " is on the free list twice"));
    on_free_list[static_cast<std::size_t>(page)] = 1;
    const std::int32_t count = ref_counts_[static_cast<std::size_t>(page)];
    if (count != 0)
      throw AllocatorError(cat(function, ": page ", page, " is on the free list with ref count ",
                               count, " (expected 0)"));
  }
  for (std::size_t page = 0; page < ref_counts_.size(); ++page) {
    const std::int32_t count = ref_counts_[page];
    if (count < 0) throw AllocatorError(cat(function, ": page ", page, " has ref count ", count));
    if (count == 0 && !on_free_list[page])
      throw AllocatorError(cat(function, ": page ", page,
                               " has ref count 0 but is not on the free list (lost)"));
  }
}

std::string BlockAllocator::leak_report() const {
  const std::int64_t held = num_used();
  if (held == 0) return {};
  std::string report = cat(held, held == 1 ? " page" : " pages", " still held: ");
  std::int64_t named = 0;
  for (std::size_t page = 0; page < ref_counts_.size() && named < 16; ++page) {
    if (ref_counts_[page] == 0) continue;
    report += cat(named == 0 ? "" : ", ", page, " (refs ", ref_counts_[page], ")");
    ++named;
  }
  if (named < held) report += cat(", ... and ", held - named, " more");
  return report;
}

// -------------------------------------------------------------------------------------------
// PagedKVCache
// -------------------------------------------------------------------------------------------
namespace {

/// Checks \p config and fills in the default layout; throws ArgumentError naming the field.
CacheConfig checked(CacheConfig config) {
  const char* function = "PagedKVCache";
  PA_REQUIRE(config.num_kv_heads > 0, function, "config.num_kv_heads", "> 0", config.num_kv_heads);
  PA_REQUIRE(config.block_size > 0, function, "config.block_size", "> 0", config.block_size);
  PA_REQUIRE(config.head_dim > 0, function, "config.head_dim", "> 0", config.head_dim);
  PA_REQUIRE(config.num_blocks >= 0 && config.num_blocks <= max_pool_pages, function,
             "config.num_blocks", "in [0, 2^31] (block-table entries are int32)", config.num_blocks);
  PA_REQUIRE(config.max_blocks_per_seq >= 0, function, "config.max_blocks_per_seq",
             ">= 0 (0: no row limit but the pool)", config.max_blocks_per_seq);
  if (config.layout == CacheLayout{0, 0, 0, 1})
    config.layout = CacheLayout::hnd(config.num_kv_heads, config.block_size, config.head_dim);
  // One problem-level check covers every stride rule (a page must not overlap the next).
  // An e4m3 pool is a problem's fp8 K/V (its q and out type does not matter here: bf16).
  const bool fp8 = config.dtype == DType::e4m3;
  DecodeProblem shape = make_problem(0, config.num_kv_heads, config.num_kv_heads, config.head_dim,
                                     config.block_size, 0, 0, config.num_blocks, fp8 ? DType::bf16 : config.dtype);
  shape.layout = config.layout;
  shape.fp8_kv = fp8;
  shape.k_scale = config.k_scale;
  shape.v_scale = config.v_scale;
  validate(shape, "PagedKVCache (config)");
  return config;
}

}  // namespace

PagedKVCache::PagedKVCache(const CacheConfig& config)
    : config_(checked(config)),
      page_span_(config_.layout.offset(0, config_.num_kv_heads - 1, config_.block_size - 1,
                                       config_.head_dim - 1) + 1),
      allocator_(config_.num_blocks, config_.page_order, config_.seed) {
  DecodeProblem shape = make_problem(0, config_.num_kv_heads, config_.num_kv_heads, config_.head_dim,
                                     config_.block_size, 0, 0, config_.num_blocks,
                                     config_.dtype == DType::e4m3 ? DType::bf16 : config_.dtype);
  shape.layout = config_.layout;
  const std::size_t elems = static_cast<std::size_t>(shape.cache_elems());
  const std::size_t bytes = elems * dtype_size(config_.dtype);
  key_pool_.resize(bytes);
  value_pool_.resize(bytes);
  // NaN everywhere: a read of a slot no one wrote turns the result into NaN instead of
  // silently reading zeros (docs/design/CORRECTNESS.md, harness rule 1).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t i = 0; i < elems; ++i) {
    store_from_float(key_pool_.data(), config_.dtype, i, nan);
    store_from_float(value_pool_.data(), config_.dtype, i, nan);
  }
}

PagedKVCache::Sequence& PagedKVCache::live(int seq, const char* function) {
  return const_cast<Sequence&>(std::as_const(*this).live(seq, function));
}

const PagedKVCache::Sequence& PagedKVCache::live(int seq, const char* function) const {
  const auto found = sequences_.find(seq);
  if (found == sequences_.end())
    throw_argument(function, "seq", cat("a live sequence id (live: ", list_some(sequences()), ")"),
                   cat(seq));
  return found->second;
}

void PagedKVCache::check_rows(std::span<const float> rows, std::int64_t num_rows,
                              const char* function, const char* argument) const {
  const std::int64_t expected = num_rows * row_elems();
  PA_REQUIRE(static_cast<std::int64_t>(rows.size()) == expected, function,
             cat(argument, ".size()"),
             cat(expected, " (", num_rows, " x num_kv_heads ", config_.num_kv_heads, " x head_dim ",
                 config_.head_dim, ")"),
             rows.size());
}

std::int64_t PagedKVCache::check_admission(std::int64_t context_len) const {
  const char* function = "PagedKVCache::check_admission";
  PA_REQUIRE(context_len >= 0, function, "context_len", ">= 0", context_len);
  const std::int64_t needed = pages_for(context_len, config_.block_size);
  const auto refuse = [&](const std::string& limit) {
    throw AllocatorError(cat(function, ": a request of ", context_len, " tokens needs ", needed, " pages of ",
                             config_.block_size, " tokens, more than ", limit, "; refused before taking any"));
  };
  if (needed > config_.num_blocks) refuse(cat("the whole pool holds (num_blocks = ", config_.num_blocks, ")"));
  if (config_.max_blocks_per_seq > 0 && needed > config_.max_blocks_per_seq)
    refuse(cat("a block-table row holds (max_blocks_per_seq = ", config_.max_blocks_per_seq, ", ",
               std::int64_t{config_.max_blocks_per_seq} * config_.block_size, " tokens)"));
  return needed;
}

int PagedKVCache::add_sequence() {
  const int id = next_id_++;
  sequences_.emplace(id, Sequence{});
  return id;
}

int PagedKVCache::add_sequence(std::span<const PageId> block_table, std::int64_t context_len) {
  const char* function = "PagedKVCache::add_sequence";
  PA_REQUIRE(context_len >= 0, function, "context_len", ">= 0", context_len);
  const std::int64_t needed = pages_for(context_len, config_.block_size);
  PA_REQUIRE(static_cast<std::int64_t>(block_table.size()) == needed, function, "block_table.size()",
             cat("pages_for(context_len = ", context_len, ") = ", needed), block_table.size());
  PA_REQUIRE(config_.max_blocks_per_seq == 0 || needed <= config_.max_blocks_per_seq, function, "block_table.size()",
             cat("at most max_blocks_per_seq = ", config_.max_blocks_per_seq, " (what a block-table row holds)"),
             needed);
  for (std::size_t i = 0; i < block_table.size(); ++i)
    PA_REQUIRE(block_table[i] >= 0 && block_table[i] < config_.num_blocks, function,
               cat("block_table[", i, "]"), cat("a page in [0, ", config_.num_blocks, ")"),
               block_table[i]);
  Sequence sequence{std::vector<PageId>(block_table.begin(), block_table.end()), context_len};
  const std::vector<PageId> pages = distinct_pages(sequence.block_table);
  // Validation is done, so nothing below can fail: a free page is taken, a used one shared.
  for (PageId page : pages) {
    if (allocator_.ref_count(page) == 0)
      allocator_.take(page);
    else
      allocator_.share(page);
  }
  const int id = next_id_++;
  sequences_.emplace(id, std::move(sequence));
  return id;
}

void PagedKVCache::copy_page(PageId from, PageId to) {
  const std::size_t elem = dtype_size(config_.dtype);
  const std::size_t bytes = static_cast<std::size_t>(page_span_) * elem;
  const std::size_t source = static_cast<std::size_t>(config_.layout.offset(from, 0, 0, 0)) * elem;
  const std::size_t target = static_cast<std::size_t>(config_.layout.offset(to, 0, 0, 0)) * elem;
  std::memcpy(key_pool_.data() + target, key_pool_.data() + source, bytes);
  std::memcpy(value_pool_.data() + target, value_pool_.data() + source, bytes);
}

AppendResult PagedKVCache::append_slot(int seq) {
  Sequence& sequence = live(seq, "PagedKVCache::append_slot");
  try {
    return grow(sequence);
  } catch (const AllocatorError& error) {
    throw AllocatorError(cat("PagedKVCache::append_slot: sequence ", seq, " (", sequence.context_len,
                             " tokens) needs a page: ", error.what()));
  }
}

AppendResult PagedKVCache::grow(Sequence& sequence) {
  AppendResult result;
  result.position = sequence.context_len;
  const std::int64_t offset = sequence.context_len % config_.block_size;
  if (offset == 0) {
    // The last page is full (or there is none): the token starts a new page, if the row has room.
    const auto pages = static_cast<std::int64_t>(sequence.block_table.size());
    if (config_.max_blocks_per_seq > 0 && pages == config_.max_blocks_per_seq)
      throw AllocatorError(cat("its block-table row is full (max_blocks_per_seq = ", config_.max_blocks_per_seq,
                               " pages, ", pages * config_.block_size, " tokens)"));
    result.page = allocator_.allocate_one();
    result.new_page = true;
    sequence.block_table.push_back(result.page);
  } else {
    const PageId last = sequence.block_table.back();
    if (allocator_.ref_count(last) > 1) {
      // Copy-on-write: another sequence still reads this page, so writing in place would
      // change its tokens. Copy first (allocation may throw: nothing has changed yet), then
      // let go of the shared page.
      const PageId copy = allocator_.allocate_one();
      copy_page(last, copy);
      allocator_.free(last);
      sequence.block_table.back() = copy;
      result.copied_from = last;
      result.page = copy;
    } else {
      result.page = last;
    }
  }
  result.slot = std::int64_t{result.page} * config_.block_size + offset;
  ++sequence.context_len;
  return result;
}

void PagedKVCache::write_row(std::int64_t slot, const float* k_row, const float* v_row) {
  const std::int64_t page = slot / config_.block_size;
  const std::int64_t offset = slot % config_.block_size;
  for (int head = 0; head < config_.num_kv_heads; ++head) {
    const std::int64_t base = config_.layout.offset(page, head, offset, 0);
    const std::int64_t row = std::int64_t{head} * config_.head_dim;
    for (int channel = 0; channel < config_.head_dim; ++channel) {
      const std::size_t at = static_cast<std::size_t>(base + channel * config_.layout.dim_stride);
      // The write path: rounded to the storage type; e4m3 divided by its pool's scale first
      // (float_to_e4m3 saturates at +-448). The scales are 1 for the other types.
      store_from_float(key_pool_.data(), config_.dtype, at, k_row[row + channel] / config_.k_scale);
      store_from_float(value_pool_.data(), config_.dtype, at, v_row[row + channel] / config_.v_scale);
    }
  }
}

AppendResult PagedKVCache::append_token(int seq, std::span<const float> k_row,
                                        std::span<const float> v_row) {
  live(seq, "PagedKVCache::append_token");
  check_rows(k_row, 1, "PagedKVCache::append_token", "k_row");
  check_rows(v_row, 1, "PagedKVCache::append_token", "v_row");
  const AppendResult result = append_slot(seq);
  write_row(result.slot, k_row.data(), v_row.data());
  return result;
}

int PagedKVCache::fork(int seq) {
  const Sequence& parent = live(seq, "PagedKVCache::fork");
  const std::vector<PageId> pages = distinct_pages(parent.block_table);
  // Check every page before sharing any, so a broken table leaves the counts as they were.
  for (PageId page : pages)
    if (allocator_.ref_count(page) == 0)
      throw AllocatorError(cat("PagedKVCache::fork: sequence ", seq, " lists page ", page, ", which is free"));
  // One reference per distinct page: a table that lists a page twice is still one holder.
  for (PageId page : pages) allocator_.share(page);
  const int id = next_id_++;
  sequences_.emplace(id, parent);
  return id;
}

void PagedKVCache::free_sequence(int seq) {
  const Sequence& sequence = live(seq, "PagedKVCache::free_sequence");
  // The sequence holds one reference per distinct page (a table may list a page twice); the
  // list free checks them all before freeing any, so a refused call frees no half table.
  try {
    allocator_.free(distinct_pages(sequence.block_table));
  } catch (const AllocatorError& error) {
    throw AllocatorError(cat("PagedKVCache::free_sequence: sequence ", seq, ": ", error.what()));
  }
  sequences_.erase(seq);
}

std::int64_t PagedKVCache::slot_mapping(int seq, std::int64_t position) const {
  const char* function = "PagedKVCache::slot_mapping";
  const Sequence& sequence = live(seq, function);
  PA_REQUIRE(position >= 0 && position < sequence.context_len, function, "position",
             cat("in [0, context_len = ", sequence.context_len, ")"), position);
  const PageId page = sequence.block_table[static_cast<std::size_t>(position / config_.block_size)];
  return std::int64_t{page} * config_.block_size + position % config_.block_size;
}

void PagedKVCache::write_slots(std::span<const std::int64_t> slots, std::span<const float> k_rows,
                               std::span<const float> v_rows) {
  const char* function = "PagedKVCache::write_slots";
  const std::int64_t num_rows = static_cast<std::int64_t>(slots.size());
  check_rows(k_rows, num_rows, function, "k_rows");
  check_rows(v_rows, num_rows, function, "v_rows");
  const std::int64_t num_slots = config_.num_blocks * config_.block_size;
  // Validate everything before the first write, so a bad call changes nothing.
  std::unordered_map<std::int64_t, std::size_t> first_index;
  first_index.reserve(slots.size());
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const std::int64_t slot = slots[i];
    if (slot == -1) continue;  // padding: a batch row with no token to store
    PA_REQUIRE(slot >= 0 && slot < num_slots, function, cat("slot_mapping[", i, "]"),
               cat("a slot in [0, num_blocks * block_size = ", num_slots, ") or -1 (padding)"), slot);
    const PageId page = static_cast<PageId>(slot / config_.block_size);
    PA_REQUIRE(allocator_.ref_count(page) > 0, function, cat("slot_mapping[", i, "]"),
               "a slot in a page some sequence holds",
               cat(slot, " (page ", page, " is free: the write would be lost)"));
    const auto [seen, inserted] = first_index.emplace(slot, i);
    PA_REQUIRE(inserted, function, cat("slot_mapping[", i, "]"),
               "each slot once per call (two rows racing for one slot)",
               cat(slot, ", also at slot_mapping[", seen->second, "]"));
  }
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] == -1) continue;
    const std::size_t row = i * static_cast<std::size_t>(row_elems());
    write_row(slots[i], k_rows.data() + row, v_rows.data() + row);
  }
}

GatheredSequence PagedKVCache::gather(int seq) const {
  const Sequence& sequence = live(seq, "PagedKVCache::gather");
  GatheredSequence out;
  out.num_kv_heads = config_.num_kv_heads;
  out.context_len = sequence.context_len;
  out.head_dim = config_.head_dim;
  const std::size_t elems = static_cast<std::size_t>(row_elems() * sequence.context_len);
  out.keys.resize(elems);    // [num_kv_heads][context_len][head_dim]
  out.values.resize(elems);  // [num_kv_heads][context_len][head_dim]
  for (int head = 0; head < config_.num_kv_heads; ++head) {
    for (std::int64_t token = 0; token < sequence.context_len; ++token) {
      const PageId page = sequence.block_table[static_cast<std::size_t>(token / config_.block_size)];
      const std::int64_t base = config_.layout.offset(page, head, token % config_.block_size, 0);
      const std::size_t row = static_cast<std::size_t>((std::int64_t{head} * sequence.context_len + token) *
                                                       config_.head_dim);
      for (int channel = 0; channel < config_.head_dim; ++channel) {
        const std::size_t at = static_cast<std::size_t>(base + channel * config_.layout.dim_stride);
        out.keys[row + static_cast<std::size_t>(channel)] = load_as_float(key_pool_.data(), config_.dtype, at) * config_.k_scale;
        out.values[row + static_cast<std::size_t>(channel)] = load_as_float(value_pool_.data(), config_.dtype, at) * config_.v_scale;
      }
    }
  }
  return out;
}

const std::vector<PageId>& PagedKVCache::block_table(int seq) const {
  return live(seq, "PagedKVCache::block_table").block_table;
}

std::int64_t PagedKVCache::context_len(int seq) const {
  return live(seq, "PagedKVCache::context_len").context_len;
}

std::vector<int> PagedKVCache::sequences() const {
  std::vector<int> ids;
  ids.reserve(sequences_.size());
  for (const auto& [id, sequence] : sequences_) ids.push_back(id);
  return ids;
}

void PagedKVCache::check_invariants() const {
  const char* function = "PagedKVCache::check_invariants";
  allocator_.check_invariants();
  std::vector<std::int32_t> holders(static_cast<std::size_t>(config_.num_blocks), 0);
  for (const auto& [id, sequence] : sequences_) {
    const std::int64_t needed = pages_for(sequence.context_len, config_.block_size);
    if (static_cast<std::int64_t>(sequence.block_table.size()) != needed)
      throw AllocatorError(cat(function, ": sequence ", id, " has ", sequence.block_table.size(),
                               " pages for ", sequence.context_len, " tokens (expected ", needed, ")"));
    for (std::size_t i = 0; i < sequence.block_table.size(); ++i) {
      const PageId page = sequence.block_table[i];
      if (page < 0 || page >= config_.num_blocks)
        throw AllocatorError(cat(function, ": sequence ", id, " block_table[", i, "] = ", page,
                                 ", outside [0, ", config_.num_blocks, ")"));
      if (allocator_.ref_count(page) == 0)
        throw AllocatorError(cat(function, ": sequence ", id, " block_table[", i, "] = page ", page,
                                 ", which is free"));
    }
    for (PageId page : distinct_pages(sequence.block_table)) ++holders[static_cast<std::size_t>(page)];
  }
  for (std::size_t page = 0; page < holders.size(); ++page) {
    const std::int32_t count = allocator_.ref_count(static_cast<PageId>(page));
    if (count != holders[page])
      throw AllocatorError(cat(function, ": page ", page, " has ref count ", count, " but ",
                               holders[page], holders[page] == 1 ? " sequence lists" : " sequences list",
                               " it"));
  }
}

std::string PagedKVCache::leak_report() const {
  std::string report;
  if (!sequences_.empty())
    report = cat(sequences_.size(), sequences_.size() == 1 ? " sequence" : " sequences",
                 " still live (ids ", list_some(sequences()), ")");
  const std::string pages = allocator_.leak_report();
  if (!pages.empty()) report += cat(report.empty() ? "" : "; ", pages);
  return report;
}

double MemoryReport::paged_waste_percent() const {
  return paged_bytes == 0 ? 0.0 : 100.0 * static_cast<double>(paged_wasted_bytes) / static_cast<double>(paged_bytes);
}

double MemoryReport::contiguous_waste_percent() const {
  return contiguous_bytes == 0
             ? 0.0
             : 100.0 * static_cast<double>(contiguous_wasted_bytes) / static_cast<double>(contiguous_bytes);
}

MemoryReport PagedKVCache::memory_report(std::int64_t reserved_len) const {
  MemoryReport report;
  std::int64_t longest = 0;
  // Filled slots of a page: the most any holder has written into it (holders share a prefix).
  std::unordered_map<PageId, std::int64_t> filled;
  for (const auto& [id, sequence] : sequences_) {
    longest = std::max(longest, sequence.context_len);
    report.tokens += sequence.context_len;
    report.table_entries += static_cast<std::int64_t>(sequence.block_table.size());
    for (std::size_t i = 0; i < sequence.block_table.size(); ++i) {
      const std::int64_t in_page =
          std::min<std::int64_t>(config_.block_size, sequence.context_len - static_cast<std::int64_t>(i) * config_.block_size);
      std::int64_t& slots = filled[sequence.block_table[i]];
      slots = std::max(slots, in_page);
    }
  }
  PA_REQUIRE(reserved_len == 0 || reserved_len >= longest, "PagedKVCache::memory_report",
             "reserved_len", cat("0 or >= the longest live sequence (", longest, " tokens)"), reserved_len);
  report.num_sequences = static_cast<std::int64_t>(sequences_.size());
  report.bytes_per_token = 2 * row_elems() * static_cast<std::int64_t>(dtype_size(config_.dtype));
  report.block_size = config_.block_size;
  report.page_bytes = report.bytes_per_token * config_.block_size;
  report.pool_pages = config_.num_blocks;
  report.pages_held = allocator_.num_used();
  for (const auto& [page, slots] : filled) report.filled_slots += slots;
  report.reserved_len = reserved_len == 0 ? longest : reserved_len;
  report.paged_bytes = report.pages_held * report.page_bytes;
  report.paged_wasted_bytes =
      (report.pages_held * config_.block_size - report.filled_slots) * report.bytes_per_token;
  report.contiguous_bytes = report.num_sequences * report.reserved_len * report.bytes_per_token;
  report.contiguous_wasted_bytes = report.contiguous_bytes - report.tokens * report.bytes_per_token;
  return report;
}

std::string MemoryReport::table() const {
  std::ostringstream text;
  const auto row = [&text](const std::string& name, const std::string& held, const std::string& wasted,
                           const std::string& percent) {
    text << std::left << std::setw(36) << name << std::right << std::setw(14) << held << std::setw(14)
         << wasted << std::setw(10) << percent << '\n';
  };
  const auto percent = [](double value) {
    std::ostringstream out;
    out << std::fixed << std::setprecision(1) << value << '%';
    return out.str();
  };
  row("cache", "bytes held", "bytes wasted", "% wasted");
  row(cat("paged (", pages_held, " pages of ", block_size, " tokens)"), cat(paged_bytes),
      cat(paged_wasted_bytes), percent(paged_waste_percent()));
  row(cat("contiguous (", num_sequences, " x ", reserved_len, " tokens)"), cat(contiguous_bytes),
      cat(contiguous_wasted_bytes), percent(contiguous_waste_percent()));
  text << tokens << " tokens in " << num_sequences << " sequences, " << bytes_per_token
       << " bytes per token (K and V); pool " << pool_pages << " pages, " << pages_saved_by_sharing()
       << " saved by prefix sharing\n";
  return text.str();
}

std::string MemoryReport::json() const {
  std::ostringstream out;
  out << "{\"num_sequences\": " << num_sequences << ", \"tokens\": " << tokens
      << ", \"bytes_per_token\": " << bytes_per_token << ", \"block_size\": " << block_size
      << ", \"page_bytes\": " << page_bytes << ", \"pool_pages\": " << pool_pages
      << ", \"pages_held\": " << pages_held << ", \"table_entries\": " << table_entries
      << ", \"pages_saved_by_sharing\": " << pages_saved_by_sharing()
      << ", \"filled_slots\": " << filled_slots << ", \"reserved_len\": " << reserved_len
      << ", \"paged_bytes\": " << paged_bytes << ", \"paged_wasted_bytes\": " << paged_wasted_bytes
      << ", \"contiguous_bytes\": " << contiguous_bytes
      << ", \"contiguous_wasted_bytes\": " << contiguous_wasted_bytes << std::fixed << std::setprecision(4)
      << ", \"paged_waste_percent\": " << paged_waste_percent()
      << ", \"contiguous_waste_percent\": " << contiguous_waste_percent() << "}";
  return out.str();
}

}  // namespace pa
