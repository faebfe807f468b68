// A device fault loses the process's CUDA context (docs/design/CATALOGUE.md R5): the fault is
// reported once, naming the call that saw it, and every later GPU call is refused naming that
// fault, instead of failing with the old error as if it were its own. A program of its own,
// since the fault leaves nothing more to run on the GPU in this process: ctest runs each case
// alone, and scripts/gpu-bench runs this program apart from test_gpu_steps. Labelled gpu;
// skipped, with the reason, where there is no device.
#include <climits>
#include <string>
#include <vector>

#include "common/cuda/runtime.h"
#include "harness/harness.h"
#include "kernels/registry.h"
#include "tests/catch_compat.h"
#include "tests/test_util.h"

using pa::Backend;
using namespace pa::testing;

TEST_CASE("gpu: after a device fault every GPU call is refused, naming the fault", "[gpu][fault]") {
  const std::string no_gpu = !pa::cuda_built() ? "pagedattn was built without CUDA" : pa::gpu::unavailable_reason();
  if (!no_gpu.empty()) PA_SKIP(no_gpu);
  REQUIRE(pa::gpu::context_lost().empty());
  // Step 06 with the checked mode off, one used block-table entry far past the pool: its
  // programs read an address no allocation holds, and the device stops them.
  pa::WorkloadSpec spec = pa::debug_spec();
  spec.context_lens = {37, 20};
  pa::Workload w = pa::make_workload(spec);
  w.block_tables[static_cast<std::size_t>(w.problem.max_blocks_per_seq)] = INT_MAX / 2;
  const pa::KernelEntry& entry = pa::kernel(6, Backend::cuda);
  const pa::LaunchPlan plan = entry.plan(w.problem, {}, pa::gpu::device_info().limits);
  pa::DeviceWorkload device(w);
  pa::DecodeView view = device.view(plan.workspace_bytes);
  view.checked = false;
  entry.launch(view, plan, nullptr);  // asynchronous: the fault is seen at the wait

  const std::string fault = error_message([] { pa::gpu::synchronize("the launch that reads past the pool"); });
  INFO("the wait: " << fault);
  REQUIRE(fault.starts_with("after the launch that reads past the pool: cudaError"));
  REQUIRE(fault.find("this process's CUDA context is lost") != std::string::npos);
  const std::string lost = pa::gpu::context_lost();
  REQUIRE(!lost.empty());
  REQUIRE(fault.starts_with(lost));

  // Every later call names that fault: a wait, an allocation, a copy, a launch.
  const std::string names_it = "refused: this process's CUDA context was lost to an earlier device fault (" + lost + ")";
  const std::string wait = error_message([] { pa::gpu::synchronize("a later wait"); });
  INFO("a later wait: " << wait);
  REQUIRE(wait.starts_with("after a later wait: " + names_it));
  const std::string allocation = error_message([] { pa::gpu::Buffer buffer(256, "a later buffer"); });
  INFO("an allocation: " << allocation);
  REQUIRE(allocation.starts_with("cudaMalloc of 256 bytes for a later buffer: " + names_it));
  const std::string copy = error_message([&] { device.download_out(); });
  INFO("a copy: " << copy);
  REQUIRE(copy.find(names_it) != std::string::npos);
  view.checked = true;
  const std::string launch = error_message([&] { entry.launch(view, plan, nullptr); });
  INFO("a launch: " << launch);
  REQUIRE(launch.find(names_it) != std::string::npos);
  REQUIRE(pa::gpu::context_lost() == lost);  // the first fault stays the one named
}
