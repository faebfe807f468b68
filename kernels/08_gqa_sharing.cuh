#pragma once
/// \file
/// Step 08, GQA sharing: one program per (sequence, KV head) serves the whole query-head group,
/// so K and V are read once instead of once per query head.
///
/// What changed since step 07: with 32 query heads over 8 KV heads, steps 03-07 read every K
/// and V row four times (once per query head of its group; the emulator's byte count shows it).
/// Here program (seq, kv_head, split) loads each token's K and V slice once and uses it for
/// HEADS query heads: HEADS queries and HEADS running states (OnlineSoftmax) a lane. A group
/// larger than HEADS takes several passes over the split. HEADS is the largest power of two
/// dividing the group size whose queries and accumulators fit in kRegisterBudget floats a lane.
/// The split count and the merge are step 07's, the splits counted per (sequence, KV head).
///
///     build/cpu/steps/step08_gqa_sharing --help

#include "kernels/07_split_kv.cuh"

namespace pa::PA_KERNELS::step08 {

using step05::Slices;
using step06::OnlineSoftmax;
using step07::Partials;

// [kernel]
/// Program (seq, kv_head, split): every query head of the KV head's group, HEADS per pass over
/// the split's tokens, each token's K and V slice loaded once for the HEADS heads.
template <class T, int HEAD_DIM, int HEADS>
__global__ void gqa_split_decode(DecodeArgs<T> args, Partials partials) {
  using S = Slices<T, HEAD_DIM>;
  PA_DYNAMIC_SHARED(float, shared);
  const int seq = blockIdx.x;
  const int kv_head = blockIdx.y;
  const int split = blockIdx.z;
  const int context_len = args.context_lens[seq];
  const int begin = std::min(split * partials.partition, context_len);
  const int end = std::min(begin + partials.partition, context_len);
  const int group_size = args.group_size();
  for (int first = kv_head * group_size; first < (kv_head + 1) * group_size; first += HEADS) {
    float q[HEADS][S::kElems];
    OnlineSoftmax<S::kElems> state[HEADS];
    PA_UNROLL
    for (int h = 0; h < HEADS; ++h) {
      step05::load_slice<T, HEAD_DIM>(args.query, (static_cast<std::int64_t>(seq) * args.num_q_heads + first + h) * HEAD_DIM,
                                      threadIdx.x % S::kGroup, q[h]);
      PA_UNROLL
      for (int e = 0; e < S::kElems; ++e) q[h][e] *= args.scale;
    }
    step06::for_each_token<T, HEAD_DIM>(args, seq, kv_head, begin, end,
                                        [&](bool valid, const float (&k)[S::kElems], const float (&v)[S::kElems]) {
                                          PA_UNROLL
                                          for (int h = 0; h < HEADS; ++h) {  // one K and V row, HEADS heads
                                            float dot = 0.0f;
                                            PA_UNROLL
                                            for (int e = 0; e < S::kElems; ++e) dot += q[h][e] * k[e];
                                            dot = step05::group_sum<S::kGroup>(dot);
                                            if (valid) state[h].add(dot, v);
                                          }
                                        });
    PA_UNROLL
    for (int h = 0; h < HEADS; ++h) {
      const std::int64_t slot = (static_cast<std::int64_t>(seq) * args.num_q_heads + first + h) * partials.splits + split;
      step06::merge_groups<T, HEAD_DIM>(state[h], shared, [&](int d, float acc, float max, float sum) {
        partials.accs[slot * HEAD_DIM + d] = acc;
        if (d == 0) {
          partials.maxes[slot] = max;
          partials.sums[slot] = sum;
        }
      });
    }
  }
}
// [kernel]

// ----- host side -----------------------------------------------------------------------------
inline constexpr const char* kName = "step08_gqa_sharing";
/// Floats a lane may spend on one pass's queries and accumulators (two arrays of HEADS x a
/// lane's channels): past this the compiler spills them to local memory.
inline constexpr int kRegisterBudget = 64;

// [heads]
/// The most heads one pass may hold for a lane slice of \p elems floats (a power of two <= 8).
constexpr int max_heads_for(int elems) {
  int heads = 1;
  while (heads < 8 && 2 * heads * 2 * elems <= kRegisterBudget) heads *= 2;
  return heads;
}

/// Heads per pass: the largest power of two dividing the group size, at most \p most.
inline int heads_per_pass(int group_size, int most) {
  int heads = 1;
  while (heads * 2 <= most && group_size % (heads * 2) == 0) heads *= 2;
  return heads;
}
// [heads]

/// Calls `f(kernel, T{}, head_dim)` with the gqa_split_decode instantiation for \p p: storage
/// type, head dim and heads per pass (only the head counts its slice size allows are compiled).
template <class F>
void with_kernel(const DecodeProblem& p, F&& f) {
  dispatch_problem(p, [&](auto storage, auto head_dim) {
    using T = decltype(storage);
    constexpr int D = decltype(head_dim)::value;
    constexpr int kMostHeads = max_heads_for(Slices<T, D>::kElems);
    const int heads = heads_per_pass(p.group_size(), kMostHeads);
    if (heads == 1) f(gqa_split_decode<T, D, 1>, storage, head_dim);
    if constexpr (kMostHeads >= 2) if (heads == 2) f(gqa_split_decode<T, D, 2>, storage, head_dim);
    if constexpr (kMostHeads >= 4) if (heads == 4) f(gqa_split_decode<T, D, 4>, storage, head_dim);
    if constexpr (kMostHeads >= 8) if (heads == 8) f(gqa_split_decode<T, D, 8>, storage, head_dim);
  });
}

inline LaunchPlan plan(const DecodeProblem& p, const KernelOptions& options, const DeviceLimits& device) {
  step05::check_warps(p, options, knob_threads | knob_splits | knob_partition, kName);
  step07::require_split_options(options, kName);
  const int threads = step05::threads_of(options);
  const std::size_t shared = step06::shared_bytes(p, threads);
  int resident = 0;
  with_kernel(p, [&](auto kernel, auto, auto) { resident = resident_programs_per_sm(kernel, threads, shared, device); });
  return step07::split_plan(p, options, device, p.num_kv_heads, shared, resident, kName);
}

inline void launch(const DecodeView& view, const LaunchPlan& plan, void* stream) {
  if (!begin_launch(view, plan, kName)) return;
  step05::require_aligned(view, kName);
  const DecodeProblem& p = view.problem;
  const Partials partials = step07::partials_in(view.workspace, p, plan.splits);
  with_kernel(p, [&](auto kernel, auto storage, auto head_dim) {
    using T = decltype(storage);
    constexpr int D = decltype(head_dim)::value;
    const DecodeArgs<T> args = make_args<T>(view);
    launch_kernel("step08_gqa_split_decode", kernel, dim3(plan.grid[0], plan.grid[1], plan.grid[2]), dim3(plan.threads),
                  plan.shared_bytes, stream, args, partials);
    launch_kernel("step08_merge_splits", step07::merge_splits<T, D>, dim3(p.num_seqs, p.num_q_heads), dim3(D), 0, stream,
                  args, partials);
  });
}

inline KernelEntry entry() { return {8, kName, kBackend, knob_threads | knob_splits | knob_partition, 0, &plan, &launch}; }

}  // namespace pa::PA_KERNELS::step08
