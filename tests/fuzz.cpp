// The seeded fuzzer (tests/fuzz.h): configurations drawn from a seed, written as one line and
// read back, run in the emulator through the checks of tests/step_checks.h.
#include "tests/fuzz.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <sstream>

#include "common/error.h"
#include "common/paged_cache.h"
#include "harness/harness.h"
#include "kernels/registry.h"
#include "tests/test_util.h"

namespace pa::fuzz {
namespace {

/// The generator of one configuration: a splitmix64 stream of its seed.
struct Draw {
  testing::SplitMix mix;
  explicit Draw(std::uint64_t seed) : mix{seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull} {}
  /// Uniform in [0, n).
  int below(int n) { return static_cast<int>(mix.next() % static_cast<std::uint64_t>(n)); }
  /// Uniform in [lo, hi].
  int between(int lo, int hi) { return lo + below(hi - lo + 1); }
  bool chance(double p) { return static_cast<double>(mix.next() >> 11) * 0x1p-53 < p; }
  template <class T>
  T pick(std::initializer_list<T> values) {
    return *(values.begin() + below(static_cast<int>(values.size())));
  }
};

// ----- the emulator's budget ----------------------------------------------------------------------
// One q_head x token x channel of work costs the emulator about the same in every step (the
// one-thread programs of 02 and 03 read K and V once per query head, the others once per group
// but through more threads). A case is kept near kWork of them: a tenth of a second on average
// (its two runs, the oracle and the twin), so test_fuzz's 432 cases take about 35 s.
constexpr std::int64_t kWork = 1 << 19;
// Each thread of each program is a fiber, and the split steps launch a program per split: the
// knobs keep threads x programs near kThreadPrograms.
constexpr std::int64_t kThreadPrograms = 1 << 14;

/// A context length drawn around the page size: 0, 1, page-1, page, page+1, 2 pages+-1, or
/// anything up to \p most.
int draw_context(Draw& draw, int page, int most) {
  int len = 0;
  switch (draw.below(8)) {
    case 0: len = 0; break;
    case 1: len = 1; break;
    case 2: len = page - 1; break;
    case 3: len = page; break;
    case 4: len = page + 1; break;
    case 5: len = 2 * page + draw.pick({-1, 1}); break;
    default: len = draw.between(0, std::max(most, 1)); break;
  }
  return std::clamp(len, 0, std::max(most, 1));
}

/// The steps' knobs (KernelEntry::knobs) within their valid ranges.
void draw_knobs(Draw& draw, Config& c, const KernelEntry& entry) {
  KernelOptions& o = c.options;
  const WorkloadSpec& s = c.spec;
  // A program a (sequence, query head) for each split; from step 08 on a program serves a whole
  // group of query heads and costs the emulator as much as the group's programs did before.
  const std::int64_t programs = std::int64_t{std::max<int>(1, static_cast<int>(s.context_lens.size()))} * s.num_q_heads;
  if ((entry.knobs & knob_threads) && draw.chance(0.6)) {
    // Step 04's tree reduction takes powers of two; the warp steps any whole number of warps.
    o.threads_per_block = c.step == 4 ? draw.pick({32, 64, 128, 256, 512})
                                      : 32 * draw.pick({1, 2, 3, 4, 5, 8, 12, 16});
    if (draw.chance(0.03)) o.threads_per_block = 1024;
    if (programs * o.threads_per_block > kThreadPrograms) o.threads_per_block = 32;
  }
  const int threads = o.threads_per_block > 0 ? o.threads_per_block : 128;
  const int most_splits = static_cast<int>(std::clamp<std::int64_t>(kThreadPrograms / (programs * threads), 1, 64));
  const int longest = s.context_lens.empty() ? 0 : *std::max_element(s.context_lens.begin(), s.context_lens.end());
  if ((entry.knobs & knob_splits) && draw.chance(0.6)) {
    o.num_splits = draw.chance(0.15) ? longest + draw.between(1, 3)  // more splits than tokens: empty ones
                                     : draw.between(1, 24);
    o.num_splits = std::min(o.num_splits, most_splits);
  }
  if ((entry.knobs & knob_partition) && o.num_splits == 0 && draw.chance(0.25))
    o.partition_tokens = draw.between(std::max(1, longest / most_splits), std::max(1, longest + 8));
  if ((entry.knobs & knob_tile) && draw.chance(0.6)) o.tile_tokens = draw.pick({1, 2, 4});
  // The ablation variants are compiled for bf16 at head dim 128 (check_variants in
  // tests/step_checks.h runs them on groups of 1 and 4): only there, with the other knobs at
  // their defaults.
  if ((entry.knobs & knob_variant) && entry.variants > 0 && s.dtype == DType::bf16 && s.head_dim == 128 &&
      (s.num_q_heads / s.num_kv_heads == 1 || s.num_q_heads / s.num_kv_heads == 4) && draw.chance(0.5)) {
    o = {};
    o.variant = draw.between(1, entry.variants);
  }
}

/// Whether \p message is a refusal the step documents for an argument the generator draws
/// within its own rules: step 04's and 05's length cap, a program that fits no SM, step 09's
/// copy-layout variants outside their shapes, step 10's largest group.
const char* documented_limit(const std::string& message) {
  for (const char* limit : {"step 06 removes this cap", "fits one SM", "only for bf16 at head dim 128",
                            "only with 1 or 4 heads a pass", "a group of at most"})
    if (message.find(limit) != std::string::npos) return limit;
  return nullptr;
}

/// Replaces newlines so that a message stays on one line.
std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

Outcome failed(std::string detail) { return {Outcome::Kind::failed, one_line(std::move(detail)), 0}; }

// ----- the config line ----------------------------------------------------------------------------
std::string join(const std::vector<int>& values) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) out += cat(i ? "," : "", values[i]);
  return out;
}

long long parse_integer(std::string_view key, std::string_view text) {
  const std::string copy(text);
  try {
    std::size_t used = 0;
    const long long value = std::stoll(copy, &used);
    if (used == copy.size()) return value;
  } catch (const std::logic_error&) {
  }
  throw_argument("fuzz::parse_config", key, "an integer", cat('\'', text, '\''));
}

/// \p value with the digits that read back as the same float.
std::string float_text(float value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", static_cast<double>(value));
  return text;
}

int parse_int(std::string_view key, std::string_view text) {
  const long long value = parse_integer(key, text);
  PA_REQUIRE(value >= INT32_MIN && value <= INT32_MAX, "fuzz::parse_config", key, "a 32-bit integer", text);
  return static_cast<int>(value);
}

}  // namespace

std::string format_config(const Config& c) {
  const WorkloadSpec& s = c.spec;
  std::string line = cat("step=", c.step, " seed=", s.seed, " dtype=", dtype_name(s.dtype), " q_heads=", s.num_q_heads,
                         " kv_heads=", s.num_kv_heads, " head_dim=", s.head_dim, " page=", s.block_size,
                         " context=", join(s.context_lens), " layout=", s.layout == LayoutKind::nhd ? "nhd" : "hnd",
                         " scatter=", int{s.scatter}, " alias=", int{s.alias}, " top=", int{s.pages_near_top},
                         " spare=", s.spare_blocks, " slack=", s.table_slack, " query_scale=", float_text(s.query_multiplier),
                         " nan_seq=", s.nan_sequence);
  const KernelOptions& o = c.options;
  line += cat(" threads=", o.threads_per_block, " splits=", o.num_splits, " partition=", o.partition_tokens,
              " tile=", o.tile_tokens, " variant=", o.variant, " order=", c.order_seed);
  if (!c.fault.empty()) line += cat(" bad=", c.fault);
  return line;
}

Config parse_config(std::string_view line) {
  constexpr std::string_view function = "fuzz::parse_config";
  Config c;
  c.spec.name = "fuzz";
  std::istringstream words{std::string(line)};
  std::string word;
  while (words >> word) {
    const std::size_t eq = word.find('=');
    PA_REQUIRE(eq != std::string::npos && eq > 0, function, "word", "key=value", cat('\'', word, '\''));
    const std::string key = word.substr(0, eq);
    const std::string value = word.substr(eq + 1);
    WorkloadSpec& s = c.spec;
    KernelOptions& o = c.options;
    if (key == "step") c.step = parse_int(key, value);
    else if (key == "seed") s.seed = static_cast<std::uint64_t>(parse_integer(key, value));
    else if (key == "dtype") s.dtype = parse_dtype(value, key);
    else if (key == "q_heads") s.num_q_heads = parse_int(key, value);
    else if (key == "kv_heads") s.num_kv_heads = parse_int(key, value);
    else if (key == "head_dim") s.head_dim = parse_int(key, value);
    else if (key == "page") s.block_size = parse_int(key, value);
    else if (key == "context") {
      s.context_lens.clear();
      std::stringstream items(value);
      std::string item;
      while (std::getline(items, item, ',')) s.context_lens.push_back(parse_int(key, item));
    } else if (key == "layout") {
      PA_REQUIRE(value == "hnd" || value == "nhd", function, key, "hnd or nhd", value);
      s.layout = value == "nhd" ? LayoutKind::nhd : LayoutKind::hnd;
    } else if (key == "scatter") s.scatter = parse_int(key, value) != 0;
    else if (key == "alias") s.alias = parse_int(key, value) != 0;
    else if (key == "top") s.pages_near_top = parse_int(key, value) != 0;
    else if (key == "spare") s.spare_blocks = parse_int(key, value);
    else if (key == "slack") s.table_slack = parse_int(key, value);
    else if (key == "query_scale") {
      char* end = nullptr;
      s.query_multiplier = std::strtof(value.c_str(), &end);
      PA_REQUIRE(!value.empty() && end == value.c_str() + value.size(), function, key, "a number", value);
    } else if (key == "nan_seq") s.nan_sequence = parse_int(key, value);
    else if (key == "threads") o.threads_per_block = parse_int(key, value);
    else if (key == "splits") o.num_splits = parse_int(key, value);
    else if (key == "partition") o.partition_tokens = parse_int(key, value);
    else if (key == "tile") o.tile_tokens = parse_int(key, value);
    else if (key == "variant") o.variant = parse_int(key, value);
    else if (key == "order") c.order_seed = static_cast<std::uint64_t>(parse_integer(key, value));
    else if (key == "bad") c.fault = value;
    else throw_argument(function, "key", "one of the keys format_config writes", cat('\'', key, '\''));
  }
  return c;
}

// ----- drawing ------------------------------------------------------------------------------------
Config draw_valid(int step, std::uint64_t seed) {
  Draw draw(seed);
  const KernelEntry& entry = kernel(step, Backend::emulator);
  Config c;
  c.step = step;
  WorkloadSpec& s = c.spec;
  s.name = "fuzz";
  s.seed = seed;
  s.dtype = entry.runs_f32 ? draw.pick({DType::f32, DType::f16, DType::bf16}) : draw.pick({DType::f16, DType::bf16});
  s.head_dim = draw.pick({64, 64, 80, 96, 112, 128, 128, 256});
  // Heads: half the cases a query-head count in 1..32 and a KV-head count that divides it, half a
  // group size in 1..32 and as many KV heads as keep the query heads at 32 or fewer.
  if (draw.chance(0.5)) {
    s.num_q_heads = draw.between(1, 32);
    std::vector<int> divisors;
    for (int d = 1; d <= s.num_q_heads; ++d)
      if (s.num_q_heads % d == 0) divisors.push_back(d);
    s.num_kv_heads = divisors[static_cast<std::size_t>(draw.below(static_cast<int>(divisors.size())))];
  } else {
    const int group = draw.chance(0.3) ? draw.pick({16, 24, 31, 32}) : draw.between(1, 32);
    s.num_kv_heads = draw.between(1, std::max(1, 32 / group));
    s.num_q_heads = group * s.num_kv_heads;
  }
  // Pages 1 to 256: powers of two (the kernels' shift) and any other size (their division).
  s.block_size = draw.chance(0.5) ? 1 << draw.between(0, 8) : draw.between(1, 256);
  // A batch of 1 to 6 (now and then 0, the empty batch), lengths within the budget.
  const int batch = draw.chance(0.03) ? 0 : draw.between(1, 6);
  const std::int64_t tokens = std::max<std::int64_t>(8, kWork / (std::int64_t{s.num_q_heads} * s.head_dim));
  const int most = static_cast<int>(std::min<std::int64_t>(tokens / std::max(batch, 1), 2000));
  s.context_lens.clear();
  for (int i = 0; i < batch; ++i) s.context_lens.push_back(draw_context(draw, s.block_size, most));
  s.layout = draw.chance(0.25) ? LayoutKind::nhd : LayoutKind::hnd;
  s.scatter = draw.chance(0.85);
  s.alias = draw.chance(0.3);
  s.pages_near_top = draw.chance(0.2);
  s.spare_blocks = draw.between(0, 8);
  s.table_slack = draw.between(0, 3);
  // Logits: ordinary, all equal (q = 0), or near +-1e5 (the adversarial set's multiplier).
  const int logits = draw.below(10);
  if (logits == 0) s.query_multiplier = 0.0f;
  if (logits == 1) {
    s.query_multiplier = 6e5f / std::sqrt(static_cast<float>(s.head_dim));
    if (s.dtype == DType::f16) s.query_multiplier = std::min(s.query_multiplier, 6e4f);
  }
  // A NaN in a valid K of one sequence (not with aliasing: a fork may hold no page alone).
  if (!s.alias && draw.chance(0.1)) {
    std::vector<int> nonempty;
    for (int i = 0; i < batch; ++i)
      if (s.context_lens[static_cast<std::size_t>(i)] > 0) nonempty.push_back(i);
    if (!nonempty.empty()) s.nan_sequence = nonempty[static_cast<std::size_t>(draw.below(static_cast<int>(nonempty.size())))];
  }
  draw_knobs(draw, c, entry);
  c.order_seed = 1 + mix64(seed) % 1000000;
  return c;
}

Config draw_invalid(int step, std::uint64_t seed) {
  Config c = draw_valid(step, seed);
  Draw draw(seed ^ 0x5bd1e9955bd1e995ull);
  const KernelEntry& entry = kernel(step, Backend::emulator);
  WorkloadSpec& s = c.spec;
  if (s.context_lens.empty() || std::all_of(s.context_lens.begin(), s.context_lens.end(), [](int len) { return len == 0; }))
    s.context_lens.push_back(draw.between(1, 40));  // faults in tables and views need a token to read
  const int batch = static_cast<int>(s.context_lens.size());
  const int q = s.num_q_heads, kv = s.num_kv_heads;
  std::vector<std::string> faults;
  auto add = [&](auto&&... parts) { faults.push_back(cat(parts...)); };
  // The problem's shapes (validate(), every step's plan).
  add("num_q_heads:", draw.pick({0, -q}));
  if (kv > 1) add("num_q_heads:", q + draw.between(1, kv - 1));
  add("num_kv_heads:", draw.pick({0, -1}));
  for (int bad = 2; bad < q; ++bad)
    if (q % bad != 0) {
      add("num_kv_heads:", bad);
      break;
    }
  add("head_dim:", draw.pick({72, 59, 100, 32, 48, 512, 1, 65, 127}));
  add("head_dim:", draw.pick({0, -64}));
  add("block_size:", draw.pick({0, -16}));
  add("num_seqs:", -1);
  add("max_blocks_per_seq:", -1);
  add("max_context_len:", draw.pick({-1, 1 << 30}));
  add("num_blocks:", draw.pick<long long>({-1, (1ll << 31) + 1}));
  add("scale:", draw.pick<std::string>({"nan", "inf", "-inf", "0", "-0.125"}));
  add("layout.dim_stride:", 2);
  add("layout.token_stride:", s.head_dim - 1);
  add("layout.head_stride:", s.head_dim - 1);
  if (kv > 1 && s.block_size > 1)  // heads and slots overlap: the outer axis's stride cut to one token's
    add(s.layout == LayoutKind::hnd ? "layout.head_stride:" : "layout.token_stride:", s.head_dim);
  add("layout.block_stride:", draw.pick<std::string>({"span-1", "2^31"}));
  if (step >= 5) add("layout.block_stride:", "span+1");  // not whole 16-byte vectors
  if (!entry.runs_f32) add("dtype:f32");
  // One token less or more than the lengths' sum (never 0, which means "unknown").
  const int total = std::accumulate(s.context_lens.begin(), s.context_lens.end(), 0);
  add("total_context_len:", total > 1 ? draw.pick({1, -1}) : 1);
  // The data checked mode reads before a launch (validate_tables).
  const int seq = draw.below(batch);
  add("context_lens[", seq, "]:", draw.pick<long long>({-1, -3, 1 << 30, INT32_MAX, INT32_MIN}));
  std::vector<int> holders;
  for (int i = 0; i < batch; ++i)
    if (s.context_lens[static_cast<std::size_t>(i)] > 0) holders.push_back(i);
  const int holder = holders[static_cast<std::size_t>(draw.below(static_cast<int>(holders.size())))];
  const int used = static_cast<int>(pages_for(s.context_lens[static_cast<std::size_t>(holder)], s.block_size));
  add("block_tables[", holder, "][", draw.below(used), "]:", draw.pick<std::string>({"-1", "num_blocks", "2147483647", "-2147483648"}));
  // The view (validate_view) and the plan it is launched with.
  add("null:", draw.pick<std::string>({"query", "out", "key_cache", "value_cache", "block_tables", "context_lens"}));
  add("out_aliases:", draw.pick<std::string>({"query", "key_cache", "value_cache"}));
  if (entry.knobs & knob_splits) add("workspace_bytes:-1");
  add("view.problem:scale");
  // Knobs: out of range, or set on a step that does not have them.
  const auto has = [&](Knob bit) { return (entry.knobs & bit) != 0; };
  add("options.threads_per_block:", has(knob_threads) ? draw.pick({-32, 16, 33, 48, 1056, 2048}) : 64);
  add("options.num_splits:", has(knob_splits) ? draw.pick({-1, 65536}) : 2);
  add("options.partition_tokens:", has(knob_partition) ? -1 : 100);
  add("options.tile_tokens:", has(knob_tile) ? draw.pick({-1, 3, 8}) : 1);
  add("options.variant:", has(knob_variant) ? draw.pick({-1, entry.variants + 1}) : 1);
  c.fault = faults[static_cast<std::size_t>(draw.below(static_cast<int>(faults.size())))];
  // A knob fault replaces the knobs (two wrong ones would be two faults).
  if (c.fault.rfind("options.", 0) == 0) c.options = {};
  return c;
}

Config draw_case(const std::vector<int>& steps, std::uint64_t seed, std::uint64_t index, int invalid_every) {
  const int step = steps[static_cast<std::size_t>(index % steps.size())];
  const std::uint64_t own = seed + index;
  const bool invalid = invalid_every > 0 && (index / steps.size()) % static_cast<std::uint64_t>(invalid_every) == 0;
  return invalid ? draw_invalid(step, own) : draw_valid(step, own);
}

// ----- running ------------------------------------------------------------------------------------
namespace {

/// The valid case: the checks of tests/step_checks.h. The output against the oracle (the
/// tolerance per storage type, NaN only where the oracle has it, at most 3x the plain loop's
/// error: require_matches_oracle); then a twin with zeros where the poison was, in a shuffled
/// thread order, must give the same bits (check_poison_is_invisible and the determinism of
/// check_knobs_and_determinism in one run). With a NaN planted in a valid slot the twin keeps
/// the poison and checks the order alone.
Outcome run_valid(const Config& c, const KernelEntry& entry) {
  Workload w;
  try {
    w = make_workload(c.spec);
  } catch (const Error& error) {
    return failed(cat("the generator drew a workload make_workload refuses: ", error.what()));
  }
  RunOutput first, twin;
  try {
    const emu::ScopedThreadOrder fixed(emu::ThreadOrder{});
    first = run_emulator(entry, w, c.options);
  } catch (const ArgumentError& refused) {
    if (const char* limit = documented_limit(refused.what())) return {Outcome::Kind::limited, cat(entry.name, ": ", limit), 0};
    return failed(cat("refused a valid configuration: ", refused.what()));
  } catch (const std::exception& fault) {
    return failed(cat("fault: ", fault.what()));
  }
  const OracleRows oracle = oracle_rows(w);
  const CompareResult result = check_against_oracle(w, oracle, first.out, entry.weights_in_storage_type);
  if (!result.ok) {
    // Say whether the plainest float loop meets the tolerance on this input: when it does not
    // either, the case asks more than the storage type's precision gives.
    std::vector<std::byte> plain(w.out_bytes());
    for (std::size_t i = 0; i < oracle.plain.size(); ++i) store_from_float(plain.data(), w.problem.dtype, i, oracle.plain[i]);
    const CompareResult loop = compare_to_reference(w.problem, oracle.exact, plain.data(), Tolerance::for_dtype(w.problem.dtype));
    return failed(cat("against the oracle: ", result.summary(), "; the plain float loop: ", loop.summary()));
  }
  WorkloadSpec twin_spec = c.spec;
  twin_spec.poison = c.spec.nan_sequence >= 0;
  const emu::ThreadOrder order{true, c.order_seed};
  try {
    const Workload zeros = make_workload(twin_spec);
    const emu::ScopedThreadOrder shuffled(order);
    twin = run_emulator(entry, zeros, c.options);
  } catch (const std::exception& fault) {
    return failed(cat("fault in the twin run (", emu::describe(order), "): ", fault.what()));
  }
  const CompareResult same = compare_bitwise(w.problem, first.out.data(), twin.out.data());
  if (!same.ok)
    return failed(cat(twin_spec.poison ? "the same workload" : "zeros where the poison was", " in the ",
                      emu::describe(order), " against the first run: ", same.summary()));
  return {};
}

/// What an invalid case must give: an ArgumentError whose message names the kernel and the
/// argument (`step07_split_kv: context_lens[2]: ...`) and holds \p also, raised by the plan or,
/// for what the plan cannot see (the data, the pointers), by the launch before anything runs.
struct Expected {
  std::string argument;
  std::string also;
  bool at_launch = false;
};

/// The fault's argument and value (`context_lens[2]:-3`: "context_lens[2]" and "-3").
std::pair<std::string, std::string> split_fault(const std::string& fault) {
  const std::size_t colon = fault.rfind(':');
  if (colon == std::string::npos) return {fault, ""};
  return {fault.substr(0, colon), fault.substr(colon + 1)};
}

Outcome run_invalid(const Config& c, const KernelEntry& entry) {
  const auto [argument, value] = split_fault(c.fault);
  WorkloadSpec spec = c.spec;
  const auto number = [&] { return parse_integer("bad", value); };
  // Faults of the workload itself (a head dim the step is not built for, a storage type it does not run).
  if (argument == "head_dim" && number() > 0) spec.head_dim = static_cast<int>(number());
  if (argument == "dtype") spec.dtype = parse_dtype(value, "bad");
  Workload w;
  try {
    w = make_workload(spec);
  } catch (const Error& error) {
    return failed(cat("the generator drew a workload make_workload refuses: ", error.what()));
  }
  DecodeProblem p = w.problem;
  KernelOptions options = c.options;
  Expected expected{argument, "", false};
  const std::string head_dims = "64, 80, 96, 112, 128, 256";
  if (argument == "num_q_heads" || argument == "num_kv_heads") {
    (argument == "num_q_heads" ? p.num_q_heads : p.num_kv_heads) = static_cast<int>(number());
    if (number() > 0) {  // a count that does not divide: the message names both
      expected.argument = "num_q_heads % num_kv_heads";
      expected.also = cat("num_q_heads=", p.num_q_heads, ", num_kv_heads=", p.num_kv_heads);
    }
  } else if (argument == "head_dim") {
    if (number() > 0) expected.also = cat("one of the head dims this kernel is built for: ", head_dims);
    else p.head_dim = static_cast<int>(number());
  } else if (argument == "dtype") {
    expected.also = "bf16 or f16";
  } else if (argument == "block_size") p.block_size = static_cast<int>(number());
  else if (argument == "num_seqs") p.num_seqs = static_cast<int>(number());
  else if (argument == "max_blocks_per_seq") p.max_blocks_per_seq = static_cast<int>(number());
  else if (argument == "max_context_len") p.max_context_len = static_cast<int>(number());
  else if (argument == "num_blocks") {
    p.num_blocks = number();
    if (p.num_blocks > 0) expected.also = "2^31";
  } else if (argument == "scale") p.scale = std::strtof(value.c_str(), nullptr);
  else if (argument.rfind("layout.", 0) == 0) {
    CacheLayout& l = p.layout;
    const std::int64_t span = l.offset(0, p.num_kv_heads - 1, p.block_size - 1, p.head_dim - 1) + 1;
    if (argument == "layout.dim_stride") l.dim_stride = number();
    if (argument == "layout.token_stride") l.token_stride = number();
    if (argument == "layout.head_stride") l.head_stride = number();
    if ((argument == "layout.token_stride" || argument == "layout.head_stride") && number() >= p.head_dim)
      expected.argument = "layout.head_stride/token_stride";
    if (argument == "layout.block_stride") {
      l.block_stride = value == "span-1" ? span - 1 : value == "span+1" ? l.block_stride + 1 : std::int64_t{1} << 31;
      if (value == "span+1") expected.argument = "layout strides";
      if (value == "2^31") expected.also = "2^31";
    }
  } else if (argument == "total_context_len") {
    p.total_context_len += number();
    // Beyond what the lengths could sum to, the plan's validate() sees it; else checked mode.
    expected.at_launch = p.total_context_len >= 0 && p.total_context_len <= std::int64_t{p.num_seqs} * p.max_context_len;
  } else if (argument.rfind("options.", 0) == 0) {
    const int knob = static_cast<int>(number());
    if (argument == "options.threads_per_block") options.threads_per_block = knob;
    if (argument == "options.num_splits") options.num_splits = knob;
    if (argument == "options.partition_tokens") options.partition_tokens = knob;
    if (argument == "options.tile_tokens") options.tile_tokens = knob;
    if (argument == "options.variant") options.variant = knob;
    const Knob bit = argument == "options.threads_per_block" ? knob_threads
                     : argument == "options.num_splits"      ? knob_splits
                     : argument == "options.partition_tokens" ? knob_partition
                     : argument == "options.tile_tokens"     ? knob_tile
                                                             : knob_variant;
    if ((entry.knobs & bit) == 0) expected.also = "no such knob";
  } else {
    expected.at_launch = true;  // the data and the view: the launch's checks
  }

  const auto check_refusal = [&](const ArgumentError& error, const char* where) -> Outcome {
    const std::string message = error.what();
    const std::string named = cat(entry.name, ": ", expected.argument);
    if (message.find(named) == std::string::npos) {
      // The valid configuration the fault was made in is itself beyond a documented limit.
      if (const char* limit = documented_limit(message)) return {Outcome::Kind::limited, cat(entry.name, ": ", limit), 0};
      return failed(cat("the ", where, " refused, but the message does not name '", named, "': ", message));
    }
    if (!expected.also.empty() && message.find(expected.also) == std::string::npos)
      return failed(cat("the ", where, " refused, but the message does not say '", expected.also, "': ", message));
    if (expected.at_launch != (std::string_view(where) == "launch"))
      return failed(cat("refused by the ", where, ", expected by the ", expected.at_launch ? "launch" : "plan", ": ", message));
    return {};
  };
  LaunchPlan plan;
  try {
    plan = entry.plan(p, options, DeviceLimits::pretend_h200());
  } catch (const ArgumentError& error) {
    return check_refusal(error, "plan");
  } catch (const std::exception& error) {
    return failed(cat("the plan threw something other than ArgumentError: ", error.what()));
  }
  if (!expected.at_launch) return failed(cat("the plan accepted it: ", plan.description));

  // The launch's faults, on copies of the tensors; the output starts as poison and must stay so.
  std::vector<std::int32_t> tables = w.block_tables, lens = w.context_lens;
  std::vector<std::byte> out(w.out_bytes(), std::byte{0xff}), workspace(plan.workspace_bytes, std::byte{0xff});
  DecodeView view = w.host_view(out.data(), workspace.data(), workspace.size());
  view.problem = p;
  view.block_tables = tables.data();
  view.context_lens = lens.data();
  const auto to_entry = [&](const std::string& text) -> std::int32_t {
    if (text == "num_blocks") return static_cast<std::int32_t>(p.num_blocks);
    return static_cast<std::int32_t>(parse_integer("bad", text));
  };
  int seq = 0, entry_index = 0;
  if (std::sscanf(argument.c_str(), "context_lens[%d]", &seq) == 1) {
    lens[static_cast<std::size_t>(seq)] = to_entry(value);
  } else if (std::sscanf(argument.c_str(), "block_tables[%d][%d]", &seq, &entry_index) == 2) {
    tables[static_cast<std::size_t>(seq) * static_cast<std::size_t>(p.max_blocks_per_seq) + static_cast<std::size_t>(entry_index)] =
        to_entry(value);
  } else if (argument == "null") {
    expected.argument = value;
    if (value == "query") view.query = nullptr;
    if (value == "out") view.out = nullptr;
    if (value == "key_cache") view.key_cache = nullptr;
    if (value == "value_cache") view.value_cache = nullptr;
    if (value == "block_tables") view.block_tables = nullptr;
    if (value == "context_lens") view.context_lens = nullptr;
  } else if (argument == "out_aliases") {
    // The output over an input: the query (of its size), or a cache at least as large (were the
    // check to miss it, the kernel would write inside the cache, not past it).
    const std::string input = value != "query" && w.key_cache.size() >= out.size() ? value : "query";
    expected.argument = "out";
    expected.also = cat("memory disjoint from ", input);
    view.out = const_cast<void*>(input == "query" ? view.query : input == "key_cache" ? view.key_cache : view.value_cache);
  } else if (argument == "workspace_bytes") {
    if (plan.workspace_bytes == 0) return failed("a workspace fault on a plan without a workspace (a generator bug)");
    view.workspace_bytes = plan.workspace_bytes - 1;
  } else if (argument == "view.problem") {
    view.problem.scale *= 2;
    expected.also = "the problem the plan was made for";
  }
  try {
    entry.launch(view, plan, nullptr);
  } catch (const ArgumentError& error) {
    if (Outcome refused = check_refusal(error, "launch"); refused.kind != Outcome::Kind::passed) return refused;
    if (view.out == out.data() &&
        std::any_of(out.begin(), out.end(), [](std::byte b) { return b != std::byte{0xff}; }))
      return failed(cat("refused at launch, but the output was written: ", error.what()));
    return {};
  } catch (const std::exception& error) {
    return failed(cat("the launch threw something other than ArgumentError: ", error.what()));
  }
  return failed("the launch ran");
}

}  // namespace

Outcome run_config(const Config& config) { return run_config(config, kernel(config.step, Backend::emulator)); }

Outcome run_config(const Config& config, const KernelEntry& entry) {
  const auto start = std::chrono::steady_clock::now();
  Outcome outcome = config.fault.empty() ? run_valid(config, entry) : run_invalid(config, entry);
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

std::string failure_line(const Config& config, const Outcome& outcome) {
  return one_line(cat("FAIL step ", config.step < 10 ? "0" : "", config.step, config.fault.empty() ? " valid" : " invalid",
                      " (", outcome.detail, ") | reproduce: pagedattn_fuzz --config '", format_config(config), "'"));
}

void Summary::add(const Config& config, const Outcome& outcome) {
  StepTally& tally = steps[config.step];
  (config.fault.empty() ? tally.valid : tally.invalid) += 1;
  tally.seconds += outcome.seconds;
  seconds += outcome.seconds;
  ++cases;
  if (!config.fault.empty()) ++faults[split_fault(config.fault).first.substr(0, split_fault(config.fault).first.find('['))];
  if (outcome.kind == Outcome::Kind::limited) {
    ++tally.limited;
    ++limits[outcome.detail];
  }
  if (outcome.kind == Outcome::Kind::failed) {
    ++tally.failed;
    failures.push_back(failure_line(config, outcome));
  }
}

}  // namespace pa::fuzz
