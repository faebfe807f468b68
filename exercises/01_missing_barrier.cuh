#pragma once
/// \file
/// Exercise 01: a missing barrier (step 04's idea).
///
/// A program (sequence, query head) of 64 threads works in two phases. In the first, thread i
/// scores tokens i, i + 64, ... into shared memory. In the second, thread d computes channel d
/// of the output, which needs every score. Run it: `exercise 01`.

#include "exercises/exercise.h"

namespace pa::PA_KERNELS::exercises::ex01 {

__global__ void two_phase_decode(DecodeArgs<float> args, gspan<float>) {
  PA_SHARED(float, logits, kMaxContext);
  const Program p = this_program(args);
  const int tid = threadIdx.x;
  // Phase 1: the scores of this thread's tokens.
  for (int token = tid; token < p.context_len; token += blockDim.x)
    logits[token] = logit_of(args, p, args.token_offset(p.seq, p.kv_head, token));

  // Phase 2: channel tid of the output, from every score.
  float max_logit = -INFINITY;
  for (int token = 0; token < p.context_len; ++token) max_logit = fmaxf(max_logit, logits[token]);
  float sum = 0.0f, acc = 0.0f;
  for (int token = 0; token < p.context_len; ++token) {
    const float weight = expf(logits[token] - max_logit);
    sum += weight;
    acc += weight * args.value_cache[args.token_offset(p.seq, p.kv_head, token) + tid];
  }
  args.out[p.row + tid] = p.context_len > 0 ? acc / sum : 0.0f;
}

}  // namespace pa::PA_KERNELS::exercises::ex01
