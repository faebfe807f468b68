#include "kernels/registry.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

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

// The rungs before step 12 read K and V as the problem's dtype; an fp8 problem given to them is
// refused by their entry's plan (KernelEntry::runs_fp8_kv), before anything of theirs runs.
/// The entry \p Make returns, as the step's file makes it.
template <KernelEntry (*Make)()>
const KernelEntry& as_made() {
  static const KernelEntry made = Make();
  return made;
}
/// Throws ArgumentError, naming \p kernel and `fp8_kv`, for an fp8 K/V problem.
void refuse_fp8_kv(const DecodeProblem& problem, const char* kernel) {
  PA_REQUIRE(!problem.fp8_kv, kernel, "fp8_kv",
             "false (this rung reads K and V as dtype; fp8 e4m3 K/V run on step 12)", "true");
}
template <KernelEntry (*Make)()>
LaunchPlan plan_refusing_fp8(const DecodeProblem& problem, const KernelOptions& options, const DeviceLimits& device) {
  refuse_fp8_kv(problem, as_made<Make>().name);
  return as_made<Make>().plan(problem, options, device);
}
template <KernelEntry (*Make)()>
LaunchPlan plan_lengths_refusing_fp8(const DecodeProblem& problem, std::span<const std::int32_t> context_lens,
                                     const KernelOptions& options, const DeviceLimits& device) {
  refuse_fp8_kv(problem, as_made<Make>().name);
  return as_made<Make>().plan_lengths(problem, context_lens, options, device);
}
/// The entry \p Make returns; unless it runs fp8 K/V, its plans refuse them.
template <KernelEntry (*Make)()>
KernelEntry fp8_checked() {
  KernelEntry entry = Make();
  if (entry.runs_fp8_kv) return entry;
  entry.plan = &plan_refusing_fp8<Make>;
  if (entry.plan_lengths) entry.plan_lengths = &plan_lengths_refusing_fp8<Make>;
  return entry;
}

#if PAGEDATTN_HAVE_CUDA
// The CUDA entries behind the checked mode. A view's pointers are device memory there, so
// begin_launch cannot read its tables: the check runs on the device, one kernel on the launch's
// stream (gpu::check_tables_async), and the kernel is called with checked off, reading the
// checked copy of the lengths the check writes. Its scratch (that copy, each sequence's fault and
// the count of the check's programs that finished) is the front of the workspace, so two streams
// with workspaces of their own never share it; the kernel's workspace follows.

/// The CUDA entry that \p Make returns, as the step's file makes it.
template <KernelEntry (*Make)()>
const KernelEntry& inner_entry() {
  static const KernelEntry inner = Make();
  return inner;
}

/// \p plan, the kernel's, its workspace grown by the checked mode's scratch
/// (gpu::table_check_bytes); the fault record is allocated here, so that no launch allocates
/// (gpu::prepare_table_check).
LaunchPlan with_check_scratch(LaunchPlan plan) {
  plan.workspace_bytes += gpu::table_check_bytes(plan.problem.num_seqs);
  gpu::prepare_table_check();
  return plan;
}

/// The kernel's plan, with the checked mode's scratch.
template <KernelEntry (*Make)()>
LaunchPlan plan_with_check_scratch(const DecodeProblem& problem, const KernelOptions& options,
                                   const DeviceLimits& device) {
  return with_check_scratch(inner_entry<Make>().plan(problem, options, device));
}

/// The kernel's plan for the host copy of the lengths, with the checked mode's scratch.
template <KernelEntry (*Make)()>
LaunchPlan plan_lengths_with_check_scratch(const DecodeProblem& problem, std::span<const std::int32_t> context_lens,
                                           const KernelOptions& options, const DeviceLimits& device) {
  return with_check_scratch(inner_entry<Make>().plan_lengths(problem, context_lens, options, device));
}

/// The launch behind the checked mode. Nothing here waits: a fault the check finds is raised
/// by the host's next wait (gpu::raise_table_fault), or by the next checked launch, which
/// raises one an earlier launch left before it starts.
template <KernelEntry (*Make)()>
void launch_checked_on_device(const DecodeView& view, const LaunchPlan& plan, void* stream) {
  const KernelEntry& inner = inner_entry<Make>();
  if (view.checked) gpu::raise_table_fault();
  DecodeView unchecked = view;
  unchecked.checked = false;
  // begin_launch first: the check kernel dereferences the pointers it vets.
  if (!begin_launch(unchecked, plan, inner.name)) return;
  gpu::require_context(inner.name);  // after a device fault nothing launches (CATALOGUE R5)
  const std::size_t scratch = gpu::table_check_bytes(view.problem.num_seqs);
  PA_REQUIRE(plan.workspace_bytes >= scratch, inner.name, "plan.workspace_bytes",
             cat(">= ", scratch, " (the checked mode's scratch: a plan made by this entry)"), plan.workspace_bytes);
  // The check counts its programs in the scratch's first 8 bytes, with 64-bit atomics.
  PA_REQUIRE(!view.checked || reinterpret_cast<std::uintptr_t>(view.workspace) % 8 == 0, inner.name, "workspace",
             "an address that is a multiple of 8 (the checked mode's scratch)", view.workspace);
  if (view.checked) unchecked.context_lens = gpu::check_tables_async(view, view.workspace, inner.name, stream);
  unchecked.workspace = static_cast<std::byte*>(view.workspace) + scratch;
  unchecked.workspace_bytes = view.workspace_bytes - scratch;
  LaunchPlan kernel_plan = plan;
  kernel_plan.workspace_bytes -= scratch;
  inner.launch(unchecked, kernel_plan, stream);
}

/// The CUDA entry that \p Make returns, its plan and launch behind the checked mode.
template <KernelEntry (*Make)()>
KernelEntry checked_on_device() {
  KernelEntry entry = Make();
  entry.plan = &plan_with_check_scratch<Make>;
  if (entry.plan_lengths) entry.plan_lengths = &plan_lengths_with_check_scratch<Make>;
  entry.launch = &launch_checked_on_device<Make>;
  return entry;
}
#endif

const std::vector<KernelEntry>& entries(Backend backend) {
  static const std::vector<KernelEntry> emulator = {
#define PA_KERNEL_STEP(number) fp8_checked<&kernels_emu::step##number##_entry>(),
#include "kernel_list.inc"
#undef PA_KERNEL_STEP
  };
#if PAGEDATTN_HAVE_CUDA
  static const std::vector<KernelEntry> cuda = {
#define PA_KERNEL_STEP(number) checked_on_device<&fp8_checked<&kernels_cuda::step##number##_entry>>(),
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
