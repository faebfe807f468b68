#pragma once
/// \file
/// Step 12, fp8 K/V: the caches hold fp8 e4m3, one byte an element, with one scale for K and one
/// for V, so a decode step reads half the bytes of bf16 K/V.
///
/// What changed since step 11: the tiles that step 11's programs copy into shared memory are
/// bytes of e4m3, and the warps turn them into f16 fragments on their way to the tensor cores,
/// exactly (every e4m3 value is an f16 value). The persistent grid and its work list and the merge
/// are step 11's, the online softmax step 10's (online_softmax_tile); the copies are step 10's
/// TileCopies made leaner for byte rows (Fp8Copies). What the bytes ask for:
/// - q·Kᵀ: one `ldmatrix` gives a lane four consecutive channels of one token (not the 2 + 2 that
///   are eight apart, as a B fragment of 16-bit elements wants). The sum over channels does not
///   care about their order, so q's A fragment is loaded in the same order instead, and each
///   register of K becomes the lane's two B registers with two conversions.
/// - P·V: `ldmatrix .trans` moves 16-bit elements, so it gives a lane two channels of two tokens;
///   one byte permute puts each channel's two tokens side by side, and each half is then a B
///   register: of an even channel's tile and of an odd one's. The output channels come out
///   interleaved, and the epilogue writes each lane's four of them in order.
/// - The multiplies are f16 (the converted K and V are f16). An f16 q goes in as it is; a bf16 q
///   is converted, divided by a power of two that brings the warp's largest |q| under 2^15 (f16
///   ends at 65504; the power goes back into the scale, exactly). The weights P are f16.
/// - The scales cost nothing in the loop: k_scale joins the softmax scale, v_scale multiplies
///   the accumulators once at the end.
/// - A program is one warp of 128 channels on 32-token tiles where step 10's has two of 64:
///   one warp computes the scores and converts K once (kShapes says what that saves).
/// - Where the portions are long, each program's last kClaimTiles tiles are items that the
///   programs done with their runs claim at run time (claim_tails): fp8 programs of equal loads
///   end further apart than bf16 ones, and the slow ones' last tiles go to those done first.
/// A problem whose K/V are not fp8 runs as step 11.
///
///     build/current/steps/step12_fp8_cache --help

#include <cmath>
#include <cstddef>

#include "kernels/11_persistent.cuh"

namespace pa::PA_KERNELS::step12 {

using step07::Partials;
using step10::kHeadsPerWarp;
using step10::parts_for;
using step10::Shape;

/// The program shapes, indexed like step 10's (step10::shape_for): one warp of 128 channels on
/// 32-token tiles (at head dim 256 two), 2 stages; for a group of more than 16 heads 64-token
/// tiles (a warp for each 16 heads already); at head dim 112 step 10's tile of 64 with 64 channels
/// a warp. The warp that holds all of a head's channels computes q·Kᵀ and converts K once for the
/// program, where two warps of 64 channels each did both: on the H200 `gqa-batch-fp8` took 301 µs
/// against 417 with {64, 64, 2} (133.6 M warp instructions against 198.9 M), 152 against 155 at
/// head dim 64, 181 against 237 at 80, 667 against 1140 at 256 (lab/perf-log.md, v81).
inline constexpr Shape kShapes[] = {{32, 128, 2}, {64, 128, 2}, {64, 64, 2}};

/// Registers a warp's fragments take: q's A fragments (head_dim / 4), a tile's scores (tile / 2)
/// and its output channels' accumulators (half its channels).
__host__ __device__ constexpr int fragment_registers(int head_dim, int tile, int part_dims) {
  return head_dim / 4 + tile / 2 + (part_dims < head_dim ? part_dims : head_dim) / 2;
}

/// The registers a thread of a program may use (`__maxnreg__`): 168 where its fragments take at
/// most 112, else as many as nvcc likes. Left to itself nvcc gives these programs up to 251
/// registers at head dim 128 (ncu on the H200): 4 programs an SM, the loop bound by its
/// instructions' latency; held to 168, 6 to 12 fit an SM, and `gqa-batch-fp8` ran 10% faster
/// (lab/perf-log.md, v79). Where the fragments take more (128 for 32 heads at head dim 128 on
/// 64-token tiles, 144 at head dim 256) the cap spills: group 32 ran 45% slower capped (v81).
__host__ __device__ constexpr int register_cap(int head_dim, int tile, int part_dims) {
  return fragment_registers(head_dim, tile, part_dims) <= 112 ? 168 : 255;
}

/// 16-byte units of one token's fp8 row: 16 channels a unit.
__host__ __device__ constexpr int row_units(int head_dim) { return head_dim / 16; }
/// Step 10's swizzle for rows of row_units(HEAD_DIM) units (step 10's rows of HEAD_DIM / 2
/// 16-bit elements have as many): the 8 rows an ldmatrix reads fall in 8 different bank groups.
template <int HEAD_DIM>
__host__ __device__ constexpr int swizzle(int f) {
  return step10::swizzle<HEAD_DIM / 2>(f);
}
/// Floats of one stage: a tile's K rows, then its V rows.
__host__ __device__ constexpr int stage_floats(int head_dim, int tile) { return 2 * tile * row_units(head_dim) * 4; }
/// Rows of \p units 16-byte units whose lanes split a warp evenly (4 units, or a multiple of 8)
/// can take the runs.
__host__ __device__ constexpr bool rows_can_run(int units) { return units == 4 || units % 8 == 0; }
/// Whether the copies of an item from token \p begin take the runs (Fp8Copies::issue_runs): rows
/// of 4 units or a multiple of 8 (head dims 64, 128 and 256), a program of one warp, a
/// power-of-two page of at least 16 tokens whose rows of one KV head are contiguous (the HND
/// layout: \p token_stride is the head dim), and \p begin a multiple of 16. Then each 16-token
/// half of a tile is 16 consecutive rows of one page: one run of bytes. The kernel asks it of
/// each item, the plan's description of the plan (whose items start on tiles).
__host__ __device__ constexpr bool takes_runs(int head_dim, int threads, int block_size, std::int64_t token_stride,
                                              int begin) {
  return rows_can_run(row_units(head_dim)) && threads == 32 && block_size >= 16 &&
         (block_size & (block_size - 1)) == 0 && token_stride == head_dim && begin % 16 == 0;
}

/// The fp8 caches as the kernel reads them, with their scales.
struct Fp8Caches {
  gspan<const e4m3> keys;
  gspan<const e4m3> values;
  float k_scale;
  float v_scale;
};

// [fragments]
/// The channel that k index \p k (0-15) of a 16-channel block stands for in q·Kᵀ: the ldmatrix
/// of fp8 K gives lane t of a group channels 4t .. 4t+3, which its two B registers hold as
/// k = 2t, 2t+1 and k = 2t+8, 2t+9; so k = 2t + e is channel 4t + e, k = 2t + 8 + e is 4t + 2 + e.
__host__ __device__ constexpr int channel_of_k(int k) { return k < 8 ? 4 * (k / 2) + k % 2 : 4 * ((k - 8) / 2) + 2 + k % 2; }

/// This lane's q fragments for the 16 heads from \p first_head (rows past \p heads are zero), in
/// f16, channels in channel_of_k's order. A bf16 q is multiplied by a power of two so that the
/// warp's largest |q| is below 2^15 (f16's largest is 65504); returns the factor's inverse, which
/// multiplies the scores (1 for f16 q, and when no element is that large or one is not finite).
template <class T, int HEAD_DIM>
__device__ __forceinline__ float load_query_f16(const DecodeArgs<T>& args, int seq, int first_head, int heads,
                                                unsigned (&q)[HEAD_DIM / 16][4]) {
  const int lane = threadIdx.x % 32;
  PA_UNROLL
  for (int kk = 0; kk < HEAD_DIM / 16; ++kk) {
    PA_UNROLL
    for (int r = 0; r < 4; ++r) {
      const int row = mma_layout::a_row(lane, r);
      const std::int64_t at = (static_cast<std::int64_t>(seq) * args.num_q_heads + first_head + row) * HEAD_DIM +
                              kk * 16 + channel_of_k(mma_layout::a_col(lane, r));
      q[kk][r] = row < heads ? load_pair(args.query, at) : 0u;
    }
  }
  if constexpr (std::is_same_v<T, f16>) {
    return 1.0f;
  } else {
    float largest = 0.0f;
    PA_UNROLL
    for (int kk = 0; kk < HEAD_DIM / 16; ++kk)
      PA_UNROLL
      for (int r = 0; r < 4; ++r) {
        float lo, hi;
        unpack_pair<T>(q[kk][r], lo, hi);
        largest = fmaxf(largest, fmaxf(fabsf(lo), fabsf(hi)));  // fmaxf passes over a NaN
      }
    PA_UNROLL
    for (int mask = 1; mask < 32; mask *= 2) largest = fmaxf(largest, __shfl_xor_sync(0xffffffffu, largest, mask));
    float factor = 1.0f;
    if (largest >= 32768.0f && largest <= 0x1.fffffep127f) {  // not for an infinity
#if defined(__CUDACC__)
      factor = ldexpf(1.0f, 14 - ilogbf(largest));  // largest * factor in [2^14, 2^15)
#else
      factor = std::ldexp(1.0f, 14 - std::ilogb(largest));
#endif
    }
    PA_UNROLL
    for (int kk = 0; kk < HEAD_DIM / 16; ++kk)
      PA_UNROLL
      for (int r = 0; r < 4; ++r) {
        float lo, hi;
        unpack_pair<T>(q[kk][r], lo, hi);
        q[kk][r] = pack_pair<f16>(lo * factor, hi * factor);
      }
    return 1.0f / factor;
  }
}

/// Two B registers of q·Kᵀ from one register of fp8 K (channels 4t .. 4t+3 of one token), or
/// with PLANTED_E5M2 the same bytes read as the other fp8 format, e5m2 (whose f16 is the byte
/// shifted into the top half): the planted bug of the test that checks the oracle sees one.
template <bool PLANTED_E5M2>
__device__ __forceinline__ void key_registers(unsigned k, unsigned (&b)[2]) {
  if constexpr (PLANTED_E5M2) {
    b[0] = (k & 0xffu) << 8 | (k & 0xff00u) << 16;
    b[1] = (k & 0xff0000u) >> 8 | (k & 0xff000000u);
  } else {
    b[0] = e4m3x2_to_f16x2<0>(k);
    b[1] = e4m3x2_to_f16x2<1>(k);
  }
}

/// From one register of an ldmatrix .trans of fp8 V (tokens 2t, 2t+1 by channels 2g, 2g+1,
/// token-major: bytes V[2t][2g], V[2t][2g+1], V[2t+1][2g], V[2t+1][2g+1]), the f16 pairs of
/// channel 2g (\p even) and 2g+1 (\p odd), tokens 2t and 2t+1 each: B registers of P·V.
__device__ __forceinline__ void value_registers(unsigned v, unsigned& even, unsigned& odd) {
  const unsigned by_channel = byte_perm(v, 0u, 0x3120u);  // V[2t][2g], V[2t+1][2g], V[2t][2g+1], V[2t+1][2g+1]
  even = e4m3x2_to_f16x2<0>(by_channel);
  odd = e4m3x2_to_f16x2<1>(by_channel);
}
// [fragments]

// [copies]
/// Step 10's copies (step10::TileCopies) of fp8 rows, with the address arithmetic cut for a
/// program held to register_cap's registers. An fp8 row is half the bytes of a 16-bit one, so a
/// lookup's addresses are twice the share of the instructions a byte they are in step 10; here
/// - the block size's test (a power of two or not) is made once a tile, and each case has its
///   own loop, where step 10 tests it once a lookup;
/// - a slot past the range is one `cp.async` with its source ignored (copy_async_or_zero), from
///   the slot's row in page 0, which exists, where step 10 branches to a copy or a zero fill;
/// - where each 16-token half of a tile is one run of bytes, 16 consecutive rows of a page (a
///   program of one warp, pages of 16 tokens or more in the HND layout, an item that starts on a
///   multiple of 16), a lane looks up the page of each half, not of each of its rows, and its
///   copies of a half are one address plus constants (issue_runs): at head dim 128 a tile's
///   copies take 66 instructions instead of 207, and `gqa-batch-fp8` 267 µs instead of 272-273
///   (lab/perf-log.md, v112).
/// Step 10's program keeps its form: there nvcc gives these loops 189 registers at head dim 128
/// (168 in step 10's form; 4 programs an SM instead of 6) and spills at 256, and its program is
/// not capped (lab/perf-log.md, v82).
template <class T, int UNITS, int TILE, int STAGES, int PARTS, class Shared>
struct Fp8Copies : step10::TileCopies<T, e4m3, UNITS, TILE, STAGES, PARTS, Shared> {
  using Base = step10::TileCopies<T, e4m3, UNITS, TILE, STAGES, PARTS, Shared>;
  using Base::kLookups, Base::kStage, Base::kTileUnits, Base::kUnitElems;
  using Base::args, Base::begin, Base::end, Base::keys, Base::kv_head, Base::shared, Base::table_row, Base::tiles,
      Base::token_of, Base::values;

  /// The lanes that copy one token's row, a 16-byte unit each (a line of 8 units, or all of a
  /// shorter row), the rows one copy instruction of the warp takes, and a row's elements.
  static constexpr int kLanesPerRow = UNITS < 8 ? UNITS : 8;
  static constexpr int kRowsPerCopy = 32 / kLanesPerRow;
  static constexpr int kLines = UNITS / kLanesPerRow;
  static constexpr int kRowElems = UNITS * kUnitElems;
  static constexpr bool kCanRun = rows_can_run(UNITS);
  static constexpr int kHalves = TILE / 16;  // 16-token halves of a tile: one run of a page each
  static_assert(kHalves <= kLookups, "the runs keep a half's page where a lookup's page is kept");
  /// The swizzle repeats every 8 rows, so the runs address a copy's slots from the first 8 rows'.
  static constexpr int kPeriod = kCanRun ? 8 / kRowsPerCopy : 1;  // copies in 8 rows
  static constexpr bool swizzle_repeats() {
    for (int f = 0; f < 8 * UNITS; ++f)
      if (step10::swizzle<UNITS * 8>(f + 8 * UNITS) != step10::swizzle<UNITS * 8>(f) + 8 * UNITS) return false;
    return true;
  }
  static_assert(!kCanRun || swizzle_repeats(), "issue_runs takes the swizzle of row r + 8 as that of row r, 8 rows on");

  /// Whether this item's tiles take the runs (takes_runs).
  bool runs;

  /// The pages of this thread's lookups in \p tile, -1 past the range (a tile past the last is
  /// wholly past it).
  __device__ __forceinline__ void look_up(int tile, int (&pages)[kLookups]) const {
    const int first = begin + tile * TILE;
    if (runs) {  // the page of each half, the same for every lane
      PA_UNROLL
      for (int h = 0; h < kHalves; ++h) {
        const int at = first + 16 * h;
        pages[h] = at < end ? args.block_tables[table_row + (at >> args.block_shift)] : -1;
      }
      return;
    }
    auto each = [&](auto page_of) {
      PA_UNROLL
      for (int j = 0; j < kLookups; ++j) {
        const int token = token_of(j);
        const int at = first + token;
        pages[j] = token >= 0 && at < end ? args.block_tables[table_row + page_of(at)] : -1;
      }
    };
    if (args.block_shift >= 0) each([&](int at) { return at >> args.block_shift; });
    else each([&](int at) { return at / args.block_size; });
  }
  /// The copies of \p tile into stage tile % STAGES, one group (an empty one past the last
  /// tile). Per lookup: the token's slot in its page, its row, and one copy or zero fill a unit
  /// of K and of V at constant offsets from the row.
  __device__ __forceinline__ void issue(int tile, const int (&pages)[kLookups]) const {
    if (kCanRun && tile < tiles && runs) {
      issue_runs(tile, pages);
    } else if (tile < tiles) {
      const int first = begin + tile * TILE;
      const int stage = (tile % STAGES) * kStage;
      auto each = [&](auto slot_of) {
        PA_UNROLL
        for (int j = 0; j < kLookups; ++j) {
          const int token = token_of(j);
          if (token < 0) break;
          const bool valid = pages[j] >= 0;
          const std::int64_t row = args.kv_offset(valid ? pages[j] : 0, kv_head, slot_of(first + token));
          auto copy = [&](int unit) {  // unit \p unit of the token's K and V rows
            const auto dst = shared_slot(shared, stage + step10::swizzle<UNITS * 8>(token * UNITS + unit) * 4);
            copy_async_or_zero<kUnitElems>(dst, keys, row + kUnitElems * unit, valid);
            copy_async_or_zero<kUnitElems>(dst + kTileUnits * 4, values, row + kUnitElems * unit, valid);
          };
          Base::for_units(j, copy);
        }
      };
      if (args.block_shift >= 0) each([&](int at) { return at & (args.block_size - 1); });
      else each([&](int at) { return at % args.block_size; });
    }
    async_commit();
  }
  /// issue's copies on the runs. Copy k of the tile takes rows kRowsPerCopy * k onwards, a lane
  /// row `lane / kLanesPerRow` of them, and the rows of a half are consecutive in their page; so
  /// a lane's copies of a half are its first one's address plus constants, and their slots the
  /// first 8 rows' plus constants. A half past the range reads page 0, whose rows exist, and its
  /// copies, like those of rows past the range in a page, land zeros.
  __device__ __forceinline__ void issue_runs(int tile, const int (&pages)[kLookups]) const {
    const int first = begin + tile * TILE;
    const int stage = (tile % STAGES) * kStage;
    const int lane = threadIdx.x % 32;
    const int my_row = lane / kLanesPerRow;
    const int my_elems = my_row * kRowElems + kUnitElems * (lane % kLanesPerRow);
    const int rows_left = end - first - my_row;  // a copy from row r on is in range for this lane while r < rows_left
    auto slot_of = [&](int k, int line) {  // of copy k < kPeriod
      return shared_slot(shared, stage + step10::swizzle<UNITS * 8>((kRowsPerCopy * k + my_row) * UNITS +
                                                                    lane % kLanesPerRow + kLanesPerRow * line) * 4);
    };
    PA_UNROLL
    for (int h = 0; h < kHalves; ++h) {
      const int slot = (first + 16 * h) & (args.block_size - 1);
      const std::int64_t run = args.kv_offset(pages[h] >= 0 ? pages[h] : 0, kv_head, slot) + my_elems;
      const auto keys_run = global_cursor(keys, run);
      const auto values_run = global_cursor(values, run);
      PA_UNROLL
      for (int c = 0; c < 16 / kRowsPerCopy; ++c) {
        const int k = 16 / kRowsPerCopy * h + c;  // the copy's index in the tile
        const bool valid = kRowsPerCopy * k < rows_left;
        PA_UNROLL
        for (int line = 0; line < kLines; ++line) {
          const int from = kRowsPerCopy * c * kRowElems + kLanesPerRow * kUnitElems * line;
          const auto dst = slot_of(k % kPeriod, line) + k / kPeriod * 8 * UNITS * 4;
          copy_async_or_zero<kUnitElems>(dst, keys_run + from, valid);
          copy_async_or_zero<kUnitElems>(dst + kTileUnits * 4, values_run + from, valid);
        }
      }
    }
  }
};
// [copies]

// [kernel]
/// Step 10's pass (step10::tensor_core_attend) over fp8 K/V: the attention of the query-head
/// group of \p kv_head of \p seq over tokens [begin, end), by a program of one warp for each 16
/// heads of the group times each part of the head dim. When \p direct, the result divided by its
/// sum goes to the output; else unnormalised to \p partials, head h of the group at slot
/// `slot_of(head_row, h)`. \p shared holds the stages; the caller orders this call after any
/// earlier use of them by a barrier.
template <class T, int HEAD_DIM, bool PLANTED_E5M2, int TILE, int PART_DIMS, int STAGES, class Shared, class SlotOf>
__device__ __forceinline__ void fp8_attend(const DecodeArgs<T>& args, const Fp8Caches& caches, int seq, int kv_head,
                                           int begin, int end, Shared shared, bool direct, const Partials& partials,
                                           SlotOf slot_of) {
  static_assert(TILE % 32 == 0, "a tile is whole 32-token quads: one ldmatrix .x4 reads 32 rows");
  constexpr int kQuads = TILE / 32;                           // 32-token quads of a tile: one ldmatrix each
  constexpr int kChunks = TILE / 16;                          // 16-token chunks: P·V's k steps
  constexpr int kBlocks = HEAD_DIM / 16;                      // 16-channel blocks of a row: one 16-byte unit each
  constexpr int kParts = parts_for(HEAD_DIM, PART_DIMS);
  constexpr int kMyBlocks = (kBlocks + kParts - 1) / kParts;
  constexpr int kUnits = row_units(HEAD_DIM);
  using Copies = Fp8Copies<T, kUnits, TILE, STAGES, kParts, Shared>;
  static_assert(Copies::kStage == stage_floats(HEAD_DIM, TILE), "a stage as shared_bytes() sizes it");
  constexpr int kTileUnits = Copies::kTileUnits;  // of a tile's K, and of its V
  constexpr int kStage = Copies::kStage;
  const int tiles = (end - begin + TILE - 1) / TILE;

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int part = warp % kParts;
  const int rows_first = (warp / kParts) * kHeadsPerWarp;
  const int group_size = args.group_size();
  const int first_head = kv_head * group_size + rows_first;
  unsigned q[HEAD_DIM / 16][4];
  const float q_unscale = load_query_f16<T, HEAD_DIM>(args, seq, first_head, group_size - rows_first, q);

  // The copies (Fp8Copies), rows of kUnits 16-byte units of fp8.
  const Copies copies{{args, caches.keys, caches.values, shared, seq, kv_head, begin, end, tiles},
                      takes_runs(HEAD_DIM, blockDim.x, args.block_size, args.token_stride, begin)};

  float running_max[2] = {-INFINITY, -INFINITY};
  float running_sum[2] = {0.0f, 0.0f};
  // Block i, tile h: channels 16 * (part + kParts * i) + 2n + h of output column n (h = 0: the
  // even channels, 1: the odd ones; value_registers).
  float o[kMyBlocks][2][4];
  PA_UNROLL
  for (int i = 0; i < kMyBlocks; ++i)
    PA_UNROLL
    for (int h = 0; h < 2; ++h)
      PA_UNROLL
      for (int e = 0; e < 4; ++e) o[i][h][e] = 0.0f;
  // Scores in base 2; k_scale and the inverse of q's factor join the softmax scale.
  const float scale = args.scale * caches.k_scale * q_unscale * step09::kLog2e;

  int pages[Copies::kLookups];
  PA_UNROLL
  for (int tile = 0; tile < STAGES - 1; ++tile) {
    copies.look_up(tile, pages);
    copies.issue(tile, pages);
  }
  copies.look_up(STAGES - 1, pages);
  for (int tile = 0; tile < tiles; ++tile) {
    __syncthreads();
    copies.issue(tile + STAGES - 1, pages);
    copies.look_up(tile + STAGES, pages);
    async_wait<STAGES - 1>();
    __syncthreads();
    const int k_tile = (tile % STAGES) * kStage;
    const int v_tile = k_tile + kTileUnits * 4;

    // Scores for 16 heads x TILE tokens: n8 tile j holds tokens 8j .. 8j+7. One ldmatrix .x4
    // reads 32 tokens' unit kk (lane l gives token 32 * quad + l's row): register m is n8 tile
    // 4 * quad + m, channels 4t .. 4t+3 of token g of it.
    float s[TILE / 8][4] = {};
    PA_UNROLL
    for (int kk = 0; kk < kBlocks; ++kk) {
      PA_UNROLL
      for (int quad = 0; quad < kQuads; ++quad) {
        unsigned k[4];
        ldmatrix_x4<false>(k, shared_slot(shared, k_tile + swizzle<HEAD_DIM>((32 * quad + lane) * kUnits + kk) * 4));
        PA_UNROLL
        for (int m = 0; m < 4; ++m) {
          unsigned b[2];
          key_registers<PLANTED_E5M2>(k[m], b);
          mma_m16n8k16<f16>(s[4 * quad + m], q[kk], b);
        }
      }
    }
    // The online softmax on the fragments, as step 10's; the weights in f16, the type of the multiply.
    unsigned p[kChunks][4];
    step10::online_softmax_tile<f16>(s, end - (begin + tile * TILE), scale, running_max, running_sum, o, p);
    // o += P·V for this warp's blocks: one ldmatrix .trans reads 32 tokens' unit `block`
    // (matrix m: tokens 32 * quad + 8m ..), so registers 2c', 2c'+1 are the two halves of the
    // k of chunk 2 * quad + c'.
    PA_UNROLL
    for (int i = 0; i < kMyBlocks; ++i) {
      const int block = part + kParts * i;
      if (kBlocks % kParts != 0 && block >= kBlocks) break;
      PA_UNROLL
      for (int quad = 0; quad < kQuads; ++quad) {
        unsigned v[4];
        ldmatrix_x4<true>(v, shared_slot(shared, v_tile + swizzle<HEAD_DIM>((32 * quad + lane) * kUnits + block) * 4));
        PA_UNROLL
        for (int c = 0; c < 2; ++c) {
          unsigned even[2], odd[2];
          value_registers(v[2 * c], even[0], odd[0]);
          value_registers(v[2 * c + 1], even[1], odd[1]);
          mma_m16n8k16<f16>(o[i][0], p[2 * quad + c], even);
          mma_m16n8k16<f16>(o[i][1], p[2 * quad + c], odd);
        }
      }
    }
  }
  async_wait<0>();

  // As step 10's epilogue, with v_scale on the accumulators and a lane's four channels of a
  // block (16 * block + 4t .. +3: even and odd tiles interleaved) written at once.
  PA_UNROLL
  for (int r = 0; r < 2; ++r) {
    running_sum[r] += __shfl_xor_sync(0xffffffffu, running_sum[r], 1);
    running_sum[r] += __shfl_xor_sync(0xffffffffu, running_sum[r], 2);
    const int row = mma_layout::c_row(lane, 2 * r);
    if (rows_first + row >= group_size) continue;
    const std::int64_t head_row = static_cast<std::int64_t>(seq) * args.num_q_heads + first_head + row;
    const std::int64_t slot = slot_of(head_row, rows_first + row);
    const float sum = running_sum[r];
    auto normalised = [&](float acc) { return from_float<T>(sum == 0.0f ? 0.0f : acc * caches.v_scale / sum); };
    PA_UNROLL
    for (int i = 0; i < kMyBlocks; ++i) {
      const int block = part + kParts * i;
      if (kBlocks % kParts != 0 && block >= kBlocks) break;
      const int channel = block * 16 + 4 * (lane % 4);
      const float acc[4] = {o[i][0][2 * r], o[i][1][2 * r], o[i][0][2 * r + 1], o[i][1][2 * r + 1]};
      if (direct)
        store_vec<4>(args.out, head_row * HEAD_DIM + channel,
                     Vec<T, 4>{{normalised(acc[0]), normalised(acc[1]), normalised(acc[2]), normalised(acc[3])}});
      else
        store_vec<4>(partials.accs, slot * HEAD_DIM + channel,
                     Vec<float, 4>{{acc[0] * caches.v_scale, acc[1] * caches.v_scale, acc[2] * caches.v_scale,
                                    acc[3] * caches.v_scale}});
    }
    if (!direct && part == 0 && lane % 4 == 0) {
      partials.maxes[slot] = running_max[r];
      partials.sums[slot] = running_sum[r];
    }
  }
}

// ----- claimed tails ---------------------------------------------------------------------------
// [claims]
/// The items of a launch that programs claim at run time: items [begin, end) of the work list,
/// each taken by the next program whose own run is done, in list order. `made` counts the claims
/// made so far; the launch sets it to 0 before the kernel. No claims: begin == end.
struct Claims {
  gspan<std::int32_t> made;  ///< [1], in the workspace after the partials
  int begin = 0;
  int end = 0;
};

/// The next claimed item for the calling program, the same for all its threads: thread 0 counts a
/// claim and hands the item through slot \p slot of \p shared (a float: exact, as the plan keeps
/// the count under 2^24). claims.end or more when none is left. Both barriers are the program's:
/// the first also ends its use of the stages by the item before.
template <class Shared>
__device__ __forceinline__ int claim_item(const Claims& claims, Shared shared, int slot) {
  __syncthreads();  // every thread has read the last claim from the slot
  if (threadIdx.x == 0) shared[slot] = static_cast<float>(claims.begin + atomic_add(claims.made, 0, 1));
  __syncthreads();
  return static_cast<int>(shared[slot]);
}
// [claims]

/// Step 11's persistent program, its items run by fp8_attend.
template <class T, int HEAD_DIM, bool PLANTED_E5M2, int TILE, int PART_DIMS, int STAGES>
__global__ void __maxnreg__(register_cap(HEAD_DIM, TILE, PART_DIMS))
    fp8_persistent_decode(DecodeArgs<T> args, Fp8Caches caches, step11::WorkList work, Claims claims, Partials partials) {
  PA_DYNAMIC_SHARED(float, shared);
  allow_next_kernel();
  const int first = work.first_item[blockIdx.x];
  int stop = work.first_item[blockIdx.x + 1];
  const int group_size = args.group_size();
  for (int i = first;; ++i) {
    if (i >= stop) {  // its own run done: the next claimed item, while any is left
      if (claims.begin == claims.end) break;
      i = claim_item(claims, shared, STAGES * stage_floats(HEAD_DIM, TILE));
      if (i >= claims.end) break;
      stop = i + 1;
    }
    const Vec<std::int32_t, 4> where = load_vec<4>(work.items, std::int64_t{i} * step11::kItemInts);
    const Vec<std::int32_t, 4> how = load_vec<4>(work.items, std::int64_t{i} * step11::kItemInts + 4);
    const int seq = where.v[0];
    const int kv_head = where.v[1];
    const int part = how.v[0];
    step11::prefetch_item_table(args, seq, where.v[2], where.v[3]);
    const int context_len = args.context_lens[seq];
    const int begin = std::min(where.v[2], context_len);
    const int end = how.v[1] != 0 ? context_len : std::min(where.v[3], context_len);
    if (i > first) __syncthreads();
    fp8_attend<T, HEAD_DIM, PLANTED_E5M2, TILE, PART_DIMS, STAGES>(
        args, caches, seq, kv_head, begin, end, shared, part < 0, partials,
        [&](std::int64_t, int head) { return std::int64_t{part} * group_size + head; });
  }
}
// [kernel]

// ----- host side -----------------------------------------------------------------------------
inline constexpr const char* kName = "step12_fp8_cache";

/// Calls `f(kernel, T{}, head_dim)` with the fp8_persistent_decode instantiation for \p p's q
/// type (bf16 or f16), head dim and shape (step 10's shape_for, indexing kShapes).
template <bool PLANTED_E5M2 = false, class F>
void with_kernel(const DecodeProblem& p, F&& f) {
  step10::dispatch_shape(p, [&](auto storage, auto head_dim, auto index) {
    using T = std::remove_cvref_t<decltype(storage)>;
    constexpr int D = decltype(head_dim)::value;
    constexpr Shape s = kShapes[decltype(index)::value];
    f(fp8_persistent_decode<T, D, PLANTED_E5M2, s.tile, s.part_dims, s.stages>, storage, head_dim);
  });
}

/// The fp8 caches of \p view.
inline Fp8Caches fp8_caches(const DecodeView& view) {
  const DecodeProblem& p = view.problem;
  const Paging paging{"block_tables", p.layout.block_stride};
  return {gspan<const e4m3>(static_cast<const e4m3*>(view.key_cache), p.cache_elems(), "key_cache", paging),
          gspan<const e4m3>(static_cast<const e4m3*>(view.value_cache), p.cache_elems(), "value_cache", paging),
          p.k_scale, p.v_scale};
}

/// The kernel-side arguments of \p view with fp8 caches: make_args's, but the 16-bit cache spans
/// are empty (the kernel reads the caches through Fp8Caches; a read through these would fault).
template <class T>
DecodeArgs<T> fp8_args(const DecodeView& view) {
  DecodeArgs<T> args = make_args<T>(view);
  args.key_cache = gspan<const T>(static_cast<const T*>(view.key_cache), 0, "key_cache (as 16-bit: unused)");
  args.value_cache = gspan<const T>(static_cast<const T*>(view.value_cache), 0, "value_cache (as 16-bit: unused)");
  return args;
}

// [claim_tails]
/// Tiles at the end of each program's run that become an item claimed at run time, where a plan
/// has claims. On the H200 (`gqa-batch-fp8`, lab/perf-log.md v92 and v102) the last 4 tiles as
/// one item ran 267-269 µs against 271-275 with none; more tiles, or smaller items, ran slower:
/// each item pays a start.
inline constexpr int kClaimTiles = 4;
/// The shortest portion, in tiles, for which a plan has claims. With short portions most of a
/// program's work becomes claims, each paying an item's start: step 11's bf16 programs with
/// claims (v92) were 10-15% slower on `small-batch` and `long-single` (portions of 16 tiles) and
/// no faster on `ragged-skew` (33); `gqa-batch-fp8`'s portions are 84 tiles. (bf16 K/V run as
/// step 11, without claims: there they cost 1% even at portions of 165 tiles, v92.)
inline constexpr int kClaimFromPortion = 48;
/// Bytes of shared memory after a program's stages: the slot claim_item hands an item through.
inline constexpr std::size_t kClaimSlotBytes = 16;

/// Moves the last \p tiles tiles of each program's run in \p s to items of up to \p tiles tiles,
/// after every program's run (items first_item[programs] .. items.size() - 1), in program order:
/// the claimed items (Claims). Numbers the pieces again (step11::number_pieces): a pair one of
/// whose items moved is cut, and its pieces are merged as step 11's are.
inline void claim_tails(step11::Schedule& s, int tiles) {
  using step11::WorkItem;
  auto tiles_of = [&](const WorkItem& item) { return (item.end - item.begin + s.tile - 1) / s.tile; };
  std::vector<WorkItem> kept, claimed;
  std::vector<int> first(s.first_item.size(), 0);
  for (int p = 0; p < s.programs(); ++p) {
    const int from = s.first_item[static_cast<std::size_t>(p)], to = s.first_item[static_cast<std::size_t>(p) + 1];
    std::int64_t run = 0;
    for (int i = from; i < to; ++i) run += tiles_of(s.items[static_cast<std::size_t>(i)]);
    const std::int64_t keep = std::max<std::int64_t>(0, run - tiles);  // tiles the program keeps
    std::int64_t done = 0;
    for (int i = from; i < to; ++i) {
      const WorkItem& item = s.items[static_cast<std::size_t>(i)];
      const int n = tiles_of(item);
      if (done + n <= keep) {  // the whole item stays
        kept.push_back(item);
        done += n;
        continue;
      }
      const int stays = static_cast<int>(std::max<std::int64_t>(0, keep - done));
      if (stays > 0) kept.push_back({item.seq, item.kv_head, item.begin, item.begin + stays * s.tile, -1, false});
      done = keep;
      for (int b = item.begin + stays * s.tile; b < item.end; b += tiles * s.tile) {
        const int e = std::min(item.end, b + tiles * s.tile);
        claimed.push_back({item.seq, item.kv_head, b, e, -1, item.last && e == item.end});
      }
    }
    first[static_cast<std::size_t>(p) + 1] = static_cast<int>(kept.size());
  }
  s.first_item = std::move(first);
  s.items = std::move(kept);
  s.items.insert(s.items.end(), claimed.begin(), claimed.end());
  step11::number_pieces(s);
}

/// Whether a plan of schedule \p s has claims: portions of at least kClaimFromPortion tiles, and
/// a claim count that a float carries exactly (claim_item).
inline bool claims_pay(const step11::Schedule& s) {
  // claim_tails adds at most a kept part and kClaimTiles claimed items a program, and each
  // program's last claim fails one past them: claim_item's largest is under the sum
  return s.work / s.programs() >= kClaimFromPortion &&
         static_cast<std::int64_t>(s.items.size()) + (kClaimTiles + 2) * std::int64_t{s.programs()} <= (std::int64_t{1} << 24);
}

/// Where the claims' count of \p tables's plan is in \p workspace: after the partials
/// (step11::pieces_bytes).
inline std::int32_t* claims_count_in(void* workspace, const step11::WorkListTables& tables, int head_dim) {
  return reinterpret_cast<std::int32_t*>(static_cast<std::byte*>(workspace) + step11::pieces_bytes(tables.slots(), head_dim));
}

/// The claimed items of \p tables's work list (none: an empty range), counted at \p made.
inline Claims claims_of(const step11::WorkListTables& tables, std::int32_t* made) {
  const step11::Schedule& s = tables.schedule;
  const int begin = s.first_item.back(), end = static_cast<int>(s.items.size());
  return {gspan<std::int32_t>(made, begin < end ? 1 : 0, "claims_made"), begin, end};
}
// [claim_tails]

/// Step 11's checks (step11::check), in this step's name; with fp8 K/V a layout of whole 16-byte
/// units of fp8 (step 11 asks for units of 16-bit elements).
inline void check(const DecodeProblem& p, const KernelOptions& options) {
  step11::check(p, options, kName);
  const CacheLayout& l = p.layout;
  PA_REQUIRE(!p.fp8_kv || (l.block_stride % 16 == 0 && l.head_stride % 16 == 0 && l.token_stride % 16 == 0), kName,
             "layout strides", "multiples of 16 elements (16-byte copies of fp8)",
             cat(l.block_stride, "/", l.head_stride, "/", l.token_stride));
}

// [plan]
/// The plan of an fp8 problem: step 11's, with this step's program (its shape, kShapes) and kernel.
inline LaunchPlan plan_work(const DecodeProblem& p, std::span<const std::int32_t> lengths, const KernelOptions& options,
                            const DeviceLimits& device) {
  const Shape shape = kShapes[step10::shape_for(p)];
  const int warps = step10::warps_for(p, shape);
  PA_REQUIRE(warps <= 32, kName, "num_q_heads / num_kv_heads",
             cat("a group of at most ", 32 / parts_for(p.head_dim, shape.part_dims) * kHeadsPerWarp, " heads at head dim ",
                 p.head_dim, " (one warp per 16 heads, 32 warps a program)"),
             p.group_size());
  LaunchPlan out;
  out.problem = p;
  out.options = options;
  out.threads = warps * 32;
  out.shared_bytes = std::size_t(shape.stages) * stage_floats(p.head_dim, shape.tile) * sizeof(float) + kClaimSlotBytes;
  with_kernel(p, [&](auto kernel_function, auto, auto) {
    out.resident_per_sm = out.shared_bytes <= device.shared_per_block_optin
                              ? resident_programs_per_sm(kernel_function, out.threads, out.shared_bytes, device)
                              : 0;
  });
  step10::require_program_fits(out, device, kName);
  step11::Schedule planned = step11::make_schedule(lengths, p.num_kv_heads, shape.tile,
                                                   step11::programs_of(out, p, lengths, shape.tile, options, device));
  const bool claims = claims_pay(planned);
  if (claims) claim_tails(planned, kClaimTiles);
  std::string schedule = step11::use_schedule(out, p, std::move(planned));
  if (claims) {
    const step11::Schedule& s = static_cast<const step11::WorkListTables&>(*out.tables).schedule;
    out.workspace_bytes += align_up(sizeof(std::int32_t));  // the claims' count (claims_count_in)
    schedule += cat("; the last ", kClaimTiles, " tiles of each of the ", s.programs(), " programs as ",
                    s.items.size() - static_cast<std::size_t>(s.first_item.back()),
                    " items claimed at run time by the programs done first");
  }
  const int parts = parts_for(p.head_dim, shape.part_dims);
  out.description = cat(describe_launch(out), ", fp8 e4m3 K/V (k_scale ", p.k_scale, ", v_scale ", p.v_scale,
                        "), a warp for each 16 heads and ", (p.head_dim / 16 + parts - 1) / parts * 16, " channels, tile ",
                        shape.tile, ", ", shape.stages, " stages, ",
                        takes_runs(p.head_dim, out.threads, p.block_size, p.layout.token_stride, 0)
                            ? "copies on the runs (a page lookup a 16-token half-tile), "
                            : "copies looked up a row at a time, ",
                        out.resident_per_sm, " programs an SM on ", device.name, "; ", schedule);
  return out;
}
// [plan]

/// The plan for a batch with the host copy of its lengths: the checks, then plan_work; a problem
/// without fp8 K/V gets step 11's plan (step11::plan_work).
inline LaunchPlan plan_lengths(const DecodeProblem& p, std::span<const std::int32_t> lengths, const KernelOptions& options,
                               const DeviceLimits& device) {
  check(p, options);
  validate_lengths(p, lengths, kName);
  return p.fp8_kv ? plan_work(p, lengths, options, device) : step11::plan_work(p, lengths, options, device);
}

/// The plan without the lengths: each sequence planned at max_context_len (step 11's rule).
inline LaunchPlan plan(const DecodeProblem& p, const KernelOptions& options, const DeviceLimits& device) {
  check(p, options);
  const std::vector<std::int32_t> capacity(static_cast<std::size_t>(p.num_seqs), p.max_context_len);
  LaunchPlan out = p.fp8_kv ? plan_work(p, capacity, options, device) : step11::plan_work(p, capacity, options, device);
  out.description += "; the lengths unknown: each planned at max_context_len";
  return out;
}

/// launch(), with the fp8 K bytes read as e5m2 when \p planted_e5m2: the planted bug of
/// tests/test_steps.cpp, which the oracle must catch (built for the emulator only).
inline void launch_as(const DecodeView& view, const LaunchPlan& plan, void* stream, bool planted_e5m2) {
  if (!begin_launch(view, plan, kName)) return;
  if (!view.problem.fp8_kv) {  // step 11's launch (its begin_launch passes what ours did)
    PA_REQUIRE(!planted_e5m2, kName, "planted_e5m2", "false for a problem without fp8 K/V", "true");
    return step11::launch(view, plan, stream);
  }
  step05::require_aligned(view, kName);
  step10::require_out_aligned(view, 4, kName);  // fp8_attend's epilogue: a lane's four channels
  const auto* tables = dynamic_cast<const step11::WorkListTables*>(plan.tables.get());
  PA_REQUIRE(tables != nullptr, kName, "plan.tables", cat("the work list of a plan that ", kName, " made for this backend"),
             plan.tables ? "tables of another kind" : "none");
  const DecodeProblem& p = view.problem;
  const step11::WorkList work = tables->work_list();
  const Partials pieces = step11::pieces_in(view.workspace, tables->slots(), p.head_dim);
  std::int32_t* made = claims_count_in(view.workspace, *tables, p.head_dim);
  const Claims claims = claims_of(*tables, made);
  if (claims.begin < claims.end) {  // the count from 0, in order before the kernel
    if constexpr (kBackend == Backend::cuda) gpu::zero_async(made, sizeof(std::int32_t), stream);
    else *made = 0;
  }
  const Fp8Caches caches = fp8_caches(view);
  auto run = [&](auto kernel, auto storage, auto head_dim) {
    using T = std::remove_cvref_t<decltype(storage)>;
    constexpr int D = decltype(head_dim)::value;
    const DecodeArgs<T> args = fp8_args<T>(view);
    launch_kernel("step12_fp8_persistent_decode", kernel, dim3(plan.grid[0]), dim3(plan.threads), plan.shared_bytes,
                  stream, args, caches, work, claims, pieces);
    if (!tables->schedule.cuts.empty())
      launch_kernel_overlapped("step12_merge_pieces", step11::merge_pieces<T, D>,
                               merge_grid(tables->schedule.cuts.size(), p.group_size(), D),
                               dim3(tables->merge_threads), 0, stream, args, work, pieces);
  };
  if constexpr (kBackend == Backend::emulator) {
    if (planted_e5m2) return with_kernel<true>(p, run);
  } else {
    PA_REQUIRE(!planted_e5m2, kName, "planted_e5m2", "false on the GPU (the planted bug is built for the emulator only)",
               "true");
  }
  with_kernel<false>(p, run);
}

inline void launch(const DecodeView& view, const LaunchPlan& plan, void* stream) { launch_as(view, plan, stream, false); }

inline KernelEntry entry() {
  return {12, kName, kBackend, knob_partition, 0, &plan, &launch, false, false, true, &plan_lengths, true};
}

}  // namespace pa::PA_KERNELS::step12
