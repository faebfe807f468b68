// The paged KV cache of step 01 (steps/01_paged_cache): allocator invariants and errors, block tables, slot mapping,
// the write path, gather, fork and copy-on-write (docs/design/CORRECTNESS.md, "allocator" and "errors").
#include "tests/catch_compat.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/paged_cache.h"

namespace {

using pa::AllocatorError;
using pa::ArgumentError;
using pa::BlockAllocator;
using pa::cat;
using pa::CacheConfig;
using pa::PagedKVCache;
using pa::PageId;

/// A token row of small integers in [-8, 8], exact in f32, f16 and bf16, different for every
/// (tag, position, head, channel) so a misplaced row shows.
std::vector<float> small_int_row(const PagedKVCache& cache, int tag, std::int64_t position) {
  std::vector<float> row(static_cast<std::size_t>(cache.row_elems()));  // [num_kv_heads][head_dim]
  for (std::size_t i = 0; i < row.size(); ++i)
    row[i] = static_cast<float>(static_cast<std::int64_t>(tag * 31 + position * 7 + static_cast<std::int64_t>(i) * 3) % 17 - 8);
  return row;
}

/// Appends \p count tokens to \p seq; K rows use tag, V rows tag + 1000. Returns them as
/// [count][row] so a test can check gather() against what went in.
struct Appended {
  std::vector<std::vector<float>> keys, values;
};
Appended append_tokens(PagedKVCache& cache, int seq, int tag, std::int64_t count) {
  Appended appended;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t position = cache.context_len(seq);
    appended.keys.push_back(small_int_row(cache, tag, position));
    appended.values.push_back(small_int_row(cache, tag + 1000, position));
    cache.append_token(seq, appended.keys.back(), appended.values.back());
  }
  return appended;
}

/// Checks gather(seq) bit for bit against rows [token][head][dim] (gather is [head][token][dim]).
void require_gather_equals(const PagedKVCache& cache, int seq, const std::vector<std::vector<float>>& keys,
                           const std::vector<std::vector<float>>& values) {
  const pa::GatheredSequence gathered = cache.gather(seq);
  const int heads = cache.config().num_kv_heads;
  const int dim = cache.config().head_dim;
  REQUIRE(gathered.context_len == static_cast<std::int64_t>(keys.size()));
  REQUIRE(gathered.keys.size() == keys.size() * static_cast<std::size_t>(heads * dim));
  std::int64_t mismatches = 0;
  for (int head = 0; head < heads; ++head)
    for (std::size_t token = 0; token < keys.size(); ++token)
      for (int d = 0; d < dim; ++d) {
        const std::size_t at = (static_cast<std::size_t>(head) * keys.size() + token) * static_cast<std::size_t>(dim) + static_cast<std::size_t>(d);
        const std::size_t in_row = static_cast<std::size_t>(head * dim + d);
        if (pa::float_bits(gathered.keys[at]) != pa::float_bits(keys[token][in_row])) ++mismatches;
        if (pa::float_bits(gathered.values[at]) != pa::float_bits(values[token][in_row])) ++mismatches;
      }
  INFO("sequence " << seq);
  REQUIRE(mismatches == 0);
}

/// Requires every element of both pools for which \p may_change(page, slot) is false to hold the
/// bytes it held in \p keys_before and \p values_before (docs/design/CATALOGUE.md N10: a write or
/// a page copy touches its destination and nothing else; the rest of the pool is its canary).
template <class MayChange>
void require_rest_unchanged(const PagedKVCache& cache, const std::vector<std::byte>& keys_before,
                            const std::vector<std::byte>& values_before, MayChange may_change) {
  const CacheConfig& c = cache.config();
  const std::size_t elem = pa::dtype_size(c.dtype);
  std::int64_t changed = 0;
  std::string first;
  for (std::int64_t page = 0; page < c.num_blocks; ++page)
    for (int slot = 0; slot < c.block_size; ++slot) {
      if (may_change(page, slot)) continue;
      for (int head = 0; head < c.num_kv_heads; ++head)
        for (int channel = 0; channel < c.head_dim; ++channel) {
          const std::size_t at = static_cast<std::size_t>(c.layout.offset(page, head, slot, channel)) * elem;
          if (std::memcmp(keys_before.data() + at, cache.key_pool().data() + at, elem) == 0 &&
              std::memcmp(values_before.data() + at, cache.value_pool().data() + at, elem) == 0)
            continue;
          if (changed++ == 0) first = cat("page ", page, ", slot ", slot, ", head ", head, ", channel ", channel);
        }
    }
  INFO(changed << " elements changed outside the destination, the first at " << first);
  REQUIRE(changed == 0);
}

/// Frees every live sequence and requires the pool to be whole (docs/design/CORRECTNESS.md: after every test).
void free_all_and_require_whole(PagedKVCache& cache) {
  cache.check_invariants();
  for (int seq : cache.sequences()) cache.free_sequence(seq);
  cache.check_invariants();
  INFO("leak report: " << cache.leak_report());
  REQUIRE(cache.leak_report().empty());
  REQUIRE(cache.allocator().num_free() == cache.config().num_blocks);
}

CacheConfig small_config(pa::DType dtype = pa::DType::f32, bool nhd = false) {
  CacheConfig config;
  config.num_kv_heads = 2;
  config.block_size = 4;
  config.head_dim = 8;
  config.num_blocks = 16;
  config.dtype = dtype;
  if (nhd) config.layout = pa::CacheLayout::nhd(config.num_kv_heads, config.block_size, config.head_dim);
  config.page_order = pa::PageOrder::shuffled;
  config.seed = 3;
  return config;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// BlockAllocator
// ---------------------------------------------------------------------------------------------

TEST_CASE("allocator hands out pages in the chosen order", "[allocator]") {
  SECTION("ascending") {
    BlockAllocator allocator(8);
    REQUIRE(allocator.allocate(3) == std::vector<PageId>{0, 1, 2});
    allocator.free(1);
    REQUIRE(allocator.allocate_one() == 1);  // a freed page is handed out next
    for (PageId page : {0, 1, 2}) allocator.free(page);
    REQUIRE(allocator.leak_report().empty());
  }
  SECTION("top first") {
    BlockAllocator allocator(8, pa::PageOrder::top_first);
    REQUIRE(allocator.allocate(3) == std::vector<PageId>{7, 6, 5});
    for (PageId page : {5, 6, 7}) allocator.free(page);
    REQUIRE(allocator.leak_report().empty());
  }
  SECTION("shuffled: a seeded permutation, scattered, the same for the same seed") {
    BlockAllocator first(64, pa::PageOrder::shuffled, 11);
    BlockAllocator again(64, pa::PageOrder::shuffled, 11);
    BlockAllocator other(64, pa::PageOrder::shuffled, 12);
    const std::vector<PageId> pages = first.allocate(64);
    REQUIRE(again.allocate(64) == pages);
    REQUIRE(other.allocate(64) != pages);
    std::vector<PageId> identity(64);
    std::iota(identity.begin(), identity.end(), 0);
    REQUIRE(pages != identity);
    std::vector<PageId> sorted = pages;
    std::sort(sorted.begin(), sorted.end());
    REQUIRE(sorted == identity);
  }
  SECTION("an explicit order") {
    const std::vector<PageId> order = {3, 0, 2, 1};
    BlockAllocator allocator(order);
    REQUIRE(allocator.allocate(4) == order);
    for (PageId page : order) allocator.free(page);
    REQUIRE(allocator.leak_report().empty());
  }
}

TEST_CASE("allocator: asking for more pages than are free takes none", "[allocator][errors]") {
  BlockAllocator allocator(8);
  const std::vector<PageId> held = allocator.allocate(5);
  REQUIRE(allocator.num_free() == 3);
  PA_REQUIRE_THROWS_AS_WITH(allocator.allocate(5), AllocatorError, "asked for 5 pages, 3 free");
  REQUIRE(allocator.num_free() == 3);
  allocator.check_invariants();
  REQUIRE(allocator.allocate(3).size() == 3);  // the three free pages are all still there
  PA_REQUIRE_THROWS_AS_WITH(allocator.allocate_one(), AllocatorError, "asked for 1 page, 0 free");
  PA_REQUIRE_THROWS_AS_WITH(allocator.allocate(-1), ArgumentError, "count");
  for (PageId page = 0; page < 8; ++page) allocator.free(page);
  REQUIRE(allocator.leak_report().empty());
}

TEST_CASE("allocator: double free names the page", "[allocator][errors]") {
  BlockAllocator allocator(32);
  const std::vector<PageId> pages = allocator.allocate(18);  // 0..17
  allocator.free(17);
  PA_REQUIRE_THROWS_AS_WITH(allocator.free(17), AllocatorError, "double free of page 17");
  allocator.check_invariants();  // the refused free changed nothing
  REQUIRE(allocator.num_free() == 32 - 17);
  for (PageId page = 0; page < 17; ++page) allocator.free(page);
  REQUIRE(allocator.leak_report().empty());
}

TEST_CASE("allocator: a request larger than the whole pool is refused as such, taking none", "[allocator][errors]") {
  BlockAllocator allocator(64);
  PA_REQUIRE_THROWS_AS_WITH(allocator.allocate(65), AllocatorError,
                            "BlockAllocator::allocate: asked for 65 pages, more than the pool's 64 (no amount of freeing makes room)");
  REQUIRE(allocator.num_free() == 64);
  const std::vector<PageId> held = allocator.allocate(60);
  // Within the pool but not free now: the transient refusal, which freeing pages cures.
  PA_REQUIRE_THROWS_AS_WITH(allocator.allocate(64), AllocatorError, "BlockAllocator::allocate: asked for 64 pages, 4 free");
  REQUIRE(allocator.num_free() == 4);
  allocator.free(held);
  REQUIRE(allocator.allocate(64).size() == 64);
}

TEST_CASE("allocator: a list that names a page twice is refused whole, naming the page and both places",
          "[allocator][errors]") {
  BlockAllocator allocator(32);
  REQUIRE(allocator.allocate(6) == std::vector<PageId>{0, 1, 2, 3, 4, 5});
  allocator.share(3);  // two holders: dropping two references would even look possible
  const std::vector<PageId> twice = {1, 3, 4, 3};
  PA_REQUIRE_THROWS_AS_WITH(allocator.free(twice), AllocatorError,
                            "BlockAllocator::free: page 3 listed twice, at pages[1] and pages[3]; nothing freed");
  const auto counts = [&] {
    std::vector<std::int32_t> refs;
    for (PageId page = 0; page < 6; ++page) refs.push_back(allocator.ref_count(page));
    return refs;
  };
  REQUIRE(counts() == std::vector<std::int32_t>{1, 1, 1, 2, 1, 1});  // not even page 1 was freed
  REQUIRE(allocator.num_free() == 26);
  allocator.free(5);
  const std::vector<PageId> with_a_free_page = {0, 5};
  PA_REQUIRE_THROWS_AS_WITH(allocator.free(with_a_free_page), AllocatorError,
                            "BlockAllocator::free: pages[1]: double free of page 5; nothing freed");
  const std::vector<PageId> outside = {0, 32};
  PA_REQUIRE_THROWS_AS_WITH(allocator.free(outside), AllocatorError,
                            "BlockAllocator::free: pages[1]: expected a page id in [0, 32), got 32");
  REQUIRE(counts() == std::vector<std::int32_t>{1, 1, 1, 2, 1, 0});
  allocator.check_invariants();
  const std::vector<PageId> once_each = {0, 1, 2, 3, 4};
  allocator.free(once_each);  // one reference each: page 3 keeps its second holder
  REQUIRE(counts() == std::vector<std::int32_t>{0, 0, 0, 1, 0, 0});
  allocator.free(3);
  allocator.check_invariants();
  REQUIRE(allocator.leak_report().empty());
}

TEST_CASE("allocator: bad page ids name the id and the range", "[allocator][errors]") {
  BlockAllocator allocator(64);
  PA_REQUIRE_THROWS_AS_WITH(allocator.free(64), AllocatorError, "got 64");
  PA_REQUIRE_THROWS_AS_WITH(allocator.free(-1), AllocatorError, "[0, 64)");
  PA_REQUIRE_THROWS_AS_WITH(allocator.share(99), AllocatorError, "BlockAllocator::share: page: expected a page id in [0, 64), got 99");
  PA_REQUIRE_THROWS_AS_WITH(allocator.ref_count(70), AllocatorError, "got 70");
  PA_REQUIRE_THROWS_AS_WITH(allocator.take(64), AllocatorError, "[0, 64)");
  PA_REQUIRE_THROWS_AS_WITH(allocator.share(5), AllocatorError, "page 5 is free");
  const PageId page = allocator.allocate_one();
  PA_REQUIRE_THROWS_AS_WITH(allocator.take(page), AllocatorError, "page 0 is not free");
  allocator.free(page);
  PA_REQUIRE_THROWS_AS_WITH(BlockAllocator(-1), ArgumentError, "num_blocks");
  const std::vector<PageId> repeated = {0, 2, 2};
  PA_REQUIRE_THROWS_AS_WITH(BlockAllocator{repeated}, ArgumentError, "hand_out_order[2]");
  const std::vector<PageId> outside = {0, 3};
  PA_REQUIRE_THROWS_AS_WITH(BlockAllocator{outside}, ArgumentError, "hand_out_order[1]");
  REQUIRE(allocator.leak_report().empty());
}

TEST_CASE("allocator: leak report names the pages still held", "[allocator]") {
  BlockAllocator allocator(40);
  REQUIRE(allocator.leak_report().empty());
  const std::vector<PageId> pages = allocator.allocate(10);
  allocator.share(9);
  for (PageId page = 0; page < 9; ++page)
    if (page != 4) allocator.free(page);
  const std::string report = allocator.leak_report();
  INFO(report);
  CHECK(report.find("2 pages still held") != std::string::npos);
  CHECK(report.find("4 (refs 1)") != std::string::npos);
  CHECK(report.find("9 (refs 2)") != std::string::npos);
  allocator.free(4);
  allocator.free(9);
  allocator.free(9);
  REQUIRE(allocator.leak_report().empty());
}

TEST_CASE("allocator: invariants hold through random allocate, share and free", "[allocator]") {
  for (const std::uint64_t seed : {1ull, 2ull, 3ull}) {
    CAPTURE(seed);
    BlockAllocator allocator(48, pa::PageOrder::shuffled, seed);
    std::vector<std::int32_t> model(48, 0);  // expected ref counts
    std::vector<PageId> held;                // one entry per reference
    std::uint64_t state = seed;
    const auto draw = [&state](std::uint64_t bound) {
      state += 0x9e3779b97f4a7c15ull;
      return pa::mix64(state) % bound;
    };
    for (int step = 0; step < 4000; ++step) {
      CAPTURE(step);
      const std::uint64_t op = draw(3);
      if (op == 0) {
        const std::int64_t count = static_cast<std::int64_t>(draw(6));
        if (count > allocator.num_free()) {
          REQUIRE_THROWS_AS(allocator.allocate(count), AllocatorError);
        } else {
          for (PageId page : allocator.allocate(count)) {
            REQUIRE(model[static_cast<std::size_t>(page)] == 0);
            model[static_cast<std::size_t>(page)] = 1;
            held.push_back(page);
          }
        }
      } else if (op == 1 && !held.empty()) {
        const PageId page = held[draw(held.size())];
        allocator.share(page);
        ++model[static_cast<std::size_t>(page)];
        held.push_back(page);
      } else if (!held.empty()) {
        const std::size_t which = draw(held.size());
        const PageId page = held[which];
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(which));
        allocator.free(page);
        --model[static_cast<std::size_t>(page)];
      }
      allocator.check_invariants();
      std::int64_t free_pages = 0;
      for (PageId page = 0; page < 48; ++page) {
        REQUIRE(allocator.ref_count(page) == model[static_cast<std::size_t>(page)]);
        free_pages += model[static_cast<std::size_t>(page)] == 0;
      }
      REQUIRE(allocator.num_free() == free_pages);
    }
    for (PageId page : held) allocator.free(page);
    allocator.check_invariants();
    INFO(allocator.leak_report());
    REQUIRE(allocator.leak_report().empty());
  }
}

// ---------------------------------------------------------------------------------------------
// PagedKVCache
// ---------------------------------------------------------------------------------------------

TEST_CASE("cache: gather returns the appended tokens bit for bit", "[cache]") {
  for (const pa::DType dtype : {pa::DType::f32, pa::DType::f16, pa::DType::bf16}) {
    for (const bool nhd : {false, true}) {
      const std::string dtype_name(pa::dtype_name(dtype));
      CAPTURE(dtype_name, nhd);
      PagedKVCache cache(small_config(dtype, nhd));
      // Ragged lengths around the page size (4): 0, 1, page-1, page, page+1, several pages.
      const std::vector<std::int64_t> lengths = {0, 1, 3, 4, 5, 13};
      std::vector<int> seqs;
      std::vector<Appended> appended;
      for (std::size_t i = 0; i < lengths.size(); ++i) {
        seqs.push_back(cache.add_sequence());
        appended.emplace_back();
      }
      // Interleave the appends, as decode steps do, so pages of different sequences mix.
      for (std::int64_t position = 0; position < 13; ++position)
        for (std::size_t i = 0; i < lengths.size(); ++i)
          if (position < lengths[i]) {
            Appended one = append_tokens(cache, seqs[i], static_cast<int>(i), 1);
            appended[i].keys.push_back(one.keys[0]);
            appended[i].values.push_back(one.values[0]);
          }
      cache.check_invariants();
      for (std::size_t i = 0; i < lengths.size(); ++i) {
        REQUIRE(cache.context_len(seqs[i]) == lengths[i]);
        REQUIRE(static_cast<std::int64_t>(cache.block_table(seqs[i]).size()) == pa::pages_for(lengths[i], 4));
        require_gather_equals(cache, seqs[i], appended[i].keys, appended[i].values);
      }
      free_all_and_require_whole(cache);
    }
  }
}

TEST_CASE("cache: slot mapping is page * block_size + offset", "[cache]") {
  PagedKVCache cache(small_config());
  const int seq = cache.add_sequence();
  append_tokens(cache, seq, 0, 10);
  const std::vector<PageId>& table = cache.block_table(seq);
  for (std::int64_t position = 0; position < 10; ++position)
    REQUIRE(cache.slot_mapping(seq, position) == std::int64_t{table[static_cast<std::size_t>(position / 4)]} * 4 + position % 4);
  // The table is scattered (shuffled pool), so slots are not 0..9.
  std::vector<std::int64_t> slots;
  for (std::int64_t position = 0; position < 10; ++position) slots.push_back(cache.slot_mapping(seq, position));
  std::vector<std::int64_t> identity(10);
  std::iota(identity.begin(), identity.end(), 0);
  REQUIRE(slots != identity);
  PA_REQUIRE_THROWS_AS_WITH(cache.slot_mapping(seq, 10), ArgumentError, "position");
  PA_REQUIRE_THROWS_AS_WITH(cache.slot_mapping(seq, -1), ArgumentError, "in [0, context_len = 10)");
  free_all_and_require_whole(cache);
}

TEST_CASE("cache: the write path stores rows at their slots, skipping padding", "[cache][write]") {
  PagedKVCache cache(small_config(pa::DType::bf16));
  const int a = cache.add_sequence();
  const int b = cache.add_sequence();
  // The scheduler's half: reserve one slot per sequence for this decode step.
  const std::vector<std::int64_t> slots = {cache.append_slot(a).slot, -1, cache.append_slot(b).slot};
  REQUIRE(slots[0] == cache.slot_mapping(a, 0));
  REQUIRE(slots[2] == cache.slot_mapping(b, 0));
  // The kernel's half: rows [3][num_kv_heads][head_dim]; row 1 is padding and must be skipped.
  std::vector<float> keys, values;
  for (int row = 0; row < 3; ++row) {
    const std::vector<float> k = small_int_row(cache, row, 0);
    const std::vector<float> v = small_int_row(cache, row + 1000, 0);
    keys.insert(keys.end(), k.begin(), k.end());
    values.insert(values.end(), v.begin(), v.end());
  }
  const std::vector<std::byte> keys_before = cache.key_pool(), values_before = cache.value_pool();
  cache.write_slots(slots, keys, values);
  require_rest_unchanged(cache, keys_before, values_before, [&](std::int64_t page, int slot) {
    const std::int64_t at = page * cache.config().block_size + slot;
    return at == slots[0] || at == slots[2];
  });
  require_gather_equals(cache, a, {small_int_row(cache, 0, 0)}, {small_int_row(cache, 1000, 0)});
  require_gather_equals(cache, b, {small_int_row(cache, 2, 0)}, {small_int_row(cache, 1002, 0)});
  free_all_and_require_whole(cache);
}

TEST_CASE("cache: write_slots rejects bad slots before writing anything", "[cache][write][errors]") {
  PagedKVCache cache(small_config());
  const int seq = cache.add_sequence();
  append_tokens(cache, seq, 0, 6);  // two pages
  const pa::GatheredSequence before = cache.gather(seq);
  const std::int64_t s0 = cache.slot_mapping(seq, 0);
  const std::int64_t s1 = cache.slot_mapping(seq, 1);
  const std::int64_t s5 = cache.slot_mapping(seq, 5);
  const std::vector<float> rows3(static_cast<std::size_t>(3 * cache.row_elems()), 7.0f);
  const std::int64_t num_slots = 16 * 4;

  SECTION("a slot outside the pool") {
    const std::vector<std::int64_t> slots = {s0, s1, num_slots};
    PA_REQUIRE_THROWS_AS_WITH(cache.write_slots(slots, rows3, rows3), ArgumentError,
                              "slot_mapping[2]: expected a slot in [0, num_blocks * block_size = 64) or -1 (padding), got 64");
    const std::vector<std::int64_t> negative = {s0, -2, s1};
    PA_REQUIRE_THROWS_AS_WITH(cache.write_slots(negative, rows3, rows3), ArgumentError, "slot_mapping[1]");
  }
  SECTION("the same slot twice names both indices") {
    const std::vector<std::int64_t> slots = {s5, s1, s5};
    PA_REQUIRE_THROWS_AS_WITH(cache.write_slots(slots, rows3, rows3), ArgumentError,
                              cat("slot_mapping[2]: expected each slot once per call (two rows racing for one slot), got ",
                                  s5, ", also at slot_mapping[0]"));
  }
  SECTION("a slot in a free page") {
    PageId free_page = 0;
    while (cache.allocator().ref_count(free_page) != 0) ++free_page;
    const std::vector<std::int64_t> slots = {s0, std::int64_t{free_page} * 4, s1};
    PA_REQUIRE_THROWS_AS_WITH(cache.write_slots(slots, rows3, rows3), ArgumentError, "is free");
  }
  SECTION("rows of the wrong size") {
    const std::vector<std::int64_t> slots = {s0, s1};
    PA_REQUIRE_THROWS_AS_WITH(cache.write_slots(slots, rows3, rows3), ArgumentError, "k_rows.size()");
  }
  // Nothing was written by any refused call.
  const pa::GatheredSequence after = cache.gather(seq);
  REQUIRE(after.keys == before.keys);
  REQUIRE(after.values == before.values);
  free_all_and_require_whole(cache);
}

TEST_CASE("cache: fork shares every distinct page once", "[cache][fork]") {
  PagedKVCache cache(small_config());
  SECTION("an ordinary table") {
    const int parent = cache.add_sequence();
    append_tokens(cache, parent, 0, 10);  // pages of 4: 3 pages, the last one partial
    const int child = cache.fork(parent);
    REQUIRE(cache.block_table(child) == cache.block_table(parent));
    REQUIRE(cache.context_len(child) == 10);
    for (PageId page : cache.block_table(parent)) REQUIRE(cache.allocator().ref_count(page) == 2);
    cache.check_invariants();
  }
  SECTION("a table that lists a page twice counts it once") {
    const PageId page_a = 9;
    const PageId page_b = 2;
    const std::vector<PageId> table = {page_a, page_b, page_a};  // e.g. a sliding window
    const int seq = cache.add_sequence(table, 9);
    REQUIRE(cache.allocator().ref_count(page_a) == 1);
    REQUIRE(cache.allocator().ref_count(page_b) == 1);
    cache.check_invariants();
    const int child = cache.fork(seq);
    REQUIRE(cache.allocator().ref_count(page_a) == 2);  // not 3
    REQUIRE(cache.allocator().ref_count(page_b) == 2);
    cache.check_invariants();
    cache.free_sequence(child);
    REQUIRE(cache.allocator().ref_count(page_a) == 1);
    cache.check_invariants();
  }
  free_all_and_require_whole(cache);
}

TEST_CASE("cache: appending to a shared page copies it first", "[cache][fork]") {
  PagedKVCache cache(small_config(pa::DType::f16));
  const int parent = cache.add_sequence();
  const Appended prefix = append_tokens(cache, parent, 0, 6);  // page 0 full, page 1 holds 2 of 4
  const int child = cache.fork(parent);
  const PageId shared_last = cache.block_table(parent)[1];
  REQUIRE(cache.allocator().ref_count(shared_last) == 2);

  // The child writes token 6 into its last page: that page is shared, so it is copied first.
  const std::vector<float> k = small_int_row(cache, 77, 6);
  const std::vector<float> v = small_int_row(cache, 78, 6);
  const std::vector<std::byte> keys_before = cache.key_pool(), values_before = cache.value_pool();
  const pa::AppendResult result = cache.append_token(child, k, v);
  require_rest_unchanged(cache, keys_before, values_before, [&](std::int64_t page, int) { return page == result.page; });
  cache.check_invariants();  // first: a count gone wrong (a reference dropped twice) is named with its page
  REQUIRE(result.copied_from == shared_last);
  REQUIRE(result.page != shared_last);
  REQUIRE_FALSE(result.new_page);
  REQUIRE(cache.block_table(child)[0] == cache.block_table(parent)[0]);  // full prefix still shared
  REQUIRE(cache.block_table(child)[1] == result.page);
  REQUIRE(cache.allocator().ref_count(shared_last) == 1);
  REQUIRE(cache.allocator().ref_count(result.page) == 1);
  REQUIRE(cache.allocator().ref_count(cache.block_table(parent)[0]) == 2);

  // The parent's tokens are unchanged; the child has the prefix plus its own token.
  require_gather_equals(cache, parent, prefix.keys, prefix.values);
  Appended child_rows = prefix;
  child_rows.keys.push_back(k);
  child_rows.values.push_back(v);
  require_gather_equals(cache, child, child_rows.keys, child_rows.values);

  // The parent now holds its last page alone: it writes in place, no copy.
  const pa::AppendResult in_place = cache.append_token(parent, small_int_row(cache, 5, 6), small_int_row(cache, 6, 6));
  REQUIRE(in_place.copied_from == -1);
  REQUIRE(in_place.page == shared_last);
  require_gather_equals(cache, child, child_rows.keys, child_rows.values);

  // A fork whose last page is full shares it but never copies: the next token opens a page.
  append_tokens(cache, parent, 0, 1);  // parent: 8 tokens, two full pages
  const int full_fork = cache.fork(parent);
  const pa::AppendResult fresh = cache.append_slot(full_fork);
  REQUIRE(fresh.new_page);
  REQUIRE(fresh.copied_from == -1);
  cache.check_invariants();
  free_all_and_require_whole(cache);
}

TEST_CASE("cache: running out of pages changes nothing", "[cache][errors]") {
  CacheConfig config = small_config();
  config.num_blocks = 2;
  PagedKVCache cache(config);
  const int seq = cache.add_sequence();
  const Appended rows = append_tokens(cache, seq, 0, 6);  // 2 pages: the pool is full
  const int child = cache.fork(seq);
  // The child's copy-on-write needs a page and there is none.
  PA_REQUIRE_THROWS_AS_WITH(cache.append_slot(child), AllocatorError, "asked for 1 page, 0 free");
  PA_REQUIRE_THROWS_AS_WITH(cache.append_token(seq, rows.keys[0], rows.values[0]), AllocatorError,
                            "PagedKVCache::append_slot: sequence 0");
  REQUIRE(cache.context_len(child) == 6);
  REQUIRE(cache.context_len(seq) == 6);
  cache.check_invariants();
  require_gather_equals(cache, child, rows.keys, rows.values);
  free_all_and_require_whole(cache);
}

TEST_CASE("cache: admission refuses up front a request larger than the pool or a block-table row", "[cache][errors]") {
  CacheConfig config = small_config();  // 16 pages of 4 tokens
  config.max_blocks_per_seq = 5;
  PagedKVCache cache(config);
  REQUIRE(cache.check_admission(0) == 0);
  REQUIRE(cache.check_admission(20) == 5);
  PA_REQUIRE_THROWS_AS_WITH(cache.check_admission(21), AllocatorError,
                            "PagedKVCache::check_admission: a request of 21 tokens needs 6 pages of 4 tokens, more than "
                            "a block-table row holds (max_blocks_per_seq = 5, 20 tokens); refused before taking any");
  PA_REQUIRE_THROWS_AS_WITH(cache.check_admission(-1), ArgumentError, "PagedKVCache::check_admission: context_len");
  config.max_blocks_per_seq = 0;  // only the pool limits a sequence
  const PagedKVCache unlimited(config);
  REQUIRE(unlimited.check_admission(64) == 16);
  PA_REQUIRE_THROWS_AS_WITH(unlimited.check_admission(65), AllocatorError,
                            "a request of 65 tokens needs 17 pages of 4 tokens, more than the whole pool holds (num_blocks = 16)");
  REQUIRE(cache.allocator().num_free() == 16);  // a refused admission takes nothing

  // A sequence never grows past its row, and a table longer than a row is not accepted.
  const int seq = cache.add_sequence();
  const Appended rows = append_tokens(cache, seq, 0, 20);
  PA_REQUIRE_THROWS_AS_WITH(cache.append_slot(seq), AllocatorError,
                            "PagedKVCache::append_slot: sequence 0 (20 tokens) needs a page: its block-table row is full "
                            "(max_blocks_per_seq = 5 pages, 20 tokens)");
  REQUIRE(cache.context_len(seq) == 20);
  REQUIRE(cache.allocator().num_free() == 11);
  require_gather_equals(cache, seq, rows.keys, rows.values);
  const std::vector<PageId> six_pages = {10, 11, 12, 13, 14, 15};
  PA_REQUIRE_THROWS_AS_WITH(cache.add_sequence(six_pages, 21), ArgumentError,
                            "PagedKVCache::add_sequence: block_table.size(): expected at most max_blocks_per_seq = 5");
  CacheConfig bad = small_config();
  bad.max_blocks_per_seq = -1;
  PA_REQUIRE_THROWS_AS_WITH(PagedKVCache{bad}, ArgumentError, "config.max_blocks_per_seq");
  free_all_and_require_whole(cache);
}

TEST_CASE("cache: argument errors name the function and the argument", "[cache][errors]") {
  PagedKVCache cache(small_config());
  const int seq = cache.add_sequence();
  const std::vector<float> row(static_cast<std::size_t>(cache.row_elems()), 1.0f);
  const std::vector<float> short_row(3, 1.0f);
  PA_REQUIRE_THROWS_AS_WITH(cache.append_token(seq + 5, row, row), ArgumentError,
                            "PagedKVCache::append_token: seq: expected a live sequence id (live: 0), got 5");
  PA_REQUIRE_THROWS_AS_WITH(cache.append_token(seq, short_row, row), ArgumentError,
                            "k_row.size(): expected 16");
  PA_REQUIRE_THROWS_AS_WITH(cache.append_token(seq, row, short_row), ArgumentError, "v_row.size()");
  REQUIRE(cache.context_len(seq) == 0);  // refused appends add nothing
  PA_REQUIRE_THROWS_AS_WITH(cache.fork(42), ArgumentError, "PagedKVCache::fork: seq");
  PA_REQUIRE_THROWS_AS_WITH(cache.gather(42), ArgumentError, "PagedKVCache::gather: seq");
  PA_REQUIRE_THROWS_AS_WITH(cache.free_sequence(42), ArgumentError, "PagedKVCache::free_sequence: seq");
  const std::vector<PageId> too_long = {1, 2};
  PA_REQUIRE_THROWS_AS_WITH(cache.add_sequence(too_long, 3), ArgumentError, "block_table.size()");
  const std::vector<PageId> outside = {16};
  PA_REQUIRE_THROWS_AS_WITH(cache.add_sequence(outside, 3), ArgumentError, "block_table[0]");
  PA_REQUIRE_THROWS_AS_WITH(cache.memory_report(-5), ArgumentError, "reserved_len");

  CacheConfig bad = small_config();
  bad.num_kv_heads = 0;
  PA_REQUIRE_THROWS_AS_WITH(PagedKVCache{bad}, ArgumentError, "config.num_kv_heads");
  bad = small_config();
  bad.block_size = -4;
  PA_REQUIRE_THROWS_AS_WITH(PagedKVCache{bad}, ArgumentError, "config.block_size");
  bad = small_config();
  bad.layout = pa::CacheLayout{8, 32, 8, 1};  // hnd strides, but pages overlap: one spans 64 elements
  PA_REQUIRE_THROWS_AS_WITH(PagedKVCache{bad}, ArgumentError, "layout.block_stride");
  free_all_and_require_whole(cache);
}

TEST_CASE("cache: check_invariants catches a count that disagrees with the tables", "[cache][errors]") {
  PagedKVCache cache(small_config());
  const int seq = cache.add_sequence();
  append_tokens(cache, seq, 0, 5);
  const PageId page = cache.block_table(seq)[1];
  cache.mutable_allocator().share(page);  // a reference no table accounts for
  PA_REQUIRE_THROWS_AS_WITH(cache.check_invariants(), AllocatorError,
                            cat("page ", page, " has ref count 2 but 1 sequence lists it"));
  cache.mutable_allocator().free(page);
  cache.check_invariants();
  // A page freed behind the cache's back: the table now points at a free page.
  cache.mutable_allocator().free(page);
  PA_REQUIRE_THROWS_AS_WITH(cache.check_invariants(), AllocatorError,
                            cat("sequence 0 block_table[1] = page ", page, ", which is free"));
  PA_REQUIRE_THROWS_AS_WITH(cache.free_sequence(seq), AllocatorError, cat("double free of page ", page));
  cache.mutable_allocator().take(page);  // put the reference back
  free_all_and_require_whole(cache);
}

TEST_CASE("cache: leak report names live sequences and held pages", "[cache]") {
  PagedKVCache cache(small_config());
  const int seq = cache.add_sequence();
  append_tokens(cache, seq, 0, 5);
  const std::string report = cache.leak_report();
  INFO(report);
  CHECK(report.find("1 sequence still live (ids 0)") != std::string::npos);
  CHECK(report.find("2 pages still held") != std::string::npos);
  free_all_and_require_whole(cache);
}

TEST_CASE("cache: memory report, paged against contiguous", "[cache][memory]") {
  CacheConfig config = small_config();  // 2 heads x 8 dims x f32: 128 bytes per token (K and V)
  PagedKVCache cache(config);
  const int a = cache.add_sequence();
  const int b = cache.add_sequence();
  append_tokens(cache, a, 0, 1);  // 1 page, 1 of 4 slots filled
  append_tokens(cache, b, 1, 9);  // 3 pages, 9 of 12 filled
  pa::MemoryReport report = cache.memory_report(100);
  REQUIRE(report.bytes_per_token == 128);
  REQUIRE(report.page_bytes == 512);
  REQUIRE(report.tokens == 10);
  REQUIRE(report.pages_held == 4);
  REQUIRE(report.paged_bytes == 4 * 512);
  REQUIRE(report.paged_wasted_bytes == 6 * 128);
  REQUIRE(report.contiguous_bytes == 2 * 100 * 128);
  REQUIRE(report.contiguous_wasted_bytes == (200 - 10) * 128);
  REQUIRE(std::abs(report.paged_waste_percent() - 100.0 * 6 / 16) < 1e-9);
  REQUIRE(std::abs(report.contiguous_waste_percent() - 95.0) < 1e-9);
  REQUIRE(cache.memory_report().reserved_len == 9);  // default: the longest live sequence

  // A fork holds no new page until it writes: sharing saves the whole table.
  const int child = cache.fork(b);
  report = cache.memory_report(100);
  REQUIRE(report.pages_held == 4);
  REQUIRE(report.table_entries == 7);
  REQUIRE(report.pages_saved_by_sharing() == 3);
  REQUIRE(report.tokens == 19);
  REQUIRE(report.filled_slots == 10);               // shared slots count once
  REQUIRE(report.paged_wasted_bytes == 6 * 128);  // the fork wastes nothing more
  REQUIRE(report.contiguous_bytes == 3 * 100 * 128);
  CHECK(report.table().find("contiguous (3 x 100 tokens)") != std::string::npos);
  CHECK(report.json().find("\"pages_held\": 4") != std::string::npos);
  cache.free_sequence(child);
  free_all_and_require_whole(cache);
}

TEST_CASE("cache: fresh pools hold NaN, so unwritten slots show", "[cache]") {
  PagedKVCache cache(small_config(pa::DType::bf16));
  const int seq = cache.add_sequence();
  cache.append_slot(seq);  // reserved but never written
  const pa::GatheredSequence gathered = cache.gather(seq);
  REQUIRE(std::isnan(gathered.keys[0]));
  REQUIRE(std::isnan(gathered.values[0]));
  free_all_and_require_whole(cache);
}

TEST_CASE("cache: the fp8 write path divides by the pool's scale, rounds to e4m3 and saturates", "[cache][fp8]") {
  CacheConfig config = small_config(pa::DType::e4m3);
  config.k_scale = 0.5f;
  config.v_scale = 0.25f;
  PagedKVCache cache(config);
  const int seq = cache.add_sequence();
  const std::int64_t row = cache.row_elems();  // 2 heads x 8 channels
  std::vector<float> k(static_cast<std::size_t>(row)), v(static_cast<std::size_t>(row));
  for (std::int64_t i = 0; i < row; ++i) {
    k[static_cast<std::size_t>(i)] = 0.3f * static_cast<float>(i) - 2.0f;
    v[static_cast<std::size_t>(i)] = 0.01f * static_cast<float>(i);
  }
  k[0] = 1e6f;                                          // past 448 * 0.5: saturates to 224
  k[1] = -std::numeric_limits<float>::infinity();       // to -224
  v[2] = std::numeric_limits<float>::quiet_NaN();       // stays NaN (0x7f)
  cache.append_token(seq, k, v);
  const pa::GatheredSequence got = cache.gather(seq);
  for (std::int64_t i = 0; i < row; ++i) {
    CAPTURE(i);
    const std::size_t at = static_cast<std::size_t>(i);
    const float want_k = pa::e4m3_to_float(pa::float_to_e4m3(k[at] / 0.5f)) * 0.5f;
    const float want_v = pa::e4m3_to_float(pa::float_to_e4m3(v[at] / 0.25f)) * 0.25f;
    REQUIRE(got.keys[at] == want_k);
    if (i == 2) REQUIRE(std::isnan(got.values[at]));
    else REQUIRE(got.values[at] == want_v);
  }
  REQUIRE(got.keys[0] == 224.0f);
  REQUIRE(got.keys[1] == -224.0f);
  REQUIRE(cache.key_pool().size() == static_cast<std::size_t>(config.num_blocks * row * config.block_size));  // one byte an element
  free_all_and_require_whole(cache);
  CacheConfig bad = small_config(pa::DType::e4m3);
  bad.k_scale = 0.0f;
  PA_REQUIRE_THROWS_AS_WITH(PagedKVCache{bad}, pa::ArgumentError, "k_scale");
  CacheConfig not_fp8 = small_config(pa::DType::bf16);
  not_fp8.v_scale = 2.0f;
  PA_REQUIRE_THROWS_AS_WITH(PagedKVCache{not_fp8}, pa::ArgumentError, "v_scale");
}
