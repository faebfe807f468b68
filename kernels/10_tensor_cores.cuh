#pragma once
/// \file
/// Step 10, tensor cores: the query-head group's q·Kᵀ and P·V as warp-level matrix multiplies,
/// so every group size and head dim takes one pass over K and V.
///
/// What changed since step 09: step 09's lanes each hold a few query heads' queries and
/// accumulators in registers, so a group larger than that takes several passes over the same K
/// and V, and a lane spends a multiply-add per channel per head on every token. Here the heads
/// of one KV head's group are the M dimension of `mma` m16n8k16 (16 rows; a smaller group pads
/// with zero queries): a warp computes the scores of 16 heads for 16 tokens with D/8 matrix
/// instructions, takes the online softmax on the accumulator fragments, and feeds the weights,
/// still in registers, to the matrix multiply by V. A program is one warp for each 16 heads of
/// the group and each 64 output channels (kShape; shape_for says where another shape is used),
/// sharing one pipeline of asynchronous copies: K and V go to shared memory a tile of 32 tokens
/// (64 at head dim 112 for a group of up to 16 heads) at a time, two tiles in flight, in a swizzled layout that `ldmatrix`
/// reads out in fragment order without bank conflicts. Step 09's block-table prefetch, its merge
/// of up to 8 splits and the overlapped merge launch are kept (with one split the split kernel
/// writes the output itself; more than 8 splits merge with merge_row). The split count is step
/// 09's with splits of at least 512 tokens, raised where that leaves too few programs for the
/// machine (choose_splits).
///
///     build/current/steps/step10_tensor_cores --help

#include "kernels/09_memory_pipeline.cuh"
#include "kernels/merge.cuh"

namespace pa::PA_KERNELS::step10 {

using step07::partials_bytes;
using step07::partials_in;
using step07::Partials;

/// Query heads a warp's fragments hold: the M of m16n8k16.
inline constexpr int kHeadsPerWarp = 16;

/// The shape of a program: tokens a tile (a multiple of 16, the k of P·V's m16n8k16), output
/// channels a warp accumulates at most (the rest of a head's channels go to more warps of the
/// program, "parts", which each compute the tile's scores themselves and share its K and V in
/// shared memory), and stages of shared memory (while the program uses one tile, the copies of
/// the next stages - 1 are on their way; see the loop for when they are issued).
struct Shape {
  int tile;
  int part_dims;
  int stages;
};
/// 32 tokens, 64 channels a warp, 2 stages: two warps a program at head dim 128, 32 KB of shared
/// memory, 6 programs an SM on the H200. With the copies of the next tile issued before the wait
/// for this one, two tiles are in flight while a program waits. The fastest of the shapes tried
/// on the H200 on the large and the small workloads alike (lab/perf-log.md, v67); one warp of 128
/// channels on 16-token tiles, 4 stages, was 9% slower on full batches (v73).
inline constexpr Shape kShape{32, 64, 2};
/// For a group of more than 16 heads, which has a warp for each 16 heads already: 128 channels a
/// warp, so that a program of 32 heads at head dim 128 has two warps, not four that each compute
/// the scores of their 16 heads again (group 32 on the H200: 68% of the roof with kShape, 95%
/// with this, lab/perf-log.md, v69).
inline constexpr Shape kWideShape{32, 128, 2};
/// For head dim 112: 64-token tiles. With 32-token tiles its programs' two warps (four and three
/// channel blocks) spent most of their stalls at the barriers, not waiting for memory, and ran
/// at 82% of the datasheet against 87% with 64 (lab/perf-log.md, v69).
inline constexpr Shape kLongTileShape{64, 64, 2};
/// Every shape a kernel is compiled for; shape_for picks one.
inline constexpr Shape kShapes[] = {kShape, kWideShape, kLongTileShape};

/// Warps that split a head dim's output channels (part_dims or fewer each, in blocks of 16).
__host__ __device__ constexpr int parts_for(int head_dim, int part_dims) { return (head_dim + part_dims - 1) / part_dims; }
/// 16-byte units of one token's row: its channels, eight a unit.
__host__ __device__ constexpr int row_units(int head_dim) { return head_dim / 8; }
/// Where 16-byte unit \p f of a tile's K (or V) sits in shared memory. The tile is its rows back
/// to back, row_units a row, unit f of the tile being unit f % row_units of token f / row_units,
/// so every 8 units make one 128-byte line of shared memory. A unit stays in its line (a warp's
/// copy of 32 consecutive units fills 4 whole lines, as in global memory) and moves within it:
/// its place in the line is XOR-ed with a few bits that set apart the 8 rows one ldmatrix reads,
/// so that they fall in 8 different banks' units. When a row is whole lines (a head dim that is
/// a multiple of 64) those bits are the row's low 3; otherwise the row is 10, 12 or 14 units,
/// and the bits that set 8 consecutive rows apart at any unit are the low 1 or 2 bits (as many
/// as the power of 2 in row_units) of the line's index. tests/test_mma.cpp checks both
/// properties for every head dim. With padded rows instead, a line that 8 lanes copy straddles
/// two lines of shared memory and the H200 splits the copies: 2.6 times the L2 requests and 1.5
/// times the bytes to the SMs at head dim 128 (lab/perf-log.md, v66).
template <int HEAD_DIM>
__host__ __device__ constexpr int swizzle(int f) {
  constexpr int units = row_units(HEAD_DIM);
  if constexpr (units % 8 == 0) return f ^ ((f / units) & 7);
  else return f ^ ((f >> 3) & ((units & -units) - 1));
}
/// Floats of one stage: a tile's K rows, then its V rows.
__host__ __device__ constexpr int stage_floats(int head_dim, int tile) { return 2 * tile * row_units(head_dim) * 4; }

// [fragments]
/// This lane's q fragments for the 16 heads from \p first_head (rows past \p heads are zero):
/// A operands of q·Kᵀ, one per 16 channels, as the tokens' 16-bit type.
template <class T, int HEAD_DIM>
__device__ __forceinline__ void load_query_fragments(const DecodeArgs<T>& args, int seq, int first_head, int heads,
                                                     unsigned (&q)[HEAD_DIM / 16][4]) {
  const int lane = threadIdx.x % 32;
  PA_UNROLL
  for (int kk = 0; kk < HEAD_DIM / 16; ++kk) {
    PA_UNROLL
    for (int r = 0; r < 4; ++r) {
      const int row = mma_layout::a_row(lane, r);
      const std::int64_t at = (static_cast<std::int64_t>(seq) * args.num_q_heads + first_head + row) * HEAD_DIM +
                              kk * 16 + mma_layout::a_col(lane, r);
      q[kk][r] = row < heads ? load_pair(args.query, at) : 0u;
    }
  }
}
// [fragments]

// [kernel]
/// The asynchronous copies of a program's K and V tiles into its stages of shared memory, a
/// 16-byte unit a copy, so that the lanes of a warp fill whole lines of shared memory from whole
/// lines of global memory, each copy instruction four of them:
/// - rows that are whole lines (UNITS a multiple of 8: a head dim that is a multiple of 64 in
///   16-bit elements): eight lanes copy a token's row, a line at a time, and the warps take the
///   tile's tokens four at a time in turn (tokens 4w .. 4w+3, then 4(w + warps) ..), so a lane
///   looks up one page for all the lines of a token;
/// - other rows (10, 12 or 14 units): thread t copies units t, t + threads, .. of the tile, so
///   a copy instruction takes 32 consecutive units, 512 bytes of one page's rows (a page of 16
///   tokens is a whole number of them at head dims 80, 96 and 112), and a lane looks up the page
///   of each unit.
/// The program looks a tile's pages up (look_up) a tile before it issues the tile's copies
/// (issue): pages[] holds them, -1 past the range. \p E is the caches' element type (step 12's
/// are fp8), UNITS the 16-byte units of a token's row, laid out as swizzle lays out rows of
/// that many units; a stage is the tile's K rows, then its V rows.
template <class T, class E, int UNITS, int TILE, int STAGES, int PARTS, class Shared>
struct TileCopies {
  static constexpr bool kWholeLines = UNITS % 8 == 0;
  static constexpr int kTileUnits = TILE * UNITS;  // of a tile's K, and of its V
  static constexpr int kStage = 2 * kTileUnits * 4;  // floats of a stage
  static constexpr int kLookups = kWholeLines ? TILE / 4 : (kTileUnits + 32 * PARTS - 1) / (32 * PARTS);
  static constexpr int kUnitElems = 16 / static_cast<int>(sizeof(E));

  const DecodeArgs<T>& args;
  const gspan<const E>& keys;
  const gspan<const E>& values;
  Shared shared;
  int seq, kv_head, begin, end, tiles;
  std::int64_t table_row = static_cast<std::int64_t>(seq) * args.max_blocks_per_seq;  // the sequence's block table

  /// The token in the tile of this thread's lookup \p j, or -1.
  __device__ __forceinline__ int token_of(int j) const {
    if constexpr (kWholeLines) {
      const int lane = threadIdx.x % 32;
      const int four = threadIdx.x / 32 + blockDim.x / 32 * j;
      return four < TILE / 4 ? 4 * four + lane / 8 : -1;
    } else {
      const int f = threadIdx.x + blockDim.x * j;
      return f < kTileUnits ? f / UNITS : -1;
    }
  }
  /// The pages of this thread's lookups in \p tile.
  __device__ __forceinline__ void look_up(int tile, int (&pages)[kLookups]) const {
    PA_UNROLL
    for (int j = 0; j < kLookups; ++j) {
      const int token = begin + tile * TILE + token_of(j);
      pages[j] = token_of(j) >= 0 && tile < tiles && token < end
                     ? args.block_tables[table_row + (args.block_shift >= 0 ? token >> args.block_shift
                                                                             : token / args.block_size)]
                     : -1;
    }
  }
  /// The copies of \p tile into stage tile % STAGES, one group (an empty one past the last
  /// tile, which keeps the count of groups simple).
  __device__ __forceinline__ void issue(int tile, const int (&pages)[kLookups]) const {
    if (tile < tiles) {
      PA_UNROLL
      for (int j = 0; j < kLookups; ++j) {
        const int token = token_of(j);
        if (token < 0) break;
        const int at = begin + tile * TILE + token;
        const int slot = args.block_shift >= 0 ? at & (args.block_size - 1) : at % args.block_size;
        const std::int64_t row = pages[j] >= 0 ? args.kv_offset(pages[j], kv_head, slot) : 0;
        auto copy = [&](int unit) {  // unit \p unit of the token's K and V rows
          const auto dst = shared_slot(shared, (tile % STAGES) * kStage + swizzle<UNITS * 8>(token * UNITS + unit) * 4);
          if (pages[j] >= 0) {
            copy_async<kUnitElems>(dst, keys, row + kUnitElems * unit);
            copy_async<kUnitElems>(dst + kTileUnits * 4, values, row + kUnitElems * unit);
          } else {  // past the range: zeros, so a weight of 0 times V adds 0, not whatever the slot held
            zero_async(dst, keys);
            zero_async(dst + kTileUnits * 4, keys);
          }
        };
        for_units(j, copy);
      }
    }
    async_commit();
  }
  /// Calls `copy(unit)` for each 16-byte unit of its token's row that lookup \p j of this thread
  /// copies: a line's worth each for whole lines, else one.
  template <class Copy>
  __device__ __forceinline__ static void for_units(int j, Copy& copy) {
    if constexpr (kWholeLines) {
      const int lane = threadIdx.x % 32;
      PA_UNROLL
      for (int line = 0; line < UNITS / 8; ++line) copy(lane % 8 + 8 * line);
    } else {
      copy((threadIdx.x + blockDim.x * j) % UNITS);
    }
  }
};

/// The online softmax of one tile, on the score fragments \p s of q·Kᵀ (16 heads x 8·N tokens:
/// n8 tile j holds tokens 8j .. 8j+7, lane l rows l / 4 and l / 4 + 8, columns 2(l % 4), +1): the
/// scores are scaled by \p scale (base 2: each weight is one ex2), and tokens at or past \p valid
/// weigh 0. A row's max needs its four lanes (two shuffles). The rows' running max and sum are
/// updated and the accumulators \p o rescaled, only when a row's max grew in some lane of the
/// warp: after the first tiles that is rare. The weights come back in \p p as P·V's A fragments,
/// in \p W, as they are: accumulator (row, token 2t, 2t+1) of n8 tile 2c + h is A's (row,
/// k = 8h + 2t, +1) for the 16-token chunk c, the layout m16n8k16 gives C and takes A in. The sum
/// adds the weights as rounded to 16 bits, the ones the multiply uses. Step 12 takes it as it is.
template <class W, int N, int BLOCKS>
__device__ __forceinline__ void online_softmax_tile(float (&s)[N][4], int valid, float scale, float (&running_max)[2],
                                                    float (&running_sum)[2], float (&o)[BLOCKS][2][4],
                                                    unsigned (&p)[N / 2][4]) {
  const int lane = threadIdx.x % 32;
  float tile_max[2] = {-INFINITY, -INFINITY};
  PA_UNROLL
  for (int j = 0; j < N; ++j)
    PA_UNROLL
    for (int e = 0; e < 4; ++e) {
      s[j][e] = 8 * j + mma_layout::c_col(lane, e) < valid ? s[j][e] * scale : -INFINITY;
      tile_max[e / 2] = fmaxf(tile_max[e / 2], s[j][e]);
    }
  bool grew = false;
  PA_UNROLL
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    grew = grew || tile_max[r] > running_max[r];
  }
  if (__ballot_sync(0xffffffffu, grew) != 0) {
    PA_UNROLL
    for (int r = 0; r < 2; ++r) {
      const float new_max = fmaxf(running_max[r], tile_max[r]);
      const float rescale = fast_exp2(running_max[r] - new_max);  // 0 on the first tile, 1 if it did not grow
      running_max[r] = new_max;
      running_sum[r] *= rescale;
      PA_UNROLL
      for (int i = 0; i < BLOCKS; ++i)
        PA_UNROLL
        for (int h = 0; h < 2; ++h) {
          o[i][h][2 * r] *= rescale;
          o[i][h][2 * r + 1] *= rescale;
        }
    }
  }
  PA_UNROLL
  for (int j = 0; j < N; ++j)
    PA_UNROLL
    for (int r = 0; r < 2; ++r) {
      p[j / 2][2 * (j % 2) + r] =
          pack_pair<W>(fast_exp2(s[j][2 * r] - running_max[r]), fast_exp2(s[j][2 * r + 1] - running_max[r]));
      float lo, hi;
      unpack_pair<W>(p[j / 2][2 * (j % 2) + r], lo, hi);
      running_sum[r] += lo + hi;
    }
}

/// The attention of the query-head group of \p kv_head of \p seq over tokens [begin, end), by a
/// program of one warp for each 16 heads of the group times each part of the head dim (step 10's
/// program, and step 11's for each item of its work list). When \p direct, the result divided by
/// its sum goes to the output; else it goes unnormalised to \p partials, head h of the group (its
/// output row head_row) at slot `slot_of(head_row, h)`. \p shared holds the stages
/// (shared_bytes()); the caller orders this call after any earlier use of them by a barrier.
/// TRANSPOSED_K plants a bug for the test that checks the oracle sees one: the K fragments are
/// read transposed.
template <class T, int HEAD_DIM, bool TRANSPOSED_K, int TILE, int PART_DIMS, int STAGES, class Shared, class SlotOf>
__device__ __forceinline__ void tensor_core_attend(const DecodeArgs<T>& args, int seq, int kv_head, int begin, int end,
                                                   Shared shared, bool direct, const Partials& partials, SlotOf slot_of) {
  constexpr int kChunks = TILE / 16;                          // 16-token chunks of a tile: P·V's k steps
  constexpr int kBlocks = HEAD_DIM / 16;                      // 16-channel blocks of a row
  constexpr int kParts = parts_for(HEAD_DIM, PART_DIMS);      // warps that share a tile's P·V
  constexpr int kMyBlocks = (kBlocks + kParts - 1) / kParts;  // a warp's blocks: part, part + kParts, ...
  constexpr int kUnits = row_units(HEAD_DIM);
  using Copies = TileCopies<T, T, kUnits, TILE, STAGES, kParts, Shared>;
  static_assert(Copies::kStage == stage_floats(HEAD_DIM, TILE), "a stage as shared_bytes() sizes it");
  constexpr int kTileUnits = Copies::kTileUnits;  // of a tile's K, and of its V
  constexpr int kStage = Copies::kStage;
  const int tiles = (end - begin + TILE - 1) / TILE;

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int part = warp % kParts;                          // this warp's channel blocks: part + kParts * i
  const int rows_first = (warp / kParts) * kHeadsPerWarp;  // its first head within the group
  const int group_size = args.group_size();
  const int first_head = kv_head * group_size + rows_first;
  unsigned q[HEAD_DIM / 16][4];
  load_query_fragments<T, HEAD_DIM>(args, seq, first_head, group_size - rows_first, q);

  // The copies (TileCopies), pages looked up a tile ahead.
  const Copies copies{args, args.key_cache, args.value_cache, shared, seq, kv_head, begin, end, tiles};

  // Row r of this lane's fragments is head rows_first + r; e = 0, 1 of an accumulator are row
  // c_row(lane, 0), e = 2, 3 row c_row(lane, 0) + 8. The row state is kept per row; a row's sum
  // is this lane's share until the end (its group of four lanes holds the row's tokens).
  float running_max[2] = {-INFINITY, -INFINITY};
  float running_sum[2] = {0.0f, 0.0f};
  float o[kMyBlocks][2][4];  // block i, n8 tile h: channels (part + kParts * i) * 16 + 8 * h ..
  PA_UNROLL
  for (int i = 0; i < kMyBlocks; ++i)
    PA_UNROLL
    for (int h = 0; h < 2; ++h)
      PA_UNROLL
      for (int e = 0; e < 4; ++e) o[i][h][e] = 0.0f;
  const float scale = args.scale * step09::kLog2e;  // scores in base 2: each weight is one ex2

  int pages[Copies::kLookups];
  PA_UNROLL
  for (int tile = 0; tile < STAGES - 1; ++tile) {
    copies.look_up(tile, pages);
    copies.issue(tile, pages);
  }
  copies.look_up(STAGES - 1, pages);  // the pages of the tile issued next
  for (int tile = 0; tile < tiles; ++tile) {
    // The copies of tile + STAGES - 1 go out before the wait for this tile, so STAGES tiles are
    // in flight while the program waits; they refill the stage the last tile used, which the
    // first barrier frees. The second barrier: everyone's copies of this tile have landed.
    __syncthreads();
    copies.issue(tile + STAGES - 1, pages);
    copies.look_up(tile + STAGES, pages);  // its latency hides behind this tile's wait and arithmetic
    async_wait<STAGES - 1>();       // this thread's copies of `tile` have landed
    __syncthreads();
    const int k_tile = (tile % STAGES) * kStage;
    const int v_tile = k_tile + kTileUnits * 4;

    // Scores s = q·Kᵀ for 16 heads x TILE tokens: n8 tile j holds tokens 8j .. 8j+7. One
    // ldmatrix gives the B fragments of two n8 tiles for 16 channels: matrices (tokens 0-7,
    // channels +0), (0-7, +8), (8-15, +0), (8-15, +8) of a 16-token chunk; lane 8m + i gives
    // row i of matrix m.
    float s[2 * kChunks][4] = {};
    PA_UNROLL
    for (int kk = 0; kk < HEAD_DIM / 16; ++kk) {
      PA_UNROLL
      for (int c = 0; c < kChunks; ++c) {
        const int token = 16 * c + (lane / 16) * 8 + lane % 8;
        const int channel = kk * 16 + (lane / 8) % 2 * 8;
        unsigned k[4];
        ldmatrix_x4<TRANSPOSED_K>(k, shared_slot(shared, k_tile + swizzle<HEAD_DIM>(token * kUnits + channel / 8) * 4));
        mma_m16n8k16<T>(s[2 * c], q[kk], {k[0], k[1]});
        mma_m16n8k16<T>(s[2 * c + 1], q[kk], {k[2], k[3]});
      }
    }
    // The online softmax on the fragments, which become P·V's A fragments.
    unsigned p[kChunks][4];
    online_softmax_tile<T>(s, end - (begin + tile * TILE), scale, running_max, running_sum, o, p);
    // o += P·V for this warp's channel blocks: ldmatrix .trans turns V's token rows into B
    // fragments (k = token, n = channel); one gives a block's two n8 tiles for a 16-token
    // chunk: matrices (tokens 0-7, channels +0), (8-15, +0), (0-7, +8), (8-15, +8).
    PA_UNROLL
    for (int i = 0; i < kMyBlocks; ++i) {
      const int block = part + kParts * i;
      if (kBlocks % kParts != 0 && block >= kBlocks) break;  // the last part may have a block fewer
      PA_UNROLL
      for (int c = 0; c < kChunks; ++c) {
        const int token = 16 * c + (lane / 8) % 2 * 8 + lane % 8;
        const int channel = block * 16 + lane / 16 * 8;
        unsigned v[4];
        ldmatrix_x4<true>(v, shared_slot(shared, v_tile + swizzle<HEAD_DIM>(token * kUnits + channel / 8) * 4));
        mma_m16n8k16<T>(o[i][0], p[c], {v[0], v[1]});
        mma_m16n8k16<T>(o[i][1], p[c], {v[2], v[3]});
      }
    }
  }
  async_wait<0>();  // the empty groups past the last tile

  // A row's sum over its four lanes; then each lane writes its rows' channels of the partials
  // (or of the output: acc / sum, 0 for an empty range, as merge_splits writes one split).
  PA_UNROLL
  for (int r = 0; r < 2; ++r) {
    running_sum[r] += __shfl_xor_sync(0xffffffffu, running_sum[r], 1);
    running_sum[r] += __shfl_xor_sync(0xffffffffu, running_sum[r], 2);
    const int row = mma_layout::c_row(lane, 2 * r);
    if (rows_first + row >= group_size) continue;  // a padding row
    const std::int64_t head_row = static_cast<std::int64_t>(seq) * args.num_q_heads + first_head + row;
    const std::int64_t slot = slot_of(head_row, rows_first + row);
    const float sum = running_sum[r];
    auto normalised = [&](float acc) { return from_float<T>(sum == 0.0f ? 0.0f : acc / sum); };
    PA_UNROLL
    for (int i = 0; i < kMyBlocks; ++i) {
      const int block = part + kParts * i;
      if (kBlocks % kParts != 0 && block >= kBlocks) break;
      PA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int channel = block * 16 + 8 * h + mma_layout::c_col(lane, 2 * r);
        if (direct)
          store_vec<2>(args.out, head_row * HEAD_DIM + channel,
                       Vec<T, 2>{{normalised(o[i][h][2 * r]), normalised(o[i][h][2 * r + 1])}});
        else
          store_vec<2>(partials.accs, slot * HEAD_DIM + channel, Vec<float, 2>{{o[i][h][2 * r], o[i][h][2 * r + 1]}});
      }
    }
    if (!direct && part == 0 && lane % 4 == 0) {
      partials.maxes[slot] = running_max[r];
      partials.sums[slot] = running_sum[r];
    }
  }
}

/// Program (kv_head, seq, split): tensor_core_attend over the split's tokens, unnormalised, to
/// the partials (slot head_row * splits + split); or, when \p direct (the plan has one split, so
/// the split is the whole sequence), divided by its sum to the output, with the same bits the
/// merge would write and no merge to wait for.
template <class T, int HEAD_DIM, bool TRANSPOSED_K, int TILE, int PART_DIMS, int STAGES>
__global__ void tensor_core_split_decode(DecodeArgs<T> args, Partials partials, bool prefetch_table, bool direct) {
  PA_DYNAMIC_SHARED(float, shared);
  allow_next_kernel();  // the merge may take the SMs this grid leaves free; it waits for our partials
  const int kv_head = blockIdx.x;
  const int seq = blockIdx.y;
  const int split = blockIdx.z;
  if (prefetch_table) step09::prefetch_split_table(args, seq, split, partials.partition);
  const int context_len = args.context_lens[seq];
  const int begin = std::min(split * partials.partition, context_len);
  const int end = std::min(begin + partials.partition, context_len);
  tensor_core_attend<T, HEAD_DIM, TRANSPOSED_K, TILE, PART_DIMS, STAGES>(
      args, seq, kv_head, begin, end, shared, direct, partials,
      [&](std::int64_t head_row, int) { return head_row * partials.splits + split; });
}
// [kernel]

// [merge]
/// Program (q_head, seq, 32 channels): merge_row over the row's splits. The plan launches it for
/// more than step09::kMergeDirectSplits splits (at most that many, step 09's merge_splits has one
/// round of loads already), overlapped with the split kernel.
template <class T, int HEAD_DIM>
__global__ void merge_splits(DecodeArgs<T> args, Partials partials) {
  PA_SHARED(float, slice_maxes, kMergeSlices);
  PA_SHARED(float, slice_sums, kMergeSlices);
  PA_SHARED(float, slice_accs, kMergeSlices * kMergeChannels);
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.y) * args.num_q_heads + blockIdx.x;
  wait_for_previous_kernel();  // the partials are complete from here
  merge_row<T, HEAD_DIM>(args.out, row, partials, partials.splits, [&](int i) { return row * partials.splits + i; },
                         slice_maxes, slice_sums, slice_accs);
}
// [merge]

// ----- host side -----------------------------------------------------------------------------
inline constexpr const char* kName = "step10_tensor_cores";

/// Warps of a program for \p p: one per 16 heads of the group, times the parts of the head dim.
inline int warps_for(const DecodeProblem& p, const Shape& shape) {
  return (p.group_size() + kHeadsPerWarp - 1) / kHeadsPerWarp * parts_for(p.head_dim, shape.part_dims);
}

/// Dynamic shared memory of a program: its stages of K and V tiles.
inline std::size_t shared_bytes(const DecodeProblem& p, const Shape& shape) {
  return std::size_t(shape.stages) * stage_floats(p.head_dim, shape.tile) * sizeof(float);
}

/// The index in kShapes of the shape of a program for \p p: kWideShape for a group of more than
/// 16 heads (at a head dim over 64: at 64 it is kShape), kLongTileShape at head dim 112, else kShape.
inline int shape_for(const DecodeProblem& p) {
  if (p.group_size() > kHeadsPerWarp) return p.head_dim > kShape.part_dims ? 1 : 0;
  return p.head_dim == 112 ? 2 : 0;
}

/// Calls `f(T{}, head_dim, shape)` with \p p's storage type (bf16 or f16), head dim and the index
/// of its shape in kShapes (shape_for), each a compile-time constant: what instantiates a kernel
/// of the tensor-core rungs for \p p. Calls nothing for f32, which the plans refuse first.
template <class F>
void dispatch_shape(const DecodeProblem& p, F&& f) {
  const int shape = shape_for(p);
  dispatch_problem(p, [&](auto storage, auto head_dim) {
    constexpr int D = decltype(head_dim)::value;
    // std::remove_cvref_t<decltype(storage)>, not an alias of it: see step09::with_kernel.
    if constexpr (!std::is_same_v<std::remove_cvref_t<decltype(storage)>, float>) {
      if constexpr (D > kShape.part_dims) if (shape == 1) return f(storage, head_dim, std::integral_constant<int, 1>{});
      if constexpr (D == 112) if (shape == 2) return f(storage, head_dim, std::integral_constant<int, 2>{});
      f(storage, head_dim, std::integral_constant<int, 0>{});
    }
  });
}

/// Calls `f(kernel, T{}, head_dim)` with the tensor_core_split_decode instantiation for \p p's
/// storage type (bf16 or f16), head dim and shape (shape_for).
template <bool TRANSPOSED_K = false, class F>
void with_kernel(const DecodeProblem& p, F&& f) {
  dispatch_shape(p, [&](auto storage, auto head_dim, auto index) {
    using T = std::remove_cvref_t<decltype(storage)>;
    constexpr int D = decltype(head_dim)::value;
    constexpr Shape s = kShapes[decltype(index)::value];
    f(tensor_core_split_decode<T, D, TRANSPOSED_K, s.tile, s.part_dims, s.stages>, storage, head_dim);
  });
}

/// The floor of a split's tokens (step 09's rule takes 256), and of a step 11 program's portion;
/// the plans go below it only where it leaves too few programs (few_programs). On the H200
/// `long-single` and `small-batch` ran fastest at 512 tokens a split (lab/perf-log.md, v64).
inline constexpr int kMinTokensPerSplit = 512;

/// Programs an SM the plan fills where 512-token splits leave too few (few_programs). A
/// program's chain of tiles is latency-bound when few run, so what sets the time there is how
/// many programs run, not how long a split is: on one sequence of 1k to 16k tokens, splits of 512
/// tokens left 16 to 256 programs and took 26-28 us whatever the length; splits toward 4 programs
/// an SM took 9.1 us at 1k (one tile a split) and 23 at 16k; `long-single` and `small-batch` were
/// fastest at 512 programs too (lab/perf-log.md, v64 and v118).
inline constexpr int kWavePrograms = 4;

/// The shortest chain, in tiles, that splitting pays for where the 512-token floor already leaves
/// one program an SM or more: 256 programs of 16 tiles (one sequence of 16k) ran 27.6 us and 23.2
/// split in two, 256 programs of 4 tiles (32 sequences of 128 tokens) 11.5 us and 12.6 split in
/// two, the merge costing more than the shorter chain saves (lab/perf-log.md, v118 and v120).
inline constexpr int kLongChainTiles = 8;

/// Whether \p programs programs of \p chain tiles each (the 512-token floor's) are too few for the
/// machine: fewer than one an SM, or fewer than two an SM with chains of kLongChainTiles or more.
inline bool few_programs(std::int64_t programs, std::int64_t chain, const DeviceLimits& device) {
  return programs < device.sm_count || (programs < 2 * std::int64_t{device.sm_count} && chain >= kLongChainTiles);
}

/// The programs a plan fills toward where few_programs holds: kWavePrograms an SM, or as many as
/// an SM holds (\p resident_per_sm) if fewer.
inline std::int64_t wave_programs(int resident_per_sm, const DeviceLimits& device) {
  return std::int64_t{device.sm_count} * std::min(resident_per_sm, kWavePrograms);
}

// [splits]
/// The split count: step 09's, with splits of kMinTokensPerSplit tokens or more; but where the
/// lengths are equal or not given and that floor leaves too few programs (few_programs), more and
/// shorter splits toward about kWavePrograms programs an SM, down to one tile, each a whole number
/// of tiles (66 splits of 497 tokens on `long-single` ran 3.5% slower than 64 of 512, v118).
/// Without the lengths, max_context_len is a capacity: a sequence shorter than it leaves its
/// last splits empty, which end at once (one sequence of up to 512 tokens: 8.6 us in 16 splits
/// against 24.3 in one, v120). `options.num_splits` or `options.partition_tokens` override it.
inline int choose_splits(const DecodeProblem& p, const LaunchPlan& program, const KernelOptions& options,
                         const DeviceLimits& device) {
  const std::int64_t pairs = std::max<std::int64_t>(std::int64_t{p.num_seqs} * p.num_kv_heads, 1);
  const int floored =
      step09::choose_splits(p, pairs, program.resident_per_sm, program.threads, options, device, kMinTokensPerSplit);
  const bool ragged = p.total_context_len != 0 && !step09::lengths_equal(p);  // given, and not equal: step 09's rounds
  if (options.num_splits > 0 || options.partition_tokens > 0 || p.max_context_len == 0 || ragged) return floored;
  const int tile = kShapes[shape_for(p)].tile;
  const std::int64_t tiles = (p.max_context_len + tile - 1) / tile;
  if (!few_programs(pairs * floored, (tiles + floored - 1) / floored, device)) return floored;
  const std::int64_t wanted = std::max<std::int64_t>(wave_programs(program.resident_per_sm, device) / pairs, 1);
  const std::int64_t split_tiles = (tiles + wanted - 1) / wanted;  // rounded up to whole tiles
  return std::max(floored, static_cast<int>((tiles + split_tiles - 1) / split_tiles));
}
// [splits]

/// Refuses f32 storage, naming \p kernel: tensor cores multiply 16-bit inputs.
inline void require_16_bit(const DecodeProblem& p, const char* kernel) {
  PA_REQUIRE(p.dtype == DType::bf16 || p.dtype == DType::f16, kernel, "dtype",
             "bf16 or f16 (tensor cores multiply 16-bit inputs here; f32 runs on step 09)", dtype_name(p.dtype));
}

/// Refuses a tensor-core program that fits no SM of \p device, naming what sets its size: the
/// group and the head dim (its warps and shared memory follow from them; no knob changes them).
inline void require_program_fits(const LaunchPlan& plan, const DeviceLimits& device, const char* kernel) {
  const DecodeProblem& p = plan.problem;
  PA_REQUIRE(step07::fits(plan, device), kernel, "num_q_heads / num_kv_heads and head_dim",
             cat("a group and head dim whose program fits one SM of ", device.name, " (registers and shared memory)"),
             cat("a group of ", p.group_size(), " at head dim ", p.head_dim, ": ", plan.threads, " threads, ",
                 plan.shared_bytes, " B shared memory"));
}

/// A tensor-core rung's plan as far as its program decides it: the warps for \p p (refused, naming
/// \p kernel, past 32), threads, shared memory, and the programs one SM holds of the kernel that
/// `with(p, f)` hands `f` as with_kernel does (the occupancy calculator; refused when none fits).
template <class With>
LaunchPlan program_plan(const DecodeProblem& p, const KernelOptions& options, const DeviceLimits& device,
                        const char* kernel, With with) {
  const Shape shape = kShapes[shape_for(p)];
  const int warps = warps_for(p, shape);
  PA_REQUIRE(warps <= 32, kernel, "num_q_heads / num_kv_heads",
             cat("a group of at most ", 32 / parts_for(p.head_dim, shape.part_dims) * kHeadsPerWarp, " heads at head dim ", p.head_dim,
                 " (one warp per 16 heads, 32 warps a program)"),
             p.group_size());
  LaunchPlan out;
  out.problem = p;
  out.options = options;
  out.threads = warps * 32;
  out.shared_bytes = shared_bytes(p, shape);
  with(p, [&](auto kernel_function, auto, auto) {
    out.resident_per_sm = out.shared_bytes <= device.shared_per_block_optin
                              ? resident_programs_per_sm(kernel_function, out.threads, out.shared_bytes, device)
                              : 0;
  });
  require_program_fits(out, device, kernel);
  return out;
}

/// "a warp for each 16 heads and 64 channels, tile 32, 2 stages, 6 programs an SM on <device>":
/// a tensor-core program as program_plan made it.
inline std::string describe_program(const LaunchPlan& plan, const DeviceLimits& device) {
  const DecodeProblem& p = plan.problem;
  const Shape shape = kShapes[shape_for(p)];
  const int parts = parts_for(p.head_dim, shape.part_dims);
  return cat("a warp for each 16 heads and ", (p.head_dim / 16 + parts - 1) / parts * 16, " channels, tile ", shape.tile,
             ", ", shape.stages, " stages, ", plan.resident_per_sm, " programs an SM on ", device.name);
}

// [plan]
/// The plan: the program's warps and shared memory from the problem, the programs one SM holds
/// from the occupancy calculator, and the split count of choose_splits.
inline LaunchPlan plan(const DecodeProblem& p, const KernelOptions& options, const DeviceLimits& device) {
  validate(p, kName);
  require_knobs(options, knob_splits | knob_partition, kName);
  require_head_dim(p.head_dim, {PA_HEAD_DIMS}, kName);
  step05::require_vector_layout(p, kName);
  step07::require_split_options(options, kName);
  require_16_bit(p, kName);
  PA_REQUIRE(p.num_seqs <= 65535, kName, "num_seqs", "at most 65535 (the grid's y limit: sequences are its second axis)",
             p.num_seqs);
  LaunchPlan out = program_plan(p, options, device, kName, [](const DecodeProblem& q, auto&& f) { with_kernel(q, f); });
  out.splits = choose_splits(p, out, options, device);
  out.options.num_splits = out.splits;
  out.grid[0] = static_cast<unsigned>(p.num_kv_heads);
  out.grid[1] = static_cast<unsigned>(p.num_seqs);
  out.grid[2] = static_cast<unsigned>(out.splits);
  out.workspace_bytes = partials_bytes(p, out.splits);
  out.description = cat(describe_launch(out), ", ", describe_program(out, device), "; ", step07::describe_splits(p, out.splits));
  return out;
}
// [plan]

/// Threads of a merge program: at most step09::kMergeDirectSplits splits go to step 09's
/// merge_splits with one thread a channel, so a warp-rounded head dim, not step 09's 512, of which
/// all but head_dim would wait (with 512, the 512 merge programs of small-batch cannot all be
/// resident beside the split kernel's programs; with 128 they can, and small-batch took 38.8 µs
/// against 39.1: lab/perf-log.md, v74); more go to this step's merge_splits, merge_slices'
/// slices of 32.
inline int merge_threads(int head_dim, int splits) {
  return splits <= step09::kMergeDirectSplits ? (head_dim + 31) / 32 * 32 : merge_slices(splits) * kMergeChannels;
}

/// Refuses an output the epilogue's vector stores of \p values elements cannot write: on the GPU
/// a misaligned store is a fault, so the refusal comes first, naming the argument.
inline void require_out_aligned(const DecodeView& view, int values, const char* kernel) {
  const std::size_t bytes = static_cast<std::size_t>(values) * dtype_size(view.problem.dtype);
  PA_REQUIRE(reinterpret_cast<std::uintptr_t>(view.out) % bytes == 0, kernel, "out",
             cat("a ", bytes, "-byte aligned pointer (the epilogue stores ", values, " values at once)"), view.out);
}

/// launch(), with the K fragments read transposed when \p transposed_k: the planted bug of
/// tests/test_mma.cpp, which the oracle must catch.
inline void launch_as(const DecodeView& view, const LaunchPlan& plan, void* stream, bool transposed_k) {
  if (!begin_launch(view, plan, kName)) return;
  step05::require_aligned(view, kName);
  require_out_aligned(view, 2, kName);
  const DecodeProblem& p = view.problem;
  const Partials partials = partials_in(view.workspace, p, plan.splits);
  auto run = [&](auto kernel, auto storage, auto head_dim) {
    using T = std::remove_cvref_t<decltype(storage)>;
    constexpr int D = decltype(head_dim)::value;
    const DecodeArgs<T> args = make_args<T>(view);
    const bool direct = plan.splits == 1;
    launch_kernel("step10_split_decode", kernel, dim3(plan.grid[0], plan.grid[1], plan.grid[2]), dim3(plan.threads),
                  plan.shared_bytes, stream, args, partials, true, direct);
    if (direct) return;
    if (plan.splits <= step09::kMergeDirectSplits)
      launch_kernel_overlapped("step10_merge_splits", step09::merge_splits<T, D>, dim3(p.num_q_heads, p.num_seqs),
                               dim3(merge_threads(D, plan.splits)), 0, stream, args, partials);
    else
      launch_kernel_overlapped("step10_merge_splits", merge_splits<T, D>, merge_grid(p.num_q_heads, p.num_seqs, D),
                               dim3(merge_threads(D, plan.splits)), 0, stream, args, partials);
  };
  if constexpr (kBackend == Backend::emulator) {  // the planted bug is compiled for the emulator's test only
    if (transposed_k) return with_kernel<true>(p, run);
  } else {
    PA_REQUIRE(!transposed_k, kName, "transposed_k", "false on the GPU (the planted bug is built for the emulator only)",
               "true");
  }
  with_kernel<false>(p, run);
}

inline void launch(const DecodeView& view, const LaunchPlan& plan, void* stream) { launch_as(view, plan, stream, false); }

inline KernelEntry entry() { return {10, kName, kBackend, knob_splits | knob_partition, 0, &plan, &launch, true, false, true}; }

}  // namespace pa::PA_KERNELS::step10
