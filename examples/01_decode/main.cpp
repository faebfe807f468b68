// Example 01: the entry point (api/decode.h) as a caller outside the ladder uses it.
//
// A serving engine keeps a paged KV cache and, at every decode step, appends one token to each
// sequence and runs attention for the batch. This program does that with the project's cache
// (pa::PagedKVCache, common/paged_cache.h):
//
//   1. a cache of 64 pages, four sequences prefilled with 37, 1, 16 and 100 tokens
//   2. one plan for the batch's shape (pa::plan_decode): the rung and its knobs
//   3. three decode steps with that plan (pa::decode), each after one more token per sequence
//   4. a sequence finishes: the batch's shape changes, the old plan refuses it, a new plan
//   5. two more decode steps with the new plan
//
// Every output is checked against the oracle (reference/, in double) with the harness's rule
// (docs/design/CORRECTNESS.md, rule 5). It runs in the emulator and, where a GPU is present, on
// the GPU too (--no-gpu skips it). Exit 0 when every output matched, 1 when one did not, 2 for
// a bad flag, 4 for an error.
//
//   build/current/examples/example01_decode [--dtype bf16|f16|f32] [--no-gpu]

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/decode.h"
#include "common/cuda/runtime.h"
#include "common/error.h"
#include "common/paged_cache.h"
#include "common/report.h"
#include "harness/harness.h"

namespace {

constexpr const char* kName = "example01_decode";
constexpr int kNumQHeads = 8;         // query heads: a group of 4 over each KV head
constexpr int kNumKvHeads = 2;
constexpr int kHeadDim = 128;
constexpr int kBlockSize = 16;        // tokens a page
constexpr int kMaxBlocksPerSeq = 8;   // a block-table row: 128 tokens at most
constexpr std::int64_t kNumBlocks = 64;
const std::vector<int> kPromptLens = {37, 1, 16, 100};
constexpr int kStepsFirstBatch = 3;
constexpr int kStepsSecondBatch = 2;
constexpr int kFinishing = 1;         // the sequence that finishes after the first steps

struct Settings {
  pa::DType dtype = pa::DType::bf16;
  bool run_gpu = true;
};

const char* kUsage =
    "usage: example01_decode [--dtype bf16|f16|f32] [--no-gpu]\n"
    "  --dtype T   storage of the cache, q and out (default bf16; f32 runs on step 09)\n"
    "  --no-gpu    the emulator only, even where a GPU is present\n"
    "  --help      this text\n";

Settings parse(int argc, char** argv) {
  Settings settings;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (flag == "--no-gpu") {
      settings.run_gpu = false;
    } else if (flag == "--dtype") {
      if (i + 1 >= argc) pa::throw_argument(kName, flag, "a value after it", "nothing");
      settings.dtype = pa::parse_dtype(argv[++i], flag);
    } else {
      pa::throw_argument(kName, "flag", "one of the flags --help lists", pa::cat('\'', flag, '\''));
    }
  }
  return settings;
}

/// Seeded rows in [-1, 1): the K and V of each new token, and each step's queries.
class Rows {
 public:
  explicit Rows(std::uint64_t seed) : state_(pa::mix64(seed)) {}
  std::vector<float> next(std::int64_t elems) {
    std::vector<float> row(static_cast<std::size_t>(elems));
    for (float& value : row) value = static_cast<float>(pa::mix64(state_ += 0x9e3779b97f4a7c15ull) >> 40) * 0x1p-23f - 1.0f;
    return row;
  }

 private:
  std::uint64_t state_;
};

/// The problem of a batch of \p num_seqs sequences of \p cache. It holds shapes, not lengths:
/// max_context_len is what a block-table row holds and total_context_len is 0 (unknown), so it
/// stays the same while the sequences grow and one plan serves every step until the batch
/// itself changes.
pa::DecodeProblem batch_problem(const pa::PagedKVCache& cache, int num_seqs, pa::DType dtype) {
  const pa::CacheConfig& c = cache.config();
  pa::DecodeProblem problem = pa::make_problem(num_seqs, kNumQHeads, c.num_kv_heads, c.head_dim, c.block_size,
                                               c.max_blocks_per_seq, c.max_blocks_per_seq * c.block_size,
                                               c.num_blocks, dtype);
  problem.layout = c.layout;
  return problem;
}

/// One decode step's host tensors besides the cache's pools: what a DecodeView points at.
struct StepTensors {
  std::vector<std::byte> query;            // [num_seqs][num_q_heads][head_dim], problem.dtype
  std::vector<std::int32_t> block_tables;  // [num_seqs][max_blocks_per_seq], -1 past a row's pages
  std::vector<std::int32_t> context_lens;  // [num_seqs]
  std::string lengths;                     // "38, 2, 17, 101"
};

/// Appends one token to each of \p seqs and gathers the step's tensors.
StepTensors next_step(pa::PagedKVCache& cache, const std::vector<int>& seqs, const pa::DecodeProblem& problem,
                      Rows& rows) {
  StepTensors step;
  for (int seq : seqs) cache.append_token(seq, rows.next(cache.row_elems()), rows.next(cache.row_elems()));
  const std::vector<float> query = rows.next(problem.query_elems());
  step.query.resize(query.size() * pa::dtype_size(problem.dtype));
  for (std::size_t i = 0; i < query.size(); ++i) pa::store_from_float(step.query.data(), problem.dtype, i, query[i]);
  for (int seq : seqs) {
    const std::vector<pa::PageId>& table = cache.block_table(seq);
    for (int entry = 0; entry < problem.max_blocks_per_seq; ++entry)
      step.block_tables.push_back(entry < static_cast<int>(table.size()) ? table[static_cast<std::size_t>(entry)] : -1);
    step.context_lens.push_back(static_cast<std::int32_t>(cache.context_len(seq)));
    step.lengths += pa::cat(step.lengths.empty() ? "" : ", ", cache.context_len(seq));
  }
  return step;
}

/// A view over host memory: the cache's pools and \p step's tensors.
pa::DecodeView host_view(const pa::DecodeProblem& problem, const pa::PagedKVCache& cache, const StepTensors& step,
                         std::vector<std::byte>& out, std::vector<std::byte>& workspace) {
  pa::DecodeView view;
  view.problem = problem;
  view.query = step.query.data();
  view.key_cache = cache.key_pool().data();
  view.value_cache = cache.value_pool().data();
  view.block_tables = step.block_tables.data();
  view.context_lens = step.context_lens.data();
  view.out = out.data();
  view.workspace = workspace.data();
  view.workspace_bytes = workspace.size();
  return view;
}

/// The same decode on the GPU: its own plan (the device's limits) and the tensors in device
/// memory, allocated once for the batch's shape.
class OnGpu {
 public:
  OnGpu(const pa::DecodeProblem& problem, const pa::PagedKVCache& cache)
      : plan_(pa::plan_decode(problem, pa::Backend::cuda)),
        query_(problem.query_elems() * pa::dtype_size(problem.dtype), "query"),
        key_cache_(cache.key_pool().size(), "key_cache"),
        value_cache_(cache.value_pool().size(), "value_cache"),
        block_tables_(std::size_t(problem.num_seqs) * problem.max_blocks_per_seq * sizeof(std::int32_t), "block_tables"),
        context_lens_(std::size_t(problem.num_seqs) * sizeof(std::int32_t), "context_lens"),
        out_(query_.size(), "out"),
        workspace_(plan_.workspace_bytes(), "workspace") {}

  const pa::DecodePlan& plan() const { return plan_; }

  /// Uploads the step's tensors, decodes on the default stream and downloads the output.
  std::vector<std::byte> decode(const pa::PagedKVCache& cache, const StepTensors& step) {
    key_cache_.upload(cache.key_pool().data(), key_cache_.size());
    value_cache_.upload(cache.value_pool().data(), value_cache_.size());
    query_.upload(step.query.data(), query_.size());
    block_tables_.upload(step.block_tables.data(), block_tables_.size());
    context_lens_.upload(step.context_lens.data(), context_lens_.size());
    // [gpu_decode]
    pa::DecodeView view;  // device memory, the plan's problem
    view.problem = plan_.problem();
    view.query = query_.data();
    view.key_cache = key_cache_.data();
    view.value_cache = value_cache_.data();
    view.block_tables = static_cast<const std::int32_t*>(block_tables_.data());
    view.context_lens = static_cast<const std::int32_t*>(context_lens_.data());
    view.out = out_.data();
    view.workspace = workspace_.data();
    view.workspace_bytes = workspace_.size();
    pa::decode(plan_, view, /*stream=*/nullptr);  // asynchronous: returns before the GPU is done
    // Wait for the device (a decode on a stream of your own: wait for that stream), which raises
    // what the checked mode found; then the copy back.
    pa::gpu::synchronize("pa::decode");
    std::vector<std::byte> out(out_.size());
    out_.download(out.data(), out.size());
    // [gpu_decode]
    return out;
  }

 private:
  pa::DecodePlan plan_;
  pa::gpu::Buffer query_, key_cache_, value_cache_, block_tables_, context_lens_, out_, workspace_;
};

/// Prints a plan: the rung and why, and its workspace.
void print_plan(const std::string& title, const pa::DecodePlan& plan) {
  std::cout << title << '\n'
            << pa::wrapped(plan.description(), 100, "  ", "    ")
            << "  workspace_bytes(): " << plan.workspace_bytes() << "\n\n";
}

/// The decode steps of one plan, one table.
class Steps {
 public:
  /// Steps of \p plan (the emulator's) and of \p gpu's plan where \p gpu is not null.
  Steps(const pa::DecodePlan& plan, OnGpu* gpu) : plan_(plan), gpu_(gpu), table_(columns(gpu != nullptr)) {}

  /// Decodes \p step with the plan and checks it against the oracle; false on a mismatch.
  bool run(int number, const pa::PagedKVCache& cache, const StepTensors& step) {
    const pa::DecodeProblem& problem = plan_.problem();
    std::vector<std::byte> out(step.query.size()), workspace(plan_.workspace_bytes());
    // [decode]
    const pa::DecodeView view = host_view(problem, cache, step, out, workspace);
    pa::decode(plan_, view);  // the emulator: returns when out is written
    // [decode]
    const pa::OracleRows oracle = pa::oracle_rows(view);
    std::vector<std::string> row = {std::to_string(number), step.lengths};
    bool ok = check(problem, oracle, out, plan_, row);
    if (gpu_) ok = check(problem, oracle, gpu_->decode(cache, step), gpu_->plan(), row) && ok;
    table_.add_row(row);
    return ok;
  }

  /// The table, and the first failure of each check that failed.
  void print() const {
    table_.print(std::cout);
    for (const std::string& failure : failures_) std::cout << pa::wrapped(failure, 100, "  ", "    ");
    std::cout << '\n';
  }

 private:
  static std::vector<std::string> columns(bool gpu) {
    std::vector<std::string> names = {"decode", "context lengths", "emulator: max |d|", "vs oracle"};
    if (gpu) names.insert(names.end(), {"GPU: max |d|", "vs oracle"});
    return names;
  }

  bool check(const pa::DecodeProblem& problem, const pa::OracleRows& oracle, const std::vector<std::byte>& out,
             const pa::DecodePlan& plan, std::vector<std::string>& row) {
    const pa::CompareResult result = pa::check_against_oracle(problem, oracle, out, plan.kernel().weights_in_storage_type);
    row.push_back(pa::format_sci(result.max_abs_error));
    row.push_back(result.ok ? "ok" : "FAIL");
    if (!result.ok) failures_.push_back(pa::cat(pa::backend_name(plan.backend()), ", decode ", row[0], ": ", result.first_failure));
    return result.ok;
  }

  const pa::DecodePlan& plan_;
  OnGpu* gpu_;
  pa::Table table_;
  std::vector<std::string> failures_;
};

/// The GPU's plan and tensors for \p problem where \p gpu_here, else nothing; prints the plan.
std::optional<OnGpu> on_gpu(bool gpu_here, const pa::DecodeProblem& problem, const pa::PagedKVCache& cache) {
  std::optional<OnGpu> gpu;
  if (gpu_here) print_plan("on the GPU: pa::plan_decode(problem, pa::Backend::cuda)", gpu.emplace(problem, cache).plan());
  return gpu;
}

int run(const Settings& settings) {
  pa::CacheConfig config;
  config.num_kv_heads = kNumKvHeads;
  config.block_size = kBlockSize;
  config.head_dim = kHeadDim;
  config.num_blocks = kNumBlocks;
  config.dtype = settings.dtype;
  config.page_order = pa::PageOrder::shuffled;  // scattered pages, as in a busy engine
  config.seed = 1;
  config.max_blocks_per_seq = kMaxBlocksPerSeq;
  pa::PagedKVCache cache(config);
  Rows rows(1);
  std::vector<int> seqs;
  std::string prompts;  // "37, 1, 16, 100"
  for (int prompt : kPromptLens) {
    prompts += pa::cat(prompts.empty() ? "" : ", ", prompt);
    seqs.push_back(cache.add_sequence());
    for (int token = 0; token < prompt; ++token)
      cache.append_token(seqs.back(), rows.next(cache.row_elems()), rows.next(cache.row_elems()));
  }
  const bool gpu_here = settings.run_gpu && pa::gpu::available();
  std::cout << kName << ": the entry point (api/decode.h) on a paged KV cache\n"
            << "  cache: " << kNumBlocks << " pages of " << kBlockSize << " tokens, " << kNumKvHeads << " KV heads, head dim "
            << kHeadDim << ", " << pa::dtype_name(settings.dtype) << "; a block-table row holds " << kMaxBlocksPerSeq
            << " pages\n"
            << "  batch: " << seqs.size() << " sequences of " << kNumQHeads << " query heads; prompts of " << prompts
            << " tokens\n"
            << "  GPU: " << (gpu_here ? pa::gpu::device_info().name
                                      : pa::cat("skipped: ", settings.run_gpu ? pa::gpu::unavailable_reason() : "--no-gpu"))
            << "\n\n";

  // [plan]
  const pa::DecodeProblem problem = batch_problem(cache, static_cast<int>(seqs.size()), settings.dtype);
  const pa::DecodePlan plan = pa::plan_decode(problem, pa::Backend::emulator);
  // [plan]
  print_plan(pa::cat("plan 1, for ", problem.num_seqs, " sequences: pa::plan_decode(problem, pa::Backend::emulator)"), plan);
  std::optional<OnGpu> gpu = on_gpu(gpu_here, problem, cache);
  bool ok = true;
  int number = 0;
  Steps first(plan, gpu ? &*gpu : nullptr);
  for (int i = 0; i < kStepsFirstBatch; ++i) ok = first.run(++number, cache, next_step(cache, seqs, problem, rows)) && ok;
  first.print();

  // [replan]
  cache.free_sequence(seqs[kFinishing]);  // its request is done: its pages go back to the pool
  seqs.erase(seqs.begin() + kFinishing);
  const pa::DecodeProblem smaller = batch_problem(cache, static_cast<int>(seqs.size()), settings.dtype);
  const pa::DecodePlan replanned = pa::plan_decode(smaller, pa::Backend::emulator);
  // [replan]
  // The old plan refuses the new batch, naming the argument.
  const StepTensors step = next_step(cache, seqs, smaller, rows);
  std::vector<std::byte> out(step.query.size()), workspace(plan.workspace_bytes());
  std::string refusal = "FAIL: plan 1 ran the smaller batch";
  try {
    pa::decode(plan, host_view(smaller, cache, step, out, workspace));
    ok = false;
  } catch (const pa::ArgumentError& error) {
    refusal = error.what();
  }
  std::cout << "sequence " << kFinishing << " finished: the batch of " << seqs.size()
            << " sequences is another problem. Plan 1 refuses it:\n"
            << pa::wrapped(refusal, 100, "  ", "    ") << '\n';
  print_plan(pa::cat("plan 2, for ", smaller.num_seqs, " sequences: pa::plan_decode(smaller, pa::Backend::emulator)"), replanned);
  gpu = on_gpu(gpu_here, smaller, cache);
  Steps second(replanned, gpu ? &*gpu : nullptr);
  ok = second.run(++number, cache, step) && ok;
  for (int i = 1; i < kStepsSecondBatch; ++i) ok = second.run(++number, cache, next_step(cache, seqs, smaller, rows)) && ok;
  second.print();
  std::cout << (ok ? "every output matched the oracle" : "FAIL: an output did not match the oracle") << '\n';
  return ok ? pa::exit_ok : pa::exit_wrong;
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  try {
    settings = parse(argc, argv);
  } catch (const pa::Error& bad) {
    std::fprintf(stderr, "%s: %s\n(see --help)\n", argv[0], bad.what());
    return pa::exit_bad_argument;
  }
  try {
    return run(settings);
  } catch (const pa::Error& error) {
    std::fprintf(stderr, "%s: %s\n", argv[0], error.what());
    return pa::exit_fault;
  }
}
