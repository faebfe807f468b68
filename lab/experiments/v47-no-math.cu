// A/B of steps 07 and 08 built as variants (v47-variants.patch, each under its own namespace)
// against the library's own: the output against the library's (bits), then three interleaved
// rounds of time_gpu_launches.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#include "common/harness.h"
#include "common/workload.h"
#include "kernels/registry.h"
namespace pa::kernels_b { KernelEntry step07_entry(); KernelEntry step08_entry(); }
namespace pa::kernels_m128 { KernelEntry step07_entry(); KernelEntry step08_entry(); }
namespace pa::kernels_nomath { KernelEntry step07_entry(); KernelEntry step08_entry(); }
using namespace pa;
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)

static double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main() {
  // 2. stages A/B
  const KernelOptions opts{};
  const DeviceLimits& limits = gpu::device_info().limits;
  struct V { const char* name; KernelEntry s7, s8; };
  std::vector<V> vs = {{"base4", kernel(7, Backend::cuda), kernel(8, Backend::cuda)},
                       {"same", kernels_b::step07_entry(), kernels_b::step08_entry()},
                       {"m128", kernels_m128::step07_entry(), kernels_m128::step08_entry()},
                       {"nomath", kernels_nomath::step07_entry(), kernels_nomath::step08_entry()}};
  std::printf("\n%-15s %-4s %-6s %10s %10s %10s   bits\n", "workload", "step", "var", "r1_us", "r2_us", "r3_us");
  for (const char* wl : {"long-single", "single16", "long-single"}) {
    WorkloadSpec spec = named_spec(std::strcmp(wl, "single16") == 0 ? "long-single" : wl);
    if (std::strcmp(wl, "single16") == 0) spec.context_lens = {16};
    Workload w = make_workload(spec, 0);
    DeviceWorkload dev(w);
    for (int step : {7, 8}) {
      std::vector<std::byte> ref;
      std::vector<std::vector<double>> t(vs.size());
      std::vector<std::string> bits(vs.size());
      for (size_t v = 0; v < vs.size(); ++v) {
        const KernelEntry& k = step == 7 ? vs[v].s7 : vs[v].s8;
        const DecodeView view = dev.view(k.workspace_bytes(w.problem, opts, limits));
        dev.poison();
        k.launch(view, opts, limits, nullptr);
        gpu::synchronize(k.name);
        auto out = dev.download_out();
        if (v == 0) { ref = out; bits[v] = "ref"; }
        else bits[v] = out == ref ? "same" : "DIFFER";
      }
      for (int r = 0; r < 5; ++r)
        for (size_t v = 0; v < vs.size(); ++v)
          t[v].push_back(time_gpu_launches(step == 7 ? vs[v].s7 : vs[v].s8, dev, opts, 21) * 1e6);
      for (size_t v = 0; v < vs.size(); ++v)
        std::printf("%-15s %-4d %-6s %10.2f %10.2f %10.2f %10.2f %10.2f   %s\n", wl, step, vs[v].name, t[v][0], t[v][1], t[v][2], t[v][3], t[v][4], bits[v].c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}
