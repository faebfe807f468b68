#pragma once
/// \file
/// Exercise 09: an online softmax that leaves old terms under an old maximum (step 06's pass).
///
/// A one-thread program (sequence, query head) reads each token once: the token's logit updates
/// a running maximum and a running sum of weights, and its V row, weighed, goes into the 64
/// accumulators; no logit is kept. Each weight is exp(logit - the maximum so far), so it stays
/// at most 1 whatever the logits. Run it: `exercise 09`.

#include "exercises/exercise.h"

namespace pa::PA_KERNELS::exercises::ex09 {

__global__ void one_pass(DecodeArgs<float> args, gspan<float>) {
  const Program p = this_program(args);
  float running_max = -INFINITY;
  float running_sum = 0.0f;
  float acc[kHeadDim] = {};
  for (int token = 0; token < p.context_len; ++token) {
    const std::int64_t kv_row = args.token_offset(p.seq, p.kv_head, token);
    const float logit = logit_of(args, p, kv_row);
    const float new_max = fmaxf(running_max, logit);
    const float rescale = expf(running_max - new_max);  // an old weight under the new maximum
    const float weight = expf(logit - new_max);
    running_sum = running_sum * rescale + weight;
    for (int d = 0; d < kHeadDim; ++d) acc[d] += weight * args.value_cache[kv_row + d];
    running_max = new_max;
  }
  for (int d = 0; d < kHeadDim; ++d) args.out[p.row + d] = p.context_len > 0 ? acc[d] / running_sum : 0.0f;
}

}  // namespace pa::PA_KERNELS::exercises::ex09
