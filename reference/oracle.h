#pragma once
/// \file
/// The oracle: the plainest correct decode attention, in double, with Eigen.
///
/// Nothing clever lives here. paged_attention() reads the cache token by token through the
/// block table, exactly as the definition says; dense_attention() computes the same from
/// contiguous K and V, so a test can hold one against the other.

#include <span>
#include <vector>

#include "common/kernel_api.h"

namespace pa::reference {

/// out[s][h][d] in double for a view over host memory: q, both caches, block tables and
/// context lengths are read (through the table, token by token); out and workspace are ignored.
/// A sequence with context 0 gets a row of zeros and its block-table row is not read. Storage
/// may be f32, f16 or bf16 (converted exactly to double); with fp8 K/V (problem.fp8_kv) each K
/// and V element is its e4m3 value times k_scale or v_scale, in double: the dequantised cache. A NaN in a valid K makes every
/// channel of the rows that read it NaN; a NaN in a valid V, that channel of those rows.
///
/// Throws ArgumentError naming "reference::paged_attention" and the argument for a problem
/// validate() rejects, a null pointer it would read, or a context length or used block-table
/// entry validate_tables() rejects.
std::vector<double> paged_attention(const DecodeView& host_view);

/// The same from contiguous tensors: \p keys and \p values are
/// `[num_seqs][num_kv_heads][max_context_len][head_dim]` in double; only the first
/// context_lens[s] tokens of each row are read. \p query is `[num_seqs][num_q_heads][head_dim]`.
/// On K/V from gather_cache() it agrees with paged_attention() to 1e-12 (tests hold it there).
/// Throws ArgumentError naming the span whose size is wrong or the context length.
std::vector<double> dense_attention(const DecodeProblem& problem, std::span<const double> query,
                                    std::span<const double> keys, std::span<const double> values,
                                    std::span<const std::int32_t> context_lens);

/// Gathers one cache (\p cache: host_view.key_cache or host_view.value_cache) into the
/// contiguous double layout dense_attention() takes. Tokens past a context's end are 0.
std::vector<double> gather_cache(const DecodeView& host_view, const void* cache);

/// The plainest loop in the storage's working precision (float math, two passes, max
/// subtracted), rounded to the storage type: docs/design/CORRECTNESS.md bounds a kernel's error
/// by 3x this loop's error. With \p weights_in_storage_type each softmax weight is rounded to
/// the storage type before it multiplies V and joins the sum, as a kernel that multiplies P·V on
/// tensor cores does (KernelEntry::weights_in_storage_type); f32 storage rounds nothing. Same
/// layout, zeros for context 0 and validation as paged_attention().
std::vector<float> plain_float_attention(const DecodeView& host_view, bool weights_in_storage_type = false);

}  // namespace pa::reference
