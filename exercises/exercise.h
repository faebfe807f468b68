#pragma once
/// \file
/// What every exercise shares: the shape they run at, the kernel's signature, the program's
/// coordinates, and a softmax that takes one logit at a time.
///
/// Each exercise is a small decode kernel with one bug, in the vocabulary of the ladder
/// (kernels/portable/portable.h), in its own file `exercises/NN_name.cuh`. Everything in this
/// file is correct: the bug is always in the exercise's file.

#include <cmath>
#include <cstdint>
#include <utility>

#include "kernels/decode_common.cuh"

namespace pa::PA_KERNELS::exercises {

/// Every exercise runs f32 storage at head dim 64: one compiled kernel each, so an edit to an
/// exercise recompiles in seconds.
inline constexpr int kHeadDim = 64;
/// The longest context an exercise takes (the runner's workload stays below it).
inline constexpr int kMaxContext = 256;

/// A kernel of an exercise: the decode arguments, and a scratch tensor in global memory of
/// kMaxContext floats a program, poisoned (NaN) before the launch.
using ExerciseKernel = void (*)(DecodeArgs<float> args, gspan<float> scratch);

/// Where a program (seq, q_head) is: blockIdx.x is the sequence, blockIdx.y the query head.
struct Program {
  int seq;
  int q_head;
  int kv_head;
  int context_len;
  std::int64_t row;  ///< offset of channel 0 of this head's query and output rows
};

__device__ inline Program this_program(const DecodeArgs<float>& args) {
  const int seq = blockIdx.x;
  const int q_head = blockIdx.y;
  return {seq, q_head, q_head / args.group_size(), args.context_lens[seq],
          (static_cast<std::int64_t>(seq) * args.num_q_heads + q_head) * kHeadDim};
}

/// q · k for the token whose K row starts at \p kv_row, times the scale.
__device__ inline float logit_of(const DecodeArgs<float>& args, const Program& p, std::int64_t kv_row) {
  float dot = 0.0f;
  for (int d = 0; d < kHeadDim; ++d) dot += args.query[p.row + d] * args.key_cache[kv_row + d];
  return dot * args.scale;
}

/// Step 06's online softmax, one logit at a time: add() returns what the accumulators so far
/// are multiplied by (their old maximum's weight under the new one) and the new token's weight.
struct OnlineSoftmax {
  float running_max = -INFINITY;
  float running_sum = 0.0f;
  int tokens = 0;

  __device__ std::pair<float, float> add(float logit) {
    const float new_max = fmaxf(running_max, logit);
    const float rescale = expf(running_max - new_max);
    const float weight = expf(logit - new_max);
    running_sum = running_sum * rescale + weight;
    running_max = new_max;
    ++tokens;
    return {rescale, weight};
  }
  /// The output of an accumulator: 0 for an empty context, as the oracle defines.
  __device__ float finish(float acc) const { return tokens > 0 ? acc / running_sum : 0.0f; }
};

/// One thread's whole attention, a token at a time: the online softmax and every channel.
struct OneThreadAttention {
  OnlineSoftmax softmax;
  float acc[kHeadDim] = {};

  /// Takes the token whose K and V rows start at \p kv_row, with its \p logit.
  __device__ void add(const DecodeArgs<float>& args, float logit, std::int64_t kv_row) {
    const auto [rescale, weight] = softmax.add(logit);
    for (int d = 0; d < kHeadDim; ++d) acc[d] = acc[d] * rescale + weight * args.value_cache[kv_row + d];
  }
  /// Writes the program's output row.
  __device__ void write(const DecodeArgs<float>& args, const Program& p) const {
    for (int d = 0; d < kHeadDim; ++d) args.out[p.row + d] = softmax.finish(acc[d]);
  }
};

/// One warp's attention, lane l owning channels l and l + 32 of the query and the accumulators.
/// \p WarpSum adds a value over the warp; every lane uses the result it returns. Exercises 04
/// and 05 give it their own; exercise 10 runs two of these on the halves of a context.
template <float (*WarpSum)(float)>
struct WarpAttention {
  OnlineSoftmax softmax;
  float acc_lo = 0.0f;
  float acc_hi = 0.0f;

  /// Takes tokens [begin, end) of the program's sequence, a token an iteration.
  __device__ void attend(const DecodeArgs<float>& args, const Program& p, int begin, int end) {
    const int lane = threadIdx.x % 32;
    const float q_lo = args.query[p.row + lane], q_hi = args.query[p.row + lane + 32];
    for (int token = begin; token < end; ++token) {
      const std::int64_t kv_row = args.token_offset(p.seq, p.kv_head, token);
      const float partial = q_lo * args.key_cache[kv_row + lane] + q_hi * args.key_cache[kv_row + lane + 32];
      const auto [rescale, weight] = softmax.add(WarpSum(partial) * args.scale);
      acc_lo = acc_lo * rescale + weight * args.value_cache[kv_row + lane];
      acc_hi = acc_hi * rescale + weight * args.value_cache[kv_row + lane + 32];
    }
  }
};

/// A warp program (32 lanes): WarpAttention over the whole context, each lane writing its two
/// channels.
template <float (*WarpSum)(float)>
__global__ void warp_decode(DecodeArgs<float> args, gspan<float>) {
  const Program p = this_program(args);
  const int lane = threadIdx.x;
  WarpAttention<WarpSum> warp;
  warp.attend(args, p, 0, p.context_len);
  args.out[p.row + lane] = warp.softmax.finish(warp.acc_lo);
  args.out[p.row + lane + 32] = warp.softmax.finish(warp.acc_hi);
}

}  // namespace pa::PA_KERNELS::exercises
