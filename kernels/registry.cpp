#include "kernels/registry.h"

#include <algorithm>

#include "common/cuda/runtime.h"
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

#if PAGEDATTN_HAVE_CUDA
/// The launch of the CUDA entry that \p Make returns, behind the checked mode: a view's
/// pointers are device memory there, so begin_launch cannot read its tables; the check runs
/// on the device (gpu::find_table_fault, on the launch's stream) and the kernel is called with
/// checked off.
template <KernelEntry (*Make)()>
void launch_checked_on_device(const DecodeView& view, const LaunchPlan& plan, void* stream) {
  static const KernelEntry inner = Make();
  DecodeView unchecked = view;
  unchecked.checked = false;
  // begin_launch first: the check kernel dereferences the pointers it vets.
  if (view.checked && begin_launch(unchecked, plan, inner.name))
    throw_table_fault(view.problem, gpu::find_table_fault(view, stream), inner.name);
  inner.launch(unchecked, plan, stream);
}

/// The CUDA entry that \p Make returns, its launch behind the checked mode.
template <KernelEntry (*Make)()>
KernelEntry checked_on_device() {
  KernelEntry entry = Make();
  entry.launch = &launch_checked_on_device<Make>;
  return entry;
}
#endif

const std::vector<KernelEntry>& entries(Backend backend) {
  static const std::vector<KernelEntry> emulator = {
#define PA_KERNEL_STEP(number) kernels_emu::step##number##_entry(),
#include "kernel_list.inc"
#undef PA_KERNEL_STEP
  };
#if PAGEDATTN_HAVE_CUDA
  static const std::vector<KernelEntry> cuda = {
#define PA_KERNEL_STEP(number) checked_on_device<&kernels_cuda::step##number##_entry>(),
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
