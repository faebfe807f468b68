// The oracle: decode attention written the way the formula reads, in double.
//
// For each sequence s and query head h (kv = kv_head_of(h), n = context_lens[s]):
//   logit[t] = (q[s][h] · K[s][kv][t]) · scale           t = 0 .. n-1
//   weight[t] = exp(logit[t] - max_t logit[t]) / Σ_t exp(logit[t] - max_t logit[t])
//   out[s][h] = Σ_t weight[t] · V[s][kv][t]
// The max is subtracted before exp so that logits near ±1e5 do not overflow; it does not
// change the result (it cancels between numerator and denominator).
//
// Nothing clever lives here: the paged version reads every token through the block table one
// at a time (once per (sequence, KV head); the query heads of that KV head's group then use the
// same rows), paged and dense share one per-(sequence, head) function, and there is no
// blocking, no online softmax and no threading. Kernels are held against this file.

#include "reference/oracle.h"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

#include "common/dtype.h"
#include "common/error.h"
#include "common/problem.h"

namespace pa::reference {
namespace {

/// Checks what the oracle reads: the problem's shapes, the pointers it dereferences, and the
/// block tables and context lengths (only the used prefix of each row, as a kernel reads them).
void check_host_view(const DecodeView& view, std::string_view function) {
  const DecodeProblem& problem = view.problem;
  validate(problem, function);
  if (problem.num_seqs == 0) return;  // an empty batch reads nothing
  PA_REQUIRE(view.query, function, "query", "a non-null pointer", "nullptr");
  PA_REQUIRE(view.context_lens, function, "context_lens", "a non-null pointer", "nullptr");
  PA_REQUIRE(view.block_tables || problem.max_blocks_per_seq == 0, function, "block_tables",
             "a non-null pointer", "nullptr");
  PA_REQUIRE(view.key_cache || problem.num_blocks == 0, function, "key_cache",
             "a non-null pointer", "nullptr");
  PA_REQUIRE(view.value_cache || problem.num_blocks == 0, function, "value_cache",
             "a non-null pointer", "nullptr");
  const std::size_t table_elems =
      static_cast<std::size_t>(problem.num_seqs) * static_cast<std::size_t>(problem.max_blocks_per_seq);
  validate_tables(problem, std::span<const std::int32_t>(view.block_tables, table_elems),
                  std::span<const std::int32_t>(view.context_lens, static_cast<std::size_t>(problem.num_seqs)),
                  function);
}

/// Index of element (seq, head, channel) in a `[num_seqs][heads][head_dim]` tensor.
std::size_t row_index(const DecodeProblem& problem, int seq, int heads, int head, int channel) {
  return (static_cast<std::size_t>(seq) * static_cast<std::size_t>(heads) + static_cast<std::size_t>(head)) *
             static_cast<std::size_t>(problem.head_dim) +
         static_cast<std::size_t>(channel);
}

/// Offset, in a `[num_seqs][num_kv_heads][max_context_len][head_dim]` tensor, of
/// (seq, kv_head, token, 0).
std::size_t dense_index(const DecodeProblem& problem, int seq, int kv_head, std::int64_t token) {
  const auto heads = static_cast<std::size_t>(problem.num_kv_heads);
  const auto tokens = static_cast<std::size_t>(problem.max_context_len);
  const auto dim = static_cast<std::size_t>(problem.head_dim);
  return ((static_cast<std::size_t>(seq) * heads + static_cast<std::size_t>(kv_head)) * tokens +
          static_cast<std::size_t>(token)) *
         dim;
}

/// K or V of one (sequence, KV head): row t is token t, as the cache stores it.
using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// softmax(keys · query · scale) · values for one (sequence, query head).
/// keys and values are `[context_len][head_dim]`; context_len is at least 1.
// [attend]
Eigen::VectorXd attend(const Eigen::VectorXd& query, const RowMatrix& keys, const RowMatrix& values,
                       double scale) {
  const Eigen::VectorXd logits = (keys * query) * scale;  // [context_len]
  // PropagateNaN: a NaN logit (NaN in a valid K) makes the whole row NaN, on purpose.
  const double max_logit = logits.maxCoeff<Eigen::PropagateNaN>();
  const Eigen::VectorXd weights = (logits.array() - max_logit).exp().matrix();  // [context_len]
  const double total = weights.sum();
  return (values.transpose() * weights) / total;  // [head_dim]
}
// [attend]

}  // namespace

std::vector<double> paged_attention(const DecodeView& host_view) {
  check_host_view(host_view, "reference::paged_attention");
  const DecodeProblem& problem = host_view.problem;
  const int head_dim = problem.head_dim;
  std::vector<double> out(static_cast<std::size_t>(problem.query_elems()), 0.0);

  for (int seq = 0; seq < problem.num_seqs; ++seq) {
    const std::int64_t context_len = host_view.context_lens[seq];
    if (context_len == 0) continue;  // row stays 0; the block-table row is not read
    const std::int32_t* table_row =
        host_view.block_tables + static_cast<std::size_t>(seq) * static_cast<std::size_t>(problem.max_blocks_per_seq);

    for (int kv_head = 0; kv_head < problem.num_kv_heads; ++kv_head) {
      // [paged_read]
      // Token t lives in page table_row[t / block_size], slot t % block_size.
      RowMatrix keys(context_len, head_dim);    // [context_len][head_dim]
      RowMatrix values(context_len, head_dim);  // [context_len][head_dim]
      for (std::int64_t token = 0; token < context_len; ++token) {
        const std::int64_t page = table_row[token / problem.block_size];
        const std::int64_t slot = token % problem.block_size;
        for (int d = 0; d < head_dim; ++d) {
          const auto offset = static_cast<std::size_t>(problem.layout.offset(page, kv_head, slot, d));
          // fp8 K/V: the stored value times its cache's scale, in double (exact: an e4m3 value
          // has 4 significant bits, a float scale 24).
          keys(token, d) = load_as_float(host_view.key_cache, problem.cache_dtype(), offset) * double{problem.k_scale};
          values(token, d) = load_as_float(host_view.value_cache, problem.cache_dtype(), offset) * double{problem.v_scale};
        }
      }
      // [paged_read]

      // Every query head of this KV head's group attends to the same K and V.
      for (int head = 0; head < problem.num_q_heads; ++head) {
        if (problem.kv_head_of(head) != kv_head) continue;
        Eigen::VectorXd query(head_dim);  // [head_dim]
        for (int d = 0; d < head_dim; ++d)
          query(d) = load_as_float(host_view.query, problem.dtype, row_index(problem, seq, problem.num_q_heads, head, d));
        const Eigen::VectorXd result = attend(query, keys, values, problem.scale);
        for (int d = 0; d < head_dim; ++d) out[row_index(problem, seq, problem.num_q_heads, head, d)] = result(d);
      }
    }
  }
  return out;
}

std::vector<double> dense_attention(const DecodeProblem& problem, std::span<const double> query,
                                    std::span<const double> keys, std::span<const double> values,
                                    std::span<const std::int32_t> context_lens) {
  constexpr std::string_view function = "reference::dense_attention";
  validate(problem, function);
  const auto query_elems = static_cast<std::size_t>(problem.query_elems());
  const std::size_t kv_elems = static_cast<std::size_t>(problem.num_seqs) * static_cast<std::size_t>(problem.num_kv_heads) *
                               static_cast<std::size_t>(problem.max_context_len) * static_cast<std::size_t>(problem.head_dim);
  PA_REQUIRE(query.size() == query_elems, function, "query.size()",
             cat("num_seqs * num_q_heads * head_dim = ", query_elems), query.size());
  PA_REQUIRE(keys.size() == kv_elems, function, "keys.size()",
             cat("num_seqs * num_kv_heads * max_context_len * head_dim = ", kv_elems), keys.size());
  PA_REQUIRE(values.size() == kv_elems, function, "values.size()",
             cat("num_seqs * num_kv_heads * max_context_len * head_dim = ", kv_elems), values.size());
  PA_REQUIRE(context_lens.size() == static_cast<std::size_t>(problem.num_seqs), function,
             "context_lens.size()", cat("num_seqs = ", problem.num_seqs), context_lens.size());
  for (int seq = 0; seq < problem.num_seqs; ++seq)
    PA_REQUIRE(context_lens[seq] >= 0 && context_lens[seq] <= problem.max_context_len, function,
               cat("context_lens[", seq, "]"), cat("in [0, max_context_len = ", problem.max_context_len, "]"),
               context_lens[seq]);

  const int head_dim = problem.head_dim;
  std::vector<double> out(query_elems, 0.0);
  for (int seq = 0; seq < problem.num_seqs; ++seq) {
    const std::int64_t context_len = context_lens[seq];
    if (context_len == 0) continue;
    for (int kv_head = 0; kv_head < problem.num_kv_heads; ++kv_head) {
      RowMatrix k(context_len, head_dim);  // [context_len][head_dim]
      RowMatrix v(context_len, head_dim);  // [context_len][head_dim]
      for (std::int64_t token = 0; token < context_len; ++token) {
        const std::size_t base = dense_index(problem, seq, kv_head, token);
        for (int d = 0; d < head_dim; ++d) {
          k(token, d) = keys[base + static_cast<std::size_t>(d)];
          v(token, d) = values[base + static_cast<std::size_t>(d)];
        }
      }
      for (int head = 0; head < problem.num_q_heads; ++head) {
        if (problem.kv_head_of(head) != kv_head) continue;
        Eigen::VectorXd q(head_dim);  // [head_dim]
        for (int d = 0; d < head_dim; ++d) q(d) = query[row_index(problem, seq, problem.num_q_heads, head, d)];
        const Eigen::VectorXd result = attend(q, k, v, problem.scale);
        for (int d = 0; d < head_dim; ++d) out[row_index(problem, seq, problem.num_q_heads, head, d)] = result(d);
      }
    }
  }
  return out;
}

std::vector<double> gather_cache(const DecodeView& host_view, const void* cache) {
  constexpr std::string_view function = "reference::gather_cache";
  check_host_view(host_view, function);
  const DecodeProblem& problem = host_view.problem;
  PA_REQUIRE(cache || problem.num_seqs == 0 || problem.num_blocks == 0, function, "cache",
             "a non-null pointer", "nullptr");
  const std::size_t elems = static_cast<std::size_t>(problem.num_seqs) * static_cast<std::size_t>(problem.num_kv_heads) *
                            static_cast<std::size_t>(problem.max_context_len) * static_cast<std::size_t>(problem.head_dim);
  std::vector<double> dense(elems, 0.0);  // [num_seqs][num_kv_heads][max_context_len][head_dim]
  for (int seq = 0; seq < problem.num_seqs; ++seq) {
    const std::int64_t context_len = host_view.context_lens[seq];
    const std::int32_t* table_row =
        host_view.block_tables + static_cast<std::size_t>(seq) * static_cast<std::size_t>(problem.max_blocks_per_seq);
    for (int kv_head = 0; kv_head < problem.num_kv_heads; ++kv_head)
      for (std::int64_t token = 0; token < context_len; ++token) {
        const std::int64_t page = table_row[token / problem.block_size];
        const std::int64_t slot = token % problem.block_size;
        const std::size_t base = dense_index(problem, seq, kv_head, token);
        for (int d = 0; d < problem.head_dim; ++d)
          dense[base + static_cast<std::size_t>(d)] =
              load_as_float(cache, problem.cache_dtype(), static_cast<std::size_t>(problem.layout.offset(page, kv_head, slot, d))) *
              double{cache == host_view.key_cache ? problem.k_scale : problem.v_scale};
      }
  }
  return dense;
}

std::vector<float> plain_float_attention(const DecodeView& host_view, bool weights_in_storage_type) {
  check_host_view(host_view, "reference::plain_float_attention");
  const DecodeProblem& problem = host_view.problem;
  const int head_dim = problem.head_dim;
  std::vector<float> out(static_cast<std::size_t>(problem.query_elems()), 0.0f);
  std::vector<float> logits(static_cast<std::size_t>(problem.max_context_len));  // scratch
  std::vector<float> accumulator(static_cast<std::size_t>(head_dim));

  for (int seq = 0; seq < problem.num_seqs; ++seq) {
    const std::int64_t context_len = host_view.context_lens[seq];
    if (context_len == 0) continue;
    const std::int32_t* table_row =
        host_view.block_tables + static_cast<std::size_t>(seq) * static_cast<std::size_t>(problem.max_blocks_per_seq);
    for (int head = 0; head < problem.num_q_heads; ++head) {
      const int kv_head = problem.kv_head_of(head);
      auto query_at = [&](int d) {
        return load_as_float(host_view.query, problem.dtype, row_index(problem, seq, problem.num_q_heads, head, d));
      };
      auto offset_of = [&](std::int64_t token, int d) {
        const std::int64_t page = table_row[token / problem.block_size];
        return static_cast<std::size_t>(problem.layout.offset(page, kv_head, token % problem.block_size, d));
      };

      // Pass 1: scores to scratch, and their max.
      float max_logit = -std::numeric_limits<float>::infinity();
      for (std::int64_t token = 0; token < context_len; ++token) {
        float dot = 0.0f;
        for (int d = 0; d < head_dim; ++d)
          dot += query_at(d) * (load_as_float(host_view.key_cache, problem.cache_dtype(), offset_of(token, d)) * problem.k_scale);
        const float logit = dot * problem.scale;
        logits[static_cast<std::size_t>(token)] = logit;
        if (logit > max_logit) max_logit = logit;  // a NaN logit never wins, but its exp below is NaN
      }

      // Pass 2: exponentials, their sum, and the weighted sum of V.
      float total = 0.0f;
      std::fill(accumulator.begin(), accumulator.end(), 0.0f);
      for (std::int64_t token = 0; token < context_len; ++token) {
        float weight = std::exp(logits[static_cast<std::size_t>(token)] - max_logit);
        if (weights_in_storage_type) weight = round_to(problem.dtype, weight);
        total += weight;
        for (int d = 0; d < head_dim; ++d)
          accumulator[static_cast<std::size_t>(d)] +=
              weight * (load_as_float(host_view.value_cache, problem.cache_dtype(), offset_of(token, d)) * problem.v_scale);
      }
      for (int d = 0; d < head_dim; ++d)
        out[row_index(problem, seq, problem.num_q_heads, head, d)] =
            round_to(problem.dtype, accumulator[static_cast<std::size_t>(d)] / total);
    }
  }
  return out;
}

}  // namespace pa::reference
