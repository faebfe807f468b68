// Step 11's own checks, beside the ones every rung passes (tests/test_steps.cpp): the work list
// its plan makes (every token of every (sequence, KV head) covered once, the programs' portions
// within a tile of each other, short pairs cut only where a portion ends), and its launches with
// lengths other than the ones planned for (longer, shorter, zero: a CUDA graph replayed across
// decode steps sees those), in the emulator against the oracle. Then step 12's claimed tails:
// the work list claim_tails makes from step 11's, and fp8 launches whose programs claim items.
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/12_fp8_cache.cuh"
#include "tests/step_checks.h"

using pa::Backend;
using pa::DType;
using namespace pa::testing;

namespace {

namespace s11 = pa::kernels_emu::step11;
namespace s12 = pa::kernels_emu::step12;

/// The pairs of \p s for \p lengths over \p kv_heads KV heads: each pair's items, in token order,
/// are [0, length) cut at multiples of the tile, the last one marked; every pair has at least one
/// item. A whole pair writes the output itself; the pieces of a cut pair have its slots in token
/// order, the cuts in (sequence, KV head) order, the slots consecutive. With \p in_list_order,
/// a pair's items are in token order in the list too. Returns each pair's items in token order.
std::vector<std::vector<std::size_t>> check_pairs(const s11::Schedule& s, const std::vector<std::int32_t>& lengths, int kv_heads,
                                                  bool in_list_order) {
  std::vector<std::vector<std::size_t>> items_of(lengths.size() * static_cast<std::size_t>(kv_heads));
  for (std::size_t i = 0; i < s.items.size(); ++i)
    items_of[static_cast<std::size_t>(s.items[i].seq * kv_heads + s.items[i].kv_head)].push_back(i);
  std::size_t cuts = 0;
  int parts = 0;
  for (int seq = 0; seq < static_cast<int>(lengths.size()); ++seq)
    for (int kv_head = 0; kv_head < kv_heads; ++kv_head) {
      INFO("pair (" << seq << ", " << kv_head << ")");
      std::vector<std::size_t>& items = items_of[static_cast<std::size_t>(seq * kv_heads + kv_head)];
      REQUIRE(!items.empty());
      auto by_begin = [&](std::size_t a, std::size_t b) { return s.items[a].begin < s.items[b].begin; };
      if (in_list_order) REQUIRE(std::is_sorted(items.begin(), items.end(), by_begin));
      std::sort(items.begin(), items.end(), by_begin);
      int covered = 0;
      for (const std::size_t i : items) {
        const s11::WorkItem& item = s.items[i];
        REQUIRE(item.begin == covered);
        REQUIRE(item.begin % s.tile == 0);
        REQUIRE(item.end >= item.begin);
        REQUIRE(item.end <= lengths[static_cast<std::size_t>(seq)]);
        REQUIRE(item.last == (i == items.back()));
        covered = item.end;
      }
      REQUIRE(covered == lengths[static_cast<std::size_t>(seq)]);
      if (items.size() == 1) {
        REQUIRE(s.items[items[0]].part == -1);
        continue;
      }
      REQUIRE(cuts < s.cuts.size());
      const s11::CutPair& cut = s.cuts[cuts++];
      REQUIRE((cut.seq == seq && cut.kv_head == kv_head && cut.first_part == parts && cut.pieces == static_cast<int>(items.size())));
      for (const std::size_t i : items) REQUIRE(s.items[i].part == parts++);
    }
  REQUIRE(cuts == s.cuts.size());
  REQUIRE(parts == s.parts);
  return items_of;
}

/// Every property a work list promises, for lengths \p lengths over \p kv_heads KV heads in
/// tiles of \p tile on \p programs programs, an item after a program's first costing \p item_cost.
void check_schedule(const std::vector<std::int32_t>& lengths, int kv_heads, int tile, int programs,
                    int item_cost = s11::kItemCost) {
  const s11::Schedule s = s11::make_schedule(lengths, kv_heads, tile, programs, item_cost);
  INFO("lengths " << lengths.size() << " (first " << (lengths.empty() ? 0 : lengths[0]) << "), " << kv_heads
                  << " KV heads, tile " << tile << ", " << programs << " programs, item cost " << item_cost);
  REQUIRE(s.programs() == std::max(programs, 1));
  REQUIRE(s.tile == tile);
  REQUIRE(s.first_item.front() == 0);
  REQUIRE(s.first_item.back() == static_cast<int>(s.items.size()));
  REQUIRE(std::is_sorted(s.first_item.begin(), s.first_item.end()));

  // Coverage and the pieces' slots (check_pairs), the items of each pair in token order in the
  // list. A short pair (no more tiles than tiles / programs, what every portion holds) is cut
  // once at most.
  const std::vector<std::vector<std::size_t>> items_of = check_pairs(s, lengths, kv_heads, true);
  for (std::size_t pair = 0; pair < items_of.size(); ++pair) {
    const int length = lengths[pair / static_cast<std::size_t>(kv_heads)];
    if ((length + tile - 1) / tile <= s.tiles / s.programs()) REQUIRE(items_of[pair].size() <= 2);
  }

  // Balance: each program's load (its tiles, and the cost of each item after its first) fits its
  // portion and, but for the last program with items, leaves at most an item's cost of it unused;
  // the portions are within a tile of each other. Items that cost nothing: each load is its
  // portion, within a tile of the mean. A pair is cut only where a portion ends, so there are
  // fewer cut pairs than programs.
  const std::int64_t tiles = s11::work_tiles(lengths, kv_heads, tile);
  REQUIRE(s.tiles == tiles);
  REQUIRE(s.item_cost == item_cost);
  REQUIRE(s.work >= tiles);
  if (item_cost == 0) REQUIRE(s.work == tiles);
  std::int64_t dealt = 0;
  int last_with_items = 0;  // the programs before it leave unused only what a next item's cost would not fit in
  for (int p = 0; p < s.programs(); ++p)
    if (s.first_item[static_cast<std::size_t>(p) + 1] > s.first_item[static_cast<std::size_t>(p)]) last_with_items = p;
  for (int p = 0; p < s.programs(); ++p) {
    std::int64_t mine = 0;
    for (int k = s.first_item[static_cast<std::size_t>(p)]; k < s.first_item[static_cast<std::size_t>(p) + 1]; ++k)
      mine += (s.items[static_cast<std::size_t>(k)].end - s.items[static_cast<std::size_t>(k)].begin + tile - 1) / tile;
    dealt += mine;
    const std::int64_t portion = s.portion_start(p + 1) - s.portion_start(p);
    const int items = s.first_item[static_cast<std::size_t>(p) + 1] - s.first_item[static_cast<std::size_t>(p)];
    INFO("program " << p << ": " << mine << " tiles in " << items << " items, load " << s.load(p) << ", portion " << portion);
    REQUIRE(s.load(p) == mine + std::int64_t{item_cost} * std::max(items - 1, 0));
    REQUIRE(portion * s.programs() >= s.work - s.programs());  // within one tile of work / programs
    REQUIRE(portion * s.programs() <= s.work + s.programs());
    // Every tile fits: a short pair of no tiles left to the last program weighs its cost only.
    REQUIRE(s.load(p) <= portion + (p + 1 == s.programs() ? std::int64_t{item_cost} * items : 0));
    if (p < last_with_items) REQUIRE(portion - s.load(p) <= item_cost);  // it ends where a next item's cost would not fit
    if (item_cost == 0) REQUIRE(mine == portion);
  }
  REQUIRE(dealt == tiles);
  REQUIRE(static_cast<int>(s.cuts.size()) <= std::max(s.programs() - 1, 0));
}

/// Lengths of sequences drawn from \p seed: mostly short, a few long, some 0.
std::vector<std::int32_t> drawn_lengths(int count, std::uint32_t seed) {
  std::vector<std::int32_t> lengths;
  for (int i = 0; i < count; ++i) {
    seed = seed * 1664525u + 1013904223u;
    const std::uint32_t r = seed >> 8;
    lengths.push_back(r % 7 == 0 ? 0 : r % 11 == 0 ? static_cast<std::int32_t>(2000 + r % 9000) : static_cast<std::int32_t>(r % 700));
  }
  return lengths;
}

/// A bf16 workload of \p lengths (8 query heads over 2 KV heads, head dim 128; K and V in fp8
/// when \p fp8_kv) whose problem allows up to \p capacity tokens a sequence and gives no total:
/// a plan made for it serves any lengths up to \p capacity, as one replayed across decode steps
/// must.
pa::Workload workload_of(const std::vector<int>& lengths, int capacity, bool fp8_kv = false) {
  pa::WorkloadSpec spec = pa::debug_spec();
  spec.name = "new-lengths";
  spec.num_q_heads = 8;
  spec.num_kv_heads = 2;
  spec.head_dim = 128;
  spec.dtype = DType::bf16;
  spec.fp8_kv = fp8_kv;
  spec.context_lens = lengths;
  const int longest = *std::max_element(lengths.begin(), lengths.end());
  spec.table_slack = static_cast<int>(pa::pages_for(capacity, spec.block_size) - pa::pages_for(longest, spec.block_size)) + 1;
  pa::Workload w = pa::make_workload(spec);
  w.problem.max_context_len = capacity;
  w.problem.total_context_len = 0;  // unknown: the lengths change between the plan and the launch
  return w;
}

/// Runs \p plan of step \p step on \p w in the emulator (output and workspace poisoned) and
/// requires the oracle's answer.
void require_oracle_with_plan(const pa::Workload& w, const pa::LaunchPlan& plan, const std::string& what, int step = 11) {
  const pa::KernelEntry& entry = pa::kernel(step, Backend::emulator);
  std::vector<std::byte> out(w.out_bytes(), std::byte{0xff}), workspace(plan.workspace_bytes, std::byte{0xff});
  entry.launch(w.host_view(out.data(), workspace.data(), workspace.size()), plan, nullptr);
  const pa::CompareResult result = pa::check_against_oracle(w, pa::oracle_rows(w), out, entry.weights_in_storage_type);
  INFO(what << "; " << plan.description << ": " << result.summary());
  REQUIRE(result.ok);
}

/// A pretend H200 with \p sm_count SMs: fewer programs, so fewer and longer portions.
pa::DeviceLimits with_sms(int sm_count) {
  pa::DeviceLimits device = pa::DeviceLimits::pretend_h200();
  device.sm_count = sm_count;
  return device;
}

}  // namespace

TEST_CASE("step11: the work list covers every token of every pair once, in portions within a tile of each other",
          "[step11]") {
  check_schedule({}, 8, 32, 1);
  check_schedule({0, 0, 0}, 2, 32, 1);
  check_schedule({65536, 512, 512, 0, 512}, 8, 32, 7);
  check_schedule({1, 31, 32, 33, 64, 65}, 1, 32, 3);
  check_schedule({100, 200}, 4, 64, 50);  // more programs than tiles: some portions empty
  for (std::uint32_t seed = 1; seed <= 20; ++seed)
    for (const int programs : {1, 2, 5, 16, 133, 924})
      for (const int item_cost : {0, 1, s11::kItemCost, 7})
        check_schedule(drawn_lengths(1 + static_cast<int>(seed % 40), seed), 1 + static_cast<int>(seed % 8),
                       seed % 2 ? 32 : 64, programs, item_cost);
}

TEST_CASE("step11: ragged-skew's plan spreads the long sequence over many programs and keeps short ones whole",
          "[step11]") {
  std::vector<std::int32_t> lengths(64, 512);
  lengths[0] = 65536;
  pa::DecodeProblem p = pa::make_problem(64, 32, 8, 128, 16, 4096, 65536, 4096 + 63 * 32, DType::bf16);
  const pa::LaunchPlan plan = pa::kernel(11, Backend::emulator).plan_lengths(p, lengths, {}, pa::DeviceLimits::pretend_h200());
  const auto* tables = dynamic_cast<const s11::WorkListTables*>(plan.tables.get());
  REQUIRE(tables != nullptr);
  const s11::Schedule& s = tables->schedule;
  INFO(plan.description);
  REQUIRE(s.programs() == static_cast<int>(plan.grid[0]));
  REQUIRE(s.programs() == pa::DeviceLimits::pretend_h200().sm_count * plan.resident_per_sm);  // one per slot
  REQUIRE(s.tiles == 8 * (65536 / 32) + 63 * 8 * (512 / 32));
  int long_cut = 0, short_whole = 0, short_cut = 0;
  // Every portion within a tile of the mean work; a program whose portion holds a short pair and
  // a piece takes item_cost tiles fewer than one that holds a piece alone.
  const std::int64_t most = (s.work + s.programs() - 1) / s.programs();
  std::int64_t fewest_of_two = most, most_of_one = 0;
  for (int p = 0; p < s.programs(); ++p) {
    const std::int64_t portion = s.portion_start(p + 1) - s.portion_start(p);
    REQUIRE(portion >= s.work / s.programs());
    REQUIRE(portion <= most);
    const int first = s.first_item[static_cast<std::size_t>(p)], items = s.first_item[static_cast<std::size_t>(p) + 1] - first;
    std::int64_t tiles = 0;
    for (int k = first; k < first + items; ++k)
      tiles += (s.items[static_cast<std::size_t>(k)].end - s.items[static_cast<std::size_t>(k)].begin + s.tile - 1) / s.tile;
    if (items == 1) most_of_one = std::max(most_of_one, tiles);
    if (items == 2) fewest_of_two = std::min(fewest_of_two, tiles);
  }
  REQUIRE(s.item_cost == s11::kItemCost);
  REQUIRE(most_of_one - fewest_of_two >= s.item_cost);
  for (const s11::CutPair& cut : s.cuts) {
    if (cut.seq == 0) {
      ++long_cut;
      REQUIRE(cut.pieces >= 2048 / most);  // 2048 tiles a pair
    } else {
      ++short_cut;
    }
  }
  for (const s11::WorkItem& item : s.items)
    if (item.seq > 0 && item.part < 0) ++short_whole;
  REQUIRE(long_cut == 8);
  REQUIRE(short_cut == 0);  // the long sequence's pieces fill around them
  REQUIRE(short_whole == 63 * 8);
  // Without the lengths, every sequence is planned at the longest: the short ones cut too.
  const pa::LaunchPlan blind = pa::kernel(11, Backend::emulator).plan(p, {}, pa::DeviceLimits::pretend_h200());
  REQUIRE(dynamic_cast<const s11::WorkListTables*>(blind.tables.get())->schedule.cuts.size() == 64 * 8);
}

TEST_CASE("step11: where the 512-token floor leaves too few programs, the plan fills: a program a (sequence, KV head) "
          "where those are enough, else toward 4 an SM, a tile or more each",
          "[step11][step12]") {
  namespace s10 = pa::kernels_emu::step10;
  const pa::DeviceLimits h200 = pa::DeviceLimits::pretend_h200();
  const std::int64_t wave = std::int64_t{h200.sm_count} * s10::kWavePrograms;
  // The schedule of step \p step's plan for \p seqs sequences of \p context tokens, 32 query
  // heads over 8 (step 12: K and V in fp8).
  auto schedule = [&](int step, int seqs, int context, const pa::KernelOptions& options = {}) {
    const std::vector<std::int32_t> lengths(static_cast<std::size_t>(seqs), context);
    pa::DecodeProblem p = pa::make_problem(seqs, 32, 8, 128, 16, context / 16, context, std::int64_t{seqs} * context / 16,
                                           DType::bf16);
    p.fp8_kv = step == 12;
    const pa::LaunchPlan plan = pa::kernel(step, Backend::emulator).plan_lengths(p, lengths, options, h200);
    INFO("step " << step << ", " << seqs << " x " << context << ": " << plan.description);
    REQUIRE(plan.resident_per_sm >= s10::kWavePrograms);
    const s11::Schedule s = dynamic_cast<const s11::WorkListTables*>(plan.tables.get())->schedule;
    REQUIRE(s.programs() == static_cast<int>(plan.grid[0]));
    return s;
  };
  for (const int step : {11, 12}) {
    INFO("step " << step);
    const s11::Schedule one_k = schedule(step, 1, 1024);
    const int tile = one_k.tile;
    const std::int64_t floor_tiles = (s10::kMinTokensPerSplit + tile - 1) / tile;
    // One sequence of 1k: 8 * 1024 / tile tiles, 8 * 1024 / 512 programs at the floor, too few;
    // a tile each instead.
    CHECK(one_k.programs() == 8 * 1024 / tile);
    CHECK(s10::few_programs(8 * 1024 / 512, floor_tiles, h200));
    // 16k: the floor's 256 programs are fewer than two an SM, with long chains.
    CHECK(schedule(step, 1, 16384).programs() == wave);
    // 32 sequences of 128 tokens: the floor's 64 programs are too few, but the 256 (sequence, KV
    // head) are enough (one an SM, chains under kLongChainTiles): a program each, nothing cut, as
    // step 10 runs them in one split.
    const s11::Schedule short_pairs = schedule(step, 32, 128);
    CHECK(short_pairs.programs() == 32 * 8);
    CHECK(short_pairs.cuts.empty());
    CHECK(short_pairs.items.size() == 32 * 8);
    // 16 of 128: 128 pairs, fewer than one an SM: the wave's fill, a tile each.
    CHECK(schedule(step, 16, 128).programs() == 16 * 8 * 128 / tile);
    // 32 of 256: 256 pairs of 256 / tile tiles (8 at tile 32), fewer than two an SM with chains
    // of kLongChainTiles or more: the wave.
    REQUIRE(256 / tile >= s10::kLongChainTiles);
    CHECK(schedule(step, 32, 256).programs() == wave);
    // 96 of 128: 768 pairs, more than the wave: the wave, as before (pairs cut in two).
    CHECK(schedule(step, 96, 128).programs() == wave);
    // 32 of 64 to 192 tokens (2 to 6 tiles a pair): enough pairs, but not equal: the wave's fill,
    // a tile or two each, not a program a pair with some pairs cut anyway.
    {
      std::vector<std::int32_t> lengths;
      for (int seq = 0; seq < 32; ++seq) lengths.push_back(64 + 32 * (seq % 5));
      pa::DecodeProblem p = pa::make_problem(32, 32, 8, 128, 16, 192 / 16, 192, 32 * 192 / 16, DType::bf16);
      p.fp8_kv = step == 12;
      const pa::LaunchPlan plan = pa::kernel(step, Backend::emulator).plan_lengths(p, lengths, {}, h200);
      INFO(plan.description);
      CHECK(static_cast<std::int64_t>(plan.grid[0]) == wave);
    }
    // `long-single` and `small-batch`: the floor's 512 programs are enough (filled to 528, step
    // 12 lost 3%).
    CHECK(schedule(step, 1, 32768).programs() == 512);
    CHECK(schedule(step, 8, 4096).programs() == 512);
    // Asked portions win.
    pa::KernelOptions portions;
    portions.partition_tokens = 512;
    CHECK(schedule(step, 1, 1024, portions).programs() == 16);
  }
}

TEST_CASE("step11: a plan serves lengths other than its own: longer, shorter, zero, moved", "[step11]") {
  const pa::KernelEntry& entry = pa::kernel(11, Backend::emulator);
  struct Case {
    const char* what;
    std::vector<int> planned, launched;
  };
  const Case cases[] = {
      {"every sequence grew by a token", {700, 1, 0, 129, 64}, {701, 2, 1, 130, 65}},
      {"every sequence grew by many", {700, 1, 0, 129, 64}, {1300, 900, 40, 800, 1000}},
      {"every sequence shrank", {700, 33, 20, 129, 64}, {300, 1, 0, 17, 63}},
      {"all planned at zero", {0, 0, 0, 0, 0}, {700, 1, 0, 129, 64}},
      {"all launched at zero", {700, 1, 0, 129, 64}, {0, 0, 0, 0, 0}},
      {"the long sequence moved", {1200, 16, 16, 16, 16}, {16, 16, 16, 16, 1200}},
  };
  for (const Case& c : cases) {
    const pa::Workload w = workload_of(c.launched, 1400);
    const std::vector<std::int32_t> planned(c.planned.begin(), c.planned.end());
    for (const int sms : {1, 3, 132}) {
      const pa::LaunchPlan plan = entry.plan_lengths(w.problem, planned, {}, with_sms(sms));
      require_oracle_with_plan(w, plan, pa::cat(c.what, ", ", sms, " SMs"));
    }
    pa::KernelOptions small;
    small.partition_tokens = 96;  // portions of 3 tiles: most pairs cut, many empty pieces
    require_oracle_with_plan(w, entry.plan_lengths(w.problem, planned, small, with_sms(132)),
                             pa::cat(c.what, ", portions of 96 tokens"));
  }
}

TEST_CASE("step11: a pair cut into more pieces than the merge loads in one round", "[step11]") {
  // A slice loads up to 8 pieces at once and a program has up to 16 slices: 128 pieces a round.
  REQUIRE(pa::kernels_emu::merge_slices(1) == 1);
  REQUIRE(pa::kernels_emu::merge_slices(64) == 8);
  REQUIRE(pa::kernels_emu::merge_slices(117) == 15);
  REQUIRE(pa::kernels_emu::merge_slices(129) == 16);
  const pa::KernelEntry& entry = pa::kernel(11, Backend::emulator);
  const pa::Workload w = workload_of({5000, 40, 0, 4100}, 5000);
  pa::KernelOptions tiny;
  tiny.partition_tokens = 32;  // a tile a portion: 157 pieces for the first pair, 129 for the last
  const pa::LaunchPlan plan = entry.plan_lengths(w.problem, w.context_lens, tiny, with_sms(132));
  int most = 0;
  for (const s11::CutPair& cut : dynamic_cast<const s11::WorkListTables*>(plan.tables.get())->schedule.cuts)
    most = std::max(most, cut.pieces);
  REQUIRE(most == 157);
  require_oracle_with_plan(w, plan, "portions of one tile, up to 157 pieces a pair");
}

TEST_CASE("step11: the plan refuses lengths it cannot be for, and a launch a plan without its work list", "[step11]") {
  const pa::KernelEntry& entry = pa::kernel(11, Backend::emulator);
  pa::WorkloadSpec spec = pa::debug_spec();
  spec.dtype = DType::bf16;
  spec.context_lens = {37, 20, 16};
  const pa::Workload w = pa::make_workload(spec);
  const pa::DeviceLimits device = pa::DeviceLimits::pretend_h200();
  const std::vector<std::int32_t> two = {37, 20};
  PA_REQUIRE_THROWS_AS_WITH(entry.plan_lengths(w.problem, two, {}, device), pa::ArgumentError,
                            "step11_persistent: context_lens.size(): expected num_seqs = 3, got 2");
  const std::vector<std::int32_t> negative = {37, -1, 16};
  PA_REQUIRE_THROWS_AS_WITH(entry.plan_lengths(w.problem, negative, {}, device), pa::ArgumentError,
                            "step11_persistent: context_lens[1]: expected the length of sequence 1 in [0, max_context_len = 37]");
  const std::vector<std::int32_t> too_long = {37, 38, 16};
  PA_REQUIRE_THROWS_AS_WITH(entry.plan_lengths(w.problem, too_long, {}, device), pa::ArgumentError, "got 38");
  const std::vector<std::int32_t> other_sum = {37, 20, 15};
  PA_REQUIRE_THROWS_AS_WITH(entry.plan_lengths(w.problem, other_sum, {}, device), pa::ArgumentError,
                            "step11_persistent: total_context_len: expected 0 (unknown) or the sum of context_lens = 72, got 73");
  // A plan of step 10 for the same problem has no work list: refused, nothing written.
  const pa::LaunchPlan step10 = pa::kernel(10, Backend::emulator).plan(w.problem, {}, device);
  std::vector<std::byte> out(w.out_bytes(), std::byte{0xff}), workspace(step10.workspace_bytes + 4096, std::byte{0xff});
  PA_REQUIRE_THROWS_AS_WITH(entry.launch(w.host_view(out.data(), workspace.data(), workspace.size()), step10, nullptr),
                            pa::ArgumentError, "step11_persistent: plan.tables: expected the work list of a plan that");
  REQUIRE(std::all_of(out.begin(), out.end(), [](std::byte b) { return b == std::byte{0xff}; }));
}

TEST_CASE("step11: on pretend devices of 1 to 132 SMs the answer is the oracle's, and one device's twice the same bits",
          "[step11]") {
  pa::WorkloadSpec spec = pa::debug_spec();
  spec.num_q_heads = 16;
  spec.num_kv_heads = 2;
  spec.head_dim = 128;
  spec.dtype = DType::f16;
  spec.context_lens = {2100, 5, 0, 640, 33, 512};
  const pa::Workload w = pa::make_workload(spec);
  const pa::KernelEntry& entry = pa::kernel(11, Backend::emulator);
  for (const int sms : {1, 2, 7, 132}) {
    const pa::LaunchPlan plan = entry.plan_lengths(w.problem, w.context_lens, {}, with_sms(sms));
    require_oracle_with_plan(w, plan, pa::cat(sms, " SMs"));
  }
  const pa::RunOutput first = run_on(Backend::emulator, 11, w), second = run_on(Backend::emulator, 11, w);
  require_same_bits(w, first, second, "a second run");
}

// ----- step 12: claimed tails ----------------------------------------------------------------

namespace {

/// What claim_tails promises, for \p before (make_schedule's) and \p after (claim_tails of it with
/// \p tiles): each program keeps its run but the last \p tiles tiles, in order; the rest follow
/// every run as items of at most \p tiles tiles, in program order; every token of every pair once,
/// exactly one item a pair marked last (the one that ends it); the pieces of each cut pair
/// numbered in token order, the cut pairs in (sequence, KV head) order, a whole pair unnumbered.
void check_claimed(const s11::Schedule& before, const s11::Schedule& after, const std::vector<std::int32_t>& lengths,
                   int kv_heads, int tiles) {
  const int tile = before.tile;
  auto tiles_of = [&](const s11::WorkItem& item) { return (item.end - item.begin + tile - 1) / tile; };
  REQUIRE(after.programs() == before.programs());
  REQUIRE(after.first_item.front() == 0);
  REQUIRE(std::is_sorted(after.first_item.begin(), after.first_item.end()));
  REQUIRE(after.first_item.back() <= static_cast<int>(after.items.size()));
  for (int p = 0; p < before.programs(); ++p) {
    INFO("program " << p);
    std::int64_t run = 0, kept = 0;
    for (int i = before.first_item[static_cast<std::size_t>(p)]; i < before.first_item[static_cast<std::size_t>(p) + 1]; ++i)
      run += tiles_of(before.items[static_cast<std::size_t>(i)]);
    for (int i = after.first_item[static_cast<std::size_t>(p)]; i < after.first_item[static_cast<std::size_t>(p) + 1]; ++i)
      kept += tiles_of(after.items[static_cast<std::size_t>(i)]);
    REQUIRE(kept == std::max<std::int64_t>(0, run - tiles));
  }
  std::int64_t claimed_tiles = 0;
  for (std::size_t i = static_cast<std::size_t>(after.first_item.back()); i < after.items.size(); ++i) {
    REQUIRE(tiles_of(after.items[i]) >= 1);
    REQUIRE(tiles_of(after.items[i]) <= tiles);
    claimed_tiles += tiles_of(after.items[i]);
  }
  REQUIRE(claimed_tiles <= std::int64_t{tiles} * before.programs());
  check_pairs(after, lengths, kv_heads, false);
}

/// An fp8 workload (bf16 q, 8 query heads over 2 KV heads, head dim 128) of \p lengths.
pa::Workload fp8_workload(const std::vector<int>& lengths) {
  pa::WorkloadSpec spec = pa::debug_spec();
  spec.name = "fp8-claims";
  spec.num_q_heads = 8;
  spec.num_kv_heads = 2;
  spec.head_dim = 128;
  spec.dtype = DType::bf16;
  spec.fp8_kv = true;
  spec.context_lens = lengths;
  return pa::make_workload(spec);
}

}  // namespace

TEST_CASE("step12: claim_tails moves each program's last tiles to items claimed after every run", "[step12][fp8]") {
  auto check = [](const std::vector<std::int32_t>& lengths, int kv_heads, int tile, int programs, int tiles) {
    INFO(lengths.size() << " sequences, " << kv_heads << " KV heads, tile " << tile << ", " << programs << " programs, claims of "
                        << tiles << " tiles");
    const s11::Schedule before = s11::make_schedule(lengths, kv_heads, tile, programs);
    s11::Schedule after = before;
    s12::claim_tails(after, tiles);
    check_claimed(before, after, lengths, kv_heads, tiles);
  };
  check({}, 8, 32, 1, 4);
  check({0, 0, 0}, 2, 32, 3, 4);
  check({65536, 512, 512, 0, 512}, 8, 32, 7, 4);
  check({1, 31, 32, 33, 64, 65}, 1, 32, 3, 1);  // every program's run claimed whole
  check({100, 200}, 4, 64, 50, 4);               // programs with no items
  for (std::uint32_t seed = 1; seed <= 20; ++seed)
    for (const int programs : {1, 2, 5, 16, 133})
      for (const int tiles : {1, 4, 9})
        check(drawn_lengths(1 + static_cast<int>(seed % 40), seed), 1 + static_cast<int>(seed % 8), seed % 2 ? 32 : 64, programs,
              tiles);
}

TEST_CASE("step12: fp8 plans claim where the portions are long, and the claims give the oracle's answer in any order",
          "[step12][fp8]") {
  const pa::KernelEntry& entry = pa::kernel(12, Backend::emulator);
  const pa::Workload w = fp8_workload({12000, 5, 0, 5000, 33, 8200});
  // On a pretend H200 the portions are short: no claims. On 1 and 2 SMs they are long.
  const pa::LaunchPlan full = entry.plan_lengths(w.problem, w.context_lens, {}, pa::DeviceLimits::pretend_h200());
  INFO(full.description);
  REQUIRE(full.description.find("claimed at run time") == std::string::npos);
  for (const int sms : {1, 2}) {
    const pa::LaunchPlan plan = entry.plan_lengths(w.problem, w.context_lens, {}, with_sms(sms));
    INFO(plan.description);
    REQUIRE(plan.description.find("claimed at run time") != std::string::npos);
    const auto* tables = dynamic_cast<const s11::WorkListTables*>(plan.tables.get());
    REQUIRE(tables != nullptr);
    REQUIRE(tables->schedule.first_item.back() < static_cast<int>(tables->schedule.items.size()));
    require_oracle_with_plan(w, plan, pa::cat(sms, " SMs"), 12);
  }
  // One plan launched again and again on one workspace (the count left by the launch before),
  // and in shuffled orders, where other programs take the claims: the same bits every time.
  const pa::LaunchPlan plan = entry.plan_lengths(w.problem, w.context_lens, {}, with_sms(1));
  std::vector<std::byte> workspace(plan.workspace_bytes, std::byte{0xff});
  auto run = [&]() {
    std::vector<std::byte> out(w.out_bytes(), std::byte{0xff});
    entry.launch(w.host_view(out.data(), workspace.data(), workspace.size()), plan, nullptr);
    return out;
  };
  const std::vector<std::byte> first = run();
  const pa::CompareResult against_oracle = pa::check_against_oracle(w, pa::oracle_rows(w), first, entry.weights_in_storage_type);
  INFO(against_oracle.summary());
  REQUIRE(against_oracle.ok);
  for (int again = 0; again < 3; ++again) {
    const pa::CompareResult same = pa::compare_bitwise(w.problem, first.data(), run().data());
    INFO("launch " << again + 2 << ": " << same.summary());
    REQUIRE(same.ok);
  }
  for (const pa::emu::ThreadOrder order : shuffled_orders()) {
    const pa::emu::ScopedThreadOrder scoped(order);
    const pa::CompareResult same = pa::compare_bitwise(w.problem, first.data(), run().data());
    INFO(pa::emu::describe(order) << ": " << same.summary());
    REQUIRE(same.ok);
  }
}

TEST_CASE("step12: a plan with claims serves lengths other than its own: shorter, zero, longer, moved",
          "[step12][fp8]") {
  // Items cut to no tiles (a sequence shorter than planned) come between items of a program's
  // run and among the claims; the run must still give the oracle's answer.
  const pa::KernelEntry& entry = pa::kernel(12, Backend::emulator);
  const std::vector<std::int32_t> planned = {12000, 5, 0, 5000, 33, 8200};
  const std::vector<int> launched[] = {
      {11000, 5, 0, 4990, 33, 8100},  // a little shorter
      {0, 0, 0, 0, 0, 0},             // all zero
      {3000, 1, 1, 0, 12000, 16},     // the long ones moved
      {12100, 40, 17, 5050, 64, 8300},  // a little longer
  };
  for (const std::vector<int>& lengths : launched) {
    const pa::Workload w = workload_of(lengths, 12400, true);
    const pa::LaunchPlan plan = entry.plan_lengths(w.problem, planned, {}, with_sms(1));
    INFO(plan.description);
    REQUIRE(plan.description.find("claimed at run time") != std::string::npos);
    require_oracle_with_plan(w, plan, pa::cat("lengths ", lengths[0], ", ", lengths[1], ", ... on 1 SM"), 12);
  }
}
