// Launch-gap experiment: is the host's enqueue of a step's launch inside the timed region?
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include "common/harness.h"
#include "common/workload.h"
#include "kernels/registry.h"
using namespace pa;

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)

__global__ void hold(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}

static double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main(int argc, char** argv) {
  const int runs = 41;
  const KernelOptions opts{};
  const DeviceLimits& limits = gpu::device_info().limits;
  struct Case { const char* wl; int ctx; };
  std::vector<Case> cases = {{"long-single", 0}, {"gqa-batch", 0}, {"single16", 16}};
  cudaStream_t s; CK(cudaStreamCreate(&s));
  cudaEvent_t a, b, f0; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b)); CK(cudaEventCreate(&f0));
  std::printf("%-12s %-5s %10s %10s %10s %10s %10s %10s\n", "workload", "step", "A_now_us", "B_hold_us", "C_graph_us", "D_ghold_us", "host_enq_us", "flush_us");
  for (const Case& c : cases) {
    WorkloadSpec spec = c.ctx ? named_spec("long-single") : named_spec(c.wl);
    if (c.ctx) { spec.context_lens = {c.ctx}; spec.name = c.wl; }
    Workload w = make_workload(spec, 0);
    DeviceWorkload dev(w);
    for (int step : {6, 7, 8}) {
      const KernelEntry& k = kernel(step, Backend::cuda);
      const DecodeView view = dev.view(k.workspace_bytes(w.problem, opts, limits));
      double A = time_gpu_launches(k, dev, opts, runs) * 1e6;
      std::vector<double> B, C, D, H, F;
      for (int i = 0; i < runs; ++i) {  // B: a hold kernel after the flush: the host is ahead
        gpu::flush_l2();
        hold<<<1, 1>>>(100000);
        CK(cudaEventRecord(a, nullptr));
        k.launch(view, opts, limits, nullptr);
        CK(cudaEventRecord(b, nullptr));
        CK(cudaEventSynchronize(b));
        float ms; CK(cudaEventElapsedTime(&ms, a, b)); B.push_back(ms * 1e3);
      }
      for (int i = 0; i < runs; ++i) {  // host enqueue time and flush time, as the harness does it
        CK(cudaEventRecord(f0, nullptr));
        gpu::flush_l2();
        auto t0 = std::chrono::steady_clock::now();
        CK(cudaEventRecord(a, nullptr));
        k.launch(view, opts, limits, nullptr);
        CK(cudaEventRecord(b, nullptr));
        auto t1 = std::chrono::steady_clock::now();
        CK(cudaEventSynchronize(b));
        H.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        float ms; CK(cudaEventElapsedTime(&ms, f0, a)); F.push_back(ms * 1e3);
      }
      cudaGraph_t g; cudaGraphExec_t ge;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
      k.launch(view, opts, limits, s);
      CK(cudaStreamEndCapture(s, &g));
      CK(cudaGraphInstantiate(&ge, g, 0));
      CK(cudaGraphLaunch(ge, s)); CK(cudaStreamSynchronize(s));
      for (int hold_it = 0; hold_it < 2; ++hold_it)
        for (int i = 0; i < runs; ++i) {
          CK(cudaDeviceSynchronize());
          gpu::flush_l2();
          if (hold_it) hold<<<1, 1, 0, s>>>(100000);
          CK(cudaEventRecord(a, s));
          CK(cudaGraphLaunch(ge, s));
          CK(cudaEventRecord(b, s));
          CK(cudaEventSynchronize(b));
          float ms; CK(cudaEventElapsedTime(&ms, a, b)); (hold_it ? D : C).push_back(ms * 1e3);
        }
      CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
      std::printf("%-12s %-5d %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n", c.wl, step, A, med(B), med(C), med(D), med(H), med(F));
      std::fflush(stdout);
    }
  }
  return 0;
}
