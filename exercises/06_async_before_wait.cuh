#pragma once
/// \file
/// Exercise 06: a read of an asynchronous copy before its wait (step 09's pipeline).
///
/// A one-thread program (sequence, query head) stages each token's K row in shared memory with
/// asynchronous copies (16 bytes each, cp.async on the GPU), then computes the logit from the
/// staged row. Run it: `exercise 06`.

#include "exercises/exercise.h"

namespace pa::PA_KERNELS::exercises::ex06 {

__global__ void staged_keys(DecodeArgs<float> args, gspan<float>) {
  PA_DYNAMIC_SHARED(float, key_row);  // kHeadDim floats
  const Program p = this_program(args);
  OneThreadAttention attention;
  for (int token = 0; token < p.context_len; ++token) {
    const std::int64_t kv_row = args.token_offset(p.seq, p.kv_head, token);
    for (int d = 0; d < kHeadDim; d += 4) copy_async<4>(key_row, d, args.key_cache, kv_row + d);
    async_commit();
    float dot = 0.0f;
    for (int d = 0; d < kHeadDim; ++d) dot += args.query[p.row + d] * key_row[d];
    async_wait<0>();
    attention.add(args, dot * args.scale, kv_row);
  }
  attention.write(args, p);
}

}  // namespace pa::PA_KERNELS::exercises::ex06
