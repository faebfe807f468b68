#pragma once
/// \file
/// Step 11, persistent and balanced: a fixed grid of programs, as many as the device holds at
/// once, each walking its own run of a work list that the host planned from the context lengths.
///
/// What changed since step 10: step 10 cuts every sequence into splits of one size, chosen for the
/// longest, so in a ragged batch (`ragged-skew`: one sequence of 65536 tokens and 63 of 512) the
/// long sequence's programs run on long after the short ones are done. Here the plan counts the
/// work, the tiles of every (sequence, KV head) and a cost for each item a program runs after its
/// first, and deals it out in equal portions, one a program, the programs as many as the SMs hold
/// at once (the occupancy calculator): a pair that fits a portion stays whole, and the long ones
/// fill the rest of the portions, spread over as many programs as they need. The list holds items
/// (sequence, KV head, tokens); a program runs step 10's pass (tensor_core_attend) over each of its
/// items. A pair that is one item divides by its sum and writes the output itself; the pieces of a
/// cut pair go to the partials, and a merge launched overlapped with the kernel's end combines each
/// pair's pieces in token order, so the same input gives the same bits whichever program ends
/// first. The list lives in memory the plan allocates (the device's for CUDA), so a launch
/// allocates nothing and a CUDA graph may capture it; the graph then replays with new lengths: an
/// item reads its sequence's length at launch, and the last item of a pair runs to it.
///
///     build/current/steps/step11_persistent --help
///     build/current/steps/step11_persistent --schedule ragged-skew    # the plan's work list

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "common/cuda/runtime.h"
#include "kernels/10_tensor_cores.cuh"

namespace pa::PA_KERNELS::step11 {

using step10::kShapes;
using step10::Shape;
using step10::shape_for;

// ----- the work list -------------------------------------------------------------------------

// [schedule]
/// One item of the work list: tokens [begin, end) of KV head kv_head of sequence seq, as planned.
/// At launch its range is cut to the sequence's length then, and the last item of a pair runs
/// to that length, however long: so the plan serves any lengths of its problem.
struct WorkItem {
  int seq = 0;
  int kv_head = 0;
  int begin = 0;   ///< first token, a multiple of the tile
  int end = 0;     ///< one past the last token planned
  int part = -1;   ///< the piece's slot in the partials when its pair is cut, else -1: it writes the output
  bool last = false;  ///< its pair's last item: it runs to the sequence's length at launch
};

/// A (sequence, KV head) cut into pieces, parts first_part .. first_part + pieces - 1 in token
/// order, which the merge combines in that order.
struct CutPair {
  int seq = 0;
  int kv_head = 0;
  int first_part = 0;
  int pieces = 0;
};

/// What an item after a program's first costs it, in tiles: starting an item waits on a chain of
/// reads (the item, the sequence's length, its block table, its first tiles' copies) that the
/// tiles of one item hide from each other. On the H200 (lab/perf-log.md, v86) 2 tiles ran
/// `gqa-batch-fp8` in 279 µs against 281 at 0 and `ragged-skew` in 106 against 107; 1 and 3 no
/// better.
inline constexpr int kItemCost = 2;

/// The work list of one plan: the items in order, each program's run of them, and the cut pairs.
struct Schedule {
  int tile = 0;               ///< tokens a tile, the unit of work
  std::int64_t tiles = 0;     ///< the tiles of every (sequence, KV head) at the planned lengths
  int item_cost = 0;          ///< what an item after a program's first weighs, in tiles
  std::int64_t work = 0;      ///< what the portions share: the tiles and the items' costs, in tiles
  std::vector<int> first_item;  ///< [programs + 1]: program p runs items first_item[p] .. first_item[p + 1] - 1
  std::vector<WorkItem> items;
  std::vector<CutPair> cuts;
  int parts = 0;              ///< pieces of the cut pairs: a partial slot for each query head of its group
  int programs() const { return static_cast<int>(first_item.size()) - 1; }
  /// The work programs 0 .. p - 1 may take together: program p's portion is
  /// portion_start(p + 1) - portion_start(p), the same to a tile for every program; its tiles
  /// and the cost of each of its items after the first fit in it.
  std::int64_t portion_start(int p) const { return work * p / programs(); }
  /// Program p's load: its tiles, and item_cost for each of its items after the first.
  std::int64_t load(int p) const {
    std::int64_t sum = 0;
    for (int i = first_item[static_cast<std::size_t>(p)]; i < first_item[static_cast<std::size_t>(p) + 1]; ++i) {
      const WorkItem& item = items[static_cast<std::size_t>(i)];
      sum += (item.end - item.begin + tile - 1) / tile + (i > first_item[static_cast<std::size_t>(p)] ? item_cost : 0);
    }
    return sum;
  }
};

/// Tiles of \p tile tokens that sequences of \p lengths take over \p num_kv_heads KV heads.
inline std::int64_t work_tiles(std::span<const std::int32_t> lengths, int num_kv_heads, int tile) {
  std::int64_t tiles = 0;
  for (const std::int32_t length : lengths) tiles += (std::int64_t{length} + tile - 1) / tile;
  return tiles * num_kv_heads;
}

/// Numbers the pieces of \p s's cut pairs (pairs with more than one item) and lists the cuts:
/// the pairs in (sequence, KV head) order, each one's pieces in token order, the slots
/// consecutive; an item whose pair it holds whole gets part -1.
inline void number_pieces(Schedule& s) {
  std::vector<int> order(s.items.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  auto key = [&](int i) {
    const WorkItem& item = s.items[static_cast<std::size_t>(i)];
    return std::tuple{item.seq, item.kv_head, item.begin};
  };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  s.cuts.clear();
  s.parts = 0;
  for (std::size_t k = 0; k < order.size();) {
    const WorkItem& first = s.items[static_cast<std::size_t>(order[k])];
    std::size_t n = k + 1;
    while (n < order.size() && s.items[static_cast<std::size_t>(order[n])].seq == first.seq &&
           s.items[static_cast<std::size_t>(order[n])].kv_head == first.kv_head)
      ++n;
    if (n - k == 1) {
      s.items[static_cast<std::size_t>(order[k])].part = -1;
    } else {
      s.cuts.push_back({first.seq, first.kv_head, s.parts, static_cast<int>(n - k)});
      for (std::size_t j = k; j < n; ++j) s.items[static_cast<std::size_t>(order[j])].part = s.parts++;
    }
    k = n;
  }
}

/// The work list for sequences of \p lengths over \p num_kv_heads KV heads, tiles of \p tile
/// tokens, on \p programs programs, an item after a program's first weighing \p item_cost tiles.
/// The programs share the work (Schedule::work: the tiles and the items' costs) in portions equal
/// to a tile, portion_start(p + 1) - portion_start(p) for program p. A pair that fits the
/// smallest portion is short, and stays whole: each program takes the next short pairs while they
/// fit, and while the short tiles dealt keep in step with the programs done, then fills what is
/// left of its portion from the long pairs, one after another, cut where the portion ends (so a
/// long pair is spread over as many programs as its tiles need, in pieces of about one size).
/// Only when the long pairs are used up is a short pair cut in two, its rest first in the next
/// program. A whole pair is one item that writes the output; the items of a cut pair are its
/// pieces, in token order, each with a slot in the partials. A sequence of length 0 is a short
/// pair of no tiles: one empty item, weighing nothing but its cost.
///
/// How many items the programs get, and so what they cost, depends on where the portions end:
/// the work is found by halving between the tiles alone and the tiles with a cost for every pair
/// and every program (always enough), the least tried for which the portions take every tile.
inline Schedule make_schedule(std::span<const std::int32_t> lengths, int num_kv_heads, int tile, int programs,
                              int item_cost = kItemCost) {
  Schedule s;
  s.tile = tile;
  s.tiles = work_tiles(lengths, num_kv_heads, tile);
  s.item_cost = item_cost;
  s.first_item.assign(static_cast<std::size_t>(std::max(programs, 1)) + 1, 0);
  struct Pair {
    int seq, kv_head, length;
    std::int64_t tiles;
  };
  std::vector<Pair> shorts, longs;
  const std::int64_t smallest = s.tiles / s.programs();  // of the tiles alone: every portion holds it
  for (int seq = 0; seq < static_cast<int>(lengths.size()); ++seq)
    for (int kv_head = 0; kv_head < num_kv_heads; ++kv_head) {
      const int length = lengths[static_cast<std::size_t>(seq)];
      const Pair pair{seq, kv_head, length, (std::int64_t{length} + tile - 1) / tile};
      (pair.tiles <= smallest ? shorts : longs).push_back(pair);
    }
  std::int64_t short_tiles = 0;  // of every short pair
  for (const Pair& pair : shorts) short_tiles += pair.tiles;
  std::vector<std::vector<WorkItem>> mine(static_cast<std::size_t>(s.programs()));  // each program's items

  // Deals the pairs to the programs in portions of s.work; true when every tile is dealt.
  auto deal = [&]() {
    for (std::vector<WorkItem>& items : mine) items.clear();
    auto piece = [&](int p, const Pair& pair, std::int64_t from, std::int64_t to) {  // tiles [from, to) of pair
      mine[static_cast<std::size_t>(p)].push_back({pair.seq, pair.kv_head, static_cast<int>(from * tile),
                                                   static_cast<int>(std::min<std::int64_t>(to * tile, pair.length)), -1,
                                                   to == pair.tiles});
    };
    std::size_t next_short = 0, next_long = 0;
    std::int64_t long_done = 0;    // tiles of longs[next_long] already dealt
    std::int64_t short_done = 0;   // tiles of shorts[next_short] dealt before (a short pair cut in two)
    std::int64_t shorts_dealt = 0; // short tiles dealt so far
    for (int p = 0; p < s.programs(); ++p) {
      std::int64_t room = s.portion_start(p + 1) - s.portion_start(p);
      auto cost = [&]() -> std::int64_t { return mine[static_cast<std::size_t>(p)].empty() ? 0 : item_cost; };  // of a next item
      // The short pairs go to the programs in step with the long ones, about short_tiles / programs
      // a program, so each long pair is cut into pieces of about one size.
      const std::int64_t short_share = (short_tiles * (p + 1) + s.programs() - 1) / s.programs();
      while (next_short < shorts.size() && cost() + shorts[next_short].tiles - short_done <= room &&
             (shorts_dealt + shorts[next_short].tiles - short_done <= short_share || next_long == longs.size())) {
        const Pair& pair = shorts[next_short++];
        room -= cost() + pair.tiles - short_done;
        piece(p, pair, short_done, pair.tiles);
        shorts_dealt += pair.tiles - short_done;
        short_done = 0;
      }
      while (room > cost() && next_long < longs.size()) {
        const Pair& pair = longs[next_long];
        room -= cost();
        const std::int64_t take = std::min(room, pair.tiles - long_done);
        piece(p, pair, long_done, long_done + take);
        room -= take;
        long_done += take;
        if (long_done == pair.tiles) ++next_long, long_done = 0;
      }
      if (room > cost() && next_short < shorts.size()) {  // no long pair left: the next short one is cut
        room -= cost();
        piece(p, shorts[next_short], 0, room);
        short_done = room;
        shorts_dealt += room;
      }
    }
    // What can be left of the short pairs here is pairs of no tiles (every portion is full), and
    // they weigh no more than the last program can take; in the last program.
    if (next_long < longs.size()) return false;
    for (std::size_t k = next_short; k < shorts.size(); ++k)
      if (shorts[k].tiles - (k == next_short ? short_done : 0) > 0) return false;
    for (; next_short < shorts.size(); ++next_short, short_done = 0)
      piece(s.programs() - 1, shorts[next_short], short_done, shorts[next_short].tiles);
    return true;
  };
  // The least work that deals every tile: the tiles alone when items cost nothing; with every
  // pair's cost and a cost a program for the room a portion may leave unused, always enough.
  std::int64_t low = s.tiles, high = s.tiles + std::int64_t{item_cost} * (static_cast<std::int64_t>(shorts.size() + longs.size()) + s.programs());
  while (low < high) {
    s.work = low + (high - low) / 2;
    if (deal()) high = s.work;
    else low = s.work + 1;
  }
  s.work = low;
  if (!deal()) throw std::logic_error(cat("make_schedule: portions of ", s.work, " tiles of work leave tiles undealt"));

  // The items, program by program; then the pieces of the cut pairs.
  for (int p = 0; p < s.programs(); ++p) {
    s.items.insert(s.items.end(), mine[static_cast<std::size_t>(p)].begin(), mine[static_cast<std::size_t>(p)].end());
    s.first_item[static_cast<std::size_t>(p) + 1] = static_cast<int>(s.items.size());
  }
  number_pieces(s);
  return s;
}
// [schedule]

// ----- the kernels ---------------------------------------------------------------------------

/// Ints an item takes in the list the kernels read: seq, kv_head, begin, end, part, last and two
/// of padding, so an item is two aligned 16-byte loads.
inline constexpr int kItemInts = 8;
/// Ints a cut pair takes: seq, kv_head, first_part, pieces.
inline constexpr int kCutInts = 4;

/// The work list as the kernels read it (Schedule, in ints).
struct WorkList {
  gspan<const std::int32_t> first_item;  ///< [programs + 1]
  gspan<const std::int32_t> items;       ///< [items][kItemInts]
  gspan<const std::int32_t> cuts;        ///< [cut pairs][kCutInts]
};

/// The partials of the pieces of cut pairs are step 07's Partials with another layout: slot
/// part * group_size + head (head: its index in the group) holds that piece's max and sum, and
/// its acc [HEAD_DIM]; the fields splits and partition are 0, unused.
using step07::Partials;

// [kernel]
/// Asks the L2 for the block-table lines that hold the pages of tokens [begin, end) of \p seq (an
/// item's range as planned) before the program reads the sequence's length, as step 10's
/// programs do for their split: the lines are on their way while the length is read. A line
/// holds 32 entries; each thread asks for one line at a time.
template <class T>
__device__ __forceinline__ void prefetch_item_table(const DecodeArgs<T>& args, int seq, int begin, int end) {
  const std::int64_t row = static_cast<std::int64_t>(seq) * args.max_blocks_per_seq;
  const std::int64_t pages = std::min<std::int64_t>(args.max_blocks_per_seq, (std::int64_t{end} + args.block_size - 1) / args.block_size);
  for (std::int64_t line = (row + begin / args.block_size) / 32 + threadIdx.x; line * 32 < row + pages; line += blockDim.x)
    prefetch_l2(args.block_tables, line * 32);
}

/// Program p of the persistent grid: for each item of its run, step 10's pass over the item's
/// tokens (cut to the sequence's length now; the pair's last item runs to it), its result divided
/// by its sum to the output (an item that is its pair), or unnormalised to its piece's slots of
/// the partials, part * group_size + head.
template <class T, int HEAD_DIM, int TILE, int PART_DIMS, int STAGES>
__global__ void persistent_decode(DecodeArgs<T> args, WorkList work, Partials partials) {
  PA_DYNAMIC_SHARED(float, shared);
  allow_next_kernel();  // the merge may take the SMs of programs that are done; it waits for our partials
  const int first = work.first_item[blockIdx.x];
  const int stop = work.first_item[blockIdx.x + 1];
  const int group_size = args.group_size();
  for (int i = first; i < stop; ++i) {
    const Vec<std::int32_t, 4> where = load_vec<4>(work.items, std::int64_t{i} * kItemInts);     // seq, kv_head, begin, end
    const Vec<std::int32_t, 4> how = load_vec<4>(work.items, std::int64_t{i} * kItemInts + 4);   // part, last
    const int seq = where.v[0];
    const int kv_head = where.v[1];
    const int part = how.v[0];
    prefetch_item_table(args, seq, where.v[2], where.v[3]);
    const int context_len = args.context_lens[seq];
    const int begin = std::min(where.v[2], context_len);
    const int end = how.v[1] != 0 ? context_len : std::min(where.v[3], context_len);
    if (i > first) __syncthreads();  // every warp is done with the item before's stages
    step10::tensor_core_attend<T, HEAD_DIM, false, TILE, PART_DIMS, STAGES>(
        args, seq, kv_head, begin, end, shared, part < 0, partials,
        [&](std::int64_t, int head) { return std::int64_t{part} * group_size + head; });
  }
}
// [kernel]

// [merge]
/// Program (cut pair c, head h of its group, channels 32z .. 32z + 31): step 10's one-round merge
/// (merge_row) of the pair's pieces for that head, in token order, to the output row.
/// Launched overlapped with persistent_decode: it reads its cut pair (the plan's) at once and the
/// partials after the wait.
template <class T, int HEAD_DIM>
__global__ void merge_pieces(DecodeArgs<T> args, WorkList work, Partials pieces) {
  PA_SHARED(float, slice_maxes, kMergeSlices);
  PA_SHARED(float, slice_sums, kMergeSlices);
  PA_SHARED(float, slice_accs, kMergeSlices * kMergeChannels);
  const Vec<std::int32_t, 4> cut = load_vec<4>(work.cuts, std::int64_t{blockIdx.x} * kCutInts);  // seq, kv_head, first_part, pieces
  const int head = blockIdx.y;
  const int group_size = args.group_size();
  const std::int64_t row = static_cast<std::int64_t>(cut.v[0]) * args.num_q_heads + cut.v[1] * group_size + head;
  wait_for_previous_kernel();  // the partials are complete from here
  merge_row<T, HEAD_DIM>(args.out, row, pieces, cut.v[3], [&](int i) { return std::int64_t{cut.v[2] + i} * group_size + head; },
                         slice_maxes, slice_sums, slice_accs);
}
// [merge]

// ----- host side -----------------------------------------------------------------------------
inline constexpr const char* kName = "step11_persistent";

/// Calls `f(kernel, T{}, head_dim)` with the persistent_decode instantiation for \p p's storage
/// type (bf16 or f16), head dim and program shape (step 10's shape_for).
template <class F>
void with_kernel(const DecodeProblem& p, F&& f) {
  step10::dispatch_shape(p, [&](auto storage, auto head_dim, auto index) {
    using T = std::remove_cvref_t<decltype(storage)>;
    constexpr int D = decltype(head_dim)::value;
    constexpr Shape s = kShapes[decltype(index)::value];
    f(persistent_decode<T, D, s.tile, s.part_dims, s.stages>, storage, head_dim);
  });
}

// [programs]
/// The programs of the grid for \p tiles of work: as many as the device holds at once (\p slots,
/// its SMs times the programs one SM holds), but none with fewer than \p min_tiles tiles, since
/// each piece costs a write of its partials and a share of the merge (step 10's splits of 512
/// tokens or more). `options.partition_tokens` asks for portions of that many tokens instead.
inline int programs_for(std::int64_t tiles, std::int64_t slots, int tile, std::int64_t min_tiles,
                        const KernelOptions& options) {
  if (options.partition_tokens > 0) {
    const std::int64_t portion = (std::int64_t{options.partition_tokens} + tile - 1) / tile;
    return static_cast<int>(std::clamp<std::int64_t>((tiles + portion - 1) / portion, 1, std::numeric_limits<int>::max()));
  }
  return static_cast<int>(std::clamp<std::int64_t>((tiles + min_tiles - 1) / min_tiles, 1, std::max<std::int64_t>(slots, 1)));
}
// [programs]

/// The plan's work list in the memory this backend's kernels read, with the schedule it encodes
/// (its counts size the launches; the step's program prints it).
struct WorkListTables final : PlanTables {
  Schedule schedule;
  int group_size = 1;
  int merge_threads = 0;             ///< threads of a merge program (0: nothing is cut)
  std::size_t items_at = 0;          ///< where the items start in the ints
  std::size_t cuts_at = 0;           ///< where the cut pairs start
  std::vector<std::int32_t> ints;    ///< first_item, padded to 4; the items; the cut pairs
  gpu::Buffer device;                ///< CUDA: the ints in device memory

  const std::int32_t* data() const {
    return kBackend == Backend::cuda ? static_cast<const std::int32_t*>(device.data()) : ints.data();
  }
  WorkList work_list() const {
    const std::int32_t* base = data();
    return {gspan<const std::int32_t>(base, static_cast<std::int64_t>(schedule.first_item.size()), "work_first_item"),
            gspan<const std::int32_t>(base + items_at, static_cast<std::int64_t>(cuts_at - items_at), "work_items"),
            gspan<const std::int32_t>(base + cuts_at, static_cast<std::int64_t>(ints.size() - cuts_at), "work_cuts")};
  }
  /// Partial slots: a piece of a cut pair for each query head of the group.
  std::int64_t slots() const { return std::int64_t{schedule.parts} * group_size; }
};

/// Bytes of the partials for \p slots slots of \p head_dim channels.
inline std::size_t pieces_bytes(std::int64_t slots, int head_dim) {
  const auto n = static_cast<std::size_t>(slots);
  return 2 * align_up(n * sizeof(float)) + align_up(n * static_cast<std::size_t>(head_dim) * sizeof(float));
}

/// The partials' spans in a workspace of pieces_bytes().
inline Partials pieces_in(void* workspace, std::int64_t slots, int head_dim) {
  auto* floats = static_cast<float*>(workspace);
  const std::size_t stride = align_up(static_cast<std::size_t>(slots) * sizeof(float)) / sizeof(float);
  return {gspan<float>(floats, slots, "piece_maxes"), gspan<float>(slots > 0 ? floats + stride : floats, slots, "piece_sums"),
          gspan<float>(slots > 0 ? floats + 2 * stride : floats, slots * head_dim, "piece_accs"), 0, 0};
}

/// Tables for \p schedule: its ints, and for CUDA their copy in a device buffer the tables own.
inline std::shared_ptr<const WorkListTables> make_tables(Schedule schedule, const DecodeProblem& p) {
  auto tables = std::make_shared<WorkListTables>();
  tables->group_size = p.group_size();
  std::vector<std::int32_t>& ints = tables->ints;
  ints.assign(schedule.first_item.begin(), schedule.first_item.end());
  ints.resize((ints.size() + 3) / 4 * 4, 0);
  tables->items_at = ints.size();
  for (const WorkItem& item : schedule.items)
    ints.insert(ints.end(), {item.seq, item.kv_head, item.begin, item.end, item.part, item.last ? 1 : 0, 0, 0});
  tables->cuts_at = ints.size();
  int most_pieces = 0;
  for (const CutPair& cut : schedule.cuts) {
    ints.insert(ints.end(), {cut.seq, cut.kv_head, cut.first_part, cut.pieces});
    most_pieces = std::max(most_pieces, cut.pieces);
  }
  tables->merge_threads = schedule.cuts.empty() ? 0 : merge_slices(most_pieces) * kMergeChannels;
  tables->schedule = std::move(schedule);
  if constexpr (kBackend == Backend::cuda) {
    tables->device = gpu::Buffer(ints.size() * sizeof(std::int32_t), cat(kName, " work list"));
    tables->device.upload(ints.data(), ints.size() * sizeof(std::int32_t));
  }
  return tables;
}

/// The checks of the problem and the knobs, before the lengths: step 10's, less its split knobs,
/// in the name of \p kernel (step 12 runs them in its own).
inline void check(const DecodeProblem& p, const KernelOptions& options, const char* kernel = kName) {
  validate(p, kernel);
  require_knobs(options, knob_partition, kernel);
  require_head_dim(p.head_dim, {PA_HEAD_DIMS}, kernel);
  step05::require_vector_layout(p, kernel);
  step10::require_16_bit(p, kernel);
}

// [plan]
/// Programs for \p lengths' tiles of \p tile tokens: as many as programs_for gives for the slots
/// \p out's occupancy leaves (its resident_per_sm); but where those are too few for the machine
/// (step10::few_programs), more, down to a tile each, as step 10 splits: a program a (sequence,
/// KV head) where the pairs are equal in tiles and those alone are enough (step 10's one split,
/// nothing cut or merged), else toward step10::kWavePrograms an SM. One sequence of 1k tokens
/// (32 query heads over 8) ran 32.8 us in 16 programs and 9.9 in 256, of 16k 32.2 in 256 and 25.0
/// in 528; `long-single`'s 512 programs of 16 tiles, filled to 528, lost 3% in step 12 (v119); 32
/// sequences of 128 tokens ran 13.3 us in 256 whole pairs and 17.1 in 512 halves, 32 of 64 to 192
/// tokens 18.2 in 256 programs (90 pairs cut) and 17.5 in 500 (an H100, v127; lab/perf-log.md).
inline int programs_of(const LaunchPlan& out, const DecodeProblem& p, std::span<const std::int32_t> lengths, int tile,
                       const KernelOptions& options, const DeviceLimits& device) {
  const std::int64_t tiles = work_tiles(lengths, p.num_kv_heads, tile);
  const std::int64_t slots = std::int64_t{device.sm_count} * out.resident_per_sm;
  const int programs = programs_for(tiles, slots, tile, (step10::kMinTokensPerSplit + tile - 1) / tile, options);
  if (options.partition_tokens > 0 || !step10::few_programs(programs, (tiles + programs - 1) / programs, device))
    return programs;
  // The fill: a program a (sequence, KV head) with tokens where the pairs are equal in tiles and
  // enough programs, so that every program has the same work and nothing is cut; else the wave
  // (wave_programs never exceeds the slots: at most kWavePrograms of resident_per_sm an SM). A
  // ragged batch of short pairs would have some cut and merged anyway, and runs faster cut finer.
  std::int64_t seqs = 0;
  std::int64_t least = std::numeric_limits<std::int64_t>::max(), most = 0;  // a pair's tiles
  for (const std::int32_t n : lengths) {
    if (n == 0) continue;
    const std::int64_t pair_tiles = (n + tile - 1) / tile;
    ++seqs, least = std::min(least, pair_tiles), most = std::max(most, pair_tiles);
  }
  const std::int64_t pairs = seqs * p.num_kv_heads;
  const std::int64_t wave = step10::wave_programs(out.resident_per_sm, device);
  const bool whole_pairs = pairs > 0 && least == most && !step10::few_programs(pairs, most, device);
  return static_cast<int>(std::max<std::int64_t>(programs, std::min(tiles, whole_pairs ? std::min(pairs, wave) : wave)));
}

/// Puts the work list of \p schedule in \p out: its grid, the workspace of the partials, the
/// tables in memory the plan allocates. Returns the schedule's clause of the plan's description.
inline std::string use_schedule(LaunchPlan& out, const DecodeProblem& p, Schedule schedule) {
  std::shared_ptr<const WorkListTables> tables = make_tables(std::move(schedule), p);
  const Schedule& s = tables->schedule;
  out.grid[0] = static_cast<unsigned>(s.programs());
  out.workspace_bytes = pieces_bytes(tables->slots(), p.head_dim);
  std::string clause = cat(s.tiles, " tiles of ", s.tile, " tokens, ", (s.work + s.programs() - 1) / s.programs(),
                           " or fewer a program (an item after its first counted as ",
                           s.item_cost, "), in ", s.items.size(), " items; ", s.cuts.size(),
                           " (sequence, KV head) cut into ", s.parts, " pieces",
                           s.cuts.empty() ? std::string() : cat(", merged by programs of ", tables->merge_threads, " threads (a query head and 32 channels each)"));
  out.tables = std::move(tables);
  return clause;
}

/// Deals \p lengths' tiles of \p tile tokens to programs_of's programs and puts the work list in
/// \p out (use_schedule). Returns the schedule's clause of the plan's description.
inline std::string plan_schedule(LaunchPlan& out, const DecodeProblem& p, std::span<const std::int32_t> lengths, int tile,
                                 const KernelOptions& options, const DeviceLimits& device) {
  return use_schedule(out, p, make_schedule(lengths, p.num_kv_heads, tile, programs_of(out, p, lengths, tile, options, device)));
}

/// The plan for a checked problem and lengths: step 10's program for the problem (its warps,
/// shared memory and occupancy), and the work list plan_schedule deals out to its programs.
inline LaunchPlan plan_work(const DecodeProblem& p, std::span<const std::int32_t> lengths, const KernelOptions& options,
                            const DeviceLimits& device) {
  LaunchPlan out = step10::program_plan(p, options, device, kName, [](const DecodeProblem& q, auto&& f) { step11::with_kernel(q, f); });
  const std::string schedule = plan_schedule(out, p, lengths, kShapes[shape_for(p)].tile, options, device);
  out.description = cat(describe_launch(out), ", ", step10::describe_program(out, device), "; ", schedule);
  return out;
}
// [plan]

/// The plan for a batch with the host copy of its lengths (KernelEntry::plan_lengths).
inline LaunchPlan plan_lengths(const DecodeProblem& p, std::span<const std::int32_t> lengths, const KernelOptions& options,
                               const DeviceLimits& device) {
  check(p, options);
  validate_lengths(p, lengths, kName);
  return plan_work(p, lengths, options, device);
}

/// The plan without the lengths: every sequence planned at max_context_len, the most its
/// problem allows. Right for any lengths; balanced when they are equal.
inline LaunchPlan plan(const DecodeProblem& p, const KernelOptions& options, const DeviceLimits& device) {
  check(p, options);
  const std::vector<std::int32_t> capacity(static_cast<std::size_t>(p.num_seqs), p.max_context_len);
  LaunchPlan out = plan_work(p, capacity, options, device);
  out.description += "; the lengths unknown: each planned at max_context_len";
  return out;
}

inline void launch(const DecodeView& view, const LaunchPlan& plan, void* stream) {
  if (!begin_launch(view, plan, kName)) return;
  step05::require_aligned(view, kName);
  step10::require_out_aligned(view, 2, kName);  // tensor_core_attend's epilogue
  const auto* tables = dynamic_cast<const WorkListTables*>(plan.tables.get());
  PA_REQUIRE(tables != nullptr, kName, "plan.tables", cat("the work list of a plan that ", kName, " made for this backend"),
             plan.tables ? "tables of another kind" : "none");
  const DecodeProblem& p = view.problem;
  const WorkList work = tables->work_list();
  const Partials pieces = pieces_in(view.workspace, tables->slots(), p.head_dim);
  with_kernel(p, [&](auto kernel, auto storage, auto head_dim) {
    using T = std::remove_cvref_t<decltype(storage)>;
    constexpr int D = decltype(head_dim)::value;
    const DecodeArgs<T> args = make_args<T>(view);
    launch_kernel("step11_persistent_decode", kernel, dim3(plan.grid[0]), dim3(plan.threads), plan.shared_bytes, stream,
                  args, work, pieces);
    if (!tables->schedule.cuts.empty())
      launch_kernel_overlapped("step11_merge_pieces", merge_pieces<T, D>,
                               merge_grid(tables->schedule.cuts.size(), p.group_size(), D),
                               dim3(tables->merge_threads), 0, stream, args, work, pieces);
  });
}

inline KernelEntry entry() {
  return {11, kName, kBackend, knob_partition, 0, &plan, &launch, false, false, true, &plan_lengths};
}

}  // namespace pa::PA_KERNELS::step11
