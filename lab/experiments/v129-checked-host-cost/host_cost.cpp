// v129: what a call of the entry point costs the host (CPU time to return), checked mode on and
// off, beside the rung's own launch and the driver queries of checked mode alone
// (gpu::require_device_pointers: one cudaPointerGetAttributes a pointer). Each mode: rounds of
// 64 calls, the queue drained between rounds (not timed), so the GPU never holds the host back;
// the median round's mean a call. Usage: host_cost [workload ...] (default: small-batch, the
// tour's workload). Built by build.sh against build/cuda's libraries.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "api/decode.h"
#include "common/cuda/runtime.h"
#include "common/workload.h"
#include "harness/harness.h"

namespace {
double median_us_a_call(const std::function<void()>& call, int rounds = 41, int calls = 64) {
  std::vector<double> means;
  for (int r = 0; r < rounds; ++r) {
    pa::gpu::synchronize("host_cost");
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) call();
    const auto stop = std::chrono::steady_clock::now();
    means.push_back(std::chrono::duration<double, std::micro>(stop - start).count() / calls);
  }
  pa::gpu::synchronize("host_cost");
  std::sort(means.begin(), means.end());
  return means[means.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<std::string, pa::WorkloadSpec>> specs;
  for (int i = 1; i < argc; ++i) specs.emplace_back(argv[i], pa::named_spec(argv[i]));
  if (specs.empty()) specs = {{"small-batch", pa::named_spec("small-batch")}, {"tour", pa::tour_spec()}};
  std::printf("%s\n", pa::gpu::device_info().limits.name.c_str());
  for (auto& [name, spec] : specs) {
    const pa::Workload workload = pa::make_workload(spec);
    const pa::DecodePlan plan = pa::plan_decode(workload.problem, pa::Backend::cuda);
    pa::DeviceWorkload device(workload);
    pa::DecodeView view = device.view(plan.workspace_bytes());
    device.poison();
    pa::DecodeView checked = view, unchecked = view;
    checked.checked = true;
    unchecked.checked = false;
    const double launch = median_us_a_call([&] { plan.kernel().launch(unchecked, plan.launch_plan(), nullptr); });
    const double decode = median_us_a_call([&] { pa::decode(plan, unchecked, nullptr); });
    const double decode_checked = median_us_a_call([&] { pa::decode(plan, checked, nullptr); });
    const double launch_checked = median_us_a_call([&] { plan.kernel().launch(checked, plan.launch_plan(), nullptr); });
    const double pointers = median_us_a_call([&] { pa::gpu::require_device_pointers(checked, "host_cost"); });
    const double device_check = median_us_a_call([&] { pa::gpu::require_process_device("host_cost"); });
    std::printf("%-12s step %02d: host us a call: rung launch %.2f, pa::decode %.2f, checked rung launch %.2f, "
                "checked pa::decode %.2f; require_device_pointers alone %.2f, require_process_device alone %.3f\n",
                name.c_str(), plan.step(), launch, decode, launch_checked, decode_checked, pointers, device_check);
  }
  return 0;
}
