// Step 11 as a program: the kernel in the emulator and (where a GPU is present) on the GPU,
// both compared with the oracle, side by side. `--help` lists the flags; `--schedule NAME`
// prints the work list the plan makes for the named workload NAME of docs/design/BENCHMARKS.md
// (the picture on the step's page: `--schedule ragged-skew`), from the emulator's plan.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/report.h"
#include "common/workload.h"
#include "harness/harness.h"
#include "kernels/11_persistent.cuh"
#include "kernels/registry.h"

namespace {

namespace s11 = pa::kernels_emu::step11;

/// The problem of named workload \p spec, without its tensors (the plans read only the shapes
/// and the lengths).
pa::DecodeProblem problem_of(const pa::WorkloadSpec& spec) {
  std::int64_t pages = 0, most_pages = 0, total = 0;
  for (const int length : spec.context_lens) {
    pages += pa::pages_for(length, spec.block_size);
    most_pages = std::max(most_pages, pa::pages_for(length, spec.block_size));
    total += length;
  }
  pa::DecodeProblem p = pa::make_problem(static_cast<int>(spec.context_lens.size()), spec.num_q_heads, spec.num_kv_heads,
                                         spec.head_dim, spec.block_size, static_cast<int>(most_pages),
                                         *std::max_element(spec.context_lens.begin(), spec.context_lens.end()), pages, spec.dtype);
  p.total_context_len = total;
  return p;
}

/// "(3, 5)": sequence 3, KV head 5.
std::string pair_name(int seq, int kv_head) { return pa::cat("(", seq, ", ", kv_head, ")"); }

/// "4–9", or "4" for one.
std::string range_name(int first, int last) { return first == last ? std::to_string(first) : pa::cat(first, "–", last); }

/// The schedule of the emulator's plan for named workload \p name as Markdown: a summary, a
/// table of which programs run each (sequence, KV head), and a few programs' items drawn one
/// character a tile. Everything comes from the plan (s11::Schedule) and step 10's plan for the
/// same batch.
void print_schedule(const std::string& name, std::ostream& out) {
  const pa::WorkloadSpec spec = pa::named_spec(name);
  const pa::DecodeProblem problem = problem_of(spec);
  const std::vector<std::int32_t> lengths(spec.context_lens.begin(), spec.context_lens.end());
  const pa::DeviceLimits device = pa::DeviceLimits::pretend_h200();
  const pa::LaunchPlan plan = pa::plan_for(pa::kernel(11, pa::Backend::emulator), problem, lengths, {}, device);
  const auto* tables = dynamic_cast<const s11::WorkListTables*>(plan.tables.get());
  if (!tables) throw pa::Error("step 11's plan made no work list");
  const s11::Schedule& s = tables->schedule;
  const pa::LaunchPlan step10 = pa::kernels_emu::step10::plan(problem, {}, device);

  std::vector<int> program_of(s.items.size());  // the program that runs each item
  for (int p = 0; p < s.programs(); ++p)
    for (int i = s.first_item[static_cast<std::size_t>(p)]; i < s.first_item[static_cast<std::size_t>(p) + 1]; ++i)
      program_of[static_cast<std::size_t>(i)] = p;
  auto tiles_of = [&](const s11::WorkItem& item) { return (item.end - item.begin + s.tile - 1) / s.tile; };
  std::int64_t fewest = s.tiles, most = 0;
  for (int p = 0; p < s.programs(); ++p) {
    std::int64_t tiles = 0;
    for (int i = s.first_item[static_cast<std::size_t>(p)]; i < s.first_item[static_cast<std::size_t>(p) + 1]; ++i)
      tiles += tiles_of(s.items[static_cast<std::size_t>(i)]);
    fewest = std::min(fewest, tiles);
    most = std::max(most, tiles);
  }
  const int step10_tiles = (step10.splits == 1 ? problem.max_context_len : pa::kernels_emu::step07::partition_of(problem, step10.splits)) / s.tile;

  const auto merge = pa::kernels_emu::merge_grid(s.cuts.size(), problem.group_size(), problem.head_dim);
  const std::size_t merge_programs = std::size_t{merge.x} * merge.y * merge.z;

  out << "**The work list of `" << name << "`** (" << problem.num_seqs << " sequences, " << problem.num_q_heads
      << " query heads over " << problem.num_kv_heads << " KV heads, head dim " << problem.head_dim
      << "), as the emulator's plan makes it for its " << device.name << " of " << device.sm_count
      << " SMs. `step11_persistent --schedule " << name << "` prints it from the plan.\n\n";
  out << "- The programs: " << s.programs() << ", " << plan.resident_per_sm << " an SM of " << plan.threads
      << " threads (the emulator counts threads and shared memory; the GPU's plan asks the occupancy calculator, "
      << "which counts registers too).\n";
  out << "- The work: " << s.tiles << " tiles of " << s.tile << " tokens, " << fewest << " to " << most
      << " a program: each item after a program's first counts as " << s.item_cost
      << " tiles more (`kItemCost`), so a program that runs two items takes that many tiles fewer.\n";
  out << "- The items: " << s.items.size() << "; " << s.cuts.size() << " (sequence, KV head) cut into " << s.parts
      << " pieces, which " << merge_programs
      << " merge programs combine (one a query head and 32 channels).\n";
  out << "- Step 10's plan for the same batch: " << step10.splits << " splits of a (sequence, KV head), "
      << step10.grid[0] * step10.grid[1] * step10.grid[2] << " programs; its longest take " << step10_tiles
      << " tiles, " << pa::format_fixed(static_cast<double>(step10_tiles) / static_cast<double>(std::max<std::int64_t>(most, 1)), 1)
      << " times this plan's longest.\n\n";

  // A row a (sequence, KV head) cut into more than two pieces; runs of pairs of one length that
  // are whole or in two pieces share a row.
  const int kv_heads = problem.num_kv_heads;
  std::vector<std::vector<std::size_t>> items_of(lengths.size() * static_cast<std::size_t>(kv_heads));
  for (std::size_t i = 0; i < s.items.size(); ++i)
    items_of[static_cast<std::size_t>(s.items[i].seq * kv_heads + s.items[i].kv_head)].push_back(i);
  out << "| (sequence, KV head) | tokens | programs | items |\n|---|--:|---|---|\n";
  for (std::size_t pair = 0; pair < items_of.size();) {
    const int length = lengths[pair / static_cast<std::size_t>(kv_heads)];
    std::size_t end = pair + 1;
    int cut = items_of[pair].size() > 1 ? 1 : 0;
    if (items_of[pair].size() <= 2)
      for (; end < items_of.size() && lengths[end / static_cast<std::size_t>(kv_heads)] == length && items_of[end].size() <= 2; ++end)
        cut += items_of[end].size() > 1 ? 1 : 0;
    int first_program = s.programs(), last_program = 0;
    for (std::size_t k = pair; k < end; ++k)
      for (const std::size_t i : items_of[k]) {
        first_program = std::min(first_program, program_of[i]);
        last_program = std::max(last_program, program_of[i]);
      }
    const auto name_of = [&](std::size_t k) {
      return pair_name(static_cast<int>(k) / kv_heads, static_cast<int>(k) % kv_heads);
    };
    const int pairs = static_cast<int>(end - pair);
    const std::string items = pairs > 1 ? pa::cat(pairs, " pairs: ", pairs - cut, " whole, ", cut, " in two pieces")
                              : items_of[pair].size() == 1 ? std::string("whole")
                                                           : pa::cat(items_of[pair].size(), " pieces, merged");
    out << "| " << (pairs == 1 ? name_of(pair) : pa::cat(name_of(pair), " – ", name_of(end - 1))) << " | " << length
        << (pairs > 1 ? " each" : "") << " | " << range_name(first_program, last_program) << " | " << items << " |\n";
    pair = end;
  }

  // A few programs drawn: the first, the first that runs two pairs, the first that runs a whole
  // pair, the first that runs pieces of two pairs, the one between that and the last, and the last.
  std::vector<int> shown = {0};
  auto first_program = [&](auto wanted) {
    for (int p = 0; p < s.programs(); ++p)
      if (wanted(p)) return p;
    return -1;
  };
  auto program_items = [&](int p) {
    return std::vector<s11::WorkItem>(s.items.begin() + s.first_item[static_cast<std::size_t>(p)],
                                      s.items.begin() + s.first_item[static_cast<std::size_t>(p) + 1]);
  };
  const int two_pairs = first_program([&](int p) { return program_items(p).size() >= 2; });
  const int whole = first_program([&](int p) {
    const auto items = program_items(p);
    return std::any_of(items.begin(), items.end(), [](const s11::WorkItem& item) { return item.part < 0 && item.end > 0; });
  });
  const int two_pieces = first_program([&](int p) {
    const auto items = program_items(p);
    return std::count_if(items.begin(), items.end(), [](const s11::WorkItem& item) { return item.part >= 0; }) >= 2;
  });
  for (int p : {two_pairs, whole, two_pieces, two_pieces >= 0 ? (two_pieces + s.programs() - 1) / 2 : -1, s.programs() - 1})
    if (p >= 0 && std::find(shown.begin(), shown.end(), p) == shown.end()) shown.push_back(p);
  std::sort(shown.begin(), shown.end());
  out << "\nSome programs' items, a character a tile: a letter a (sequence, KV head), upper case for a piece of a cut "
         "pair, lower case for a whole one.\n\n```\n";
  for (const int p : shown) {
    std::string bar, list;
    for (const s11::WorkItem& item : program_items(p)) {
      const int pair = item.seq * problem.num_kv_heads + item.kv_head;
      const char letter = static_cast<char>((item.part >= 0 ? 'A' : 'a') + pair % 26);
      bar.append(static_cast<std::size_t>(tiles_of(item)), letter);
      list += pa::cat(list.empty() ? "" : ", ", pair_name(item.seq, item.kv_head), " ", item.begin, "-", item.end);
    }
    std::string head = pa::cat("program ", p);
    head.resize(13, ' ');
    bar.resize(std::max<std::size_t>(bar.size(), static_cast<std::size_t>(most)) + 2, ' ');
    out << head << bar << list << '\n';
  }
  out << "```\n";
}

}  // namespace

int main(int argc, char** argv) {
  const bool schedule = std::any_of(argv + 1, argv + argc, [](const char* arg) { return std::strcmp(arg, "--schedule") == 0; });
  if (schedule) {
    if (argc != 3 || std::strcmp(argv[1], "--schedule") != 0) {
      std::fprintf(stderr, "%s: --schedule takes the name of a workload of docs/design/BENCHMARKS.md, and no other flag\n(see --help)\n",
                   argv[0]);
      return pa::exit_bad_argument;
    }
    try {
      print_schedule(argv[2], std::cout);
      return pa::exit_ok;
    } catch (const pa::Error& error) {
      std::fprintf(stderr, "%s: %s\n", argv[0], error.what());
      return pa::exit_bad_argument;
    }
  }
  return pa::kernel_step_main(11, argc, argv,
                              "  --schedule NAME      print the work list the emulator's plan makes for a named workload\n"
                              "                       (its programs, items and cut pairs, as Markdown)\n");
}
