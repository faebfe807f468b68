#pragma once
/// \file
/// Step 06, online softmax: one streaming pass over K and V with a running max and sum; no
/// logits buffer, so no context cap.
///
/// What changed since step 05: each thread group keeps, for its tokens, the running max `m`,
/// the running sum `l` of exp(score - m) and the running weighted sum of V rows `acc`. A new
/// score above `m` rescales `l` and `acc` by exp(m_old - m_new) first. K and V of a token are
/// read in the same iteration, and nothing is stored per token, so any context length fits.
/// At the end the groups' states are merged through shared memory (log-sum-exp), the same
/// merge step 07 uses across programs.
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

// [group_sums]
/// Sums HEADS values across the GROUP lanes of a thread group, every lane getting every total.
/// HEADS separate butterflies would cost HEADS * log2(GROUP) shuffles. Instead, while a lane
/// carries several values, each step sends half of them to its partner and keeps the other half
/// (partner's half added in): HEADS-1 shuffles leave each lane one head's partial, a plain
/// butterfly finishes it, and HEADS shuffles hand each total to every lane. For 4 heads over 16
/// lanes: 9 shuffles instead of 16. Every lane of the warp must call it.
template <int GROUP, int HEADS>
__device__ __forceinline__ void group_sums(float (&values)[HEADS]) {
  if constexpr (HEADS == 1 || HEADS > GROUP) {
    PA_UNROLL
    for (int h = 0; h < HEADS; ++h) values[h] = group_sum<GROUP>(values[h]);
  } else {
    const int lane = threadIdx.x % 32;
    float carried[HEADS];
    PA_UNROLL
    for (int h = 0; h < HEADS; ++h) carried[h] = values[h];
    PA_UNROLL
    for (int offset = GROUP / 2, count = HEADS; count > 1; offset /= 2, count /= 2) {
      const bool upper = (lane & offset) != 0;  // keep the upper half of what is carried
      PA_UNROLL
      for (int i = 0; i < count / 2; ++i) {
        const float keep = upper ? carried[i + count / 2] : carried[i];
        const float send = upper ? carried[i] : carried[i + count / 2];
        carried[i] = keep + __shfl_xor_sync(0xffffffffu, send, offset);
      }
    }
    float total = carried[0];  // this lane's head: its lane bits at offsets GROUP/2 .. GROUP/HEADS
    PA_UNROLL
    for (int offset = GROUP / (2 * HEADS); offset > 0; offset /= 2) total += __shfl_xor_sync(0xffffffffu, total, offset);
    PA_UNROLL
    for (int h = 0; h < HEADS; ++h) values[h] = __shfl_sync(0xffffffffu, total, h * (GROUP / HEADS), GROUP);
  }
}
// [group_sums]

/// Floats of shared memory online_attend needs per query head for \p groups thread groups.
__host__ __device__ constexpr int merge_floats(int groups, int head_dim) { return groups * (head_dim + 2); }

// [online]
/// Attends query heads first_q_head .. first_q_head+HEADS-1 (all served by \p kv_head; HEADS is
/// 1 until step 08) to tokens [begin, end) of \p seq in one pass: thread group g takes tokens
/// begin+g, begin+g+groups, ... and reads each token's K and V slice once for all HEADS heads.
/// Then the groups' (max, sum, acc) are merged through \p shared (HEADS * merge_floats()
/// floats) and `emit(h, d, acc, max, sum)` is called once per head h and channel d with the
/// merged, not yet normalised, values (sum == 0 means no tokens). Ends with a barrier, so
/// \p shared may be reused at once.
template <class T, int HEAD_DIM, int HEADS, class Shared, class Emit>
__device__ void online_attend(const DecodeArgs<T>& args, int seq, int first_q_head, int kv_head, int begin, int end,
                              Shared shared, Emit emit) {
  using S = Slices<T, HEAD_DIM>;
  const int rank = threadIdx.x % S::kGroup;
  const int group = threadIdx.x / S::kGroup;
  const int groups = blockDim.x / S::kGroup;

  float q[HEADS][S::kElems];
  float running_max[HEADS];
  float running_sum[HEADS];
  float acc[HEADS][S::kElems];
  PA_UNROLL
  for (int h = 0; h < HEADS; ++h) {
    load_slice<T, HEAD_DIM>(args.query, (static_cast<std::int64_t>(seq) * args.num_q_heads + first_q_head + h) * HEAD_DIM,
                            rank, q[h]);
    running_max[h] = -INFINITY;
    running_sum[h] = 0.0f;
    PA_UNROLL
    for (int e = 0; e < S::kElems; ++e) acc[h][e] = 0.0f;
  }

  // The next token's K and V are loaded before this one's are used: two tokens' loads in
  // flight per lane instead of one, which a memory-bound loop needs.
  RawSlice<T, HEAD_DIM> k_next{}, v_next{};
  auto fetch = [&](int token) {
    if (token < end) {
      const std::int64_t row = args.token_offset(seq, kv_head, token);
      load_raw<T, HEAD_DIM>(args.key_cache, row, rank, k_next);
      load_raw<T, HEAD_DIM>(args.value_cache, row, rank, v_next);
    }
  };
  fetch(begin + group);
  for (int base = begin; base < end; base += groups) {  // the same trip count in every lane
    const int token = base + group;
    const bool valid = token < end;
    const RawSlice<T, HEAD_DIM> k_raw = k_next, v_raw = v_next;
    fetch(token + groups);
    float k[S::kElems], v[S::kElems];
    to_floats<T, HEAD_DIM>(k_raw, k);
    to_floats<T, HEAD_DIM>(v_raw, v);
    float dots[HEADS];
    PA_UNROLL
    for (int h = 0; h < HEADS; ++h) {
      dots[h] = 0.0f;
      if (valid) {
        PA_UNROLL
        for (int e = 0; e < S::kElems; ++e) dots[h] += q[h][e] * k[e];
      }
    }
    group_sums<S::kGroup, HEADS>(dots);
    PA_UNROLL
    for (int h = 0; h < HEADS; ++h) {
      if (valid) {
        const float score = dots[h] * args.scale;
        if (score > running_max[h]) {  // a new max: rescale what was summed under the old one
          const float rescale = expf(running_max[h] - score);
          running_sum[h] *= rescale;
          PA_UNROLL
          for (int e = 0; e < S::kElems; ++e) acc[h][e] *= rescale;
          running_max[h] = score;
        }
        const float p = expf(score - running_max[h]);
        running_sum[h] += p;
        PA_UNROLL
        for (int e = 0; e < S::kElems; ++e) acc[h][e] += p * v[e];
      }
    }
  }

  // Merge the groups, head by head: maxes[groups], sums[groups], accs[groups][HEAD_DIM].
  PA_UNROLL
  for (int h = 0; h < HEADS; ++h) {
    auto region = shared + h * merge_floats(groups, HEAD_DIM);
    if (rank == 0) {
      region[group] = running_max[h];
      region[groups + group] = running_sum[h];
    }
    PA_UNROLL
    for (int e = 0; e < S::kElems; ++e) region[2 * groups + group * HEAD_DIM + S::channel(rank, e)] = acc[h][e];
  }
  __syncthreads();
  for (int h = 0; h < HEADS; ++h) {
    auto maxes = shared + h * merge_floats(groups, HEAD_DIM);
    auto sums = maxes + groups;
    auto accs = maxes + 2 * groups;
    float merged_max = -INFINITY;
    for (int g = 0; g < groups; ++g) merged_max = fmaxf(merged_max, maxes[g]);
    for (int d = threadIdx.x; d < HEAD_DIM; d += blockDim.x) {
      float merged_sum = 0.0f, merged_acc = 0.0f;
      for (int g = 0; g < groups; ++g) {
        const float sum = sums[g];
        const float weight = sum == 0.0f ? 0.0f : expf(maxes[g] - merged_max);  // empty groups weigh 0
        merged_sum += sum * weight;
        merged_acc += accs[g * HEAD_DIM + d] * weight;
      }
      emit(h, d, merged_acc, merged_max, merged_sum);
    }
  }
  __syncthreads();  // the caller may reuse shared at once
}
// [online]

// [kernel]
/// Program (seq, q_head): the whole context in one pass.
template <class T, int HEAD_DIM>
__global__ void online_decode(DecodeArgs<T> args) {
  PA_DYNAMIC_SHARED(float, shared);
  const int seq = blockIdx.x;
  const int q_head = blockIdx.y;
  const std::int64_t out_row = (static_cast<std::int64_t>(seq) * args.num_q_heads + q_head) * HEAD_DIM;
  online_attend<T, HEAD_DIM, 1>(args, seq, q_head, q_head / args.group_size(), 0, args.context_lens[seq], shared,
                                [&](int, int d, float acc, float, float sum) {
                                  // sum == 0: no tokens (context 0), the row is zeros; a NaN sum stays NaN.
                                  args.out[out_row + d] = from_float<T>(sum == 0.0f ? 0.0f : acc / sum);
                                });
}
// [kernel]

// ----- host side -----------------------------------------------------------------------------
inline constexpr const char* kName = "step06_online_softmax";
inline constexpr int kDefaultThreads = 128;

inline int threads_of(const KernelOptions& options) {
  return options.threads_per_block > 0 ? options.threads_per_block : kDefaultThreads;
}

inline void check(const DecodeProblem& problem, const KernelOptions& options, const DeviceLimits&) {
  validate(problem, kName);
  require_head_dim(problem.head_dim, {PA_HEAD_DIMS}, kName);
  step05::require_vector_layout(problem, kName);
  const int threads = threads_of(options);
  PA_REQUIRE(threads >= 32 && threads <= 1024 && threads % 32 == 0, kName, "options.threads_per_block",
             "a multiple of 32 in [32, 1024] (whole warps)", threads);
}

inline std::size_t workspace_bytes(const DecodeProblem&, const KernelOptions&, const DeviceLimits&) { return 0; }

inline void launch(const DecodeView& view, const KernelOptions& options, const DeviceLimits& device, void* stream) {
  const DecodeProblem& p = view.problem;
  check(p, options, device);
  validate_view(view, 0, kName);
  if (p.num_seqs == 0) return;
  step05::require_aligned(view, kName);
  const int threads = threads_of(options);
  dispatch_dtype(p.dtype, [&](auto storage) {
    using T = decltype(storage);
    dispatch_head_dim<PA_HEAD_DIMS>(p.head_dim, [&](auto head_dim) {
      constexpr int D = decltype(head_dim)::value;
      const int groups = threads / Slices<T, D>::kGroup;
      launch_kernel(kName, online_decode<T, D>, dim3(p.num_seqs, p.num_q_heads), dim3(threads),
                    merge_floats(groups, D) * sizeof(float), stream, make_args<T>(view));
    });
  });
}

inline KernelEntry entry() { return {6, kName, kBackend, &check, &workspace_bytes, &launch}; }

}  // namespace pa::PA_KERNELS::step06
