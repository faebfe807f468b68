#pragma once
/// \file
/// The checks every kernel step must pass, written once for both backends: test_steps.cpp
/// runs them in the emulator (CI), test_gpu_steps.cpp on the GPU (labelled gpu).

#include <string>
#include <vector>

#include "harness/harness.h"
#include "kernels/registry.h"
#include "tests/catch_compat.h"

namespace pa::testing {

/// Runs one kernel on one workload on \p backend (the GPU path poisons, launches, downloads).
inline RunOutput run_on(Backend backend, int step, const Workload& workload, const KernelOptions& options = {}) {
  const KernelEntry& entry = kernel(step, backend);
  return backend == Backend::cuda ? run_gpu(entry, workload, options) : run_emulator(entry, workload, options);
}

/// Requires the run to match the oracle (tolerance, NaN rules, 3x the plain loop's error).
inline void require_oracle_match(Backend backend, int step, const Workload& workload, const KernelOptions& options = {}) {
  const RunOutput run = run_on(backend, step, workload, options);
  const CompareResult result = check_against_oracle(workload, oracle_rows(workload), run.out);
  INFO("step " << step << " on " << backend_name(backend) << ", workload '" << workload.spec.name << "' ("
               << describe(workload.problem) << ", seed " << workload.spec.seed << ", threads "
               << options.threads_per_block << ", splits " << options.num_splits << ", tile " << options.tile_tokens << "): " << result.summary());
  REQUIRE(result.ok);
}

/// The adversarial set of CORRECTNESS.md in one storage type.
inline void check_adversarial(Backend backend, int step, DType dtype, int max_context = 300) {
  AdversarialOptions options;
  options.dtype = dtype;
  options.max_context = max_context;
  for (const WorkloadSpec& spec : adversarial_specs(options)) require_oracle_match(backend, step, make_workload(spec));
}

/// NaN where the kernel must not read gives the same bits as zeros there (CORRECTNESS.md rule 1).
inline void check_poison_is_invisible(Backend backend, int step, DType dtype) {
  AdversarialOptions options;
  options.dtype = dtype;
  for (WorkloadSpec spec : adversarial_specs(options)) {
    if (spec.nan_sequence >= 0) continue;  // a NaN inside a context is meant to be read
    const RunOutput poisoned = run_on(backend, step, make_workload(spec));
    spec.poison = false;
    const Workload zeroed = make_workload(spec);
    const RunOutput zeros = run_on(backend, step, zeroed);
    const CompareResult same = compare_bitwise(zeroed.problem, zeros.out.data(), poisoned.out.data());
    INFO("step " << step << " on " << backend_name(backend) << ", workload '" << spec.name << "': " << same.summary());
    REQUIRE(same.ok);
  }
}

/// Every head dim the ladder supports, and page sizes 1 to 64 (12: a page size that is not a
/// power of two takes the kernels' division path instead of the shift).
inline void check_shapes(Backend backend, int step) {
  for (int head_dim : {64, 80, 96, 112, 128, 256}) {
    for (DType dtype : {DType::f32, DType::bf16}) {
      WorkloadSpec spec = debug_spec();
      spec.name = "head-dim-" + std::to_string(head_dim);
      spec.head_dim = head_dim;
      spec.dtype = dtype;
      spec.context_lens = {33, 0, 17};
      require_oracle_match(backend, step, make_workload(spec));
    }
  }
  for (int page : {1, 8, 12, 16, 32, 64}) {
    WorkloadSpec spec = debug_spec();
    spec.name = "page-" + std::to_string(page);
    spec.block_size = page;
    spec.context_lens = {page - 1 > 0 ? page - 1 : 1, page, page + 1, 2 * page + 3};
    require_oracle_match(backend, step, make_workload(spec));
  }
}

/// Knobs never change the answer beyond rounding; the same input gives the same bits twice.
inline void check_knobs_and_determinism(Backend backend, int step, const std::vector<KernelOptions>& knobs) {
  WorkloadSpec spec = debug_spec();
  spec.dtype = DType::bf16;
  spec.context_lens = {700, 1, 0, 129, 64};
  const Workload workload = make_workload(spec);
  for (const KernelOptions& options : knobs) require_oracle_match(backend, step, workload, options);
  const RunOutput first = run_on(backend, step, workload);
  const RunOutput second = run_on(backend, step, workload);
  const CompareResult same = compare_bitwise(workload.problem, first.out.data(), second.out.data());
  INFO(same.summary());
  REQUIRE(same.ok);
}

/// The knobs a step exposes (empty for the one-thread steps).
inline std::vector<KernelOptions> knobs_of(int step) {
  std::vector<KernelOptions> knobs;
  if (step >= 4)
    for (int threads : {32, 64, 256}) knobs.push_back({threads, 0, 0});
  if (step >= 7) {
    for (int splits : {1, 2, 3, 7, 8, 9, 64}) knobs.push_back({0, splits, 0});  // 8, 9: either side of kMergeDirectSplits
    knobs.push_back({64, 5, 0});
    knobs.push_back({0, 0, 100});
  }
  if (step >= 6)
    for (int tile : {1, 2, 4}) {
      knobs.push_back({0, 0, 0, tile});
      knobs.push_back({64, 0, 0, tile});
    }
  return knobs;
}

/// An unsupported head dim is refused before any launch, naming the argument and the choices.
inline void check_refusals(Backend backend, int step) {
  WorkloadSpec spec = debug_spec();
  spec.head_dim = 72;
  const Workload workload = make_workload(spec);
  const KernelEntry& entry = kernel(step, backend);
  PA_REQUIRE_THROWS_AS_WITH(run_on(backend, step, workload), ArgumentError, "head_dim");
  PA_REQUIRE_THROWS_AS_WITH(run_on(backend, step, workload), ArgumentError, "64, 80, 96, 112, 128, 256");
  PA_REQUIRE_THROWS_AS_WITH(run_on(backend, step, workload), ArgumentError, entry.name);
  if (step >= 6) {  // a tile size that is not compiled
    const Workload good = make_workload(debug_spec());
    KernelOptions options;
    options.tile_tokens = 3;
    PA_REQUIRE_THROWS_AS_WITH(run_on(backend, step, good, options), ArgumentError, "options.tile_tokens");
    PA_REQUIRE_THROWS_AS_WITH(run_on(backend, step, good, options), ArgumentError, "one of 1, 2, 4");
  }
  if (step >= 7) {  // the split kernels put the sequences on the grid's y axis
    DecodeProblem many = make_workload(debug_spec()).problem;
    many.num_seqs = 65536;
    many.total_context_len = 0;
    PA_REQUIRE_THROWS_AS_WITH(entry.check(many, {}, DeviceLimits::pretend_h200()), ArgumentError, "num_seqs");
    PA_REQUIRE_THROWS_AS_WITH(entry.check(many, {}, DeviceLimits::pretend_h200()), ArgumentError, "at most 65535");
  }
}

/// An empty batch launches nothing and raises nothing.
inline void check_empty_batch(Backend backend, int step) {
  WorkloadSpec spec = debug_spec();
  spec.context_lens = {};
  const Workload workload = make_workload(spec);
  const RunOutput run = run_on(backend, step, workload);
  REQUIRE(run.out.empty());
}

}  // namespace pa::testing
