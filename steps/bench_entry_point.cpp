#include "steps/bench_entry_point.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "api/decode.h"
#include "common/error.h"
#include "harness/bench.h"
#include "harness/harness.h"
#include "kernels/registry.h"

namespace pa::bench {
namespace {

/// The named workload the rows call the entry point on: its kernel is short (38 to 41 µs for
/// steps 10 to 12 on the H200 of the run of 2026-12-05), so the host's share of a decode step
/// weighs most there.
constexpr const char* kWorkload = "small-batch";
/// What the rows call, by the last part of their name (bench_entry_point.h).
const std::vector<std::string> kModes = {"empty-kernels", "launch", "decode", "decode-checked"};

/// A row's median is taken over kRounds rounds of kCallsPerRound calls.
constexpr int kRounds = 41;
constexpr int kCallsPerRound = 64;

/// The host time of one \p call, in seconds: the median over kRounds rounds of a round's mean,
/// each round kCallsPerRound calls timed by the host's clock from the first call to the return
/// of the last. The calls are asynchronous: without a wait the launches would pile up in the
/// device's queue until it is full, and from then on each call would wait for a kernel to finish,
/// timing the GPU instead of the host. So each round starts on an idle GPU (gpu::synchronize,
/// outside the timed region): a round's launches (one more a call in checked mode, its check
/// kernel) fit in the queue, and no call waits for the GPU. One round first, not timed, loads the
/// kernels.
template <class Call>
double host_seconds_a_call(const Call& call) {
  for (int i = 0; i < kCallsPerRound; ++i) call();
  std::vector<double> means;
  for (int round = 0; round < kRounds; ++round) {
    gpu::synchronize("entry_point benchmark");
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCallsPerRound; ++i) call();
    const auto stop = std::chrono::steady_clock::now();
    means.push_back(std::chrono::duration<double>(stop - start).count() / kCallsPerRound);
  }
  gpu::synchronize("entry_point benchmark");
  std::nth_element(means.begin(), means.begin() + kRounds / 2, means.end());
  return means[kRounds / 2];
}

/// Times \p call as a row: host_seconds_a_call as the iteration's time, and its counters.
template <class Call>
void time_row(benchmark::State& state, const Call& call) {
  double seconds = 0;
  for (auto _ : state) {
    seconds = host_seconds_a_call(call);
    state.SetIterationTime(seconds);
  }
  state.counters["host_us"] = seconds * 1e6;
  state.counters["rounds"] = kRounds;
  state.counters["calls_per_round"] = kCallsPerRound;
}

/// The floor under the rows: two launches of a kernel that does nothing, the second overlapped,
/// as the rung launches its split kernel and its merge on kWorkload.
void empty_kernels_benchmark(benchmark::State& state) {
  time_row(state, [] {
    gpu::launch_empty_kernel(false, nullptr);
    gpu::launch_empty_kernel(true, nullptr);
  });
  state.SetLabel("two launches of an empty kernel, the second overlapped (nothing to check)");
}

void entry_point_benchmark(benchmark::State& state, const std::string& mode) {
  if (mode == "empty-kernels") return empty_kernels_benchmark(state);
  Cached& w = cached(kWorkload);  // the step rows' copy of the workload, built once a process
  std::optional<DecodePlan> plan;
  try {
    plan.emplace(plan_decode(w.host.problem, Backend::cuda));
  } catch (const ArgumentError& refused) {
    state.SkipWithError(cat("refused: ", refused.what()).c_str());
    for (auto _ : state) {
    }
    return;
  }
  DecodeView view = w.device->view(plan->workspace_bytes());
  view.checked = mode == "decode-checked";
  const bool rung_alone = mode == "launch";
  const auto call = [&] {
    if (rung_alone)
      plan->kernel().launch(view, plan->launch_plan(), nullptr);
    else
      decode(*plan, view, nullptr);
  };
  w.device->poison();
  time_row(state, call);
  // The output of the last call, checked after timing (in checked mode the download also raises
  // a fault the device-side check recorded).
  const std::vector<std::byte> out = w.device->download_out();
  const CompareResult result = check_against_oracle(w.host, w.oracle, out, plan->kernel().weights_in_storage_type);
  state.counters["max_abs_error"] = result.max_abs_error;
  state.SetLabel(cat("step ", plan->step(), " (", plan->kernel().name, ")"));
  if (!result.ok) state.SkipWithError(cat("output check after timing failed: ", result.first_failure).c_str());
}

}  // namespace

void register_entry_point() {
  if (!cuda_built() || !gpu::available()) return;
  for (const std::string& mode : kModes)
    benchmark::RegisterBenchmark(cat("entry_point/gpu/", kWorkload, "/host/", mode).c_str(),
                                 [mode](benchmark::State& s) { entry_point_benchmark(s, mode); })
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMicrosecond);
}

}  // namespace pa::bench
