#pragma once
/// \file
/// Step 02, pretend programs: a grid of one-thread programs, each finding its work from its
/// program id (`blockIdx`).
///
/// The decode step is done the way an engine without paged kernels would do it: first
/// gather_kv copies every context's K and V out of their pages into a contiguous buffer (one
/// program per (sequence, kv head)), then dense_decode runs attention over that copy (one
/// program per (sequence, query head)). The copy costs a write and a second read of all of
/// K and V; step 03 removes it by reading the pages in place.
///
///     build/cpu/steps/step02_pretend_programs --help

#include "kernels/decode_common.cuh"

namespace pa::PA_KERNELS::step02 {

// [gather]
/// Program (seq, kv_head), one thread: copies the context's K and V rows from their pages to
/// `keys`/`values`, laid out `[num_seqs][num_kv_heads][max_context_len][HEAD_DIM]`.
template <class T, int HEAD_DIM>
__global__ void gather_kv(DecodeArgs<T> args, gspan<T> keys, gspan<T> values) {
  const int seq = blockIdx.x;
  const int kv_head = blockIdx.y;
  const int context_len = args.context_lens[seq];
  const std::int64_t row0 =
      (static_cast<std::int64_t>(seq) * args.num_kv_heads + kv_head) * args.max_context_len;
  for (int token = 0; token < context_len; ++token) {
    const std::int64_t src = args.token_offset(seq, kv_head, token);  // through the block table
    const std::int64_t dst = (row0 + token) * HEAD_DIM;               // contiguous
    for (int d = 0; d < HEAD_DIM; ++d) {
      keys[dst + d] = args.key_cache[src + d];
      values[dst + d] = args.value_cache[src + d];
    }
  }
}
// [gather]

// [attend]
/// One thread computes one (sequence, query head) in three passes over the context:
/// 1. logits q·k·scale into `scores` (global scratch), tracking their max;
/// 2. each score becomes exp(score - max), summed;
/// 3. out = Σ p_t · v_t / Σ p_t.
/// `row_of(token)` is the offset of channel 0 of that token's K (and V) row: this is the only
/// thing steps 02 and 03 do differently.
template <class T, int HEAD_DIM, class RowOf>
__device__ void attend_one_thread(const DecodeArgs<T>& args, const gspan<const T>& keys,
                                  const gspan<const T>& values, RowOf row_of,
                                  const gspan<float>& scores, int seq, int q_head, int context_len) {
  const std::int64_t q_row = (static_cast<std::int64_t>(seq) * args.num_q_heads + q_head) * HEAD_DIM;
  const std::int64_t score_row =
      (static_cast<std::int64_t>(seq) * args.num_q_heads + q_head) * args.max_context_len;
  float q[HEAD_DIM];
  for (int d = 0; d < HEAD_DIM; ++d) q[d] = to_float(args.query[q_row + d]);

  float max_score = -INFINITY;  // pass 1: logits and their max
  for (int token = 0; token < context_len; ++token) {
    const std::int64_t row = row_of(token);
    float dot = 0.0f;
    for (int d = 0; d < HEAD_DIM; ++d) dot += q[d] * to_float(keys[row + d]);
    const float score = dot * args.scale;
    scores[score_row + token] = score;
    max_score = fmaxf(max_score, score);
  }
  float sum = 0.0f;  // pass 2: softmax numerators (max subtracted, so exp never overflows)
  for (int token = 0; token < context_len; ++token) {
    const float p = expf(scores[score_row + token] - max_score);
    scores[score_row + token] = p;
    sum += p;
  }
  float acc[HEAD_DIM];  // pass 3: weighted sum of V rows
  for (int d = 0; d < HEAD_DIM; ++d) acc[d] = 0.0f;
  for (int token = 0; token < context_len; ++token) {
    const float p = scores[score_row + token];
    const std::int64_t row = row_of(token);
    for (int d = 0; d < HEAD_DIM; ++d) acc[d] += p * to_float(values[row + d]);
  }
  const float inv_sum = context_len > 0 ? 1.0f / sum : 0.0f;  // context 0: a row of zeros
  for (int d = 0; d < HEAD_DIM; ++d) args.out[q_row + d] = from_float<T>(acc[d] * inv_sum);
}
// [attend]

/// Program (seq, q_head), one thread: attention over the gathered, contiguous K and V.
template <class T, int HEAD_DIM>
__global__ void dense_decode(DecodeArgs<T> args, gspan<const T> keys, gspan<const T> values,
                             gspan<float> scores) {
  const int seq = blockIdx.x;
  const int q_head = blockIdx.y;
  const int kv_head = q_head / args.group_size();
  const int context_len = args.context_lens[seq];
  const std::int64_t row0 =
      (static_cast<std::int64_t>(seq) * args.num_kv_heads + kv_head) * args.max_context_len;
  attend_one_thread<T, HEAD_DIM>(
      args, keys, values, [&](int token) { return (row0 + token) * HEAD_DIM; }, scores, seq,
      q_head, context_len);
}

// ----- host side -----------------------------------------------------------------------------
inline constexpr const char* kName = "step02_pretend_programs";

/// Workspace: the gathered K and V copies, then the scores.
struct Workspace {
  std::size_t kv_bytes = 0;      ///< bytes of one gathered copy (K or V)
  std::size_t scores_bytes = 0;  ///< [num_seqs][num_q_heads][max_context_len] floats
  static Workspace of(const DecodeProblem& p) {
    const std::size_t kv_elems = static_cast<std::size_t>(p.num_seqs) * p.num_kv_heads *
                                 p.max_context_len * p.head_dim;
    return {align_up(kv_elems * dtype_size(p.dtype)),
            align_up(static_cast<std::size_t>(p.num_seqs) * p.num_q_heads * p.max_context_len * sizeof(float))};
  }
  std::size_t total() const { return 2 * kv_bytes + scores_bytes; }
};

inline LaunchPlan plan(const DecodeProblem& p, const KernelOptions& options, const DeviceLimits&) {
  check_one_thread(p, options, kName);
  return make_plan(p, options, static_cast<unsigned>(p.num_seqs), static_cast<unsigned>(p.num_q_heads), 1, 0,
                   Workspace::of(p).total());
}

inline void launch(const DecodeView& view, const LaunchPlan& plan, void* stream) {
  if (!begin_launch(view, plan, kName)) return;  // an empty batch launches nothing
  const DecodeProblem& p = view.problem;
  const Workspace ws = Workspace::of(p);
  auto* base = static_cast<unsigned char*>(view.workspace);
  dispatch_problem(p, [&](auto storage, auto head_dim) {
    using T = decltype(storage);
    constexpr int D = decltype(head_dim)::value;
    const std::int64_t kv_elems = static_cast<std::int64_t>(ws.kv_bytes / sizeof(T));
    T* keys = reinterpret_cast<T*>(base);
    T* values = reinterpret_cast<T*>(base + ws.kv_bytes);
    float* scores = reinterpret_cast<float*>(base + 2 * ws.kv_bytes);
    const DecodeArgs<T> args = make_args<T>(view);
    launch_kernel("step02_gather_kv", gather_kv<T, D>, dim3(p.num_seqs, p.num_kv_heads), dim3(1), 0,
                  stream, args, gspan<T>(keys, kv_elems, "gathered_keys"),
                  gspan<T>(values, kv_elems, "gathered_values"));
    launch_kernel("step02_dense_decode", dense_decode<T, D>, dim3(p.num_seqs, p.num_q_heads), dim3(1), 0,
                  stream, args, gspan<const T>(keys, kv_elems, "gathered_keys"),
                  gspan<const T>(values, kv_elems, "gathered_values"),
                  gspan<float>(scores, static_cast<std::int64_t>(ws.scores_bytes / sizeof(float)), "scores"));
  });
}

inline KernelEntry entry() { return {2, kName, kBackend, 0, 0, &plan, &launch}; }

}  // namespace pa::PA_KERNELS::step02
