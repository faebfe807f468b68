// The entry point (api/decode.h) on the GPU: the plan for the device, decodes against the
// oracle and the emulator, the checked mode's refusal raised at the wait, and pointers the device
// cannot read refused before the launch. Labelled gpu; skipped, with the reason, where there is
// no device.
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "common/cuda/runtime.h"
#include "kernels/registry.h"
#include "tests/api_checks.h"
#include "tests/test_util.h"

using pa::Backend;
using pa::DType;
using namespace pa::testing;

TEST_CASE("gpu api: the plan is the rung's plan for this device", "[gpu][api]") {
  if (!pa::gpu::available()) PA_SKIP(pa::gpu::unavailable_reason());
  const pa::DecodeProblem problem = pa::make_workload(api_specs(DType::bf16).front()).problem;
  const pa::DecodePlan plan = pa::plan_decode(problem, Backend::cuda);
  const pa::KernelEntry& entry = pa::kernel(10, Backend::cuda);
  const pa::LaunchPlan own = entry.plan(problem, pa::KernelOptions{}, pa::gpu::device_info().limits);
  REQUIRE(plan.step() == 10);
  REQUIRE(plan.backend() == Backend::cuda);
  REQUIRE(plan.workspace_bytes() == own.workspace_bytes);  // the checked mode's scratch included
  REQUIRE(plan.description().starts_with("step 10 (step10_tensor_cores) on the GPU: "));
  REQUIRE(plan.description().ends_with(own.description));
}

TEST_CASE("gpu api: decode matches the oracle (groups 1 and 8, head dims 128 and 80, every dtype)", "[gpu][api]") {
  if (!pa::gpu::available()) PA_SKIP(pa::gpu::unavailable_reason());
  check_api_against_oracle(Backend::cuda);
}

TEST_CASE("gpu api: fp8 K/V run on step 12, match the oracle, and decode again bit for bit", "[gpu][api]") {
  if (!pa::gpu::available()) PA_SKIP(pa::gpu::unavailable_reason());
  check_api_fp8(Backend::cuda);
}

TEST_CASE("gpu api: decode agrees with the emulator's decode", "[gpu][api]") {
  if (!pa::gpu::available()) PA_SKIP(pa::gpu::unavailable_reason());
  for (const DType dtype : {DType::bf16, DType::f32})
    for (const pa::WorkloadSpec& spec : api_specs(dtype)) {
      const pa::Workload workload = pa::make_workload(spec);
      const std::vector<std::byte> gpu = decode_with_api(Backend::cuda, workload);
      const std::vector<std::byte> emulated = decode_with_api(Backend::emulator, workload);
      std::vector<double> emulated_values(emulated.size() / pa::dtype_size(dtype));
      for (std::size_t i = 0; i < emulated_values.size(); ++i) emulated_values[i] = pa::load_as_float(emulated.data(), dtype, i);
      const pa::CompareResult agree =
          pa::compare_to_reference(workload.problem, emulated_values, gpu.data(), pa::Tolerance::for_dtype(dtype));
      INFO(spec.name << ", GPU against emulator: " << agree.summary());
      REQUIRE(agree.ok);
    }
}

TEST_CASE("gpu api: a bad context length is raised at the wait, with the rung's name", "[gpu][api]") {
  if (!pa::gpu::available()) PA_SKIP(pa::gpu::unavailable_reason());
  pa::Workload bad = pa::make_workload(api_specs(DType::bf16).front());
  bad.context_lens[1] = -3;
  const pa::DecodePlan plan = pa::plan_decode(bad.problem, Backend::cuda);
  const std::string expected =
      error_message([&] { pa::validate_tables(bad.problem, bad.block_tables, bad.context_lens, plan.kernel().name); });
  REQUIRE(expected.starts_with(std::string(plan.kernel().name) + ": context_lens[1]: "));  // the host check refuses it too
  pa::DeviceWorkload device(bad);
  const pa::DecodeView view = device.view(plan.workspace_bytes());
  REQUIRE(error_message([&] { pa::decode(plan, view, nullptr); }) == "");  // asynchronous: nothing waits
  REQUIRE(error_message([] { pa::gpu::synchronize("the api's decode"); }) == expected);
}

TEST_CASE("gpu api: decode refuses a view of another problem before launching", "[gpu][api]") {
  if (!pa::gpu::available()) PA_SKIP(pa::gpu::unavailable_reason());
  const pa::Workload workload = pa::make_workload(api_specs(DType::bf16).front());
  const pa::DecodePlan plan = pa::plan_decode(workload.problem, Backend::cuda);
  pa::WorkloadSpec spec = workload.spec;
  spec.context_lens.pop_back();
  const pa::Workload other = pa::make_workload(spec);
  pa::DeviceWorkload device(other);
  const pa::DecodeView view = device.view(plan.workspace_bytes());
  REQUIRE(error_message([&] { pa::decode(plan, view, nullptr); }) ==
          pa::cat("pa::decode: view.problem: expected the problem the plan was made for, got ", pa::describe(other.problem),
                  " (the plan's: ", pa::describe(workload.problem), ")"));
}

TEST_CASE("gpu api: checked decode refuses host memory the device cannot read, naming the argument", "[gpu][api]") {
  if (!pa::gpu::available()) PA_SKIP(pa::gpu::unavailable_reason());
  const pa::gpu::DeviceInfo& info = pa::gpu::device_info();
  if (info.pageable_memory_access) PA_SKIP(info.name + " reads pageable host memory (HMM or ATS): nothing to refuse");
  const pa::Workload workload = pa::make_workload(api_specs(DType::bf16).front());
  const pa::DecodePlan plan = pa::plan_decode(workload.problem, Backend::cuda);
  pa::DeviceWorkload device(workload);
  const pa::DecodeView good = device.view(plan.workspace_bytes());
  std::vector<std::byte> host(std::max(workload.out_bytes(), plan.workspace_bytes()));
  // One argument at a time pointed at pageable host memory: refused before anything is launched.
  const auto refused = [&](const char* name, auto point_at_host) {
    pa::DecodeView view = good;
    point_at_host(view);
    const std::string message = error_message([&] { pa::decode(plan, view, nullptr); });
    INFO(name << ": " << message);
    REQUIRE(message.starts_with(pa::cat("pa::decode: ", name, ": expected memory cuda:", info.ordinal, " reads and writes")));
    REQUIRE(message.find("pageable host memory") != std::string::npos);
  };
  refused("query", [&](pa::DecodeView& view) { view.query = host.data(); });
  refused("block_tables", [&](pa::DecodeView& view) { view.block_tables = workload.block_tables.data(); });
  refused("out", [&](pa::DecodeView& view) { view.out = host.data(); });
  refused("workspace", [&](pa::DecodeView& view) { view.workspace = host.data(); });
  // The device's own memory passes, and the decode it launches runs.
  REQUIRE(error_message([&] { pa::decode(plan, good, nullptr); }) == "");
  REQUIRE(error_message([] { pa::gpu::synchronize("the api's decode"); }) == "");
}
