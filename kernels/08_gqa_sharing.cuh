#pragma once
/// \file
/// Step 08, GQA sharing: one program per (sequence, KV head) serves the whole query-head group,
/// so K and V are read once instead of once per query head.
///
/// What changed since step 07: with 32 query heads over 8 KV heads, steps 03–07 read every K
/// and V row four times (once per query head of its group; the emulator's byte count shows it).
/// Here program (kv_head, seq, split) loads each token's K and V slice once and uses it for
/// HEADS query heads at a time (online_attend's HEADS, 1 until now); a group larger than HEADS
/// takes several passes over the split. HEADS is the largest power of two dividing the group
/// size whose queries and accumulators still fit in registers (64 floats a lane); the split
/// count and the merge are step 07's, counted in (sequence, KV head) pairs.
///
///     build/cpu/steps/step08_gqa_sharing --help

#include "kernels/07_split_kv.cuh"

namespace pa::PA_KERNELS::step08 {

using step05::Slices;
using step06::merge_floats;
using step06::online_attend;
using step07::Partials;

// [kernel]
/// Program (kv_head, seq, split): every query head of the KV head's group, HEADS per pass.
template <class T, int HEAD_DIM, int HEADS, int TOKENS>
__global__ void gqa_split_decode(DecodeArgs<T> args, Partials partials) {
  PA_DYNAMIC_SHARED(float, shared);
  allow_next_kernel();  // as in step 07: the merge may be placed early and waits for the partials
  const int kv_head = blockIdx.x;  // heads first, as in step 07
  const int seq = blockIdx.y;
  const int split = blockIdx.z;
  step07::prefetch_split_table(args, seq, split, partials.partition);  // as in step 07
  const int context_len = args.context_lens[seq];
  const int begin = std::min(split * partials.partition, context_len);
  const int end = std::min(begin + partials.partition, context_len);
  const int group_size = args.group_size();
  for (int first = kv_head * group_size; first < (kv_head + 1) * group_size; first += HEADS) {
    online_attend<T, HEAD_DIM, HEADS, TOKENS>(
        args, seq, first, kv_head, begin, end, shared, [&](int h, int d, float acc, float max, float sum) {
          const std::int64_t slot = (static_cast<std::int64_t>(seq) * args.num_q_heads + first + h) * partials.splits + split;
          partials.accs[slot * HEAD_DIM + d] = acc;
          if (d == 0) {
            partials.maxes[slot] = max;
            partials.sums[slot] = sum;
          }
        });
  }
}
// [kernel]

// ----- host side -----------------------------------------------------------------------------
inline constexpr const char* kName = "step08_gqa_sharing";
/// Floats a lane may spend on one pass's queries and accumulators.
inline constexpr int kRegisterBudget = 64;

using step07::threads_of;  // the same default (step07::kDefaultThreads) and the same plan_split

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


/// Runs `f(kernel, T{}, head_dim, shared_bytes)` with the gqa_split_decode instantiation this
/// problem uses (storage type, head dim, heads per pass, tile of \p options) and its dynamic
/// shared memory; only the head counts its slice size allows are compiled.
template <class F>
void with_kernel(const DecodeProblem& p, const KernelOptions& options, F&& f) {
  const int threads = threads_of(options);
  step06::dispatch_attend(p, options, [&](auto storage, auto head_dim, auto tile) {
    using T = decltype(storage);
    constexpr int D = decltype(head_dim)::value;
    constexpr int N = decltype(tile)::value;
    constexpr int kMostHeads = max_heads_for(Slices<T, D>::kElems);
    const int heads = heads_per_pass(p.group_size(), kMostHeads);
    auto call = [&](auto kernel, auto heads_constant) {
      constexpr int H = decltype(heads_constant)::value;
      f(kernel, storage, head_dim, step06::attend_floats<T, D, H, N>(threads) * std::int64_t{sizeof(float)});
    };
    if (heads == 1) call(gqa_split_decode<T, D, 1, N>, std::integral_constant<int, 1>{});
    if constexpr (kMostHeads >= 2) if (heads == 2) call(gqa_split_decode<T, D, 2, N>, std::integral_constant<int, 2>{});
    if constexpr (kMostHeads >= 4) if (heads == 4) call(gqa_split_decode<T, D, 4, N>, std::integral_constant<int, 4>{});
    if constexpr (kMostHeads >= 8) if (heads == 8) call(gqa_split_decode<T, D, 8, N>, std::integral_constant<int, 8>{});
  });
}

/// This step's with_kernel as a callable object (a SplitHost holds one).
struct WithKernel {
  template <class F>
  void operator()(const DecodeProblem& p, const KernelOptions& options, F&& f) const {
    step08::with_kernel(p, options, f);  // qualified: ADL would also find step07::with_kernel
  }
};

/// Step 08's wave program: one of 512 threads an SM at tile 1. Its thread group already uses
/// each K and V row for the whole query-head group, so step 07's tile 2 (two tokens an
/// iteration, to spread the per-iteration costs) made it slower: 44.8-47.0 us on long-single
/// against 41.6-43.0 (run v51).
inline constexpr step07::WaveShape kWaveShape{step07::kWaveWarps * 32, 1};

/// Step 08's host side: step 07's, over (KV head, sequence) pairs, so its plan counts those.
inline constexpr step07::SplitHost<WithKernel> kHost{kName, "step08_gqa_split_decode", "step08_merge_splits", true,
                                                     kWaveShape, {}};

inline step07::SplitPlan make_plan(const DecodeProblem& p, const KernelOptions& options, const DeviceLimits& device) {
  return kHost.make_plan(p, options, device);
}

inline KernelEntry entry() { return step07::split_entry<kHost>(8); }

}  // namespace pa::PA_KERNELS::step08
