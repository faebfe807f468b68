// Every kernel step on the GPU: the checks of the emulator tests, the GPU against the emulator
// on the adversarial set, contexts up to 128k, and pools over 2^31 and 2^32 elements. Labelled
// gpu; skipped, with the reason, where there is no device.
#include <algorithm>
#include <cmath>

#include "tests/step_checks.h"

using pa::Backend;
using pa::DType;
using namespace pa::testing;

namespace {

/// Empty when the GPU path can run; otherwise why not.
std::string no_gpu_reason() {
  if (!pa::cuda_built()) return "pagedattn was built without CUDA";
  return pa::gpu::unavailable_reason();
}

/// The GPU and the emulator agree on every adversarial workload (both within tolerance of the
/// oracle, and within the same tolerance of each other).
void check_gpu_against_emulator(int step, DType dtype) {
  pa::AdversarialOptions options;
  options.dtype = dtype;
  for (const pa::WorkloadSpec& spec : pa::adversarial_specs(options)) {
    const pa::Workload w = pa::make_workload(spec);
    const pa::RunOutput gpu = run_on(Backend::cuda, step, w);
    const pa::RunOutput emulated = run_on(Backend::emulator, step, w);
    std::vector<double> emulated_values(emulated.out.size() / pa::dtype_size(w.problem.dtype));
    for (std::size_t i = 0; i < emulated_values.size(); ++i)
      emulated_values[i] = pa::load_as_float(emulated.out.data(), w.problem.dtype, i);
    const pa::CompareResult agree = pa::compare_to_reference(w.problem, emulated_values, gpu.out.data(),
                                                             pa::Tolerance::for_dtype(dtype));
    INFO("step " << step << ", workload '" << spec.name << "', GPU against emulator: " << agree.summary());
    REQUIRE(agree.ok);
  }
}

/// One sequence of 128k tokens (and a ragged companion), checked against the oracle.
void check_long_context(int step) {
  pa::WorkloadSpec spec = pa::debug_spec();
  spec.name = "128k";
  spec.dtype = DType::bf16;
  spec.num_q_heads = 8;
  spec.num_kv_heads = 2;
  spec.head_dim = 128;
  spec.context_lens = {131072, 4097};
  require_oracle_match(Backend::cuda, step, pa::make_workload(spec));
}

}  // namespace

#define PA_GPU_STEP_TESTS(step, tag)                                                                 \
  TEST_CASE("gpu step" tag ": adversarial set against the oracle, every dtype", "[gpu][step" tag "]") { \
    if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);                         \
    for (DType dtype : {DType::f32, DType::f16, DType::bf16}) check_adversarial(Backend::cuda, step, dtype); \
  }                                                                                                  \
  TEST_CASE("gpu step" tag ": agrees with the emulator", "[gpu][step" tag "]") {                     \
    if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);                         \
    check_gpu_against_emulator(step, DType::bf16);                                                   \
    check_gpu_against_emulator(step, runs(step, DType::f32) ? DType::f32 : DType::f16);              \
  }                                                                                                  \
  TEST_CASE("gpu step" tag ": NaN poison invisible, shapes, knobs, refusals", "[gpu][step" tag "]") { \
    if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);                         \
    check_poison_is_invisible(Backend::cuda, step, DType::bf16);                                     \
    check_shapes(Backend::cuda, step);                                                               \
    check_knobs_and_determinism(Backend::cuda, step, knobs_of(step));                                \
    check_refusals(Backend::cuda, step);                                                             \
    check_empty_batch(Backend::cuda, step);                                                          \
  }                                                                                                  \
  TEST_CASE("gpu step" tag ": empty contexts, logits near -1e5, NaN in V, the length cap, split ends", \
            "[gpu][step" tag "]") {                                                                  \
    if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);                         \
    check_empty_contexts(Backend::cuda, step);                                                       \
    check_very_negative_logits(Backend::cuda, step, DType::f16);                                     \
    check_very_negative_logits(Backend::cuda, step, DType::bf16);                                    \
    check_nan_in_value(Backend::cuda, step);                                                         \
    check_length_cap(Backend::cuda, step);                                                           \
    check_split_boundaries(Backend::cuda, step);                                                     \
  }                                                                                                  \
  TEST_CASE("gpu step" tag ": checked mode refuses bad lengths and table entries on the device",     \
            "[gpu][step" tag "][checked]") {                                                         \
    if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);                         \
    check_bad_tables_refused(Backend::cuda, step);                                                   \
  }                                                                                                  \
  TEST_CASE("gpu step" tag ": pools over 2^31 and 2^32 elements (18 GB of device memory)",           \
            "[gpu][step" tag "][huge]") {                                                            \
    if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);                         \
    check_huge_pools(Backend::cuda, step);                                                           \
  }

// One set per kernel step of the build (see tests/test_steps.cpp).
#define PA_KERNEL_STEP(number) PA_GPU_STEP_TESTS((1##number - 100), #number)
#include "kernel_list.inc"
#undef PA_KERNEL_STEP

TEST_CASE("gpu: contexts up to 128k for the steps without a length cap (06 on)", "[gpu]") {
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  for (int step : pa::kernel_steps())
    if (step >= 6) check_long_context(step);
}

TEST_CASE("gpu: every ablation variant of a step that has them matches the oracle", "[gpu]") {
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  for (int step : pa::kernel_steps()) check_variants(Backend::cuda, step, {4097, 1, 0, 129, 700});
}

TEST_CASE("gpu: the roof and the device stamp are measured, not assumed", "[gpu]") {
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  const pa::gpu::DeviceInfo& info = pa::gpu::device_info();
  INFO(info.name << ", datasheet " << info.limits.datasheet_gbps << " GB/s");
  REQUIRE(info.limits.sm_count > 0);
  REQUIRE(info.limits.datasheet_gbps > 100);
  const double roof = pa::gpu::measure_roof_gbps(std::size_t{1} << 30, 5);
  INFO("roof " << roof << " GB/s");
  REQUIRE(roof > 0.3 * info.limits.datasheet_gbps);
  REQUIRE(roof < 1.05 * info.limits.datasheet_gbps);
}

TEST_CASE("gpu: a bare read times real reads and refuses bad arguments", "[gpu]") {
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  const double datasheet = pa::gpu::device_info().limits.datasheet_gbps;
  const std::size_t bytes = std::size_t{256} << 20;  // over the L2, so the reads reach memory
  const std::size_t chunk = std::size_t{128} << 10;
  const double once_ms = pa::gpu::time_bare_read_ms(bytes, chunk, 1, 128, 5);
  const double twice_ms = pa::gpu::time_bare_read_ms(2 * bytes, chunk, 1, 128, 5);
  const double per_group_ms = pa::gpu::time_bare_read_ms(bytes, chunk, 4, 128, 5);
  INFO("once " << once_ms << " ms, twice the bytes " << twice_ms << " ms, each chunk by 4 programs " << per_group_ms << " ms");
  const double gbps = static_cast<double>(bytes) / (once_ms * 1e-3) / 1e9;
  CHECK(gbps > 0.3 * datasheet);
  CHECK(gbps < 1.05 * datasheet);
  CHECK(twice_ms > 1.5 * once_ms);       // the time grows with the bytes: the reads happen
  CHECK(per_group_ms > 1.02 * once_ms);  // four programs a chunk take longer than one
  PA_REQUIRE_THROWS_AS_WITH(pa::gpu::time_bare_read_ms(bytes, 100, 1, 128, 1), pa::ArgumentError, "chunk_bytes");
  PA_REQUIRE_THROWS_AS_WITH(pa::gpu::time_bare_read_ms(bytes, chunk, 0, 128, 1), pa::ArgumentError, "readers");
  PA_REQUIRE_THROWS_AS_WITH(pa::gpu::time_bare_read_ms(bytes, chunk, 1, 100, 1), pa::ArgumentError, "threads");
}

TEST_CASE("gpu: out of device memory names the buffer and the bytes, and is not sticky", "[gpu]") {
  // docs/design/CATALOGUE.md R2: nothing half-built, and a smaller request works afterwards.
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  const std::size_t too_much = std::size_t{1} << 50;  // a petabyte
  PA_REQUIRE_THROWS_AS_WITH(pa::gpu::Buffer(too_much, "a pool too big"), pa::CudaError,
                            pa::cat("cudaMalloc of ", too_much, " bytes for a pool too big failed: "));
  PA_REQUIRE_THROWS_AS_WITH(pa::gpu::Buffer(too_much, "a pool too big"), pa::CudaError, " bytes free)");
  const pa::gpu::Buffer fits(std::size_t{1} << 20, "a pool that fits");
  REQUIRE(fits.data() != nullptr);
  require_oracle_match(Backend::cuda, 6, pa::make_workload(pa::debug_spec()));
}

TEST_CASE("gpu: a launch the device rejects names the kernel and its configuration", "[gpu]") {
  // docs/design/CATALOGUE.md R4: caught right after the launch, and the next launch runs.
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  const pa::Workload w = pa::make_workload(pa::debug_spec());
  const pa::KernelEntry& entry = pa::kernel(4, Backend::cuda);
  pa::LaunchPlan plan = entry.plan(w.problem, {}, pa::gpu::device_info().limits);
  pa::DeviceWorkload device(w);
  const pa::DecodeView view = device.view(plan.workspace_bytes);
  plan.threads = 2048;  // more threads than a program may have: an invalid configuration
  PA_REQUIRE_THROWS_AS_WITH(entry.launch(view, plan, nullptr), pa::CudaError, "launch of step04");
  PA_REQUIRE_THROWS_AS_WITH(entry.launch(view, plan, nullptr), pa::CudaError, "block 2048");
  pa::gpu::synchronize("the rejected launch");  // nothing sticky was left behind
  require_oracle_match(Backend::cuda, 4, w);
}

TEST_CASE("gpu: once uploaded, the block tables are the device's own: reusing the host copy changes nothing", "[gpu]") {
  // docs/design/CATALOGUE.md A11: the host tables and lengths are overwritten (as a serving
  // engine's staging buffer is, for the next step) right after an asynchronous launch.
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  pa::Workload w = pa::make_workload(pa::debug_spec());
  const pa::Workload original = w;
  const pa::KernelEntry& entry = pa::kernel(6, Backend::cuda);
  const pa::LaunchPlan plan = entry.plan(w.problem, {}, pa::gpu::device_info().limits);
  pa::DeviceWorkload device(w);
  device.poison();
  pa::DecodeView view = device.view(plan.workspace_bytes);
  view.checked = false;  // checked mode waits for its check kernel; unchecked, the launch is asynchronous
  entry.launch(view, plan, nullptr);
  std::fill(w.block_tables.begin(), w.block_tables.end(), 0);
  std::fill(w.context_lens.begin(), w.context_lens.end(), 1);
  pa::gpu::synchronize("the launch");
  const pa::CompareResult result = pa::check_against_oracle(original, pa::oracle_rows(original), device.download_out(),
                                                             entry.weights_in_storage_type);
  INFO(result.summary());
  REQUIRE(result.ok);
}
