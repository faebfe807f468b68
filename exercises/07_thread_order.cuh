#pragma once
/// \file
/// Exercise 07: a race the fixed thread order hides (step 03's scores in global memory).
///
/// A program (sequence, query head) of 64 threads: thread 0 scores every token into the
/// program's row of a scratch tensor in global memory, as step 03 does; then thread d computes
/// channel d of the output from the scores. Run it: `exercise 07`.

#include "exercises/exercise.h"

namespace pa::PA_KERNELS::exercises::ex07 {

__global__ void scores_in_global(DecodeArgs<float> args, gspan<float> scratch) {
  const Program p = this_program(args);
  const int tid = threadIdx.x;
  const std::int64_t scores = (std::int64_t{p.seq} * args.num_q_heads + p.q_head) * kMaxContext;
  if (tid == 0)
    for (int token = 0; token < p.context_len; ++token)
      scratch[scores + token] = logit_of(args, p, args.token_offset(p.seq, p.kv_head, token));

  OnlineSoftmax softmax;
  float acc = 0.0f;
  for (int token = 0; token < p.context_len; ++token) {
    const auto [rescale, weight] = softmax.add(scratch[scores + token]);
    acc = acc * rescale + weight * args.value_cache[args.token_offset(p.seq, p.kv_head, token) + tid];
  }
  args.out[p.row + tid] = softmax.finish(acc);
}

}  // namespace pa::PA_KERNELS::exercises::ex07
