#include "common/problem.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace pa {

namespace {
/// a * b, or INT64_MAX when it does not fit in 64 bits (docs/design/CATALOGUE.md R6: a size
/// product never wraps). The shapes are ints, so three of them can overflow 64 bits; a
/// saturated size is then refused by validate() as too large, naming the argument.
std::int64_t times(std::int64_t a, std::int64_t b) {
  std::int64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? std::numeric_limits<std::int64_t>::max() : product;
}
/// a + b, or INT64_MAX when it does not fit.
std::int64_t plus(std::int64_t a, std::int64_t b) {
  std::int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<std::int64_t>::max() : sum;
}
}  // namespace

CacheLayout CacheLayout::hnd(int num_kv_heads, int block_size, int head_dim) {
  const std::int64_t dim = head_dim;
  return {times(times(num_kv_heads, block_size), dim), times(block_size, dim), dim, 1};
}

CacheLayout CacheLayout::nhd(int num_kv_heads, int block_size, int head_dim) {
  const std::int64_t dim = head_dim;
  return {times(times(num_kv_heads, block_size), dim), dim, times(num_kv_heads, dim), 1};
}

std::string CacheLayout::name(int num_kv_heads, int block_size, int head_dim) const {
  if (*this == hnd(num_kv_heads, block_size, head_dim)) return "hnd";
  if (*this == nhd(num_kv_heads, block_size, head_dim)) return "nhd";
  return "custom";
}

std::int64_t DecodeProblem::cache_elems() const {
  if (num_blocks == 0) return 0;
  return layout.offset(num_blocks - 1, num_kv_heads - 1, block_size - 1, head_dim - 1) + 1;
}

DecodeProblem make_problem(int num_seqs, int num_q_heads, int num_kv_heads, int head_dim,
                           int block_size, int max_blocks_per_seq, int max_context_len,
                           std::int64_t num_blocks, DType dtype) {
  DecodeProblem problem;
  problem.num_seqs = num_seqs;
  problem.num_q_heads = num_q_heads;
  problem.num_kv_heads = num_kv_heads;
  problem.head_dim = head_dim;
  problem.block_size = block_size;
  problem.max_blocks_per_seq = max_blocks_per_seq;
  problem.max_context_len = max_context_len;
  problem.num_blocks = num_blocks;
  problem.dtype = dtype;
  problem.scale = head_dim > 0 ? 1.0f / std::sqrt(static_cast<float>(head_dim)) : 0.0f;
  if (num_kv_heads > 0 && block_size > 0 && head_dim > 0)
    problem.layout = CacheLayout::hnd(num_kv_heads, block_size, head_dim);
  return problem;
}

void validate(const DecodeProblem& p, std::string_view function) {
  PA_REQUIRE(p.num_seqs >= 0, function, "num_seqs", ">= 0", p.num_seqs);
  PA_REQUIRE(p.num_q_heads > 0, function, "num_q_heads", "> 0", p.num_q_heads);
  PA_REQUIRE(p.num_kv_heads > 0, function, "num_kv_heads", "> 0", p.num_kv_heads);
  PA_REQUIRE(p.num_q_heads % p.num_kv_heads == 0, function, "num_q_heads % num_kv_heads",
             "0 (each KV head serves a whole group of query heads)",
             cat(p.num_q_heads % p.num_kv_heads, " (num_q_heads=", p.num_q_heads,
                 ", num_kv_heads=", p.num_kv_heads, ")"));
  PA_REQUIRE(p.head_dim > 0, function, "head_dim", "> 0", p.head_dim);
  PA_REQUIRE(p.block_size > 0, function, "block_size", "> 0", p.block_size);
  // q and out are indexed in 64 bits and their bytes (4 an element at most) must fit too.
  const std::int64_t io_elems = times(times(p.num_seqs, p.num_q_heads), p.head_dim);
  PA_REQUIRE(io_elems <= std::int64_t{1} << 61, function, "num_seqs * num_q_heads * head_dim",
             "at most 2^61 elements of q and of out (their bytes fit 64 bits)",
             io_elems == std::numeric_limits<std::int64_t>::max() ? std::string("more than 2^63") : cat(io_elems));
  PA_REQUIRE(p.max_blocks_per_seq >= 0, function, "max_blocks_per_seq", ">= 0",
             p.max_blocks_per_seq);
  PA_REQUIRE(p.num_blocks >= 0, function, "num_blocks", ">= 0", p.num_blocks);
  PA_REQUIRE(p.num_blocks <= std::int64_t{INT32_MAX} + 1, function, "num_blocks",
             "<= 2^31 (block-table entries are int32)", p.num_blocks);
  PA_REQUIRE(p.max_context_len >= 0 && p.max_context_len <= p.row_capacity(), function,
             "max_context_len",
             cat("in [0, max_blocks_per_seq * block_size = ", p.row_capacity(), "]"),
             p.max_context_len);
  PA_REQUIRE(p.total_context_len >= 0 && p.total_context_len <= std::int64_t{p.num_seqs} * p.max_context_len, function,
             "total_context_len",
             cat("0 (unknown) or the sum of the context lengths, at most num_seqs * max_context_len = ",
                 std::int64_t{p.num_seqs} * p.max_context_len),
             p.total_context_len);
  PA_REQUIRE(p.dtype == DType::f32 || p.dtype == DType::f16 || p.dtype == DType::bf16, function, "dtype",
             "f32, f16 or bf16 (the storage of q and out; fp8 K/V are fp8_kv)",
             p.dtype == DType::e4m3 ? std::string("e4m3") : cat("the value ", static_cast<int>(p.dtype)));
  PA_REQUIRE(std::isfinite(p.scale) && p.scale > 0.0f, function, "scale", "finite and > 0",
             p.scale);
  if (p.fp8_kv) {
    PA_REQUIRE(std::isfinite(p.k_scale) && p.k_scale > 0.0f, function, "k_scale", "finite and > 0 (fp8 K/V)", p.k_scale);
    PA_REQUIRE(std::isfinite(p.v_scale) && p.v_scale > 0.0f, function, "v_scale", "finite and > 0 (fp8 K/V)", p.v_scale);
  } else {
    PA_REQUIRE(p.k_scale == 1.0f, function, "k_scale", "1 (K/V are not fp8: fp8_kv is false)", p.k_scale);
    PA_REQUIRE(p.v_scale == 1.0f, function, "v_scale", "1 (K/V are not fp8: fp8_kv is false)", p.v_scale);
  }
  const CacheLayout& l = p.layout;
  PA_REQUIRE(l.dim_stride == 1, function, "layout.dim_stride",
             "1 (channels of one token are contiguous)", l.dim_stride);
  PA_REQUIRE(l.token_stride >= p.head_dim, function, "layout.token_stride",
             cat(">= head_dim = ", p.head_dim), l.token_stride);
  PA_REQUIRE(l.head_stride >= p.head_dim, function, "layout.head_stride",
             cat(">= head_dim = ", p.head_dim), l.head_stride);
  // Heads and slots of one page must not overlap: one of the two axes nests inside the other.
  const std::int64_t slots_span = times(p.block_size, l.token_stride);
  const std::int64_t heads_span = times(p.num_kv_heads, l.head_stride);
  const bool heads_outer = l.head_stride >= slots_span;
  const bool slots_outer = l.token_stride >= heads_span;
  PA_REQUIRE(heads_outer || slots_outer, function, "layout.head_stride/token_stride",
             cat("non-overlapping heads and slots (head_stride >= block_size * token_stride = ", slots_span,
                 ", or token_stride >= num_kv_heads * head_stride = ", heads_span, ")"),
             cat(l.head_stride, "/", l.token_stride));
  // One page's span, the offset of its last element + 1, in sums that saturate instead of wrapping.
  const std::int64_t page_span = plus(plus(times(p.num_kv_heads - 1, l.head_stride), times(p.block_size - 1, l.token_stride)),
                                      p.head_dim);
  PA_REQUIRE(l.block_stride >= page_span, function, "layout.block_stride",
             cat(">= one page's span = ", page_span), l.block_stride);
  PA_REQUIRE(l.block_stride <= INT32_MAX, function, "layout.block_stride",
             "< 2^31 elements (the kernels compute offsets inside a page in 32 bits)", l.block_stride);
}

TableFault find_table_fault(const DecodeProblem& p, std::span<const std::int32_t> block_tables,
                            std::span<const std::int32_t> context_lens) {
  std::int64_t total = 0;
  for (int seq = 0; seq < p.num_seqs; ++seq) {
    const std::int32_t len = context_lens[static_cast<std::size_t>(seq)];
    if (len < 0 || len > p.max_context_len) return {TableFault::Kind::context_len, seq, 0, len, len};
    total += len;
    const std::size_t row = static_cast<std::size_t>(seq) * static_cast<std::size_t>(p.max_blocks_per_seq);
    const std::int64_t used = pages_for(len, p.block_size);
    for (std::int64_t entry = 0; entry < used; ++entry) {
      const std::int32_t page = block_tables[row + static_cast<std::size_t>(entry)];
      if (page < 0 || page >= p.num_blocks) return {TableFault::Kind::block_table, seq, entry, page, len};
    }
  }
  if (p.total_context_len != 0 && p.total_context_len != total) return {TableFault::Kind::total, 0, 0, total, 0};
  return {};
}

void throw_table_fault(const DecodeProblem& p, const TableFault& fault, std::string_view function) {
  switch (fault.kind) {
    case TableFault::Kind::none:
      return;
    case TableFault::Kind::context_len:
      throw_argument(function, cat("context_lens[", fault.seq, "]"),
                     cat("the length of sequence ", fault.seq, " in [0, max_context_len = ", p.max_context_len,
                         "] (a block-table row holds ", p.max_blocks_per_seq, " pages of ", p.block_size, " = ",
                         p.row_capacity(), " tokens)"),
                     cat(fault.value));
    case TableFault::Kind::block_table: {
      const std::int64_t first = fault.entry * p.block_size;
      const std::int64_t last = std::min<std::int64_t>(first + p.block_size, fault.context_len) - 1;
      throw_argument(function, cat("block_tables[", fault.seq, "][", fault.entry, "]"),
                     cat("a page in [0, num_blocks = ", p.num_blocks, ") (entry ", fault.entry, " of sequence ",
                         fault.seq, " holds its tokens ", first, "..", last, " of context_lens[", fault.seq,
                         "] = ", fault.context_len, ")"),
                     cat(fault.value));
    }
    case TableFault::Kind::total:
      throw_argument(function, "total_context_len", cat("0 (unknown) or the sum of context_lens = ", fault.value),
                     cat(p.total_context_len));
  }
}

void validate_lengths(const DecodeProblem& p, std::span<const std::int32_t> context_lens, std::string_view function) {
  PA_REQUIRE(context_lens.size() == static_cast<std::size_t>(p.num_seqs), function, "context_lens.size()",
             cat("num_seqs = ", p.num_seqs), context_lens.size());
  std::int64_t sum = 0;
  for (int seq = 0; seq < p.num_seqs; ++seq) {
    const std::int32_t length = context_lens[static_cast<std::size_t>(seq)];
    if (length < 0 || length > p.max_context_len)
      throw_table_fault(p, {TableFault::Kind::context_len, seq, 0, length, 0}, function);
    sum += length;
  }
  if (p.total_context_len != 0 && p.total_context_len != sum)
    throw_table_fault(p, {TableFault::Kind::total, 0, 0, sum, 0}, function);
}

void validate_tables(const DecodeProblem& p, std::span<const std::int32_t> block_tables,
                     std::span<const std::int32_t> context_lens, std::string_view function) {
  PA_REQUIRE(context_lens.size() == static_cast<std::size_t>(p.num_seqs), function,
             "context_lens.size()", cat("num_seqs = ", p.num_seqs), context_lens.size());
  const std::size_t table_elems = static_cast<std::size_t>(p.num_seqs) * p.max_blocks_per_seq;
  PA_REQUIRE(block_tables.size() == table_elems, function, "block_tables.size()",
             cat("num_seqs * max_blocks_per_seq = ", table_elems), block_tables.size());
  throw_table_fault(p, find_table_fault(p, block_tables, context_lens), function);
}

std::string describe(const DecodeProblem& p) {
  return cat("seqs=", p.num_seqs, " heads=", p.num_q_heads, "/", p.num_kv_heads, " dim=", p.head_dim,
             " page=", p.block_size, " ctx<=", p.max_context_len, " pool=", p.num_blocks, " ",
             dtype_name(p.dtype), p.fp8_kv ? cat(" kv=e4m3 k_scale=", p.k_scale, " v_scale=", p.v_scale) : std::string(),
             " ", p.layout.name(p.num_kv_heads, p.block_size, p.head_dim));
}

}  // namespace pa
