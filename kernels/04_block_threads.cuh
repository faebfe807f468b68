#pragma once
/// \file
/// Step 04, block threads: many threads per program, logits in shared memory, barriers and
/// block-wide reductions.
///
/// What changed since step 03: a program (sequence, query head) has `threads` threads (128 by
/// default). Keys are split across them: thread i takes tokens i, i+threads, ... and writes
/// their logits to a shared-memory array; a block-wide max and sum (a tree through shared
/// memory, a barrier per level) give the softmax; each thread then owns a few output channels
/// and accumulates them over every token. The logits array is why shared memory caps the
/// context length: the host refuses a context whose logits do not fit, before the launch.
///
///     build/cpu/steps/step04_block_threads --help

#include "kernels/decode_common.cuh"

namespace pa::PA_KERNELS::step04 {

// [reduce]
/// Block-wide reduction through shared memory: every thread contributes \p value and gets the
/// result. \p scratch holds blockDim.x floats; blockDim.x is a power of two.
template <class Op, class Shared>
__device__ float block_reduce(float value, Shared scratch, Op op) {
  const int tid = threadIdx.x;
  scratch[tid] = value;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (tid < stride) scratch[tid] = op(static_cast<float>(scratch[tid]), static_cast<float>(scratch[tid + stride]));
    __syncthreads();
  }
  const float result = scratch[0];
  __syncthreads();  // scratch is reused by the next reduction
  return result;
}
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};
// [reduce]

// [kernel]
/// Program (seq, q_head), blockDim.x threads. Dynamic shared memory: logits[max_context_len].
template <class T, int HEAD_DIM>
__global__ void block_decode(DecodeArgs<T> args) {
  PA_SHARED(float, q_shared, HEAD_DIM);
  PA_SHARED(float, scratch, 1024);
  PA_DYNAMIC_SHARED(float, logits);
  const int seq = blockIdx.x;
  const int q_head = blockIdx.y;
  const int kv_head = q_head / args.group_size();
  const int tid = threadIdx.x;
  const int threads = blockDim.x;
  const int context_len = args.context_lens[seq];
  const std::int64_t q_row = (static_cast<std::int64_t>(seq) * args.num_q_heads + q_head) * HEAD_DIM;
  for (int d = tid; d < HEAD_DIM; d += threads) q_shared[d] = to_float(args.query[q_row + d]);
  __syncthreads();

  float local_max = -INFINITY;  // pass 1: this thread's tokens
  for (int token = tid; token < context_len; token += threads) {
    const std::int64_t row = args.token_offset(seq, kv_head, token);
    float dot = 0.0f;
    for (int d = 0; d < HEAD_DIM; ++d) dot += q_shared[d] * to_float(args.key_cache[row + d]);
    const float score = dot * args.scale;
    logits[token] = score;
    local_max = fmaxf(local_max, score);
  }
  const float max_score = block_reduce(local_max, scratch, Max{});

  float local_sum = 0.0f;  // pass 2: numerators (each thread revisits its own tokens)
  for (int token = tid; token < context_len; token += threads) {
    const float p = expf(logits[token] - max_score);
    logits[token] = p;
    local_sum += p;
  }
  const float sum = block_reduce(local_sum, scratch, Sum{});  // its barriers publish logits

  const float inv_sum = context_len > 0 ? 1.0f / sum : 0.0f;
  for (int d = tid; d < HEAD_DIM; d += threads) {  // pass 3: each thread owns channels
    float acc = 0.0f;
    for (int token = 0; token < context_len; ++token)
      acc += logits[token] * to_float(args.value_cache[args.token_offset(seq, kv_head, token) + d]);
    args.out[q_row + d] = from_float<T>(acc * inv_sum);
  }
}
// [kernel]

// ----- host side -----------------------------------------------------------------------------
inline constexpr const char* kName = "step04_block_threads";
inline constexpr int kDefaultThreads = 128;

inline int threads_of(const KernelOptions& options) {
  return options.threads_per_block > 0 ? options.threads_per_block : kDefaultThreads;
}

/// Dynamic shared memory a program needs: the logits of the longest context, rounded up to
/// whole 16-byte vectors: nvcc may load the logits as 16-byte vectors in the unrolled pass 3, and
/// the padding keeps such a load inside the array.
inline std::size_t shared_bytes(const DecodeProblem& p) {
  return (static_cast<std::size_t>(p.max_context_len) + 3) / 4 * 4 * sizeof(float);
}
inline std::size_t static_shared_bytes(int head_dim) { return (static_cast<std::size_t>(head_dim) + 1024) * sizeof(float); }

inline LaunchPlan plan(const DecodeProblem& p, const KernelOptions& options, const DeviceLimits& device) {
  validate(p, kName);
  require_knobs(options, knob_threads, kName);
  require_head_dim(p.head_dim, {PA_HEAD_DIMS}, kName);
  const int threads = threads_of(options);
  PA_REQUIRE(threads >= 32 && threads <= 1024 && (threads & (threads - 1)) == 0, kName,
             "options.threads_per_block", "a power of two in [32, 1024] (the tree reduction halves it)", threads);
  // The logits of a whole context live in shared memory: that is this step's length cap.
  const std::size_t available = device.shared_per_block_optin - static_shared_bytes(p.head_dim);
  const std::size_t max_context = available / sizeof(float);
  PA_REQUIRE(shared_bytes(p) <= available, kName, "max_context_len",
             cat("at most ", max_context, " tokens: the logits (4 bytes a token) must fit in the ",
                 device.shared_per_block_optin, " bytes of shared memory a block may use on ", device.name,
                 " (step 06 removes this cap)"),
             p.max_context_len);
  KernelOptions ran = options;
  ran.threads_per_block = threads;
  return make_plan(p, ran, static_cast<unsigned>(p.num_seqs), static_cast<unsigned>(p.num_q_heads), threads,
                   std::max<std::size_t>(shared_bytes(p), sizeof(float)));
}

inline void launch(const DecodeView& view, const LaunchPlan& plan, void* stream) {
  if (!begin_launch(view, plan, kName)) return;
  launch_planned(kName, view, plan, stream, [](auto storage, auto head_dim) {
    return block_decode<decltype(storage), decltype(head_dim)::value>;
  });
}

inline KernelEntry entry() { return {4, kName, kBackend, knob_threads, 0, &plan, &launch}; }

}  // namespace pa::PA_KERNELS::step04
