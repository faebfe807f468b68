// The problem's one place of validation: every rule of common/problem.cpp and
// common/kernel_api.cpp, each negative case checked for its type and for the argument it names
// (docs/design/CORRECTNESS.md, harness rule 3).

#include <array>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/kernel_api.h"
#include "common/problem.h"
#include "tests/catch_compat.h"
#include "tests/test_util.h"

namespace {

using pa::testing::error_message;

constexpr const char* kFunction = "test_fn";

/// A small valid GQA problem: 3 sequences, 4 query heads over 2 KV heads, dim 8, page 4.
pa::DecodeProblem small_problem() {
  return pa::make_problem(/*num_seqs=*/3, /*num_q_heads=*/4, /*num_kv_heads=*/2, /*head_dim=*/8,
                          /*block_size=*/4, /*max_blocks_per_seq=*/3, /*max_context_len=*/10,
                          /*num_blocks=*/6, pa::DType::f32);
}

}  // namespace

TEST_CASE("problem: make_problem fills the shapes, the hnd layout and 1/sqrt(head_dim)") {
  const pa::DecodeProblem p = small_problem();
  CHECK(p.num_seqs == 3);
  CHECK(p.num_q_heads == 4);
  CHECK(p.num_kv_heads == 2);
  CHECK(p.head_dim == 8);
  CHECK(p.block_size == 4);
  CHECK(p.max_blocks_per_seq == 3);
  CHECK(p.max_context_len == 10);
  CHECK(p.num_blocks == 6);
  CHECK(p.dtype == pa::DType::f32);
  CHECK(p.scale == 1.0f / std::sqrt(8.0f));
  CHECK(p.layout == pa::CacheLayout::hnd(2, 4, 8));
  CHECK(p.group_size() == 2);
  CHECK(p.row_capacity() == 12);
  CHECK(p.query_elems() == 3 * 4 * 8);
  CHECK(p.cache_elems() == 6 * 2 * 4 * 8);
  CHECK(error_message([&] { pa::validate(p, kFunction); }) == "");
}

TEST_CASE("problem: kv_head_of maps query heads to KV heads for MHA, GQA and MQA") {
  pa::DecodeProblem p = small_problem();
  p.num_q_heads = 8;
  p.num_kv_heads = 8;  // MHA: one to one
  for (int h = 0; h < 8; ++h) CHECK(p.kv_head_of(h) == h);
  p.num_kv_heads = 2;  // GQA: groups of 4 consecutive query heads
  CHECK(p.group_size() == 4);
  const std::array<int, 8> gqa = {0, 0, 0, 0, 1, 1, 1, 1};
  for (int h = 0; h < 8; ++h) CHECK(p.kv_head_of(h) == gqa[static_cast<std::size_t>(h)]);
  p.num_kv_heads = 1;  // MQA: everyone reads head 0
  for (int h = 0; h < 8; ++h) CHECK(p.kv_head_of(h) == 0);
}

TEST_CASE("problem: pages_for rounds up") {
  CHECK(pa::pages_for(0, 16) == 0);
  CHECK(pa::pages_for(1, 16) == 1);
  CHECK(pa::pages_for(15, 16) == 1);
  CHECK(pa::pages_for(16, 16) == 1);
  CHECK(pa::pages_for(17, 16) == 2);
  CHECK(pa::pages_for(5, 1) == 5);
  CHECK(pa::pages_for(std::int64_t{1} << 40, 16) == std::int64_t{1} << 36);
}

TEST_CASE("problem: CacheLayout hnd and nhd offsets, name() and 64-bit spans") {
  // 3 KV heads, page 4, dim 5.
  const pa::CacheLayout hnd = pa::CacheLayout::hnd(3, 4, 5);
  CHECK(hnd.block_stride == 3 * 4 * 5);
  CHECK(hnd.head_stride == 4 * 5);
  CHECK(hnd.token_stride == 5);
  CHECK(hnd.dim_stride == 1);
  // (page 2, head 1, slot 3, dim 4) = 2*60 + 1*20 + 3*5 + 4
  CHECK(hnd.offset(2, 1, 3, 4) == 120 + 20 + 15 + 4);

  const pa::CacheLayout nhd = pa::CacheLayout::nhd(3, 4, 5);
  CHECK(nhd.block_stride == 3 * 4 * 5);
  CHECK(nhd.head_stride == 5);
  CHECK(nhd.token_stride == 3 * 5);
  // (page 2, head 1, slot 3, dim 4) = 2*60 + 3*15 + 1*5 + 4
  CHECK(nhd.offset(2, 1, 3, 4) == 120 + 45 + 5 + 4);

  SECTION("every (head, slot, dim) of a page is a distinct offset inside the page") {
    for (const pa::CacheLayout& layout : {hnd, nhd}) {
      std::vector<int> hits(60, 0);
      for (int head = 0; head < 3; ++head)
        for (int slot = 0; slot < 4; ++slot)
          for (int dim = 0; dim < 5; ++dim) ++hits[static_cast<std::size_t>(layout.offset(0, head, slot, dim))];
      for (int count : hits) CHECK(count == 1);
    }
  }
  SECTION("name() recognises the two layouts for the given shapes") {
    CHECK(hnd.name(3, 4, 5) == "hnd");
    CHECK(nhd.name(3, 4, 5) == "nhd");
    CHECK(hnd.name(3, 4, 6) == "custom");  // right strides for other shapes only
    pa::CacheLayout padded = hnd;
    padded.block_stride += 8;
    CHECK(padded.name(3, 4, 5) == "custom");
  }
  SECTION("offsets are 64-bit: a page id near 2^31 with a large page does not wrap") {
    const pa::CacheLayout big = pa::CacheLayout::hnd(8, 16, 128);
    const std::int64_t page = std::int64_t{INT32_MAX};
    CHECK(big.offset(page, 7, 15, 127) == page * 16384 + 7 * 2048 + 15 * 128 + 127);
    pa::DecodeProblem p = pa::make_problem(1, 8, 8, 128, 16, 1, 16, std::int64_t{1} << 31, pa::DType::bf16);
    CHECK(p.cache_elems() == (std::int64_t{1} << 31) * 16384);
    CHECK(error_message([&] { pa::validate(p, kFunction); }) == "");
  }
  SECTION("cache_elems of an empty pool is 0 and of an nhd pool its full size") {
    pa::DecodeProblem p = small_problem();
    p.num_blocks = 0;
    CHECK(p.cache_elems() == 0);
    p = small_problem();
    p.layout = pa::CacheLayout::nhd(2, 4, 8);
    CHECK(p.cache_elems() == 6 * 2 * 4 * 8);
  }
}

TEST_CASE("problem: describe() gives one line") {
  pa::DecodeProblem p = pa::make_problem(64, 32, 8, 128, 16, 512, 8192, 32768, pa::DType::bf16);
  CHECK(pa::describe(p) == "seqs=64 heads=32/8 dim=128 page=16 ctx<=8192 pool=32768 bf16 hnd");
  p.layout = pa::CacheLayout::nhd(8, 16, 128);
  CHECK(pa::describe(p) == "seqs=64 heads=32/8 dim=128 page=16 ctx<=8192 pool=32768 bf16 nhd");
}

TEST_CASE("problem: validate() accepts the edges it should") {
  pa::DecodeProblem p = small_problem();
  SECTION("an empty batch") {
    p.num_seqs = 0;
    CHECK(error_message([&] { pa::validate(p, kFunction); }) == "");
  }
  SECTION("max_context_len exactly the row capacity, and 0") {
    p.max_context_len = 12;
    CHECK(error_message([&] { pa::validate(p, kFunction); }) == "");
    p.max_context_len = 0;
    CHECK(error_message([&] { pa::validate(p, kFunction); }) == "");
  }
  SECTION("an empty pool and empty tables") {
    p.num_blocks = 0;
    p.max_blocks_per_seq = 0;
    p.max_context_len = 0;
    CHECK(error_message([&] { pa::validate(p, kFunction); }) == "");
  }
  SECTION("MQA, MHA and page size 1") {
    p.num_kv_heads = 1;
    p.layout = pa::CacheLayout::hnd(1, 4, 8);
    CHECK(error_message([&] { pa::validate(p, kFunction); }) == "");
    p.num_kv_heads = 4;
    p.layout = pa::CacheLayout::hnd(4, 4, 8);
    CHECK(error_message([&] { pa::validate(p, kFunction); }) == "");
    p.block_size = 1;
    p.max_blocks_per_seq = 10;
    p.layout = pa::CacheLayout::nhd(4, 1, 8);
    CHECK(error_message([&] { pa::validate(p, kFunction); }) == "");
  }
  SECTION("a padded custom layout") {
    p.layout.token_stride = 16;  // 8 channels used of 16
    p.layout.head_stride = 64;
    p.layout.block_stride = 128;
    CHECK(error_message([&] { pa::validate(p, kFunction); }) == "");
  }
  SECTION("a pool of exactly 2^31 pages (int32 page ids 0 .. 2^31-1)") {
    p.num_blocks = std::int64_t{1} << 31;
    CHECK(error_message([&] { pa::validate(p, kFunction); }) == "");
  }
}

TEST_CASE("problem: validate() names the function and the argument of every rule") {
  pa::DecodeProblem p = small_problem();
  SECTION("num_seqs below 0") {
    p.num_seqs = -1;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "test_fn: num_seqs");
  }
  SECTION("num_q_heads not positive") {
    p.num_q_heads = 0;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "num_q_heads");
  }
  SECTION("num_kv_heads not positive") {
    p.num_kv_heads = 0;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "test_fn: num_kv_heads");
  }
  SECTION("num_q_heads not a multiple of num_kv_heads") {
    p.num_q_heads = 6;
    p.num_kv_heads = 4;
    p.layout = pa::CacheLayout::hnd(4, 4, 8);
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError,
                              "test_fn: num_q_heads % num_kv_heads: expected 0 (each KV head serves a whole group "
                              "of query heads), got 2 (num_q_heads=6, num_kv_heads=4)");
  }
  SECTION("more KV heads than query heads") {
    p.num_q_heads = 2;
    p.num_kv_heads = 4;
    p.layout = pa::CacheLayout::hnd(4, 4, 8);
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "num_q_heads % num_kv_heads");
  }
  SECTION("head_dim not positive") {
    p.head_dim = 0;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "head_dim");
  }
  SECTION("block_size not positive") {
    p.block_size = 0;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "test_fn: block_size: expected > 0, got 0");
    p.block_size = -16;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "test_fn: block_size: expected > 0, got -16");
  }
  SECTION("max_blocks_per_seq below 0") {
    p.max_blocks_per_seq = -1;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "max_blocks_per_seq");
  }
  SECTION("num_blocks below 0") {
    p.num_blocks = -1;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "num_blocks");
  }
  SECTION("num_blocks beyond what int32 table entries address") {
    p.num_blocks = (std::int64_t{1} << 31) + 1;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "num_blocks");
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "int32");
  }
  SECTION("max_context_len above what a block-table row holds") {
    p.max_context_len = 13;  // 3 pages of 4
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "max_context_len");
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "= 12");
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "got 13");
  }
  SECTION("max_context_len below 0") {
    p.max_context_len = -1;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "max_context_len");
  }
  SECTION("scale NaN, infinite, zero or negative") {
    for (float scale : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity(), 0.0f, -0.0f, -0.5f}) {
      CAPTURE(scale);
      p.scale = scale;
      PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "test_fn: scale");
    }
    p.scale = std::numeric_limits<float>::denorm_min();  // tiny but valid
    CHECK(error_message([&] { pa::validate(p, kFunction); }) == "");
  }
  SECTION("layout.dim_stride other than 1") {
    p.layout.dim_stride = 2;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "layout.dim_stride");
  }
  SECTION("layout.token_stride smaller than a token") {
    p.layout.token_stride = 7;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "layout.token_stride");
  }
  SECTION("layout.head_stride smaller than a token") {
    p.layout = pa::CacheLayout::nhd(2, 4, 8);
    p.layout.head_stride = 4;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "layout.head_stride");
  }
  SECTION("layout.block_stride smaller than a page") {
    p.layout.block_stride = 2 * 4 * 8 - 1;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "layout.block_stride");
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "= 64");
  }
  SECTION("total_context_len above num_seqs * max_context_len, or negative") {
    p.total_context_len = std::int64_t{p.num_seqs} * p.max_context_len + 1;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "total_context_len");
    p.total_context_len = -1;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "total_context_len");
  }
  SECTION("layout.block_stride of 2^31 elements or more") {
    p.layout.block_stride = std::int64_t{1} << 31;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "layout.block_stride");
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "2147483648");
    p.layout.block_stride = INT32_MAX;  // the largest page the kernels address
    CHECK_NOTHROW(pa::validate(p, kFunction));
  }
  SECTION("a layout left at its default (all strides 0)") {
    p.layout = pa::CacheLayout{};
    PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "layout.");
  }
}

TEST_CASE("problem: validate_tables checks lengths and the used prefix of each row only") {
  const pa::DecodeProblem p = small_problem();  // 3 seqs, rows of 3 pages of 4, pool of 6, ctx <= 10
  constexpr std::int32_t kPad = std::numeric_limits<std::int32_t>::max();
  std::vector<std::int32_t> tables = {5, 0, kPad,      // seq 0: 5 tokens -> 2 pages
                                      3, kPad, kPad,   // seq 1: 1 token  -> 1 page
                                      -7, kPad, kPad}; // seq 2: 0 tokens -> the row is never read
  std::vector<std::int32_t> lens = {5, 1, 0};

  SECTION("padding past the used prefix is not checked") {
    CHECK(error_message([&] { pa::validate_tables(p, tables, lens, kFunction); }) == "");
  }
  SECTION("a full row and the top page of the pool are fine") {
    lens[0] = 10;
    tables[2] = 5;
    CHECK(error_message([&] { pa::validate_tables(p, tables, lens, kFunction); }) == "");
  }
  SECTION("total_context_len: 0 (unknown) or the sum of context_lens") {
    pa::DecodeProblem hinted = p;
    hinted.total_context_len = 6;
    CHECK(error_message([&] { pa::validate_tables(hinted, tables, lens, kFunction); }) == "");
    hinted.total_context_len = 7;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate_tables(hinted, tables, lens, kFunction), pa::ArgumentError,
                              "the sum of context_lens = 6");
  }
  SECTION("context_lens of the wrong size") {
    lens.push_back(1);
    PA_REQUIRE_THROWS_AS_WITH(pa::validate_tables(p, tables, lens, kFunction), pa::ArgumentError,
                              "context_lens.size()");
  }
  SECTION("block_tables of the wrong size") {
    tables.pop_back();
    PA_REQUIRE_THROWS_AS_WITH(pa::validate_tables(p, tables, lens, kFunction), pa::ArgumentError,
                              "block_tables.size()");
  }
  SECTION("a context below 0") {
    lens[1] = -1;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate_tables(p, tables, lens, kFunction), pa::ArgumentError,
                              "test_fn: context_lens[1]");
  }
  SECTION("a context above max_context_len") {
    lens[2] = 11;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate_tables(p, tables, lens, kFunction), pa::ArgumentError,
                              "context_lens[2]");
    PA_REQUIRE_THROWS_AS_WITH(pa::validate_tables(p, tables, lens, kFunction), pa::ArgumentError, "got 11");
  }
  SECTION("an entry of the used prefix at num_blocks") {
    tables[1] = 6;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate_tables(p, tables, lens, kFunction), pa::ArgumentError,
                              "block_tables[0][1]");
    PA_REQUIRE_THROWS_AS_WITH(pa::validate_tables(p, tables, lens, kFunction), pa::ArgumentError, "got 6");
  }
  SECTION("a negative entry of the used prefix") {
    tables[3] = -1;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate_tables(p, tables, lens, kFunction), pa::ArgumentError,
                              "block_tables[1][0]");
  }
  SECTION("growing a context by one token makes the next entry part of the prefix") {
    lens[0] = 9;  // 3 pages: entry [0][2] (padding) is now read
    PA_REQUIRE_THROWS_AS_WITH(pa::validate_tables(p, tables, lens, kFunction), pa::ArgumentError,
                              "block_tables[0][2]");
  }
}

TEST_CASE("problem: validate_view checks pointers, aliasing and the workspace") {
  const pa::DecodeProblem p = small_problem();
  // Every buffer lives in one arena, 8 KiB apart, so which ranges overlap is decided by the
  // test and not by where the heap happened to put separate vectors.
  constexpr std::size_t kSpacing = 8192;
  std::vector<std::byte> arena(8 * kSpacing);
  std::byte* const query = arena.data() + 0 * kSpacing;
  std::byte* const out = arena.data() + 1 * kSpacing;
  std::byte* const keys = arena.data() + 2 * kSpacing;
  std::byte* const values = arena.data() + 3 * kSpacing;
  std::byte* const tables = arena.data() + 4 * kSpacing;
  std::byte* const lens = arena.data() + 5 * kSpacing;
  std::byte* const workspace = arena.data() + 6 * kSpacing;
  const std::size_t io_bytes = static_cast<std::size_t>(p.query_elems()) * 4;  // 384
  const std::size_t cache_bytes = static_cast<std::size_t>(p.cache_elems()) * 4;  // 1536
  pa::DecodeView view;
  view.problem = p;
  view.query = query;
  view.key_cache = keys;
  view.value_cache = values;
  view.block_tables = reinterpret_cast<const std::int32_t*>(tables);
  view.context_lens = reinterpret_cast<const std::int32_t*>(lens);
  view.out = out;
  view.workspace = workspace;
  view.workspace_bytes = 256;

  CHECK(error_message([&] { pa::validate_view(view, 256, kFunction); }) == "");

  SECTION("the problem itself is validated") {
    view.problem.scale = -1.0f;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate_view(view, 0, kFunction), pa::ArgumentError, "test_fn: scale");
  }
  SECTION("each null pointer is named") {
    std::string name;
    SECTION("query") { view.query = nullptr; name = "test_fn: query"; }
    SECTION("out") { view.out = nullptr; name = "test_fn: out"; }
    SECTION("key_cache") { view.key_cache = nullptr; name = "test_fn: key_cache"; }
    SECTION("value_cache") { view.value_cache = nullptr; name = "test_fn: value_cache"; }
    SECTION("block_tables") { view.block_tables = nullptr; name = "test_fn: block_tables"; }
    SECTION("context_lens") { view.context_lens = nullptr; name = "test_fn: context_lens"; }
    SECTION("workspace") { view.workspace = nullptr; name = "test_fn: workspace"; }
    PA_REQUIRE_THROWS_AS_WITH(pa::validate_view(view, 16, kFunction), pa::ArgumentError, name);
    PA_REQUIRE_THROWS_AS_WITH(pa::validate_view(view, 16, kFunction), pa::ArgumentError, "got nullptr");
  }
  SECTION("null tables are fine when rows are empty, null caches when the pool is") {
    view.problem.max_blocks_per_seq = 0;
    view.problem.max_context_len = 0;
    view.block_tables = nullptr;
    CHECK(error_message([&] { pa::validate_view(view, 0, kFunction); }) == "");
    view.problem.num_blocks = 0;
    view.key_cache = nullptr;
    view.value_cache = nullptr;
    CHECK(error_message([&] { pa::validate_view(view, 0, kFunction); }) == "");
  }
  SECTION("an empty batch needs no pointers") {
    pa::DecodeView empty;
    empty.problem = p;
    empty.problem.num_seqs = 0;
    CHECK(error_message([&] { pa::validate_view(empty, 0, kFunction); }) == "");
  }
  SECTION("no workspace is fine when none is needed") {
    view.workspace = nullptr;
    view.workspace_bytes = 0;
    CHECK(error_message([&] { pa::validate_view(view, 0, kFunction); }) == "");
  }
  SECTION("a workspace that is too small") {
    PA_REQUIRE_THROWS_AS_WITH(pa::validate_view(view, 257, kFunction), pa::ArgumentError,
                              "test_fn: workspace_bytes");
    PA_REQUIRE_THROWS_AS_WITH(pa::validate_view(view, 257, kFunction), pa::ArgumentError, ">= 257");
  }
  SECTION("out aliasing an input is named with the input") {
    std::string input;
    SECTION("query") { view.out = query; input = "disjoint from query"; }
    SECTION("key_cache") { view.out = keys + 20; input = "disjoint from key_cache"; }
    SECTION("value_cache, last element") { view.out = values + cache_bytes - 4; input = "disjoint from value_cache"; }
    SECTION("value_cache, ending at its first element") {
      view.out = values - io_bytes + 1;
      input = "disjoint from value_cache";
    }
    SECTION("block_tables") { view.out = tables + 8; input = "disjoint from block_tables"; }
    SECTION("context_lens") { view.out = lens; input = "disjoint from context_lens"; }
    SECTION("workspace") { view.out = workspace + 128; input = "disjoint from workspace"; }
    PA_REQUIRE_THROWS_AS_WITH(pa::validate_view(view, 0, kFunction), pa::ArgumentError, "test_fn: out");
    PA_REQUIRE_THROWS_AS_WITH(pa::validate_view(view, 0, kFunction), pa::ArgumentError, input);
  }
  SECTION("out touching an input's ends without overlap is fine") {
    view.out = query + io_bytes;  // right after query
    CHECK(error_message([&] { pa::validate_view(view, 0, kFunction); }) == "");
    view.out = values - io_bytes;  // ends where value_cache begins
    CHECK(error_message([&] { pa::validate_view(view, 0, kFunction); }) == "");
    view.out = query + io_bytes - 4;  // one element of overlap
    PA_REQUIRE_THROWS_AS_WITH(pa::validate_view(view, 0, kFunction), pa::ArgumentError, "disjoint from query");
  }
  SECTION("16-bit storage sizes the ranges by its element size") {
    view.problem.dtype = pa::DType::bf16;
    view.out = query + io_bytes / 2;  // right after a bf16 query
    CHECK(error_message([&] { pa::validate_view(view, 0, kFunction); }) == "");
    view.out = query + io_bytes / 2 - 2;
    PA_REQUIRE_THROWS_AS_WITH(pa::validate_view(view, 0, kFunction), pa::ArgumentError, "disjoint from query");
  }
}

TEST_CASE("problem: validate() refuses layouts whose heads and slots share memory") {
  pa::DecodeProblem p = small_problem();  // 2 KV heads, page 4, dim 8
  p.layout = {/*block_stride=*/64, /*head_stride=*/8, /*token_stride=*/8, /*dim_stride=*/1};
  // (head 1, slot 0) and (head 0, slot 1) would be the same 8 elements.
  PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "layout.head_stride/token_stride");
  PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "non-overlapping heads and slots");
  p.layout = pa::CacheLayout::nhd(2, 4, 8);
  REQUIRE_NOTHROW(pa::validate(p, kFunction));
  p.dtype = static_cast<pa::DType>(7);
  PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "dtype");
}

TEST_CASE("problem: size products that would overflow 64 bits are refused, never wrapped") {
  // docs/design/CATALOGUE.md R6: the shapes are ints, and three of them multiply past 2^63.
  // 2^30 sequences of 2^30 heads of 2^30 channels: 2^90 elements of q.
  pa::DecodeProblem p = pa::make_problem(1 << 30, 1 << 30, 1, 1 << 30, 16, 1, 16, 1, pa::DType::f32);
  PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError,
                            "test_fn: num_seqs * num_q_heads * head_dim: expected at most 2^61 elements of q and of "
                            "out (their bytes fit 64 bits), got more than 2^63");
  p.num_seqs = 1 << 20;  // 2^80
  PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "got more than 2^63");
  p.num_seqs = 4;  // 2^62: fits 64 bits, but not its bytes
  PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "got 4611686018427387904");
  // A page of 2^21 KV heads x 2^21 slots x 2^21 channels is 2^63 elements: its strides saturate
  // instead of wrapping to a negative stride that would pass every check below them.
  const pa::CacheLayout huge = pa::CacheLayout::hnd(1 << 21, 1 << 21, 1 << 21);
  CHECK(huge.block_stride == std::numeric_limits<std::int64_t>::max());
  CHECK(pa::CacheLayout::nhd(1 << 21, 1 << 21, 1 << 21).block_stride == std::numeric_limits<std::int64_t>::max());
  p = pa::make_problem(1, 1 << 21, 1 << 21, 1 << 21, 1 << 21, 1, 16, 1, pa::DType::f32);
  REQUIRE(p.layout == huge);
  PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError,
                            "test_fn: layout.block_stride: expected < 2^31 elements (the kernels compute offsets "
                            "inside a page in 32 bits), got 9223372036854775807");
  // Strides set by hand: the page's span and the heads' and slots' spans saturate too.
  p = small_problem();
  p.layout.token_stride = std::numeric_limits<std::int64_t>::max() / 2;
  p.layout.head_stride = std::numeric_limits<std::int64_t>::max() / 2;
  PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError, "test_fn: layout.head_stride/token_stride");
  p.layout.head_stride = 8;  // slots outside heads: 2 heads x 8 fit in one slot's stride
  PA_REQUIRE_THROWS_AS_WITH(pa::validate(p, kFunction), pa::ArgumentError,
                            "test_fn: layout.block_stride: expected >= one page's span = 9223372036854775807");
}
