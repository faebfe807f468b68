#pragma once
/// \file
/// Exercise 10: a split with no tokens (step 07's merge).
///
/// A program (sequence, query head) of two warps splits the context in two halves, as step 07
/// splits it across programs: warp w attends to its half as exercise 04's warp does
/// (WarpAttention: lane l owns channels l and l + 32) and leaves its running maximum, its sum of weights and its
/// normalised output in shared memory; then warp 0 merges the two halves, weighing each by its
/// sum under the larger maximum. Run it: `exercise 10`.

#include "exercises/exercise.h"

namespace pa::PA_KERNELS::exercises::ex10 {

/// The sum of \p value over the warp, in every lane.
__device__ inline float warp_sum(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

__global__ void two_halves(DecodeArgs<float> args, gspan<float>) {
  PA_SHARED(float, maxes, 2);
  PA_SHARED(float, sums, 2);
  PA_SHARED(float, outs, 2 * kHeadDim);  // [warp][channel]
  const Program p = this_program(args);
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int half = (p.context_len + 1) / 2;
  const int begin = warp * half;
  const int end = warp == 0 ? half : p.context_len;
  WarpAttention<warp_sum> half_attention;
  half_attention.attend(args, p, begin, end);
  const OnlineSoftmax& softmax = half_attention.softmax;
  if (lane == 0) {
    maxes[warp] = softmax.running_max;
    sums[warp] = softmax.running_sum;
  }
  outs[warp * kHeadDim + lane] = half_attention.acc_lo / softmax.running_sum;
  outs[warp * kHeadDim + lane + 32] = half_attention.acc_hi / softmax.running_sum;
  __syncthreads();
  if (warp == 0) {
    const float merged_max = fmaxf(maxes[0], maxes[1]);
    float weights[2], total = 0.0f;
    for (int w = 0; w < 2; ++w) {
      weights[w] = sums[w] * expf(maxes[w] - merged_max);
      total += weights[w];
    }
    for (int d = lane; d < kHeadDim; d += 32) {
      float merged = 0.0f;
      for (int w = 0; w < 2; ++w) merged += outs[w * kHeadDim + d] * weights[w];
      args.out[p.row + d] = total > 0.0f ? merged / total : 0.0f;
    }
  }
}

}  // namespace pa::PA_KERNELS::exercises::ex10
