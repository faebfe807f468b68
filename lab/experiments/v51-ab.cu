// The A/B calls of run v51 in one program: `v51-ab N` runs call N (5 to 10) of
// v51-slots-and-shapes.txt. Each variant is a build of steps 06-08 from v51-variants.patch under
// its own namespace; "same" is the library's code built the same way. For each workload and
// step: the output of every variant against the first's (bits; a different split count or tile
// changes the order of the sums), then five interleaved rounds of time_gpu_launches (L2
// flushed, median of 21 launches), microseconds. (The calls ran as six drivers with these
// tables written out; they are one program here, printing call 5-7's format.)
//
// Variant objects (in build/cuda, head dim 128, tile 1 unless said):
//   nvcc ... -DPAGEDATTN_HAVE_CUDA=1 -DPA_HEAD_DIMS=128 -DPA_TILE_TOKENS=1 -DPA_KERNELS=kernels_X <flags>
//     -I<patched copy> -I<repo> -I build/cuda/generated/kernels -O3 --generate-code=arch=compute_90,code=sm_90
//     --expt-relaxed-constexpr -std=c++20 -x cu -c build/cuda/generated/kernels/stepNN.cuda.cu
//   b: none; s5: -DPA_EXP_STAGES=5; wsK: -DPA_EXP_WARPSLOTS -DPA_EXP_STAGES=K (K = 4, 5, 6);
//   ws4t and bt: tiles 1, 2, 4 (PA_TILE_TOKENS defined as 1, 2, 4 in a --pre-include file), ws4t
//   with -DPA_EXP_WARPSLOTS; wsm, wsa, wsam: ws4t plus -DPA_EXP_MERGE_SMALL, -DPA_EXP_AHEAD, both.
// Linked with build/cuda's libpagedattn_{harness,reference,kernels,common}.a, Boost.Context, -ldl.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <cuda_runtime.h>
#include "common/harness.h"
#include "common/workload.h"
#include "kernels/registry.h"

#define PA_V51_DECLARE(ns)     \
  namespace pa::ns {           \
  KernelEntry step06_entry();  \
  KernelEntry step07_entry();  \
  KernelEntry step08_entry();  \
  }
PA_V51_DECLARE(kernels_b)
PA_V51_DECLARE(kernels_s5)
PA_V51_DECLARE(kernels_ws4)
PA_V51_DECLARE(kernels_ws5)
PA_V51_DECLARE(kernels_ws6)
PA_V51_DECLARE(kernels_ws4t)
namespace pa::kernels_bt { KernelEntry step07_entry(); }
namespace pa::kernels_wsm { KernelEntry step07_entry(); }
namespace pa::kernels_wsa { KernelEntry step07_entry(); }
namespace pa::kernels_wsam { KernelEntry step07_entry(); }
using namespace pa;

namespace {
using Entry = KernelEntry (*)();
struct Variant {
  const char* name;
  Entry s6, s7, s8;  // nullptr: that step was not built for the variant
  KernelOptions options;
};
struct Load {
  const char* name;
  const char* base;  // a named workload
  int batch = 0;     // > 0: `batch` sequences of `context` tokens instead of the named lengths
  int context = 0;
};
struct Call {
  std::vector<Variant> variants;
  std::vector<Load> loads;
  std::vector<int> steps;
  std::vector<std::string> step06_loads;  // step 06 runs on these only
};

KernelOptions shape(int tile, int threads, int splits = 0) {
  KernelOptions o{};
  o.tile_tokens = tile;
  o.threads_per_block = threads;
  o.num_splits = splits;
  return o;
}

#define PA_V51_ALL(ns) kernels_##ns::step06_entry, kernels_##ns::step07_entry, kernels_##ns::step08_entry
#define PA_V51_07(ns) nullptr, kernels_##ns::step07_entry, nullptr
#define PA_V51_78(ns) nullptr, kernels_##ns::step07_entry, kernels_##ns::step08_entry

Call call(int n) {
  const Load ls{"long-single", "long-single"}, c8{"ctx8192", "long-single", 1, 8192};
  const Load b2{"b2x16384", "long-single", 2, 16384};
  const Variant same{"same", PA_V51_ALL(b), {}};  // kernels_b: steps 06-08 built
  switch (n) {
    case 5:
      return {{same, {"st5", PA_V51_78(s5), {}}},
              {ls, {"single16", "long-single", 1, 16}, {"small-batch", "small-batch"}, {"gqa-batch", "gqa-batch"},
               {"mha-batch", "mha-batch"}, {"ragged-uniform", "ragged-uniform"}, {"ragged-skew", "ragged-skew"}, ls},
              {7, 8}, {}};
    case 6:
      return {{same, {"ws4", PA_V51_ALL(ws4), {}}, {"ws5", PA_V51_ALL(ws5), {}}, {"ws6", PA_V51_ALL(ws6), {}}},
              {ls, {"single16", "long-single", 1, 16}, {"small-batch", "small-batch"}, {"gqa-batch", "gqa-batch"},
               {"mha-batch", "mha-batch"}, {"ragged-uniform", "ragged-uniform"}, {"ragged-skew", "ragged-skew"}, ls},
              {6, 7, 8}, {"single16", "gqa-batch", "mha-batch"}};
    case 7:
      return {{same, {"ws4", PA_V51_ALL(ws4), {}}, {"ws4t1", PA_V51_78(ws4t), {}}, {"ws4t2", PA_V51_78(ws4t), shape(2, 0)},
               {"ws4-256", PA_V51_ALL(ws4), shape(0, 256)}, {"ws4t2-256", PA_V51_78(ws4t), shape(2, 256)}},
              {ls, c8, {"small-batch", "small-batch"}, {"ragged-skew", "ragged-skew"}, {"gqa-batch", "gqa-batch"}, ls},
              {7, 8}, {}};
    case 8:
      return {{same, {"ws4", PA_V51_78(ws4t), {}}, {"ws t2x256", PA_V51_78(ws4t), shape(2, 256)},
               {"ws t2x128", PA_V51_78(ws4t), shape(2, 128)}, {"ws t2x384", PA_V51_78(ws4t), shape(2, 384)},
               {"ws t4x128", PA_V51_78(ws4t), shape(4, 128)}, {"ws t4x256", PA_V51_78(ws4t), shape(4, 256)},
               {"lib t2x256", PA_V51_07(bt), shape(2, 256)}},
              {ls, c8, {"ctx16384", "long-single", 1, 16384}, {"ctx65536", "long-single", 1, 65536}, b2,
               {"b4x4096", "long-single", 4, 4096}, {"small-batch", "small-batch"}, {"gqa-batch", "gqa-batch"},
               {"ragged-skew", "ragged-skew"}, ls},
              {7}, {}};
    case 9:
      return {{same, {"ws4", PA_V51_78(ws4t), {}}, {"ws t2x256", PA_V51_78(ws4t), shape(2, 256)},
               {"ws t2x192s12", PA_V51_78(ws4t), shape(2, 192, 12)}, {"ws t2x160s12", PA_V51_78(ws4t), shape(2, 160, 12)},
               {"ws t2x128s12", PA_V51_78(ws4t), shape(2, 128, 12)}, {"ws t1x384s8", PA_V51_78(ws4t), shape(1, 384, 8)},
               {"ws t2x256s6", PA_V51_78(ws4t), shape(2, 256, 6)}},
              {ls, c8, b2, ls}, {7}, {}};
    case 10:
      return {{same, {"ws", PA_V51_78(ws4t), {}}, {"ws-ahead", PA_V51_07(wsa), {}},
               {"ws t2x256", PA_V51_78(ws4t), shape(2, 256)}, {"m t2x256", PA_V51_07(wsm), shape(2, 256)},
               {"a t2x256", PA_V51_07(wsa), shape(2, 256)}, {"am t2x256", PA_V51_07(wsam), shape(2, 256)}},
              {ls, c8, b2, ls, {"gqa-batch", "gqa-batch"}, {"ragged-unif", "ragged-uniform"}, {"small-batch", "small-batch"}, ls},
              {7}, {}};
    default:
      std::fprintf(stderr, "v51-ab: the call is one of 5 to 10, not %d\n", n);
      std::exit(2);
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: v51-ab CALL (5 to 10)\n");
    return 2;
  }
  const Call c = call(std::atoi(argv[1]));
  const DeviceLimits& limits = gpu::device_info().limits;
  std::printf("\n%-15s %-4s %-13s %9s %9s %9s %9s %9s   bits\n", "workload", "step", "var", "r1_us", "r2_us", "r3_us", "r4_us",
              "r5_us");
  for (const Load& load : c.loads) {
    WorkloadSpec spec = named_spec(load.base);
    if (load.batch > 0) spec.context_lens.assign(load.batch, load.context);
    Workload w = make_workload(spec, 0);
    DeviceWorkload dev(w);
    for (int step : c.steps) {
      if (step == 6 && std::find(c.step06_loads.begin(), c.step06_loads.end(), load.name) == c.step06_loads.end()) continue;
      std::vector<KernelEntry> entries;
      for (const Variant& v : c.variants) {
        const Entry e = step == 6 ? v.s6 : step == 7 ? v.s7 : v.s8;
        if (e == nullptr) {
          std::fprintf(stderr, "v51-ab: variant %s has no step %d\n", v.name, step);
          return 2;
        }
        entries.push_back(e());
      }
      std::vector<std::byte> ref;
      std::vector<std::string> bits;
      for (size_t v = 0; v < entries.size(); ++v) {
        const KernelOptions& o = c.variants[v].options;
        const DecodeView view = dev.view(entries[v].workspace_bytes(w.problem, o, limits));
        dev.poison();
        entries[v].launch(view, o, limits, nullptr);
        gpu::synchronize(entries[v].name);
        const std::vector<std::byte> out = dev.download_out();
        if (v == 0) ref = out;
        bits.push_back(v == 0 ? "ref" : out == ref ? "same" : "differ");
      }
      std::vector<std::vector<double>> t(entries.size());
      for (int round = 0; round < 5; ++round)
        for (size_t v = 0; v < entries.size(); ++v)
          t[v].push_back(time_gpu_launches(entries[v], dev, c.variants[v].options, 21) * 1e6);
      for (size_t v = 0; v < entries.size(); ++v)
        std::printf("%-15s %-4d %-13s %9.2f %9.2f %9.2f %9.2f %9.2f   %s\n", load.name, step, c.variants[v].name, t[v][0],
                    t[v][1], t[v][2], t[v][3], t[v][4], bits[v].c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}
