#pragma once
/// \file
/// Step 03, naive paged decode: one one-thread program per (sequence, query head) reads K and
/// V in place, page by page through the block table.
///
/// What changed since step 02: no gather. The thread runs the same three passes
/// (attend_one_thread), but a token's row is found through the block table
/// (DecodeArgs::token_offset) instead of in a contiguous copy, so K and V are read once per
/// query head and never written. Everything else is as slow as one thread per head can be:
/// that is the first point of the ladder.
///
///     build/cpu/steps/step03_naive_decode --help

#include "kernels/02_pretend_programs.cuh"

namespace pa::PA_KERNELS::step03 {

// [kernel]
/// Program (seq, q_head), one thread: the three passes of step 02, reading the pages in place.
template <class T, int HEAD_DIM>
__global__ void naive_decode(DecodeArgs<T> args, gspan<float> scores) {
  const int seq = blockIdx.x;
  const int q_head = blockIdx.y;
  const int kv_head = q_head / args.group_size();
  const int context_len = args.context_lens[seq];
  step02::attend_one_thread<T, HEAD_DIM>(
      args, args.key_cache, args.value_cache,
      [&](int token) { return args.token_offset(seq, kv_head, token); }, scores, seq, q_head,
      context_len);
}
// [kernel]

// ----- host side -----------------------------------------------------------------------------
inline constexpr const char* kName = "step03_naive_decode";

/// Scores scratch: [num_seqs][num_q_heads][max_context_len] floats.
inline std::size_t workspace_bytes(const DecodeProblem& p) {
  return align_up(static_cast<std::size_t>(p.num_seqs) * p.num_q_heads * p.max_context_len * sizeof(float));
}

inline LaunchPlan plan(const DecodeProblem& p, const KernelOptions& options, const DeviceLimits&) {
  check_one_thread(p, options, kName);
  return make_plan(p, options, static_cast<unsigned>(p.num_seqs), static_cast<unsigned>(p.num_q_heads), 1, 0,
                   workspace_bytes(p));
}

inline void launch(const DecodeView& view, const LaunchPlan& plan, void* stream) {
  if (!begin_launch(view, plan, kName)) return;
  const DecodeProblem& p = view.problem;
  const std::size_t ws_bytes = plan.workspace_bytes;
  dispatch_problem(p, [&](auto storage, auto head_dim) {
    using T = decltype(storage);
    constexpr int D = decltype(head_dim)::value;
    launch_kernel(kName, naive_decode<T, D>, dim3(p.num_seqs, p.num_q_heads), dim3(1), 0, stream,
                  make_args<T>(view),
                  gspan<float>(static_cast<float*>(view.workspace),
                               static_cast<std::int64_t>(ws_bytes / sizeof(float)), "scores"));
  });
}

inline KernelEntry entry() { return {3, kName, kBackend, 0, 0, &plan, &launch}; }

}  // namespace pa::PA_KERNELS::step03
