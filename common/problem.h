#pragma once
/// \file
/// The decode problem: shapes, cache geometry, storage type and scale, validated in one place.
///
/// One decode step computes, for every sequence `s` and query head `h`,
/// `out[s][h] = softmax(q[s][h] · K[s][kv(h)]ᵀ · scale) · V[s][kv(h)]`, where K and V are the
/// first `context_lens[s]` tokens of that sequence, read page by page through its block-table
/// row. Every shape check of the project lives here, so a kernel's launcher and the oracle
/// reject the same inputs with the same message.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/dtype.h"

namespace pa {

/// Element strides of the K and V caches (both caches share one layout). 64-bit: a pool of
/// more than 2^31 elements is ordinary.
struct CacheLayout {
  std::int64_t block_stride = 0;  ///< elements between page p and page p+1
  std::int64_t head_stride = 0;   ///< elements between kv head h and h+1 of one page
  std::int64_t token_stride = 0;  ///< elements between slot t and t+1 of one page
  std::int64_t dim_stride = 1;    ///< elements between channel d and d+1 (1 for every layout here)

  /// `[num_blocks][num_kv_heads][block_size][head_dim]`: one page of one head is contiguous.
  static CacheLayout hnd(int num_kv_heads, int block_size, int head_dim);
  /// `[num_blocks][block_size][num_kv_heads][head_dim]`: one token of all heads is contiguous.
  static CacheLayout nhd(int num_kv_heads, int block_size, int head_dim);
  /// "hnd" or "nhd" when the strides match one of them for these shapes, else "custom".
  std::string name(int num_kv_heads, int block_size, int head_dim) const;

  /// Offset of (page, kv_head, slot, channel).
  constexpr std::int64_t offset(std::int64_t page, std::int64_t kv_head, std::int64_t slot,
                                std::int64_t channel) const {
    return page * block_stride + kv_head * head_stride + slot * token_stride + channel * dim_stride;
  }
  friend bool operator==(const CacheLayout&, const CacheLayout&) = default;
};

/// Shapes of one batched decode step. Tensors: q and out are
/// `[num_seqs][num_q_heads][head_dim]`; the caches are `num_blocks` pages laid out by `layout`;
/// block tables are `[num_seqs][max_blocks_per_seq]` int32; context lengths `[num_seqs]` int32.
struct DecodeProblem {
  int num_seqs = 0;            ///< sequences in the batch (one decode token each)
  int num_q_heads = 0;         ///< query heads
  int num_kv_heads = 0;        ///< key/value heads; num_q_heads % num_kv_heads == 0
  int head_dim = 0;            ///< channels per head
  int block_size = 0;          ///< tokens per page
  int max_blocks_per_seq = 0;  ///< length of a block-table row
  int max_context_len = 0;     ///< longest context in the batch (sizes scratch and shared memory)
  /// Sum of the context lengths when the caller knows it (a serving engine does), else 0. A
  /// hint for the split count (step 07), never for memory: a wrong value costs speed only.
  std::int64_t total_context_len = 0;
  std::int64_t num_blocks = 0; ///< pages in the pool
  DType dtype = DType::f32;    ///< storage of q and out, and of K and V unless fp8_kv
  float scale = 0.0f;          ///< multiplies q·k; usually 1/sqrt(head_dim)
  CacheLayout layout;          ///< strides of the K and V caches
  /// K and V are stored as fp8 e4m3 (one byte an element, step 12), each with one scale for
  /// the whole cache: the value of a stored K element x is `e4m3_to_float(x) * k_scale`, of a V
  /// element `* v_scale`. False: K and V are stored as dtype, and both scales are 1.
  bool fp8_kv = false;
  float k_scale = 1.0f;        ///< dequantisation scale of K (fp8_kv)
  float v_scale = 1.0f;        ///< dequantisation scale of V (fp8_kv)

  /// Storage type of the K and V caches: e4m3 when fp8_kv, else dtype.
  DType cache_dtype() const { return fp8_kv ? DType::e4m3 : dtype; }

  /// Query heads that share one KV head (1 = MHA, num_q_heads = MQA).
  int group_size() const { return num_q_heads / num_kv_heads; }
  /// The KV head that query head \p q_head reads.
  int kv_head_of(int q_head) const { return q_head / group_size(); }
  /// Tokens one block-table row can address.
  std::int64_t row_capacity() const { return std::int64_t{max_blocks_per_seq} * block_size; }
  /// Elements of q (and of out).
  std::int64_t query_elems() const { return std::int64_t{num_seqs} * num_q_heads * head_dim; }
  /// Elements one cache (K or V) spans: last element's offset + 1.
  std::int64_t cache_elems() const;
  friend bool operator==(const DecodeProblem&, const DecodeProblem&) = default;
};

/// A problem with the default layout (hnd) and scale 1/sqrt(head_dim).
DecodeProblem make_problem(int num_seqs, int num_q_heads, int num_kv_heads, int head_dim,
                           int block_size, int max_blocks_per_seq, int max_context_len,
                           std::int64_t num_blocks, DType dtype);

/// Checks every shape and the scale; throws ArgumentError naming \p function and the argument.
void validate(const DecodeProblem& problem, std::string_view function);

/// Checks the data that indexes memory: each context length in [0, max_context_len] (which
/// validate() keeps within what a block-table row holds), each block-table entry of the used
/// prefix of a row (the pages_for(context_len) entries that hold the context) in
/// [0, num_blocks), and total_context_len against the lengths' sum. Entries past the used
/// prefix are never read and may hold anything (padding). Throws ArgumentError naming the
/// sequence, the entry and the value (throw_table_fault's messages).
void validate_tables(const DecodeProblem& problem, std::span<const std::int32_t> block_tables,
                     std::span<const std::int32_t> context_lens, std::string_view function);

/// The first value validate_tables refuses, in the order it checks them: sequence by sequence,
/// the context length before the row's entries, and the total last. The checked mode finds it
/// on the host (find_table_fault) or with kernels on the GPU (gpu::check_tables_async), and both
/// report it with throw_table_fault, so the two backends give the same message.
struct TableFault {
  enum class Kind : std::uint8_t {
    none,         ///< every value is in range
    context_len,  ///< context_lens[seq] = value is outside [0, max_context_len]
    block_table,  ///< block_tables[seq][entry] = value, an entry of the used prefix, is outside the pool
    total,        ///< total_context_len is neither 0 nor the sum of the lengths (value)
  };
  Kind kind = Kind::none;
  int seq = 0;                  ///< the sequence (context_len, block_table)
  std::int64_t entry = 0;       ///< the entry of its block-table row (block_table)
  std::int64_t value = 0;       ///< the value refused; for total, the lengths' sum
  std::int32_t context_len = 0; ///< the sequence's length (block_table)
};

/// The first out-of-range value of host tensors, as validate_tables checks them (whose size
/// checks come first: \p block_tables and \p context_lens must have the problem's sizes).
TableFault find_table_fault(const DecodeProblem& problem, std::span<const std::int32_t> block_tables,
                            std::span<const std::int32_t> context_lens);

/// Throws validate_tables's ArgumentError for \p fault, naming \p function, the sequence, the
/// entry, the value and the range it must lie in; returns when fault.kind is none.
void throw_table_fault(const DecodeProblem& problem, const TableFault& fault, std::string_view function);

/// Checks the host copy of a batch's context lengths alone (a plan that balances by them, before
/// any block table exists): one a sequence, each in [0, max_context_len], and total_context_len
/// against their sum, with validate_tables's messages (context_lens.size() first).
void validate_lengths(const DecodeProblem& problem, std::span<const std::int32_t> context_lens, std::string_view function);

/// Pages a context of \p context_len tokens occupies.
inline std::int64_t pages_for(std::int64_t context_len, int block_size) {
  return (context_len + block_size - 1) / block_size;
}

/// One line: "seqs=64 heads=32/8 dim=128 page=16 ctx<=8192 pool=32768 bf16 hnd" (with fp8 K/V,
/// "bf16 kv=e4m3 k_scale=0.00223 v_scale=0.00223 hnd").
std::string describe(const DecodeProblem& problem);

}  // namespace pa
