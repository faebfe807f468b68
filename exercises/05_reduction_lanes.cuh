#pragma once
/// \file
/// Exercise 05: a reduction that misses lanes (step 05's warps).
///
/// The warp program of exercise 04 (exercises/exercise.h, warp_decode): every lane multiplies
/// its two channels of q and k, and warp_sum below adds the 32 products; every lane then
/// weighs its channels of V with the result. Run it: `exercise 05`.

#include "exercises/exercise.h"

namespace pa::PA_KERNELS::exercises::ex05 {

/// The sum of \p value over the lanes of the warp, in every lane: five shuffles, unrolled, each
/// adding the value of the lane half as far away as the one before.
__device__ inline float warp_sum(float value) {
  constexpr unsigned kWholeWarp = 0xffffffffu;
  value += __shfl_down_sync(kWholeWarp, value, 16);
  value += __shfl_down_sync(kWholeWarp, value, 8);
  value += __shfl_down_sync(kWholeWarp, value, 4);
  value += __shfl_down_sync(kWholeWarp, value, 2);
  value += __shfl_down_sync(kWholeWarp, value, 1);
  return value;
}

}  // namespace pa::PA_KERNELS::exercises::ex05
