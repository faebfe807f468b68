#pragma once
/// \file
/// Exercise 08: an element in the wrong place of a tensor-core fragment (step 10's q·Kᵀ).
///
/// A program (sequence, query head) of one warp computes its head's scores with `mma`
/// m16n8k16 in f16, 8 tokens at a time: A is the query (row 0; rows 1-15 are zero), B is 16
/// channels x 8 tokens of K, and row 0 of the 16 x 8 accumulators is the head's 8 scores. Lanes
/// 0-3 write them to the program's row of a scratch tensor; then lane l computes channels l and
/// l + 32 from the scores in f32. `mma_layout` (kernels/portable/portable.h) says which lane holds
/// which element; `step10_tensor_cores --fragments` prints it as tables. Run it: `exercise 08`.

#include "exercises/exercise.h"

namespace pa::PA_KERNELS::exercises::ex08 {

__global__ void tensor_core_scores(DecodeArgs<float> args, gspan<float> scratch) {
  const Program p = this_program(args);
  const int lane = threadIdx.x;
  const std::int64_t scores = (std::int64_t{p.seq} * args.num_q_heads + p.q_head) * kMaxContext;
  unsigned q[kHeadDim / 16][4];  // A: register r holds (a_row, a_col) and (a_row, a_col + 1)
  for (int kk = 0; kk < kHeadDim / 16; ++kk)
    for (int r = 0; r < 4; ++r) {
      const std::int64_t at = p.row + kk * 16 + mma_layout::a_col(lane, r);
      q[kk][r] = mma_layout::a_row(lane, r) == 0 ? pack_pair<f16>(args.query[at], args.query[at + 1]) : 0u;
    }
  for (int first = 0; first < p.context_len; first += 8) {  // every lane takes every step: mma is warp-wide
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      unsigned k[2];  // B: 16 channels (k) x 8 tokens (n) of K
      for (int r = 0; r < 2; ++r) {
        const int channel = kk * 16 + mma_layout::b_col(lane);
        const int token = first + mma_layout::b_row(lane, r);
        float lo = 0.0f, hi = 0.0f;
        if (token + 1 < p.context_len) {
          const std::int64_t kv_row = args.token_offset(p.seq, p.kv_head, token);
          lo = args.key_cache[kv_row + channel];
          hi = args.key_cache[args.token_offset(p.seq, p.kv_head, token + 1) + channel];
        }
        k[r] = pack_pair<f16>(lo, hi);
      }
      mma_m16n8k16<f16>(s, q[kk], k);
    }
    for (int e = 0; e < 2; ++e) {  // row 0 of the accumulators: lanes 0-3, elements 0 and 1
      const int token = first + mma_layout::c_col(lane, e);
      if (mma_layout::c_row(lane, e) == 0 && token < p.context_len) scratch[scores + token] = s[e] * args.scale;
    }
  }
  __syncthreads();  // the scores are written before any lane reads them

  OnlineSoftmax softmax;
  float acc_lo = 0.0f, acc_hi = 0.0f;
  for (int token = 0; token < p.context_len; ++token) {
    const std::int64_t kv_row = args.token_offset(p.seq, p.kv_head, token);
    const auto [rescale, weight] = softmax.add(scratch[scores + token]);
    acc_lo = acc_lo * rescale + weight * args.value_cache[kv_row + lane];
    acc_hi = acc_hi * rescale + weight * args.value_cache[kv_row + lane + 32];
  }
  args.out[p.row + lane] = softmax.finish(acc_lo);
  args.out[p.row + lane + 32] = softmax.finish(acc_hi);
}

}  // namespace pa::PA_KERNELS::exercises::ex08
