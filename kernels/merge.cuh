#pragma once
/// \file
/// The merge of partial results into output rows with one round of loads, which step 10 uses for
/// more than 8 splits and steps 11 and 12 for the pieces of a cut (sequence, KV head). A partial
/// is a (max, sum, acc) over a range of tokens, the max in base 2, acc relative to it (step
/// 07's layout). Each rung's merge kernel names its row and slots and calls merge_row.

#include <cstddef>
#include <cstdint>

#include "kernels/decode_common.cuh"

namespace pa::PA_KERNELS {

// [merge]
/// Adds a partial result (its max, its sum and acc relative to that max) to a running (max, sum,
/// acc): both are rescaled to the larger max, in base 2 as the partials' maxes are. A partial with
/// sum 0 (no tokens) adds nothing; a NaN in one reaches the result.
__device__ __forceinline__ void add_piece(float& max, float& sum, float& acc, float piece_max, float piece_sum,
                                          float piece_acc) {
  if (piece_sum == 0.0f) return;
  const float merged = fmaxf(max, piece_max);
  const float keep = exp2f(max - merged);  // 0 for the first piece (max -inf)
  const float take = exp2f(piece_max - merged);
  sum = sum * keep + piece_sum * take;
  acc = acc * keep + piece_acc * take;
  max = merged;
}

/// Channels of a merge program: one a thread of each of its slices.
inline constexpr int kMergeChannels = 32;
/// The most slices of kMergeChannels threads a merge program has.
inline constexpr int kMergeSlices = 16;
/// Partials a slice has in flight at once: its loads of up to this many go out together, so a
/// row of up to kMergeSlices * kMergePiecesAtOnce partials is one round of loads.
inline constexpr int kMergePiecesAtOnce = 8;

/// Slices of a merge program for rows of at most \p most partials: enough that each slice has at
/// most kMergePiecesAtOnce of them, up to kMergeSlices.
__host__ __device__ constexpr int merge_slices(int most) {
  const int slices = (most + kMergePiecesAtOnce - 1) / kMergePiecesAtOnce;
  return slices < 1 ? 1 : slices > kMergeSlices ? kMergeSlices : slices;
}

/// The merge grid for \p rows_x x \p rows_y output rows of \p head_dim channels: a program a
/// row and 32 channels (blockIdx.z).
inline dim3 merge_grid(std::size_t rows_x, int rows_y, int head_dim) {
  return dim3(static_cast<unsigned>(rows_x), static_cast<unsigned>(rows_y),
              static_cast<unsigned>((head_dim + kMergeChannels - 1) / kMergeChannels));
}

/// The merge of \p count partial results of output row \p row (the slots slot_of(i) of
/// \p partials, i = 0 .. count - 1 in order) for channels 32 * blockIdx.z .. + 31, by slices of 32
/// threads, one a channel. Slice j takes partials j, j + slices, .., loading up to
/// kMergePiecesAtOnce of them at once, then adding them in order (add_piece); slice 0 then adds
/// the slices in order: the same bits every run. With merge_slices(count) slices that is one
/// round of loads for up to 128 partials, where a loop that adds each as it comes waits for each
/// round in turn (on the H200, step 11's `long-single`, 64 pieces a pair, took 38.8 µs against
/// 44.3: lab/perf-log.md, v83). \p slice_maxes, \p slice_sums: kMergeSlices floats of shared
/// memory; \p slice_accs kMergeSlices * kMergeChannels. \p partials: the spans maxes, sums
/// and accs of step07::Partials.
template <class T, int HEAD_DIM, class Partials, class SlotOf, class Shared>
__device__ __forceinline__ void merge_row(const gspan<T>& out, std::int64_t row, const Partials& partials, int count,
                                          SlotOf slot_of, Shared slice_maxes, Shared slice_sums, Shared slice_accs) {
  const int slices = static_cast<int>(blockDim.x) / kMergeChannels;
  const int slice = threadIdx.x / kMergeChannels;
  const int c = threadIdx.x % kMergeChannels;
  const int d = blockIdx.z * kMergeChannels + c;
  const bool has_channel = d < HEAD_DIM;  // head dims 80 and 112: the last program's upper threads have none
  float max = -INFINITY, sum = 0.0f, acc = 0.0f;
  for (int from = slice; from < count; from += slices * kMergePiecesAtOnce) {
    float maxes[kMergePiecesAtOnce], sums[kMergePiecesAtOnce], accs[kMergePiecesAtOnce];
    PA_UNROLL
    for (int k = 0; k < kMergePiecesAtOnce; ++k) {  // every load issued before any is used
      const int i = from + k * slices;
      const std::int64_t slot = i < count ? slot_of(i) : 0;
      maxes[k] = i < count ? partials.maxes[slot] : -INFINITY;
      sums[k] = i < count ? partials.sums[slot] : 0.0f;
      accs[k] = i < count && has_channel ? partials.accs[slot * HEAD_DIM + d] : 0.0f;
    }
    PA_UNROLL
    for (int k = 0; k < kMergePiecesAtOnce; ++k) add_piece(max, sum, acc, maxes[k], sums[k], accs[k]);
  }
  slice_accs[slice * kMergeChannels + c] = acc;
  if (c == 0) {
    slice_maxes[slice] = max;
    slice_sums[slice] = sum;
  }
  __syncthreads();
  if (slice == 0 && has_channel) {
    for (int j = 1; j < slices; ++j) add_piece(max, sum, acc, slice_maxes[j], slice_sums[j], slice_accs[j * kMergeChannels + c]);
    out[row * HEAD_DIM + d] = from_float<T>(sum == 0.0f ? 0.0f : acc / sum);
  }
}
// [merge]

}  // namespace pa::PA_KERNELS
