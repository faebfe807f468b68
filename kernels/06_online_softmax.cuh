#pragma once
/// \file
/// Step 06, online softmax: one streaming pass over K and V with a running max and sum; no
/// logits buffer, so no context cap.
///
/// What changed since step 05: each thread group keeps, for its tokens, the running max `m`,
/// the running sum `l` of exp(score - m) and the running weighted sum of V rows `acc`. A new
/// score above `m` rescales `l` and `acc` by exp(m_old - m_new) first. K and V of a token are
/// read in the same iteration, and nothing is stored per token, so any context length fits.
/// At the end the groups' states are merged (log-sum-exp), by shuffles within a warp and through
/// shared memory across warps: the same merge step 07 uses across programs.
///
///     build/cpu/steps/step06_online_softmax --help

#include "kernels/05_warps_and_vectors.cuh"

namespace pa::PA_KERNELS::step06 {

using step05::group_sum;
using step05::load_raw;
using step05::load_slice;
using step05::RawSlice;
using step05::Slices;
using step05::to_floats;

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
/// (partner's half added in): a reduce-scatter that leaves each lane max(1, N/GROUP) totals
/// (for N < GROUP a plain butterfly finishes the partial it carries); then one indexed shuffle
/// per value hands every total to every lane. For 16 values over 16 lanes: 31 shuffles instead
/// of 64; for 4 over 16: 9 instead of 16. Every lane of the warp must call it.
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

// [online]
/// log2(e). Scores are kept in base-2 units (the query is multiplied by scale * log2(e) once),
/// so every exponential of the loop is one fast_exp2: the GPU's ex2 instruction, no range reduction.
inline constexpr float kLog2e = 1.44269504088896340736f;

/// The tile sizes (tokens a thread group takes per iteration) the kernels are compiled for.
#define PA_TILE_TOKENS 1, 2, 4

/// The default tile: one token per thread group per iteration (measured fastest on the H200
/// once the copies run several tiles ahead; larger tiles cost registers and shared memory).
inline constexpr int kDefaultTileTokens = 1;

/// The widest thread group online_attend uses for HEADS heads a pass. With one head: the
/// narrowest group (at least 4 lanes) whose lanes hold at most 16 elements of a row, so a
/// token's fixed costs (its address, the shuffles, the exponential) are shared by more channels
/// a lane than step 05's groups give: 8 lanes of 16 channels at bf16 and head dim 128. Narrower
/// still (4 lanes of 32) measured slower on the H200, twice: with 3 programs an SM (run v10),
/// and with 4 once the merge shared the copy slots' space (v19: mha-batch 90 -> 73% of the
/// datasheet, step 07 on long-single 62 -> 82 us). With several heads the registers for
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

/// Tiles a thread's copy slots hold (online_attend's asynchronous copies), for \p vectors
/// 16-byte vectors of K (and as many of V) a tile: four when a tile is one or two vectors a
/// lane, else three (still two tiles, 256 bytes or more a thread, in flight).
__host__ __device__ constexpr int stages_for(int vectors) { return vectors <= 2 ? 4 : 3; }

/// Floats of dynamic shared memory online_attend needs: the stages_for() tiles of TOKENS
/// tokens' K and V slices for each of \p threads threads, or the merge of HEADS heads if that is
/// larger. The two share the space: the merge starts once the last tile has been used.
template <class T, int HEAD_DIM, int HEADS, int TOKENS>
__host__ __device__ constexpr std::int64_t attend_floats(int threads) {
  using S = AttendSlices<T, HEAD_DIM, HEADS>;
  const std::int64_t merge = HEADS * merge_floats(threads / 32, HEAD_DIM);
  const std::int64_t staging = std::int64_t{stages_for(TOKENS * S::kPerThread)} * TOKENS * 2 * S::kPerThread * threads * 4;
  return merge > staging ? merge : staging;
}

/// Attends query heads first_q_head .. first_q_head+HEADS-1 (all served by \p kv_head; HEADS is
/// 1 until step 08) to tokens [begin, end) of \p seq in one pass. The range is cut into
/// groups * TOKENS contiguous streams; each iteration thread group g takes the next token of
/// each of its TOKENS streams and reads each token's slice once for all HEADS heads; the copies
/// of the next tiles (kStages - 1 of them) are in flight while one is used, and the running max
/// is updated once per iteration. Then the groups' (max, sum, acc) are merged, within each warp
/// by shuffles and across warps through \p shared (HEADS * merge_floats() floats, in the copy
/// slots' space), and `emit(h, d, acc, max, sum)` is
/// called once per head h and channel d with the merged, not yet normalised, values: max in
/// base-2 units, sum == 0 when there were no tokens. Ends with a barrier, so \p shared may be reused at once.
template <class T, int HEAD_DIM, int HEADS, int TOKENS, class Shared, class Emit>
__device__ void online_attend(const DecodeArgs<T>& args, int seq, int first_q_head, int kv_head, int begin, int end,
                              Shared shared, Emit emit) {
  using S = AttendSlices<T, HEAD_DIM, HEADS>;
  constexpr int kCap = attend_group_cap<T, HEAD_DIM, HEADS>();
  constexpr int kStages = stages_for(TOKENS * S::kPerThread);
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
  // [warp][stage][slot][lane]: one copy instruction of a warp writes 512 contiguous bytes (its 32
  // lanes' slices side by side), one 16-byte read of a slot is conflict-free, and a slot's
  // distance from the thread's first is a constant, an immediate in the instruction. With the
  // slots of 8 threads interleaved instead ([thread / 8][stage][slot][thread % 8], which the
  // banks serve as well) a copy instruction wrote four 128-byte pieces 2 KB apart, and the H200
  // took longer to land copies that the L2 serves: step 07 on long-single 1 us slower (run v51),
  // its bare copies in its pattern 41 us against 38 (run v50; the step 06 page).
  constexpr int kSlots = TOKENS * 2 * S::kPerThread;  // [token][K, V][vector]
  constexpr int kStageFloats = kSlots * 32 * 4;       // a stage of a warp's slots (32 lanes x 16 bytes a slot)
  auto mine = shared_slot(shared, static_cast<int>(threadIdx.x / 32) * kStages * kStageFloats +
                                      static_cast<int>(threadIdx.x % 32) * 4);
  keep_in_register(mine);
  auto slot = [](int stage, int u, int kv, int j) { return stage * kStageFloats + ((u * 2 + kv) * S::kPerThread + j) * 128; };
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

// [kernel]
/// Program (seq, q_head): the whole context in one pass.
template <class T, int HEAD_DIM, int TOKENS>
__global__ void online_decode(DecodeArgs<T> args) {
  PA_DYNAMIC_SHARED(float, shared);
  const int seq = blockIdx.x;
  const int q_head = blockIdx.y;
  const std::int64_t out_row = (static_cast<std::int64_t>(seq) * args.num_q_heads + q_head) * HEAD_DIM;
  online_attend<T, HEAD_DIM, 1, TOKENS>(args, seq, q_head, q_head / args.group_size(), 0, args.context_lens[seq], shared,
                                        [&](int, int d, float acc, float, float sum) {
                                          // sum == 0: no tokens (context 0), the row is zeros; a NaN sum stays NaN.
                                          args.out[out_row + d] = from_float<T>(sum == 0.0f ? 0.0f : acc / sum);
                                        });
}
// [kernel]

// ----- host side -----------------------------------------------------------------------------
inline constexpr const char* kName = "step06_online_softmax";
inline constexpr int kDefaultThreads = 128;

inline int threads_of(const KernelOptions& options) {
  return options.threads_per_block > 0 ? options.threads_per_block : kDefaultThreads;
}

/// Refuses a tile size that is not compiled (steps 07 and 08 share this check).
inline void require_tile(const KernelOptions& options, const char* kernel) {
  const int tile = options.tile_tokens;
  PA_REQUIRE(tile == 0 || tile == 1 || tile == 2 || tile == 4, kernel, "options.tile_tokens",
             "0 (choose) or one of 1, 2, 4", tile);
}

/// Refuses a program whose shared memory (\p bytes: the merge and the copy slots) exceeds what
/// a block may use on \p device; threads and tile set it.
inline void require_shared(std::int64_t bytes, const KernelOptions& options, const DeviceLimits& device,
                           const char* kernel) {
  PA_REQUIRE(bytes <= static_cast<std::int64_t>(device.shared_per_block_optin), kernel,
             "options.threads_per_block and options.tile_tokens",
             cat("at most ", device.shared_per_block_optin, " bytes of shared memory per program on ", device.name,
                 " (the copy slots grow with threads x tile)"),
             cat(bytes, " bytes for ", options.threads_per_block, " threads (0: default) and tile ", options.tile_tokens,
                 " (0: default)"));
}

/// The tile \p options ask for: options.tile_tokens, or kDefaultTileTokens.
inline int tile_of(const KernelOptions& options) {
  return options.tile_tokens > 0 ? options.tile_tokens : kDefaultTileTokens;
}

/// Calls `f(std::integral_constant<int, TOKENS>{})` with the tile of \p options (tile_of).
template <class F>
void dispatch_tile(const KernelOptions& options, F&& f) {
  dispatch_compiled<PA_TILE_TOKENS>(tile_of(options), "options.tile_tokens", f);
}

/// Calls `f(T{}, head_dim, tile)` with the storage type, head dim and tile (integral constants)
/// that \p p and \p options select: the dispatch of every kernel built on online_attend.
template <class F>
void dispatch_attend(const DecodeProblem& p, const KernelOptions& options, F&& f) {
  dispatch_dtype(p.dtype, [&](auto storage) {
    dispatch_head_dim<PA_HEAD_DIMS>(p.head_dim, [&](auto head_dim) {
      dispatch_tile(options, [&](auto tile) { f(storage, head_dim, tile); });
    });
  });
}

/// Runs `f(kernel, T{}, head_dim, shared_bytes)` with the online_decode instantiation this
/// problem uses and its dynamic shared memory.
template <class F>
void with_kernel(const DecodeProblem& p, const KernelOptions& options, F&& f) {
  const int threads = threads_of(options);
  dispatch_attend(p, options, [&](auto storage, auto head_dim, auto tile) {
    using T = decltype(storage);
    constexpr int D = decltype(head_dim)::value;
    constexpr int N = decltype(tile)::value;
    f(online_decode<T, D, N>, storage, head_dim, attend_floats<T, D, 1, N>(threads) * std::int64_t{sizeof(float)});
  });
}

inline void check(const DecodeProblem& problem, const KernelOptions& options, const DeviceLimits& device) {
  validate(problem, kName);
  require_head_dim(problem.head_dim, {PA_HEAD_DIMS}, kName);
  step05::require_vector_layout(problem, kName);
  const int threads = threads_of(options);
  PA_REQUIRE(threads >= 32 && threads <= 1024 && threads % 32 == 0, kName, "options.threads_per_block",
             "a multiple of 32 in [32, 1024] (whole warps)", threads);
  require_tile(options, kName);
  with_kernel(problem, options, [&](auto, auto, auto, std::int64_t shared) { require_shared(shared, options, device, kName); });
}

inline std::size_t workspace_bytes(const DecodeProblem&, const KernelOptions&, const DeviceLimits&) { return 0; }

inline void launch(const DecodeView& view, const KernelOptions& options, const DeviceLimits& device, void* stream) {
  const DecodeProblem& p = view.problem;
  check(p, options, device);
  validate_view(view, 0, kName);
  if (p.num_seqs == 0) return;
  step05::require_aligned(view, kName);
  with_kernel(p, options, [&](auto kernel, auto storage, auto, std::int64_t shared) {
    using T = decltype(storage);
    launch_kernel(kName, kernel, dim3(p.num_seqs, p.num_q_heads), dim3(threads_of(options)),
                  static_cast<std::size_t>(shared), stream, make_args<T>(view));
  });
}

inline KernelEntry entry() { return {6, kName, kBackend, &check, &workspace_bytes, &launch}; }

}  // namespace pa::PA_KERNELS::step06
