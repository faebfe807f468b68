#pragma once
/// \file
/// Exercise 04: a shuffle under the wrong mask (step 05's warps).
///
/// A warp program (sequence, query head): lane l holds channels l and l + 32 of the query and
/// of its accumulators (exercises/exercise.h, warp_decode). For each token every lane
/// multiplies its two channels, and warp_sum below adds the 32 products with shuffles, so that
/// every lane has the whole dot product. Run it: `exercise 04`.

#include "exercises/exercise.h"

namespace pa::PA_KERNELS::exercises::ex04 {

/// The sum of \p value over the lanes of the warp, in every lane: a butterfly of xor shuffles.
__device__ inline float warp_sum(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0x0000ffffu, value, offset);
  return value;
}

}  // namespace pa::PA_KERNELS::exercises::ex04
