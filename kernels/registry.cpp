#include "kernels/registry.h"

#include <algorithm>

#include "common/error.h"

// The generated list holds one PA_KERNEL_STEP(NN) per pagedattn_add_kernel() call.
namespace pa::kernels_emu {
#define PA_KERNEL_STEP(number) KernelEntry step##number##_entry();
#include "kernel_list.inc"
#undef PA_KERNEL_STEP
}  // namespace pa::kernels_emu

#if PAGEDATTN_HAVE_CUDA
namespace pa::kernels_cuda {
#define PA_KERNEL_STEP(number) KernelEntry step##number##_entry();
#include "kernel_list.inc"
#undef PA_KERNEL_STEP
}  // namespace pa::kernels_cuda
#endif

namespace pa {
namespace {
const std::vector<KernelEntry>& entries(Backend backend) {
  static const std::vector<KernelEntry> emulator = {
#define PA_KERNEL_STEP(number) kernels_emu::step##number##_entry(),
#include "kernel_list.inc"
#undef PA_KERNEL_STEP
  };
#if PAGEDATTN_HAVE_CUDA
  static const std::vector<KernelEntry> cuda = {
#define PA_KERNEL_STEP(number) kernels_cuda::step##number##_entry(),
#include "kernel_list.inc"
#undef PA_KERNEL_STEP
  };
  if (backend == Backend::cuda) return cuda;
#else
  if (backend == Backend::cuda)
    throw Error("pagedattn was built without CUDA (configure with the 'cuda' preset to build the GPU path)");
#endif
  return emulator;
}
}  // namespace

const KernelEntry& kernel(int step, Backend backend) {
  for (const KernelEntry& entry : entries(backend))
    if (entry.step == step) return entry;
  std::string steps;
  for (int s : kernel_steps()) steps += (steps.empty() ? "" : ", ") + std::to_string(s);
  throw_argument("pa::kernel", "step", cat("a step with a kernel (", steps, ")"), std::to_string(step));
}

std::vector<int> kernel_steps() {
  std::vector<int> steps;
  for (const KernelEntry& entry : entries(Backend::emulator)) steps.push_back(entry.step);
  return steps;
}

bool cuda_built() { return PAGEDATTN_HAVE_CUDA != 0; }

}  // namespace pa
