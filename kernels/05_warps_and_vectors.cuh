#pragma once
/// \file
/// Step 05, warps and vectors: warp shuffles instead of shared-memory trees, a thread group per
/// token, 16-byte vector loads, fp16/bf16 storage with fp32 math.
///
/// What changed since step 04:
///  - a *thread group* of `Slices::kGroup` lanes reads one token's K row together, each lane a
///    16-byte vector (8 bf16 or 4 floats) at a time, so a warp's loads are whole contiguous
///    rows: coalesced, and a quarter as many load instructions as 4-byte loads;
///  - the group's partial dot products are summed with `__shfl_xor_sync` (no shared memory, no
///    barrier); block-wide max and sum go warp by warp, with one small shared array between warps;
///  - V is read the same way, each lane accumulating its own channels, and the groups' partial
///    outputs are summed through shared memory once at the end.
/// The logits still live in shared memory, so the context cap of step 04 remains.
///
///     build/cpu/steps/step05_warps_and_vectors --help

#include "kernels/04_block_threads.cuh"

namespace pa::PA_KERNELS::step05 {

// [slices]
/// How a thread group splits one head_dim row into 16-byte vectors. A row has kVectors
/// vectors; the group has kGroup lanes (the largest power of two up to MAX_GROUP dividing
/// kVectors), and lane r holds vectors r, r + kGroup, ... : kPerThread of them, kElems elements.
template <class T, int HEAD_DIM, int MAX_GROUP = 32>
struct Slices {
  static constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte load
  static_assert(HEAD_DIM % kVec == 0, "a row must be whole 16-byte vectors");
  static constexpr int kVectors = HEAD_DIM / kVec;
  static constexpr int kGroup = [] {
    int g = 1;
    while (g < MAX_GROUP && kVectors % (2 * g) == 0) g *= 2;
    return g;
  }();
  static constexpr int kPerThread = kVectors / kGroup;
  static constexpr int kElems = kPerThread * kVec;
  /// Offset within a row of element e of lane \p rank's slice.
  __device__ static constexpr int channel(int rank, int e) { return ((e / kVec) * kGroup + rank) * kVec + e % kVec; }
};

/// A lane's slice as loaded: kPerThread raw 16-byte vectors, converted to float when used.
template <class T, int HEAD_DIM, int MAX_GROUP = 32>
struct RawSlice {
  Vec<T, Slices<T, HEAD_DIM, MAX_GROUP>::kVec> vectors[Slices<T, HEAD_DIM, MAX_GROUP>::kPerThread];
};

/// Issues lane \p rank's kPerThread 16-byte loads of the row at \p row.
template <class T, int HEAD_DIM, int MAX_GROUP = 32>
__device__ __forceinline__ void load_raw(const gspan<const T>& tensor, std::int64_t row, int rank,
                                         RawSlice<T, HEAD_DIM, MAX_GROUP>& out) {
  using S = Slices<T, HEAD_DIM, MAX_GROUP>;
  PA_UNROLL
  for (int j = 0; j < S::kPerThread; ++j) out.vectors[j] = load_vec<S::kVec>(tensor, row + (j * S::kGroup + rank) * S::kVec);
}

/// Converts a loaded slice to floats (fp32 math whatever the storage).
template <class T, int HEAD_DIM, int MAX_GROUP = 32>
__device__ __forceinline__ void to_floats(const RawSlice<T, HEAD_DIM, MAX_GROUP>& slice,
                                          float (&out)[Slices<T, HEAD_DIM, MAX_GROUP>::kElems]) {
  using S = Slices<T, HEAD_DIM, MAX_GROUP>;
  PA_UNROLL
  for (int j = 0; j < S::kPerThread; ++j) vec_to_floats(slice.vectors[j], out + j * S::kVec);
}

/// Loads lane \p rank's slice of the row at \p row as floats (kPerThread 16-byte loads).
template <class T, int HEAD_DIM, int MAX_GROUP = 32>
__device__ __forceinline__ void load_slice(const gspan<const T>& tensor, std::int64_t row, int rank,
                                           float (&out)[Slices<T, HEAD_DIM, MAX_GROUP>::kElems]) {
  RawSlice<T, HEAD_DIM, MAX_GROUP> raw;
  load_raw<T, HEAD_DIM, MAX_GROUP>(tensor, row, rank, raw);
  to_floats<T, HEAD_DIM, MAX_GROUP>(raw, out);
}
// [slices]

// [shuffles]
/// Sum over the kGroup lanes of a thread group (xor shuffles stay inside aligned groups).
/// Every lane of the warp must call it.
template <int GROUP>
__device__ __forceinline__ float group_sum(float value) {
  PA_UNROLL
  for (int offset = GROUP / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

/// Max over a warp, left in every lane.
__device__ __forceinline__ float warp_max(float value) {
  PA_UNROLL
  for (int offset = 16; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}
/// Sum over a warp, left in every lane.
__device__ __forceinline__ float warp_sum(float value) { return group_sum<32>(value); }

/// Block-wide max or sum: warps reduce with shuffles, then one value per warp goes through
/// \p scratch (32 floats) and every warp reduces those. Two barriers.
template <bool kMax, class Shared>
__device__ float block_reduce_warps(float value, Shared scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  value = kMax ? warp_max(value) : warp_sum(value);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = lane < warps ? static_cast<float>(scratch[lane]) : (kMax ? -INFINITY : 0.0f);
  value = kMax ? warp_max(value) : warp_sum(value);
  __syncthreads();  // scratch is reused by the next reduction
  return value;
}
// [shuffles]

// [kernel]
/// Program (seq, q_head), blockDim.x threads in groups of kGroup lanes. Dynamic shared memory:
/// logits[max_context_len], then the groups' partial outputs [groups][HEAD_DIM].
template <class T, int HEAD_DIM>
__global__ void warp_decode(DecodeArgs<T> args) {
  using S = Slices<T, HEAD_DIM>;
  PA_SHARED(float, scratch, 32);
  PA_DYNAMIC_SHARED(float, shared);
  const int seq = blockIdx.x;
  const int q_head = blockIdx.y;
  const int kv_head = q_head / args.group_size();
  const int rank = threadIdx.x % S::kGroup;  // lane within the thread group
  const int group = threadIdx.x / S::kGroup;
  const int groups = blockDim.x / S::kGroup;
  const int context_len = args.context_lens[seq];
  auto logits = shared;                                   // [max_context_len]
  auto partial = shared + args.max_context_len;           // [groups][HEAD_DIM]

  float q[S::kElems];
  load_slice<T, HEAD_DIM>(args.query, (static_cast<std::int64_t>(seq) * args.num_q_heads + q_head) * HEAD_DIM, rank, q);

  // Pass 1: group g takes tokens g, g + groups, ...; the loop runs the same number of times in
  // every lane (the shuffle needs the whole warp), tokens past the end just contribute nothing.
  float local_max = -INFINITY;
  for (int base = 0; base < context_len; base += groups) {
    const int token = base + group;
    float dot = 0.0f;
    if (token < context_len) {
      float k[S::kElems];
      load_slice<T, HEAD_DIM>(args.key_cache, args.token_offset(seq, kv_head, token), rank, k);
      PA_UNROLL
      for (int e = 0; e < S::kElems; ++e) dot += q[e] * k[e];
    }
    dot = group_sum<S::kGroup>(dot);
    if (token < context_len) {
      const float score = dot * args.scale;
      if (rank == 0) logits[token] = score;
      local_max = fmaxf(local_max, score);
    }
  }
  const float max_score = block_reduce_warps<true>(local_max, scratch);

  float local_sum = 0.0f;  // pass 2: numerators, threads strided over tokens
  for (int token = threadIdx.x; token < context_len; token += blockDim.x) {
    const float p = expf(logits[token] - max_score);
    logits[token] = p;
    local_sum += p;
  }
  const float sum = block_reduce_warps<false>(local_sum, scratch);  // its barriers publish logits

  float acc[S::kElems];  // pass 3: the group's weighted V rows, this lane's channels
  PA_UNROLL
  for (int e = 0; e < S::kElems; ++e) acc[e] = 0.0f;
  for (int token = group; token < context_len; token += groups) {
    const float p = logits[token];
    float v[S::kElems];
    load_slice<T, HEAD_DIM>(args.value_cache, args.token_offset(seq, kv_head, token), rank, v);
    PA_UNROLL
    for (int e = 0; e < S::kElems; ++e) acc[e] += p * v[e];
  }
  PA_UNROLL
  for (int e = 0; e < S::kElems; ++e) partial[group * HEAD_DIM + S::channel(rank, e)] = acc[e];
  __syncthreads();
  const float inv_sum = context_len > 0 ? 1.0f / sum : 0.0f;
  const std::int64_t out_row = (static_cast<std::int64_t>(seq) * args.num_q_heads + q_head) * HEAD_DIM;
  for (int d = threadIdx.x; d < HEAD_DIM; d += blockDim.x) {
    float total = 0.0f;
    for (int g = 0; g < groups; ++g) total += partial[g * HEAD_DIM + d];
    args.out[out_row + d] = from_float<T>(total * inv_sum);
  }
}
// [kernel]

// ----- host side -----------------------------------------------------------------------------
inline constexpr const char* kName = "step05_warps_and_vectors";
inline constexpr int kDefaultThreads = 128;

inline int threads_of(const KernelOptions& options) {
  return options.threads_per_block > 0 ? options.threads_per_block : kDefaultThreads;
}

/// Dynamic shared memory: the logits, then one partial output row per thread group.
inline std::size_t shared_bytes(const DecodeProblem& p, int threads, int group) {
  return (static_cast<std::size_t>(p.max_context_len) + static_cast<std::size_t>(threads / group) * p.head_dim) *
         sizeof(float);
}

/// The thread-group size for the problem's head dim and storage type (host side).
inline int group_of(const DecodeProblem& p) {
  int group = 0;
  dispatch_problem(p, [&](auto storage, auto head_dim) {
    group = Slices<decltype(storage), decltype(head_dim)::value>::kGroup;
  });
  return group;
}

/// Vector loads need 16-byte aligned rows: every stride a multiple of one vector.
inline void require_vector_layout(const DecodeProblem& p, const char* kernel) {
  const std::int64_t vec = 16 / static_cast<std::int64_t>(dtype_size(p.dtype));
  const CacheLayout& l = p.layout;
  PA_REQUIRE(l.block_stride % vec == 0 && l.head_stride % vec == 0 && l.token_stride % vec == 0, kernel,
             "layout strides", cat("multiples of ", vec, " elements (16-byte vector loads)"),
             cat(l.block_stride, "/", l.head_stride, "/", l.token_stride));
}

/// The checks of a kernel in thread groups of 16-byte slices (this step's, and 06-09's): the
/// problem, the knobs the step declares, the head dim, a layout of whole vectors, whole warps.
inline void check_warps(const DecodeProblem& p, const KernelOptions& options, unsigned knobs, const char* kernel) {
  validate(p, kernel);
  require_knobs(options, knobs, kernel);
  require_head_dim(p.head_dim, {PA_HEAD_DIMS}, kernel);
  require_vector_layout(p, kernel);
  const int threads = threads_of(options);
  PA_REQUIRE(threads >= 32 && threads <= 1024 && threads % 32 == 0, kernel, "options.threads_per_block",
             "a multiple of 32 in [32, 1024] (whole warps)", threads);
}

/// The plan of a grid of (sequence, query head) programs of threads_of(options) threads.
inline LaunchPlan warp_plan(const DecodeProblem& p, const KernelOptions& options, std::size_t shared_bytes) {
  KernelOptions ran = options;
  ran.threads_per_block = threads_of(options);
  return make_plan(p, ran, static_cast<unsigned>(p.num_seqs), static_cast<unsigned>(p.num_q_heads),
                   ran.threads_per_block, shared_bytes);
}

inline LaunchPlan plan(const DecodeProblem& p, const KernelOptions& options, const DeviceLimits& device) {
  check_warps(p, options, knob_threads, kName);
  const int threads = threads_of(options);
  const std::size_t bytes = shared_bytes(p, threads, group_of(p));
  const std::size_t available = device.shared_per_block_optin - 32 * sizeof(float);
  const std::size_t fixed = bytes - p.max_context_len * sizeof(float);
  PA_REQUIRE(bytes <= available, kName, "max_context_len",
             cat("at most ", (available - fixed) / sizeof(float), " tokens: the logits (4 bytes a token) must fit in the ",
                 device.shared_per_block_optin, " bytes of shared memory a block may use on ", device.name,
                 " (step 06 removes this cap)"),
             p.max_context_len);
  return warp_plan(p, options, bytes);
}

/// 16-byte alignment of the tensors the kernel reads with vector loads.
inline void require_aligned(const DecodeView& view, const char* kernel) {
  for (const auto& [pointer, name] : {std::pair<const void*, const char*>{view.query, "query"},
                                      {view.key_cache, "key_cache"},
                                      {view.value_cache, "value_cache"}})
    PA_REQUIRE(reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0, kernel, name,
               "a 16-byte aligned pointer (vector loads)", pointer);
}

inline void launch(const DecodeView& view, const LaunchPlan& plan, void* stream) {
  if (!begin_launch(view, plan, kName)) return;
  require_aligned(view, kName);
  launch_planned(kName, view, plan, stream, [](auto storage, auto head_dim) {
    return warp_decode<decltype(storage), decltype(head_dim)::value>;
  });
}

inline KernelEntry entry() { return {5, kName, kBackend, knob_threads, 0, &plan, &launch}; }

}  // namespace pa::PA_KERNELS::step05
