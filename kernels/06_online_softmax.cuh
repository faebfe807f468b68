#pragma once
/// \file
/// Step 06, online softmax: one streaming pass over K and V with a running max and sum; no
/// logits buffer, so no context cap.
///
/// What changed since step 05: each thread group keeps, for its tokens, the running max `m`,
/// the running sum `l` of exp(score - m) and the running weighted sum of V rows `acc`
/// (OnlineSoftmax). A score above `m` rescales `l` and `acc` by exp(m_old - m_new) first. A
/// token's K and V are read in the same iteration, and the next token's are loaded while this
/// one is used (a register prefetch); nothing is stored per token, so any context length fits.
/// At the end the groups' states are merged with the same rescaling, by shuffles within a warp
/// and through shared memory across warps.
///
///     build/cpu/steps/step06_online_softmax --help

#include "kernels/05_warps_and_vectors.cuh"

namespace pa::PA_KERNELS::step06 {

using step05::group_sum;
using step05::load_raw;
using step05::load_slice;
using step05::RawSlice;
using step05::Slices;
using step05::to_floats;

// [state]
/// softmax(scores) · V over the tokens seen so far, kept as three running values: the largest
/// score `max`, the sum of exp(score - max), and the sum of exp(score - max) · V (this lane's N
/// channels). Adding a token or merging another state rescales what was summed under an older,
/// smaller max: the result is exact whatever the order, up to rounding.
template <int N>
struct OnlineSoftmax {
  float max = -INFINITY;
  float sum = 0.0f;
  float acc[N] = {};

  /// Adds one token: its score and this lane's channels of its V row. A NaN score makes the
  /// state NaN, as the reference's softmax does.
  __device__ void add(float score, const float (&v)[N]) {
    if (score > max) {  // a new max: rescale what was summed under the old one
      const float rescale = expf(max - score);
      sum *= rescale;
      PA_UNROLL
      for (int e = 0; e < N; ++e) acc[e] *= rescale;
      max = score;
    }
    const float p = expf(score - max);
    sum += p;
    PA_UNROLL
    for (int e = 0; e < N; ++e) acc[e] += p * v[e];
  }

  /// The weight exp(max - merged_max) of a state with this max and sum under \p merged_max; an
  /// empty state (sum 0) weighs 0, never NaN.
  __device__ static float weight(float sum, float max, float merged_max) {
    return sum == 0.0f ? 0.0f : expf(max - merged_max);
  }
};
// [state]

// [stream]
/// Walks tokens [begin, end) of \p seq's KV head \p kv_head: thread group g takes tokens
/// begin + g, begin + g + groups, ... (a warp's groups read neighbouring tokens, so its loads
/// stay coalesced) and calls `visit(valid, k, v)` with its lane's channels of the token's K and
/// V rows as floats. The next token's K and V are loaded before the visit, so their loads are
/// in flight while this token is used. Every lane of the program runs the same number of
/// iterations (a visit's shuffles need the whole warp); past the end `valid` is false and the
/// rows are zeros.
template <class T, int HEAD_DIM, class Visit>
__device__ void for_each_token(const DecodeArgs<T>& args, int seq, int kv_head, int begin, int end, Visit visit) {
  using S = Slices<T, HEAD_DIM>;
  const int rank = threadIdx.x % S::kGroup;
  const int group = threadIdx.x / S::kGroup;
  const int groups = blockDim.x / S::kGroup;
  auto fetch = [&](int token, RawSlice<T, HEAD_DIM>& k, RawSlice<T, HEAD_DIM>& v) {
    if (token < end) {
      const std::int64_t row = args.token_offset(seq, kv_head, token);
      load_raw<T, HEAD_DIM>(args.key_cache, row, rank, k);
      load_raw<T, HEAD_DIM>(args.value_cache, row, rank, v);
    } else {
      k = {};
      v = {};
    }
  };
  RawSlice<T, HEAD_DIM> k_next, v_next;
  fetch(begin + group, k_next, v_next);
  for (int first = begin; first < end; first += groups) {
    const int token = first + group;
    const RawSlice<T, HEAD_DIM> k_raw = k_next, v_raw = v_next;
    fetch(token + groups, k_next, v_next);  // in flight while this token is used
    float k[S::kElems], v[S::kElems];
    to_floats<T, HEAD_DIM>(k_raw, k);
    to_floats<T, HEAD_DIM>(v_raw, v);
    visit(token < end, k, v);
  }
}
// [stream]

/// Floats of shared memory merge_groups needs for \p warps warps: maxes, sums, accs[HEAD_DIM].
__host__ __device__ constexpr int merge_floats(int warps, int head_dim) { return warps * (head_dim + 2); }

// [merge]
/// Merges the states of every thread group of the program, then calls `emit(d, acc, max, sum)`
/// once per channel d with the merged, not yet normalised values (sum == 0: no tokens). Within
/// a warp by shuffles: at lane distances kGroup, 2 kGroup, .., 16 each lane merges with the lane
/// of the same rank in the partner group, so the warp's first group ends with the warp's state.
/// Then across warps through \p shared (merge_floats() floats): each warp's state, a barrier,
/// one thread a channel merging the warps in order, so the result is the same bits every run.
/// Ends with a barrier, so \p shared may be reused at once.
template <class T, int HEAD_DIM, class Shared, class Emit>
__device__ void merge_groups(OnlineSoftmax<Slices<T, HEAD_DIM>::kElems> state, Shared shared, Emit emit) {
  using S = Slices<T, HEAD_DIM>;
  using State = OnlineSoftmax<S::kElems>;
  PA_UNROLL
  for (int distance = S::kGroup; distance < 32; distance *= 2) {
    const float other_max = __shfl_xor_sync(0xffffffffu, state.max, distance);
    const float other_sum = __shfl_xor_sync(0xffffffffu, state.sum, distance);
    const float merged_max = fmaxf(state.max, other_max);
    const float weight = State::weight(state.sum, state.max, merged_max);
    const float other_weight = State::weight(other_sum, other_max, merged_max);
    state.sum = state.sum * weight + other_sum * other_weight;
    PA_UNROLL
    for (int e = 0; e < S::kElems; ++e)
      state.acc[e] = state.acc[e] * weight + __shfl_xor_sync(0xffffffffu, state.acc[e], distance) * other_weight;
    state.max = merged_max;
  }
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  auto maxes = shared;             // [warps]
  auto sums = shared + warps;      // [warps]
  auto accs = shared + 2 * warps;  // [warps][HEAD_DIM]
  if (threadIdx.x % 32 < S::kGroup) {  // the warp's first group holds the warp's state
    const int rank = static_cast<int>(threadIdx.x) % S::kGroup;
    if (rank == 0) {
      maxes[warp] = state.max;
      sums[warp] = state.sum;
    }
    PA_UNROLL
    for (int e = 0; e < S::kElems; ++e) accs[warp * HEAD_DIM + S::channel(rank, e)] = state.acc[e];
  }
  __syncthreads();
  for (int d = threadIdx.x; d < HEAD_DIM; d += blockDim.x) {
    float merged_max = -INFINITY;
    for (int w = 0; w < warps; ++w) merged_max = fmaxf(merged_max, maxes[w]);
    float merged_sum = 0.0f, merged_acc = 0.0f;
    for (int w = 0; w < warps; ++w) {
      const float weight = State::weight(sums[w], maxes[w], merged_max);
      merged_sum += sums[w] * weight;
      merged_acc += accs[w * HEAD_DIM + d] * weight;
    }
    emit(d, merged_acc, merged_max, merged_sum);
  }
  __syncthreads();  // the caller may reuse shared at once
}
// [merge]

// [kernel]
/// Program (seq, q_head): the whole context in one pass, then the groups' merge.
template <class T, int HEAD_DIM>
__global__ void online_decode(DecodeArgs<T> args) {
  using S = Slices<T, HEAD_DIM>;
  PA_DYNAMIC_SHARED(float, shared);
  const int seq = blockIdx.x;
  const int q_head = blockIdx.y;
  const int kv_head = q_head / args.group_size();
  const std::int64_t row = (static_cast<std::int64_t>(seq) * args.num_q_heads + q_head) * HEAD_DIM;
  float q[S::kElems];
  load_slice<T, HEAD_DIM>(args.query, row, threadIdx.x % S::kGroup, q);
  PA_UNROLL
  for (int e = 0; e < S::kElems; ++e) q[e] *= args.scale;
  OnlineSoftmax<S::kElems> state;
  for_each_token<T, HEAD_DIM>(args, seq, kv_head, 0, args.context_lens[seq],
                              [&](bool valid, const float (&k)[S::kElems], const float (&v)[S::kElems]) {
                                float dot = 0.0f;
                                PA_UNROLL
                                for (int e = 0; e < S::kElems; ++e) dot += q[e] * k[e];
                                dot = group_sum<S::kGroup>(dot);
                                if (valid) state.add(dot, v);
                              });
  merge_groups<T, HEAD_DIM>(state, shared, [&](int d, float acc, float, float sum) {
    args.out[row + d] = from_float<T>(sum == 0.0f ? 0.0f : acc / sum);  // context 0: zeros; NaN stays NaN
  });
}
// [kernel]

// ----- host side -----------------------------------------------------------------------------
inline constexpr const char* kName = "step06_online_softmax";

/// Dynamic shared memory: the groups' merge for \p threads threads.
inline std::size_t shared_bytes(const DecodeProblem& p, int threads) {
  return static_cast<std::size_t>(merge_floats(threads / 32, p.head_dim)) * sizeof(float);
}

inline LaunchPlan plan(const DecodeProblem& p, const KernelOptions& options, const DeviceLimits&) {
  step05::check_warps(p, options, knob_threads, kName);
  // At most 32 warps of 258 floats (head dim 256): the merge always fits a block.
  return step05::warp_plan(p, options, shared_bytes(p, step05::threads_of(options)));
}

inline void launch(const DecodeView& view, const LaunchPlan& plan, void* stream) {
  if (!begin_launch(view, plan, kName)) return;
  step05::require_aligned(view, kName);
  launch_planned(kName, view, plan, stream, [](auto storage, auto head_dim) {
    return online_decode<decltype(storage), decltype(head_dim)::value>;
  });
}

inline KernelEntry entry() { return {6, kName, kBackend, knob_threads, 0, &plan, &launch}; }

}  // namespace pa::PA_KERNELS::step06
