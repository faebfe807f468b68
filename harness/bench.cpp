#include "harness/bench.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "harness/harness.h"
#include "common/report.h"
#include "kernels/registry.h"

namespace pa::bench {
namespace {

double g_roof_gbps = 0;  // measured at start-up (0 without a GPU)
int g_named_rounds = 0;  // register_named_rounds' rounds (0: none registered), stamped in the context

bool gpu_here() { return cuda_built() && gpu::available(); }

/// The context-length sweep: gqa-batch's head layout (32/8, dim 128, bf16, page 16) with 16
/// sequences of one length each, named "sweep-<context>".
const std::vector<int> kSweepContexts = {512, 1024, 2048, 4096, 8192, 16384, 32768};

/// The shape sweeps of docs/design/BENCHMARKS.md, on gqa-batch's sequences (64 of 8192 tokens
/// over 8 KV heads, bf16, page 16):
///  - "group-<g>": 8·g query heads (group size g), head dim 128;
///  - "head-dim-<d>": 32 query heads (group size 4), head dim d.
/// g = 4 and d = 128 are gqa-batch itself: they are not timed again, and scripts/results_lib.py
/// reads those points from each step's gqa-batch row. And on gqa-batch's heads:
///  - "single-<n>": one sequence of n tokens, 1k to 1M (4 MB to 4.3 GB of K/V).
const std::vector<int> kSweepGroups = {1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 32};
const std::vector<int> kSweepHeadDims = {64, 80, 96, 112, 128, 256};
const std::vector<int> kSweepSingleContexts = {1 << 10, 1 << 11, 1 << 12, 1 << 13, 1 << 14, 1 << 15,
                                               1 << 16, 1 << 17, 1 << 18, 1 << 19, 1 << 20};
/// The shape sweeps are recorded from step 08 on: the first kernel that reads each KV head's K
/// and V once for its whole query-head group, so its speed should not depend on the group size.
/// Earlier steps read them once per query head, and their rows would only repeat that.
constexpr int kFirstShapeSweepStep = 8;

/// The number after \p prefix in \p name (12 for "group-12" and "group-"), or 0 when the rest
/// of \p name is not a number of at most seven digits.
int number_after(const std::string& name, std::string_view prefix) {
  if (name.size() <= prefix.size() || name.size() > prefix.size() + 7 || name.compare(0, prefix.size(), prefix) != 0)
    return 0;
  const auto digits = std::string_view(name).substr(prefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return 0;
  return std::stoi(std::string(digits));
}

/// gqa-batch under another name (each variant below changes one thing of it).
WorkloadSpec gqa_batch_as(const std::string& name) {
  WorkloadSpec spec = named_spec("gqa-batch");
  spec.name = name;
  return spec;
}

WorkloadSpec spec_of(const std::string& name) {
  if (name == "gqa-batch-nhd") {  // the layout comparison of step 05's page: token-major pages
    WorkloadSpec spec = gqa_batch_as(name);
    spec.layout = LayoutKind::nhd;
    return spec;
  }
  if (const int context = number_after(name, "sweep-")) {
    WorkloadSpec spec = gqa_batch_as(name);
    spec.context_lens.assign(16, context);
    return spec;
  }
  if (const int group = number_after(name, "group-")) {
    WorkloadSpec spec = gqa_batch_as(name);
    spec.num_q_heads = spec.num_kv_heads * group;
    return spec;
  }
  if (const int head_dim = number_after(name, "head-dim-")) {
    WorkloadSpec spec = gqa_batch_as(name);
    spec.head_dim = head_dim;
    return spec;
  }
  if (const int context = number_after(name, "single-")) {
    WorkloadSpec spec = gqa_batch_as(name);
    spec.context_lens.assign(1, context);
    return spec;
  }
  return named_spec(name);
}

/// The shape sweeps' workloads that are timed, group sizes first (every point but gqa-batch's).
std::vector<std::string> shape_sweep_workloads() {
  const WorkloadSpec gqa = named_spec("gqa-batch");
  std::vector<std::string> names;
  for (int group : kSweepGroups)
    if (group * gqa.num_kv_heads != gqa.num_q_heads) names.push_back(cat("group-", group));
  for (int head_dim : kSweepHeadDims)
    if (head_dim != gqa.head_dim) names.push_back(cat("head-dim-", head_dim));
  for (int context : kSweepSingleContexts) names.push_back(cat("single-", context));
  return names;
}

bool is_shape_sweep(const std::string& name) {
  return number_after(name, "group-") > 0 || number_after(name, "head-dim-") > 0 || number_after(name, "single-") > 0;
}

/// The bandwidth counters of a GPU row: \p bytes moved in \p seconds, against the roof measured
/// at start-up and the datasheet (the step rows and the bare reads report the same ones).
void set_bandwidth_counters(benchmark::State& state, double bytes, double seconds) {
  const double gbps = bytes / seconds / 1e9;
  state.counters["GB/s"] = gbps;
  if (g_roof_gbps > 0) {  // a roof not measured is left out, not written as 0
    state.counters["roof_GB/s"] = g_roof_gbps;
    state.counters["pct_roof"] = 100.0 * gbps / g_roof_gbps;
  }
  state.counters["pct_datasheet"] = 100.0 * gbps / gpu::device_info().limits.datasheet_gbps;
  state.counters["bytes"] = bytes;
}

/// The knobs as the plan ran them (the kernel's choices filled in), one counter per knob the
/// step has: `threads_per_block`, `num_splits`, `tile_tokens`, `variant`. A knob the step does
/// not have gets no counter (Google Benchmark's counters are numbers: absent is its null).
void set_knob_counters(benchmark::State& state, const KernelEntry& entry, const KernelOptions& ran) {
  const std::pair<Knob, std::pair<const char*, int>> knobs[] = {
      {knob_threads, {"threads_per_block", ran.threads_per_block}},
      {knob_splits, {"num_splits", ran.num_splits}},
      {knob_tile, {"tile_tokens", ran.tile_tokens}},
      {knob_variant, {"variant", ran.variant}},
  };
  for (const auto& [bit, counter] : knobs)
    if (entry.knobs & bit) state.counters[counter.first] = counter.second;
}

/// The launches a row's median is taken of: kRuns, or kLongLaunchRuns where one launch takes more
/// than kLongLaunchMs (steps 02 and 03 on the named workloads, up to 50 ms a launch). At 20 those
/// rows took 114 s of the 533 that the recorded run v114 spent on its benchmarks, which one call of
/// the device machine holds to 600 (lab/perf-log.md, v114).
constexpr int kRuns = 20;
constexpr int kLongLaunchRuns = 5;
constexpr double kLongLaunchMs = 10.0;

void gpu_benchmark(benchmark::State& state, int step, const std::string& workload_name, const KernelOptions& options,
                   bool checked) {
  const KernelEntry& entry = kernel(step, Backend::cuda);
  Cached& c = cached(workload_name);
  LaunchPlan plan;
  try {
    // once: every timed launch reuses it (a rung that balances by the lengths plans for the workload's)
    plan = plan_for(entry, c.host.problem, c.host.context_lens, options, gpu::device_info().limits);
  } catch (const ArgumentError& refused) {
    state.SkipWithError(cat("refused: ", refused.what()).c_str());
    for (auto _ : state) {
    }
    return;
  }
  // kLongLaunchRuns launches first; kRuns where their median is at most kLongLaunchMs.
  int runs = kLongLaunchRuns;
  double median = 0;
  for (auto _ : state) {
    c.device->poison();
    median = time_gpu_launches(entry, *c.device, plan, kLongLaunchRuns, checked);
    if (median * 1e3 <= kLongLaunchMs) {
      runs = kRuns;
      median = time_gpu_launches(entry, *c.device, plan, kRuns, checked);
    }
    state.SetIterationTime(median);
  }
  // The SM clock right after the timed launches (it moves with temperature and power within a
  // run; a kernel that issues mma ran below it: measure_sm_clock_mhz): read before the host's
  // check below leaves the GPU idle.
  state.counters["sm_mhz"] = gpu::measure_sm_clock_mhz();
  // The output of the last timed launch, checked after timing (sampled rows: the full oracle on
  // gigabytes of K/V would take minutes on the host).
  const std::vector<std::byte> out = c.device->download_out();
  const CompareResult result = check_against_oracle(c.host, c.oracle, out, entry.weights_in_storage_type);
  set_bandwidth_counters(state, static_cast<double>(c.host.bytes_moved()), median);
  state.counters["runs"] = runs;
  state.counters["max_abs_error"] = result.max_abs_error;
  set_knob_counters(state, entry, plan.options);
  state.SetLabel(plan.description);
  if (!result.ok) state.SkipWithError(cat("output check after timing failed: ", result.first_failure).c_str());
}

// [bare_read]
/// The chunk sizes (tokens of one KV head) and thread counts a bare read tries; it reports the
/// fastest, so a kernel with that access pattern has no easy way to beat it.
const std::vector<int> kBareReadTokens = {256, 1024};
const std::vector<int> kBareReadThreads = {128, 256};

/// A bare read of a named workload's bytes (gpu::time_bare_read_ms): each chunk of one KV
/// head's K and V read by one program ("once", step 08's pattern) or by each query head of the
/// group ("per-query-head", the pattern of steps 03-07).
void bare_read_benchmark(benchmark::State& state, const std::string& workload_name, bool per_query_head) {
  const Cached& c = cached(workload_name);
  const DecodeProblem& p = c.host.problem;
  const auto bytes = static_cast<std::size_t>(c.host.bytes_moved());
  const int readers = per_query_head ? p.group_size() : 1;
  double best_ms = 0;
  int best_tokens = 0, best_threads = 0;
  for (auto _ : state) {
    for (int tokens : kBareReadTokens)
      for (int threads : kBareReadThreads) {
        const std::size_t chunk = std::size_t{2} * static_cast<std::size_t>(tokens) * p.head_dim * dtype_size(p.cache_dtype());
        const double ms = gpu::time_bare_read_ms(bytes, chunk, readers, threads);
        if (best_ms == 0 || ms < best_ms) best_ms = ms, best_tokens = tokens, best_threads = threads;
      }
    state.SetIterationTime(best_ms * 1e-3);
  }
  set_bandwidth_counters(state, static_cast<double>(bytes), best_ms * 1e-3);
  state.counters["readers"] = readers;
  state.counters["chunk_tokens"] = best_tokens;
  state.counters["threads"] = best_threads;
  state.SetLabel(cat("each chunk of ", best_tokens, " tokens of one KV head read by ", readers, readers == 1 ? " program" : " programs",
                     " of ", best_threads, " threads (fastest of chunks of 256 and 1024 tokens, 128 and 256 threads)"));
}
// [bare_read]

/// Runs \p entry on \p workload in the emulator once an iteration of \p state; nothing (the row
/// skipped with the refusal's message) where the rung does not run the workload (fp8 K/V before
/// step 12).
std::optional<RunOutput> emulate_or_skip(benchmark::State& state, const KernelEntry& entry, const Workload& workload) {
  RunOutput run;
  try {
    for (auto _ : state) run = run_emulator(entry, workload, {});
  } catch (const ArgumentError& refused) {
    state.SkipWithError(cat("refused: ", refused.what()).c_str());
    return std::nullopt;
  }
  return run;
}

void emulator_benchmark(benchmark::State& state, int step) {
  const KernelEntry& entry = kernel(step, Backend::emulator);
  const Workload workload = make_workload(tour_spec());
  const std::optional<RunOutput> emulated = emulate_or_skip(state, entry, workload);
  if (!emulated) return;
  const RunOutput& run = *emulated;
  state.counters["emu_bytes"] = static_cast<double>(run.traffic.total_read() + run.traffic.total_written());
  state.counters["bytes_moved"] = static_cast<double>(workload.bytes_moved());
  set_knob_counters(state, entry, run.plan.options);
}

/// A named workload shrunk for the emulator: the same head layout, two sequences of at most
/// 256 tokens. Returns the spec and the factor that scales its tokens to the full workload's.
std::pair<WorkloadSpec, double> miniature(const std::string& name) {
  const WorkloadSpec full = named_spec(name);
  WorkloadSpec mini = full;
  mini.name = name + "-miniature";
  mini.context_lens.clear();
  for (std::size_t i = 0; i < std::min<std::size_t>(2, full.context_lens.size()); ++i)
    mini.context_lens.push_back(std::min(full.context_lens[i], 256));
  const double full_tokens = std::accumulate(full.context_lens.begin(), full.context_lens.end(), 0.0);
  const double mini_tokens = std::accumulate(mini.context_lens.begin(), mini.context_lens.end(), 0.0);
  return {mini, full_tokens / mini_tokens};
}

void traffic_benchmark(benchmark::State& state, int step, const std::string& name) {
  const KernelEntry& entry = kernel(step, Backend::emulator);
  const auto [spec, factor] = miniature(name);
  const Workload workload = make_workload(spec);
  const std::optional<RunOutput> emulated = emulate_or_skip(state, entry, workload);
  if (!emulated) return;
  const RunOutput& run = *emulated;
  const double counted = static_cast<double>(run.traffic.total_read() + run.traffic.total_written());
  state.counters["predicted_bytes"] = counted * factor;
  state.counters["scale"] = factor;
}

/// Registers `bench_name`: \p step's CUDA kernel on \p workload, timed by gpu_benchmark, in
/// checked mode (DecodeView::checked) when \p checked.
void register_gpu(const std::string& bench_name, int step, const std::string& workload, const KernelOptions& options,
                  bool checked = false) {
  benchmark::RegisterBenchmark(bench_name.c_str(), [step, workload, options, checked](benchmark::State& s) {
    gpu_benchmark(s, step, workload, options, checked);
  })
      ->UseManualTime()
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond);
}

/// Registers `bare_read/gpu/<workload>/once` and `.../per-query-head` (bare_read_benchmark).
void register_bare_reads(const std::string& workload) {
  for (const bool per_query_head : {false, true})
    benchmark::RegisterBenchmark(cat("bare_read/gpu/", workload, per_query_head ? "/per-query-head" : "/once").c_str(),
                                 [workload, per_query_head](benchmark::State& s) {
                                   bare_read_benchmark(s, workload, per_query_head);
                                 })
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
}

}  // namespace

Cached& cached(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Cached>> cache;
  static std::string shape_point;  // the shape sweep's point held now ("" for none)
  auto& slot = cache[name];
  if (!slot) {
    if (is_shape_sweep(name)) {
      if (!shape_point.empty() && shape_point != name) cache.erase(shape_point);  // freed before the next is built
      shape_point = name;
    }
    // Each part timed and said on stderr (the log of scripts/gpu-bench): the host's share of a
    // recorded run's minutes is here, not in the rows.
    using Clock = std::chrono::steady_clock;
    auto built = std::make_unique<Cached>();
    Clock::time_point start = Clock::now();
    built->host = make_workload(spec_of(name));
    const double made = seconds_since(start);
    start = Clock::now();
    built->device = std::make_unique<DeviceWorkload>(built->host);
    const double uploaded = seconds_since(start);
    start = Clock::now();
    const std::vector<int> sample = sample_sequences(built->host);
    built->oracle = oracle_rows(built->host, sample);
    const double oracle = seconds_since(start);
    std::cerr << "bench_ladder: workload " << name << " (" << format_bytes(static_cast<double>(built->host.bytes_moved()))
              << " a call): built in " << format_seconds(made) << ", uploaded in " << format_seconds(uploaded)
              << ", the oracle of " << sample.size() << (sample.size() == 1 ? " sampled sequence" : " sampled sequences")
              << " in " << format_seconds(oracle) << '\n';
    slot = std::move(built);
  }
  return *slot;
}

void register_step(int step) {
  const std::string name = kernel(step, Backend::emulator).name;
  if (gpu_here()) {
    // The named workloads' plain rows are register_named_rounds'.
    std::vector<std::string> workloads = {"gqa-batch-nhd"};
    for (int context : kSweepContexts) workloads.push_back("sweep-" + std::to_string(context));
    for (const std::string& workload : workloads) register_gpu(name + "/gpu/" + workload, step, workload, {});
    // The cost of the checked mode: `stepNN_name/gpu/<workload>/checked` times each named
    // workload with it on (the rows above time the kernel alone, checked mode off).
    for (const std::string& workload : named_workloads())
      register_gpu(cat(name, "/gpu/", workload, "/checked"), step, workload, {}, true);
    // A step with variants (its ablations) runs each on the named workloads:
    // `stepNN_name/gpu/<workload>/variant-V`.
    for (int variant = 1; variant <= kernel(step, Backend::cuda).variants; ++variant)
      for (const std::string& workload : named_workloads()) {
        KernelOptions options;
        options.variant = variant;
        register_gpu(cat(name, "/gpu/", workload, "/variant-", variant), step, workload, options);
      }
  }
  benchmark::RegisterBenchmark((name + "/emulator/tour").c_str(),
                               [step](benchmark::State& s) { emulator_benchmark(s, step); })
      ->Unit(benchmark::kMillisecond);
  for (const std::string& workload : named_workloads())
    benchmark::RegisterBenchmark((name + "/traffic/" + workload).c_str(),
                                 [step, workload](benchmark::State& s) { traffic_benchmark(s, step, workload); })
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
}

void register_shape_sweeps(const std::vector<int>& steps) {
  if (!gpu_here()) return;
  // Point by point, every step's row of a point next to each other: Google Benchmark runs them
  // in this order, so each point is built once and dropped when the next is (cached()).
  for (const std::string& workload : shape_sweep_workloads())
    for (int step : steps)
      if (step >= kFirstShapeSweepStep)
        register_gpu(cat(kernel(step, Backend::emulator).name, "/gpu/", workload), step, workload, {});
}

void register_named_rounds(const std::vector<int>& steps, int rounds) {
  if (!gpu_here() || rounds < 1) return;
  g_named_rounds = rounds;
  for (int round = 0; round < rounds; ++round)
    for (const std::string& workload : named_workloads()) {
      register_bare_reads(workload);
      for (std::size_t i = 0; i < steps.size(); ++i) {
        // the rungs in order in even rounds, backwards in odd ones: no rung always runs right after the same one
        const int step = round % 2 == 0 ? steps[i] : steps[steps.size() - 1 - i];
        register_gpu(cat(kernel(step, Backend::emulator).name, "/gpu/", workload), step, workload, {});
      }
    }
}

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const bool gpu = gpu_here();
  const Stamp stamp = Stamp::collect(gpu);
  benchmark::AddCustomContext("pagedattn_stamp", stamp.line());
  benchmark::AddCustomContext("git_revision", stamp.git_revision);
  benchmark::AddCustomContext("compiler", stamp.compiler);
  benchmark::AddCustomContext("cuda_compiler", stamp.cuda_compiler);
  benchmark::AddCustomContext("build_flags", stamp.flags);
  if (gpu) {
    g_roof_gbps = gpu::measure_roof_gbps();
    const gpu::DeviceInfo& d = gpu::device_info();
    benchmark::AddCustomContext("gpu", d.name);
    benchmark::AddCustomContext("gpu_details", stamp.gpu_details);
    benchmark::AddCustomContext("roof_gbps", format_fixed(g_roof_gbps, 1));
    benchmark::AddCustomContext("datasheet_gbps", format_fixed(d.limits.datasheet_gbps, 1));
    benchmark::AddCustomContext("sm_count", std::to_string(d.limits.sm_count));
    // How gpu::flush_l2 empties the L2 before each timed run (files before this key: a memset).
    benchmark::AddCustomContext("l2_flush", "read");
    // The rows whose launch takes longer than this take fewer launches a median (gpu_benchmark).
    benchmark::AddCustomContext("long_launch_ms", format_fixed(kLongLaunchMs, 0));
    benchmark::AddCustomContext("long_launch_runs", std::to_string(kLongLaunchRuns));
    // How many times each named workload's rows ran, taking turns (register_named_rounds); the
    // rows of a name are that many entries of the JSON, and scripts/results takes their median.
    if (g_named_rounds > 0) benchmark::AddCustomContext("named_rounds", std::to_string(g_named_rounds));
  } else {
    benchmark::AddCustomContext("gpu", cat("none: ", gpu::unavailable_reason()));
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace pa::bench
