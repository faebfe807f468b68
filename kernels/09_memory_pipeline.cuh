#pragma once
/// \file
/// Step 09, the memory pipeline: step 08's program, fed so that the memory system never waits
/// for the arithmetic and the arithmetic rarely waits for memory.
///
/// What changed since step 08 (each idea's effect is measured on the page, as an ablation:
/// `options.variant` leaves one out):
///  - K and V travel to shared memory by asynchronous copies (`cp.async`), kStages - 1 tiles
///    ahead of the tile being used: the bytes in flight hold no registers, so a lane can keep several
///    tiles of copies in flight where step 08's register prefetch keeps one token;
///  - each thread group walks contiguous streams of tokens, so it looks a page up in the block
///    table once per page, and a steady loop without end-of-stream checks covers all but the
///    last tiles;
///  - a warp's copy slots are one block of shared memory, [warp][stage][slot][lane], so one
///    copy instruction of a warp writes 512 contiguous bytes (variant 4: slots of 8 threads
///    interleaved instead);
///  - the heads' dot products are summed across the thread group by one reduce-scatter
///    butterfly (group_sums) instead of a butterfly per head;
///  - a split program asks the L2 for its block-table lines before it reads its context length
///    (variant 1: it does not);
///  - the merge is launched overlapped with the split kernel's end, Hopper's programmatic
///    dependent launch (variant 2: launched after it);
///  - for few long sequences of equal length, a wave-shaped plan: one program of 512 threads an
///    SM, as many splits as fill one wave (variant 3: the default plan);
///  - the grid runs KV heads first, so the programs of one sequence's KV heads are launched
///    together, and a tile knob gives each thread group 1, 2 or 4 tokens an iteration.
///
///     build/cuda/steps/step09_memory_pipeline --help

#include "kernels/08_gqa_sharing.cuh"

namespace pa::PA_KERNELS::step09 {

using step05::group_sum;
using step05::load_slice;
using step05::RawSlice;
using step05::Slices;
using step05::to_floats;
using step07::partials_bytes;
using step07::partials_in;
using step07::Partials;

/// The ablations of options.variant: each leaves one idea of this rung out.
enum Variant : int {
  kFull = 0,              ///< every idea
  kNoTablePrefetch = 1,   ///< split programs do not prefetch their block-table lines
  kPlainMergeLaunch = 2,  ///< the merge is launched after the split kernel, not overlapped
  kNoWavePlan = 3,        ///< the default plan also for few long sequences
  kInterleavedSlots = 4,  ///< copy slots of 8 threads interleaved, not a warp's side by side
  kOneTileAhead = 5,      ///< copies one tile ahead (two stages), not stages_for()
};
inline constexpr int kVariants = 6;

/// What variant \p v leaves out, in a few words (the plan's description ends with it).
inline const char* variant_name(int v) {
  switch (v) {
    case kFull: return "every idea";
    case kNoTablePrefetch: return "no block-table prefetch";
    case kPlainMergeLaunch: return "merge launched after the split kernel";
    case kNoWavePlan: return "no wave plan";
    case kInterleavedSlots: return "copy slots of 8 threads interleaved";
    case kOneTileAhead: return "copies one tile ahead";
  }
  return "?";
}

// [group_sums]
/// One step of group_sums' reduce-scatter and the steps after it: COUNT values still carried,
/// partner at lane distance OFFSET. A template so every count is a compile-time constant (a
/// runtime count would leave `carried` in local memory).
template <int COUNT, int OFFSET, int N>
__device__ __forceinline__ void reduce_scatter(float (&carried)[N], [[maybe_unused]] int lane) {
  if constexpr (OFFSET > 0) {
    if constexpr (COUNT > 1) {  // halve them: keep the upper half where this lane's offset bit is set
      const bool upper = (lane & OFFSET) != 0;
      PA_UNROLL
      for (int i = 0; i < COUNT / 2; ++i) {
        const float keep = upper ? carried[i + COUNT / 2] : carried[i];
        const float send = upper ? carried[i] : carried[i + COUNT / 2];
        carried[i] = keep + __shfl_xor_sync(0xffffffffu, send, OFFSET);
      }
      reduce_scatter<COUNT / 2, OFFSET / 2>(carried, lane);
    } else {  // one partial left (N < GROUP): finish it with plain butterfly steps
      carried[0] += __shfl_xor_sync(0xffffffffu, carried[0], OFFSET);
      reduce_scatter<1, OFFSET / 2>(carried, lane);
    }
  }
}

/// Sums each of N values across the GROUP lanes of a thread group, every lane getting every
/// total. N separate butterflies would cost N * log2(GROUP) shuffles. Instead, while a lane
/// carries several values, each step sends half of them to its partner and keeps the other half
/// (partner's half added in): a reduce-scatter that leaves each lane max(1, N/GROUP) totals;
/// then one indexed shuffle per value hands every total to every lane. For 16 values over 16
/// lanes: 31 shuffles instead of 64; for 4 over 16: 9 instead of 16. Every lane of the warp must
/// call it.
template <int GROUP, int N>
__device__ __forceinline__ void group_sums(float (&values)[N]) {
  if constexpr (N == 1 || GROUP == 1) {
    PA_UNROLL
    for (int i = 0; i < N; ++i) values[i] = group_sum<GROUP>(values[i]);
  } else {
    const int lane = threadIdx.x % 32;
    float carried[N];
    PA_UNROLL
    for (int i = 0; i < N; ++i) carried[i] = values[i];
    reduce_scatter<N, GROUP / 2>(carried, lane);
    // Total j now sits in slot j % kPerLane of lane (j / kPerLane) * kStride of the group.
    constexpr int kPerLane = N >= GROUP ? N / GROUP : 1;
    constexpr int kStride = N >= GROUP ? 1 : GROUP / N;
    PA_UNROLL
    for (int j = 0; j < N; ++j) values[j] = __shfl_sync(0xffffffffu, carried[j % kPerLane], (j / kPerLane) * kStride, GROUP);
  }
}
// [group_sums]

/// Floats of shared memory online_attend's merge needs per query head for \p warps warps.
__host__ __device__ constexpr int merge_floats(int warps, int head_dim) { return warps * (head_dim + 2); }

/// log2(e). Scores are kept in base-2 units (the query is multiplied by scale * log2(e) once),
/// so every exponential of the loop is one fast_exp2: the GPU's ex2 instruction, no range reduction.
inline constexpr float kLog2e = 1.44269504088896340736f;

/// The tile sizes (tokens a thread group takes per iteration) the kernels are compiled for.
#define PA_TILE_TOKENS 1, 2, 4
/// The default tile: one token per thread group per iteration (fastest on the H200 once the
/// copies run several tiles ahead; larger tiles cost registers and shared memory).
inline constexpr int kDefaultTileTokens = 1;

/// The widest thread group online_attend uses for HEADS heads a pass. With one head: the
/// narrowest group (at least 4 lanes) whose lanes hold at most 16 elements of a row, so a
/// token's fixed costs (its address, the shuffles, the exponential) are shared by more channels
/// a lane: 8 lanes of 16 channels at bf16 and head dim 128 (4 lanes of 32 measured slower on
/// the H200: mha-batch 90% against 73% of the datasheet). With several heads the registers for
/// queries and accumulators run out first: up to 32 lanes.
template <class T, int HEAD_DIM, int HEADS, int CAP = 32>
__host__ __device__ constexpr int attend_group_cap() {
  if constexpr (HEADS == 1 && CAP > 4 && Slices<T, HEAD_DIM, CAP / 2>::kElems <= 16)
    return attend_group_cap<T, HEAD_DIM, HEADS, CAP / 2>();
  else
    return CAP;
}

/// The slices online_attend uses for HEADS heads a pass.
template <class T, int HEAD_DIM, int HEADS>
using AttendSlices = Slices<T, HEAD_DIM, attend_group_cap<T, HEAD_DIM, HEADS>()>;

/// Tiles a thread's copy slots hold, for \p vectors 16-byte vectors of K (and as many of V) a
/// tile: four when a tile is one or two vectors a lane, else three (still two tiles, 192 bytes
/// or more a thread, in flight). Variant kOneTileAhead: two.
__host__ __device__ constexpr int stages_for(int vectors, int variant) {
  return variant == kOneTileAhead ? 2 : vectors <= 2 ? 4 : 3;
}

/// Floats of dynamic shared memory online_attend needs: the stages of TOKENS tokens' K and V
/// slices for each of \p threads threads, or the merge of HEADS heads if that is larger. The
/// two share the space: the merge starts once the last tile has been used.
template <class T, int HEAD_DIM, int HEADS, int TOKENS, int VARIANT>
__host__ __device__ constexpr std::int64_t attend_floats(int threads) {
  using S = AttendSlices<T, HEAD_DIM, HEADS>;
  const std::int64_t merge = HEADS * merge_floats(threads / 32, HEAD_DIM);
  const std::int64_t staging =
      std::int64_t{stages_for(TOKENS * S::kPerThread, VARIANT)} * TOKENS * 2 * S::kPerThread * threads * 4;
  return merge > staging ? merge : staging;
}

// [online]
/// Attends query heads first_q_head .. first_q_head+HEADS-1 (all served by \p kv_head) to
/// tokens [begin, end) of \p seq in one pass. The range is cut into groups * TOKENS contiguous
/// streams; each iteration thread group g takes the next token of each of its TOKENS streams
/// and reads each token's slice once for all HEADS heads; the copies of the next tiles
/// (kStages - 1 of them) are in flight while one is used, and the running max is updated once
/// per iteration. Then the groups' (max, sum, acc) are merged, within each warp by shuffles and
/// across warps through \p shared (HEADS * merge_floats() floats, in the copy slots' space), and
/// `emit(h, d, acc, max, sum)` is called once per head h and channel d with the merged, not yet
/// normalised, values: max in base-2 units, sum == 0 when there were no tokens. Ends with a
/// barrier, so \p shared may be reused at once.
template <class T, int HEAD_DIM, int HEADS, int TOKENS, int VARIANT, class Shared, class Emit>
__device__ void online_attend(const DecodeArgs<T>& args, int seq, int first_q_head, int kv_head, int begin, int end,
                              Shared shared, Emit emit) {
  using S = AttendSlices<T, HEAD_DIM, HEADS>;
  constexpr int kCap = attend_group_cap<T, HEAD_DIM, HEADS>();
  constexpr int kStages = stages_for(TOKENS * S::kPerThread, VARIANT);
  const int rank = threadIdx.x % S::kGroup;
  const int group = threadIdx.x / S::kGroup;
  const int groups = blockDim.x / S::kGroup;

  float q[HEADS][S::kElems];  // scaled by scale * log2(e): a dot product is a base-2 score
  float running_max[HEADS];
  float running_sum[HEADS];
  float acc[HEADS][S::kElems];
  PA_UNROLL
  for (int h = 0; h < HEADS; ++h) {
    load_slice<T, HEAD_DIM, kCap>(args.query, (static_cast<std::int64_t>(seq) * args.num_q_heads + first_q_head + h) * HEAD_DIM,
                                  rank, q[h]);
    PA_UNROLL
    for (int e = 0; e < S::kElems; ++e) {
      q[h][e] *= args.scale * kLog2e;
      keep_in_register(q[h][e]);  // else nvcc may redo the conversion and scaling every tile
    }
    running_max[h] = -INFINITY;
    running_sum[h] = 0.0f;
    PA_UNROLL
    for (int e = 0; e < S::kElems; ++e) acc[h][e] = 0.0f;
  }

  // Each thread group owns TOKENS streams of tokens (u = 0 .. TOKENS-1): stream
  // group * TOKENS + u is a contiguous run of the range [begin, end), and tile t takes token t of
  // every stream. A stream walks its pages in order, so a lane looks its page up in the block
  // table once per page, not once per token: between pages a token's K and V are the last ones
  // plus the token stride (the cursor below).
  const int streams = groups * TOKENS;
  const int run = end > begin ? (end - begin + streams - 1) / streams : 0;  // the same in every lane
  const int tiles = run;
  struct Cursor {
    int next;                    // the next token this stream copies
    int stop;                    // one past its last token
    int slot;                    // next's slot in its page
    int index;                   // next's page, as an index into the block table
    GlobalCursor<const T> k, v;  // this lane's channels of token next
  };
  Cursor cursor[TOKENS];
  int count[TOKENS];  // tokens in each stream: tile t of stream u is valid when t < count[u]
  const std::int64_t table_row = static_cast<std::int64_t>(seq) * args.max_blocks_per_seq;
  const int lane_channels = kv_head * static_cast<int>(args.head_stride) + rank * S::kVec;  // < 2^31: validate
  const int token_stride = static_cast<int>(args.token_stride);                           // < 2^31: validate
  auto look_up = [&](Cursor& c) {  // K and V of slot c.slot of page c.index
    const std::int32_t page = args.block_tables[table_row + c.index];
    const std::int64_t row = args.kv_offset(page, 0, c.slot) + lane_channels;
    c.k = global_cursor(args.key_cache, row);
    c.v = global_cursor(args.value_cache, row);
  };
  PA_UNROLL
  for (int u = 0; u < TOKENS; ++u) {
    Cursor& c = cursor[u];
    c.next = std::min(begin + (group * TOKENS + u) * run, end);
    c.stop = std::min(c.next + run, end);
    count[u] = c.stop - c.next;
    c.index = args.block_shift >= 0 ? c.next >> args.block_shift : c.next / args.block_size;
    c.slot = args.block_shift >= 0 ? c.next & (args.block_size - 1) : c.next % args.block_size;
    c.k = global_cursor(args.key_cache, 0);
    c.v = global_cursor(args.value_cache, 0);
    if (c.next < c.stop) look_up(c);
  }
  // Only the last streams of the range are cut short, so a warp's last stream is its shortest:
  // before tile `steady` every stream of the warp has a token in the tile and one in the tile
  // whose copies it issues, and the loop runs without the checks that the end needs. `steady` is
  // a whole number of kStages tiles, so each of those tiles' stages is a constant. It is the same
  // in every lane of the warp (the shuffles need every lane), not across warps.
  const int warp_last = (static_cast<int>(threadIdx.x) / 32 + 1) * (32 / S::kGroup) * TOKENS - 1;
  const int shortest = std::max(0, std::min(end - (begin + warp_last * run), run));
  const int steady = std::max(0, shortest - (kStages - 1)) / kStages * kStages;

  // K and V travel global -> shared memory by asynchronous copies, kStages tiles deep: while a
  // thread computes tile t (in stage t % kStages), the copies of tiles t+1 .. t+kStages-1 are in
  // flight, and they hold no registers. Each lane copies exactly the 16-byte slices it will read
  // back itself, so no barrier is needed, only its own wait. A warp's slots are its own block,
  // [warp][stage][slot][lane]: one copy instruction of a warp writes 512 contiguous bytes, a
  // 16-byte read of a slot is conflict-free, and a slot's distance from the thread's first is a
  // constant, an immediate in the instruction. Variant kInterleavedSlots interleaves the slots
  // of 8 threads instead, [thread / 8][stage][slot][thread % 8]: the banks serve it as well, but
  // a copy instruction writes four 128-byte pieces a stage's slots apart (2 KB at one head a pass,
  // 1 KB at four; the page measures the cost).
  constexpr int kLanes = VARIANT == kInterleavedSlots ? 8 : 32;  // threads whose slots sit side by side
  constexpr int kSlots = TOKENS * 2 * S::kPerThread;             // [token][K, V][vector]
  constexpr int kSlotFloats = kLanes * 4;                        // one slot of kLanes threads, 16 bytes each
  constexpr int kStageFloats = kSlots * kSlotFloats;
  auto mine = shared_slot(shared, static_cast<int>(threadIdx.x / kLanes) * kStages * kStageFloats +
                                      static_cast<int>(threadIdx.x % kLanes) * 4);
  keep_in_register(mine);
  auto slot = [](int stage, int u, int kv, int j) {
    return stage * kStageFloats + ((u * 2 + kv) * S::kPerThread + j) * kSlotFloats;
  };
  // Starts the copies of the next token of each stream into \p stage. CHECKED: a stream may have
  // ended (then its slots are zero-filled, so the weight-0 product below adds 0, not whatever the
  // slot held); unchecked, the caller knows every stream has its token.
  auto issue = [&](int stage, auto checked) {
    PA_UNROLL
    for (int u = 0; u < TOKENS; ++u) {
      Cursor& c = cursor[u];
      if (!decltype(checked)::value || c.next < c.stop) {
        PA_UNROLL
        for (int j = 0; j < S::kPerThread; ++j) {
          copy_async<S::kVec>(mine + slot(stage, u, 0, j), c.k + j * S::kGroup * S::kVec);
          copy_async<S::kVec>(mine + slot(stage, u, 1, j), c.v + j * S::kGroup * S::kVec);
        }
        ++c.next;
        c.k = c.k + token_stride;
        c.v = c.v + token_stride;
        if (++c.slot == args.block_size) {  // the next token starts a page
          c.slot = 0;
          ++c.index;
          if (c.next < c.stop) look_up(c);
        }
      } else {
        PA_UNROLL
        for (int j = 0; j < S::kPerThread; ++j) {
          zero_async(mine + slot(stage, u, 0, j), args.key_cache);
          zero_async(mine + slot(stage, u, 1, j), args.key_cache);
        }
      }
    }
    async_commit();  // an empty group past the last tile keeps the count of groups simple
  };
  // Tile `tile`, in \p stage: issue the copies of tile + kStages - 1, wait for this tile's, use
  // it. CHECKED: near the end, where streams may have ended or have no tile left to copy.
  auto step = [&](int tile, int stage, auto checked) {
    constexpr bool kChecked = decltype(checked)::value;
    const int ahead = stage == 0 ? kStages - 1 : stage - 1;  // the stage of tile + kStages - 1
    if (!kChecked || tile + kStages - 1 < tiles) issue(ahead, checked);
    else async_commit();
    async_wait<kStages - 1>();  // this tile's copies have landed
    RawSlice<T, HEAD_DIM, kCap> k_raw[TOKENS], v_raw[TOKENS];
    bool valid[TOKENS];
    PA_UNROLL
    for (int u = 0; u < TOKENS; ++u) {
      PA_UNROLL
      for (int j = 0; j < S::kPerThread; ++j) {
        k_raw[u].vectors[j] = load_shared_vec<T, S::kVec>(mine + slot(stage, u, 0, j));
        v_raw[u].vectors[j] = load_shared_vec<T, S::kVec>(mine + slot(stage, u, 1, j));
      }
      valid[u] = !kChecked || tile < count[u];
    }
    float scores[TOKENS * HEADS];  // [token][head], this lane's partial dot products
    PA_UNROLL
    for (int u = 0; u < TOKENS; ++u) {
      float k[S::kElems];
      to_floats<T, HEAD_DIM, kCap>(k_raw[u], k);
      PA_UNROLL
      for (int h = 0; h < HEADS; ++h) {
        float dot = 0.0f;  // an empty stream's slots hold zeros: its dot is 0, and valid[] masks it below
        PA_UNROLL
        for (int e = 0; e < S::kElems; ++e) dot += q[h][e] * k[e];
        scores[u * HEADS + h] = dot;
      }
    }
    group_sums<S::kGroup, TOKENS * HEADS>(scores);  // every lane now has every full score
    PA_UNROLL
    for (int h = 0; h < HEADS; ++h) {
      float tile_max = valid[0] ? scores[h] : -INFINITY;
      PA_UNROLL
      for (int u = 1; u < TOKENS; ++u)
        if (valid[u]) tile_max = fmaxf(tile_max, scores[u * HEADS + h]);
      if (tile_max > running_max[h]) {  // a new max: rescale what was summed under the old one
        const float rescale = fast_exp2(running_max[h] - tile_max);
        running_sum[h] *= rescale;
        PA_UNROLL
        for (int e = 0; e < S::kElems; ++e) acc[h][e] *= rescale;
        running_max[h] = tile_max;
      }
    }
    PA_UNROLL
    for (int u = 0; u < TOKENS; ++u) {
      float v[S::kElems];
      to_floats<T, HEAD_DIM, kCap>(v_raw[u], v);
      PA_UNROLL
      for (int h = 0; h < HEADS; ++h) {
        // A NaN score gives a NaN weight (and a NaN row), as the reference does.
        const float p = valid[u] ? fast_exp2(scores[u * HEADS + h] - running_max[h]) : 0.0f;
        running_sum[h] += p;
        PA_UNROLL
        for (int e = 0; e < S::kElems; ++e) acc[h][e] += p * v[e];
      }
    }
  };
  PA_UNROLL
  for (int tile = 0; tile < kStages - 1; ++tile) {  // the first tiles' copies, in stages 0 .. kStages-2
    if (tile < tiles) issue(tile, std::true_type{});
    else async_commit();
  }
  int tile = 0;
  for (; tile < steady; tile += kStages) {
    PA_UNROLL
    for (int stage = 0; stage < kStages; ++stage) step(tile + stage, stage, std::false_type{});
  }
  for (; tile < tiles; ++tile) step(tile, tile % kStages, std::true_type{});

  // Merge the groups in two stages. Within a warp, by shuffles: at lane distances kGroup,
  // 2 * kGroup, .., 16, each lane merges its (max, sum, acc) with the lane of the same rank in
  // the partner group, so the first group of the warp ends with the whole warp's state. Then the
  // warps, through shared memory: maxes[warps], sums[warps], accs[warps][HEAD_DIM], in the space
  // the copy slots used (every copy has landed; the barrier: every lane is done reading). The
  // order is fixed, so the result is the same bits every run; empty groups (sum 0) weigh 0.
  PA_UNROLL
  for (int h = 0; h < HEADS; ++h) {
    PA_UNROLL
    for (int distance = S::kGroup; distance < 32; distance *= 2) {
      const float other_max = __shfl_xor_sync(0xffffffffu, running_max[h], distance);
      const float other_sum = __shfl_xor_sync(0xffffffffu, running_sum[h], distance);
      const float merged_max = fmaxf(running_max[h], other_max);
      const float weight = running_sum[h] == 0.0f ? 0.0f : exp2f(running_max[h] - merged_max);
      const float other_weight = other_sum == 0.0f ? 0.0f : exp2f(other_max - merged_max);
      running_sum[h] = running_sum[h] * weight + other_sum * other_weight;
      PA_UNROLL
      for (int e = 0; e < S::kElems; ++e)
        acc[h][e] = acc[h][e] * weight + __shfl_xor_sync(0xffffffffu, acc[h][e], distance) * other_weight;
      running_max[h] = merged_max;
    }
  }
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  async_wait<0>();
  __syncthreads();
  if (group % (32 / S::kGroup) == 0) {  // the warp's first group
    PA_UNROLL
    for (int h = 0; h < HEADS; ++h) {
      auto region = shared + h * merge_floats(warps, HEAD_DIM);
      if (rank == 0) {
        region[warp] = running_max[h];
        region[warps + warp] = running_sum[h];
      }
      PA_UNROLL
      for (int e = 0; e < S::kElems; ++e) region[2 * warps + warp * HEAD_DIM + S::channel(rank, e)] = acc[h][e];
    }
  }
  __syncthreads();
  // One thread a (head, channel): with several heads, more threads than one head's channels work.
  for (int i = threadIdx.x; i < HEADS * HEAD_DIM; i += blockDim.x) {
    const int h = i / HEAD_DIM;
    const int d = i % HEAD_DIM;
    auto maxes = shared + h * merge_floats(warps, HEAD_DIM);
    auto sums = maxes + warps;
    auto accs = maxes + 2 * warps;
    float merged_max = -INFINITY;
    for (int w = 0; w < warps; ++w) merged_max = fmaxf(merged_max, maxes[w]);
    float merged_sum = 0.0f, merged_acc = 0.0f;
    for (int w = 0; w < warps; ++w) {
      const float sum = sums[w];
      const float weight = sum == 0.0f ? 0.0f : exp2f(maxes[w] - merged_max);  // empty warps weigh 0
      merged_sum += sum * weight;
      merged_acc += accs[w * HEAD_DIM + d] * weight;
    }
    emit(h, d, merged_acc, merged_max, merged_sum);
  }
  __syncthreads();  // the caller may reuse shared at once
}
// [online]

// [prologue]
/// Asks the L2 for the block-table lines of split \p split's tokens (all \p partition of them,
/// as if the split were full) before the program has read its context length. A program's first
/// loads form a chain: the context length gives the split's range, the range the entries of its
/// pages in the block table, the entries the K and V addresses; after the L2 flush each link is
/// a DRAM round trip. With the table lines on their way while the context length is read, the
/// second link hits the L2. A line holds 32 entries; a thread asks for one line at a time.
template <class T>
__device__ __forceinline__ void prefetch_split_table(const DecodeArgs<T>& args, int seq, int split, int partition) {
  const std::int64_t row = static_cast<std::int64_t>(seq) * args.max_blocks_per_seq;
  const std::int64_t first = std::int64_t{split} * partition / args.block_size;
  const std::int64_t last = std::min<std::int64_t>(args.max_blocks_per_seq,
                                                   (std::int64_t{split + 1} * partition + args.block_size - 1) / args.block_size);
  const std::int64_t step = std::int64_t{blockDim.x} * 32;
  for (std::int64_t entry = ((row + first) & ~std::int64_t{31}) + threadIdx.x * 32; entry < row + last; entry += step)
    prefetch_l2(args.block_tables, entry);  // from the start of the line that holds the first entry
}
// [prologue]

// [kernel]
/// Program (kv_head, seq, split): every query head of the KV head's group, HEADS per pass, over
/// the split's tokens; the unnormalised results go to the partials, as in step 08.
template <class T, int HEAD_DIM, int HEADS, int TOKENS, int VARIANT>
__global__ void pipelined_split_decode(DecodeArgs<T> args, Partials partials, bool prefetch_table) {
  PA_DYNAMIC_SHARED(float, shared);
  allow_next_kernel();  // the merge may take the SMs this grid leaves free; it waits for our partials
  const int kv_head = blockIdx.x;  // KV heads first: a sequence's programs are launched together
  const int seq = blockIdx.y;
  const int split = blockIdx.z;
  if (prefetch_table) prefetch_split_table(args, seq, split, partials.partition);  // before the context length
  const int context_len = args.context_lens[seq];
  const int begin = std::min(split * partials.partition, context_len);
  const int end = std::min(begin + partials.partition, context_len);
  const int group_size = args.group_size();
  for (int first = kv_head * group_size; first < (kv_head + 1) * group_size; first += HEADS) {
    online_attend<T, HEAD_DIM, HEADS, TOKENS, VARIANT>(
        args, seq, first, kv_head, begin, end, shared, [&](int h, int d, float acc, float max, float sum) {
          const std::int64_t slot = (static_cast<std::int64_t>(seq) * args.num_q_heads + first + h) * partials.splits + split;
          partials.accs[slot * HEAD_DIM + d] = acc;
          if (d == 0) {
            partials.maxes[slot] = max;
            partials.sums[slot] = sum;
          }
        });
  }
}
// [kernel]

// [merge]
/// The most splits merge_splits merges with one thread a channel and one round of loads.
inline constexpr int kMergeDirectSplits = 8;

/// Program (q_head, seq), kMergeThreads threads: step 07's merge in base 2, launched overlapped
/// with the split kernel. With at most kMergeDirectSplits splits, one thread a channel issues
/// every split's max, sum and acc loads at once and merges them: one round of loads, where step
/// 07's merge takes two. With more, the threads form `slices` copies of the head_dim channels;
/// slice i takes splits i, i + slices, ..., then slice 0 adds the slices up in a fixed order.
/// Either way the same input gives the same bits.
template <class T, int HEAD_DIM>
__global__ void merge_splits(DecodeArgs<T> args, Partials partials) {
  PA_SHARED(float, scratch, 32);
  PA_SHARED(float, slice_accs, 512);  // [slices][HEAD_DIM]
  PA_SHARED(float, slice_sums, 32);   // [slices]
  const int q_head = blockIdx.x;
  const int seq = blockIdx.y;
  const std::int64_t first = (static_cast<std::int64_t>(seq) * args.num_q_heads + q_head) * partials.splits;
  const std::int64_t out_row = (static_cast<std::int64_t>(seq) * args.num_q_heads + q_head) * HEAD_DIM;
  // Split s weighs 2^(m_s - M); an empty split (sum 0) weighs 0. No tokens at all: a row of zeros.
  auto weight = [](float split_sum, float split_max, float merged_max) {
    return split_sum == 0.0f ? 0.0f : exp2f(split_max - merged_max);
  };
  auto write = [&](int d, float sum, float acc) { args.out[out_row + d] = from_float<T>(sum == 0.0f ? 0.0f : acc / sum); };
  wait_for_previous_kernel();  // launched overlapped with the split kernel: its partials are complete from here
  if (partials.splits <= kMergeDirectSplits) {
    if (threadIdx.x < HEAD_DIM) {
      const int d = threadIdx.x;
      float maxes[kMergeDirectSplits], sums[kMergeDirectSplits], accs[kMergeDirectSplits];
      PA_UNROLL
      for (int s = 0; s < kMergeDirectSplits; ++s) {  // every load issued before any is used
        if (s < partials.splits) {
          maxes[s] = partials.maxes[first + s];
          sums[s] = partials.sums[first + s];
          accs[s] = partials.accs[(first + s) * HEAD_DIM + d];
        }
      }
      float merged_max = -INFINITY;
      PA_UNROLL
      for (int s = 0; s < kMergeDirectSplits; ++s)
        if (s < partials.splits) merged_max = fmaxf(merged_max, maxes[s]);
      float sum = 0.0f, acc = 0.0f;
      PA_UNROLL
      for (int s = 0; s < kMergeDirectSplits; ++s) {
        if (s < partials.splits) {
          const float w = weight(sums[s], maxes[s], merged_max);
          sum += sums[s] * w;
          acc += accs[s] * w;
        }
      }
      write(d, sum, acc);
    }
    return;
  }
  float local_max = -INFINITY;
  for (int s = threadIdx.x; s < partials.splits; s += blockDim.x) local_max = fmaxf(local_max, partials.maxes[first + s]);
  const float merged_max = step05::block_reduce_warps<true>(local_max, scratch);

  const int slices = blockDim.x / HEAD_DIM;
  const int slice = threadIdx.x / HEAD_DIM;
  const int d = threadIdx.x % HEAD_DIM;
  if (slice < slices) {
    float sum = 0.0f, acc = 0.0f;
    PA_UNROLL_BY(4)  // four splits' loads in flight, not one after another
    for (int s = slice; s < partials.splits; s += slices) {
      const float split_sum = partials.sums[first + s];
      const float w = weight(split_sum, partials.maxes[first + s], merged_max);
      sum += split_sum * w;
      acc += partials.accs[(first + s) * HEAD_DIM + d] * w;
    }
    slice_accs[slice * HEAD_DIM + d] = acc;
    if (d == 0) slice_sums[slice] = sum;
  }
  __syncthreads();
  if (slice == 0) {
    float sum = 0.0f, acc = 0.0f;
    for (int i = 0; i < slices; ++i) {
      sum += slice_sums[i];
      acc += slice_accs[i * HEAD_DIM + d];
    }
    write(d, sum, acc);
  }
}
/// Threads of a merge program: at least two slices of the largest head dim (256).
inline constexpr int kMergeThreads = 512;
// [merge]

// ----- host side -----------------------------------------------------------------------------
inline constexpr const char* kName = "step09_memory_pipeline";
inline constexpr int kDefaultThreads = step05::kDefaultThreads;  ///< step 05's default, which check_warps checks
/// Rounds of resident programs the split count aims for when the programs differ in length (or
/// their lengths are unknown): many short programs let the SMs that finish early take more, so
/// a long sequence does not run alone at the end.
inline constexpr int kRounds = 8;
/// The most warps an SM the one-wave split count fills: split sweeps on the H200 found the
/// split kernel fastest near 16 warps an SM whatever more the SM could hold, and each program
/// more pays its fixed costs again.
inline constexpr int kWaveWarps = 16;
/// The wave program (wants_wave_program): its threads and tile. One of 512 threads an SM at
/// tile 1: a thread group already uses each K and V row for the whole query-head group, so two
/// tokens an iteration (tile 2) measured slower (long-single 44.8-47.0 us against 41.6-43.0,
/// lab/perf-log.md v51).
struct WaveShape {
  int threads;
  int tile;
};
inline constexpr WaveShape kWaveShape{kWaveWarps * 32, 1};
/// The fewest tokens of one sequence on one SM (sm_count / pairs of them share it) for the
/// wave program: at 16 warps an SM, 32 tokens for each of 64 thread groups of 8 lanes (one head
/// a pass), 64 for each of 32 groups of 16 lanes (four heads a pass, as long-single and small-batch).
inline constexpr int kWaveMinTokens = 2048;

using step05::threads_of;
inline int tile_of(const KernelOptions& options) {
  return options.tile_tokens > 0 ? options.tile_tokens : kDefaultTileTokens;
}

/// Whether the caller says every sequence has the same length (p.total_context_len, a hint).
inline bool lengths_equal(const DecodeProblem& p) { return p.total_context_len == std::int64_t{p.num_seqs} * p.max_context_len; }

// [wave]
/// Whether the wave program is wanted: the caller leaves threads, tile, splits and partition at
/// 0 (choose), the lengths are known to be equal (p.total_context_len), there are fewer
/// (sequence, KV head) \p pairs than SMs, and each SM's share of a sequence is at least
/// kWaveMinTokens tokens. Several equal programs of 128 threads on one SM do not finish
/// together: the SM's warp schedulers favour the warps of the programs that started first, and
/// the last program runs on alone; the wave program is larger and alone on its SM.
inline bool wants_wave_program(const DecodeProblem& p, std::int64_t pairs, const KernelOptions& options,
                               const DeviceLimits& device) {
  const bool choose = options.threads_per_block == 0 && options.tile_tokens == 0 && options.num_splits == 0 &&
                      options.partition_tokens == 0 && options.variant != kNoWavePlan;
  return choose && lengths_equal(p) && pairs > 0 && pairs < device.sm_count &&
         p.max_context_len >= std::int64_t{kWaveMinTokens} * (device.sm_count / pairs);
}
// [wave]

// [choose]
/// Splits per (sequence, KV head) for \p pairs of them. The slots: what every SM holds at once
/// (\p resident_per_sm, from the occupancy calculator). When every sequence has the same length
/// and the pairs do not fill the slots, one wave: as many equal splits as the slots hold,
/// counting at most kWaveWarps warps an SM, so they all run at once. Otherwise enough programs
/// for kRounds rounds of the slots, so the SMs that finish early balance the long sequences. No
/// split under \p min_tokens tokens (step 07's kMinTokensPerSplit unless a later rung asks for
/// more); `options.num_splits` or `options.partition_tokens` override it.
inline int choose_splits(const DecodeProblem& p, std::int64_t pairs, int resident_per_sm, int threads,
                         const KernelOptions& options, const DeviceLimits& device,
                         int min_tokens = step07::kMinTokensPerSplit) {
  if (p.max_context_len == 0) return 1;
  if (options.num_splits > 0) return options.num_splits;
  if (options.partition_tokens > 0)
    return static_cast<int>((p.max_context_len + options.partition_tokens - 1) / options.partition_tokens);
  pairs = std::max<std::int64_t>(pairs, 1);
  const std::int64_t slots = std::int64_t{device.sm_count} * resident_per_sm;
  const int wave_programs = std::max(1, kWaveWarps * 32 / threads);  // programs an SM
  const std::int64_t wave = std::int64_t{device.sm_count} * std::min(resident_per_sm, wave_programs);
  const std::int64_t wanted = lengths_equal(p) && pairs < slots ? wave / pairs  // 0 (then 1) past the wave
                                                                        : (kRounds * slots + pairs - 1) / pairs;
  const std::int64_t most = (p.max_context_len + min_tokens - 1) / min_tokens;
  return static_cast<int>(std::clamp<std::int64_t>(wanted, 1, std::max<std::int64_t>(most, 1)));
}
// [choose]

/// Calls `f(kernel, T{}, head_dim, shared_bytes)` with the pipelined_split_decode instantiation
/// \p p and \p options select (storage type, head dim, heads a pass, tile, and for variants
/// kInterleavedSlots and kOneTileAhead the copy layout they change) and its dynamic shared
/// memory. Those two variants exist for the ablation of the named workloads only: they are
/// compiled for bf16 at head dim 128, tile 1, and 1 or 4 heads a pass.
template <class F>
void with_kernel(const DecodeProblem& p, const KernelOptions& options, F&& f) {
  const int threads = threads_of(options);
  const int tile = tile_of(options);
  const bool copies_variant = options.variant == kInterleavedSlots || options.variant == kOneTileAhead;
  dispatch_problem(p, [&](auto storage, auto head_dim) {
    using T = decltype(storage);
    constexpr int D = decltype(head_dim)::value;
    constexpr int kMostHeads = step08::max_heads_for(Slices<T, D>::kElems);
    const int heads = step08::heads_per_pass(p.group_size(), kMostHeads);
    dispatch_compiled<PA_TILE_TOKENS>(tile, "options.tile_tokens", [&](auto tile_constant) {
      constexpr int N = decltype(tile_constant)::value;
      auto call = [&](auto heads_constant, auto variant_constant) {
        constexpr int H = decltype(heads_constant)::value;
        constexpr int V = decltype(variant_constant)::value;
        f(pipelined_split_decode<T, D, H, N, V>, storage, head_dim,
          attend_floats<T, D, H, N, V>(threads) * std::int64_t{sizeof(float)});
      };
      auto by_heads = [&](auto variant_constant) {
        if (heads == 1) call(std::integral_constant<int, 1>{}, variant_constant);
        if constexpr (kMostHeads >= 2) if (heads == 2) call(std::integral_constant<int, 2>{}, variant_constant);
        if constexpr (kMostHeads >= 4) if (heads == 4) call(std::integral_constant<int, 4>{}, variant_constant);
        if constexpr (kMostHeads >= 8) if (heads == 8) call(std::integral_constant<int, 8>{}, variant_constant);
      };
      if (!copies_variant) {
        by_heads(std::integral_constant<int, kFull>{});
      } else if constexpr (std::is_same_v<std::remove_cvref_t<decltype(storage)>, bf16> && D == 128 && N == 1) {
        // decltype(storage), not T: in nvcc 13.0's host pass, the alias T of the enclosing lambda
        // compared unequal to bf16 here once a kernel template was named in this lambda (the
        // variant was refused on the GPU for bf16); the deduced type itself compares right.
        PA_REQUIRE(heads == 1 || heads == 4, kName, "options.variant",
                   cat(options.variant, " only with 1 or 4 heads a pass (a group of 1, or of a multiple of 4)"),
                   cat(heads, " heads a pass"));
        if (options.variant == kInterleavedSlots) {
          if (heads == 1) call(std::integral_constant<int, 1>{}, std::integral_constant<int, kInterleavedSlots>{});
          else call(std::integral_constant<int, 4>{}, std::integral_constant<int, kInterleavedSlots>{});
        } else {
          if (heads == 1) call(std::integral_constant<int, 1>{}, std::integral_constant<int, kOneTileAhead>{});
          else call(std::integral_constant<int, 4>{}, std::integral_constant<int, kOneTileAhead>{});
        }
      } else {
        throw_argument(kName, "options.variant",
                       cat(options.variant, " only for bf16 at head dim 128 and tile 1 (an ablation of the named workloads)"),
                       cat(dtype_name(p.dtype), " at head dim ", D, " and tile ", N));
      }
    });
  });
}

// [plan]
/// The plan: the wave program where wants_wave_program says so and it fits one SM, else the
/// asked options; the program's shared memory and the programs one SM holds (the occupancy
/// calculator on the GPU, asked once a plan); then choose_splits.
inline LaunchPlan plan(const DecodeProblem& p, const KernelOptions& asked, const DeviceLimits& device) {
  step05::check_warps(p, asked, knob_threads | knob_splits | knob_partition | knob_tile | knob_variant, kName);
  step07::require_split_options(asked, kName);
  PA_REQUIRE(p.num_seqs <= 65535, kName, "num_seqs", "at most 65535 (the grid's y limit: sequences are its second axis)",
             p.num_seqs);
  PA_REQUIRE(asked.tile_tokens == 0 || asked.tile_tokens == 1 || asked.tile_tokens == 2 || asked.tile_tokens == 4, kName,
             "options.tile_tokens", "0 (choose) or one of 1, 2, 4", asked.tile_tokens);
  PA_REQUIRE(asked.variant >= 0 && asked.variant < kVariants, kName, "options.variant",
             cat("0 (every idea) to ", kVariants - 1, " (one left out; the page lists them)"), asked.variant);
  const std::int64_t pairs = std::int64_t{p.num_seqs} * p.num_kv_heads;
  auto measure = [&](const KernelOptions& options) {
    LaunchPlan out;
    out.problem = p;
    out.options = options;
    out.options.threads_per_block = threads_of(options);
    out.options.tile_tokens = tile_of(options);
    out.threads = out.options.threads_per_block;
    with_kernel(p, options, [&](auto kernel, auto, auto, std::int64_t shared) {
      out.shared_bytes = static_cast<std::size_t>(shared);
      // Past the opt-in limit the program cannot launch, and CUDA would refuse the question.
      out.resident_per_sm = shared <= static_cast<std::int64_t>(device.shared_per_block_optin)
                                ? resident_programs_per_sm(kernel, out.threads, out.shared_bytes, device)
                                : 0;
    });
    return out;
  };
  LaunchPlan out;
  bool planned = false;
  if (wants_wave_program(p, pairs, asked, device)) {
    KernelOptions wave = asked;
    wave.threads_per_block = kWaveShape.threads;
    wave.tile_tokens = kWaveShape.tile;
    out = measure(wave);
    planned = step07::fits(out, device);
  }
  if (!planned) out = measure(asked);
  step07::require_fits(out, device, kName);
  out.splits = choose_splits(p, pairs, out.resident_per_sm, out.threads, out.options, device);
  out.options.num_splits = out.splits;
  out.grid[0] = static_cast<unsigned>(p.num_kv_heads);
  out.grid[1] = static_cast<unsigned>(p.num_seqs);
  out.grid[2] = static_cast<unsigned>(out.splits);
  out.workspace_bytes = partials_bytes(p, out.splits);
  out.description = cat(describe_launch(out), ", tile ", out.options.tile_tokens, ", ", out.resident_per_sm,
                        " programs an SM on ", device.name, "; ", step07::describe_splits(p, out.splits),
                        asked.variant != kFull ? cat("; variant ", asked.variant, ": ", variant_name(asked.variant)) : std::string());
  return out;
}
// [plan]

inline void launch(const DecodeView& view, const LaunchPlan& plan, void* stream) {
  if (!begin_launch(view, plan, kName)) return;
  step05::require_aligned(view, kName);
  const DecodeProblem& p = view.problem;
  const Partials partials = partials_in(view.workspace, p, plan.splits);
  const int variant = plan.options.variant;
  with_kernel(p, plan.options, [&](auto kernel, auto storage, auto head_dim, std::int64_t) {
    using T = decltype(storage);
    constexpr int D = decltype(head_dim)::value;
    const DecodeArgs<T> args = make_args<T>(view);
    launch_kernel("step09_split_decode", kernel, dim3(plan.grid[0], plan.grid[1], plan.grid[2]), dim3(plan.threads),
                  plan.shared_bytes, stream, args, partials, variant != kNoTablePrefetch);
    launch_kernel_as(variant != kPlainMergeLaunch, "step09_merge_splits", merge_splits<T, D>,
                     dim3(p.num_q_heads, p.num_seqs), dim3(kMergeThreads), 0, stream, args, partials);
  });
}

inline KernelEntry entry() {
  return {9, kName, kBackend, knob_threads | knob_splits | knob_partition | knob_tile | knob_variant, kVariants - 1,
          &plan, &launch, true};
}

}  // namespace pa::PA_KERNELS::step09
