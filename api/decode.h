#pragma once
/// \file
/// The one entry point for code outside the ladder: plan once for a batch shape and a device,
/// then decode with the plan, as many times as the shape holds.
///
/// ```
/// const pa::DecodePlan plan = pa::plan_decode(problem, pa::Backend::cuda);  // picks the rung and its knobs
/// // allocate plan.workspace_bytes() of scratch, fill a DecodeView of your tensors, then each step:
/// pa::decode(plan, view, stream);  // stream: a cudaStream_t (nullptr: the default stream)
/// ```
///
/// plan_decode picks the fastest rung of the ladder measured for the problem (choose_rungs, a
/// table whose comments give the measurements) and lets that rung's own plan choose its knobs:
/// it plans with `KernelOptions{}`, every knob 0, as the measured runs did. decode checks that
/// the view is the plan's problem and launches. Both throw ArgumentError naming the function
/// (`pa::plan_decode`, `pa::decode`), the argument, what was expected and what was found, as
/// every function of the project does. Examples: examples/01_decode/main.cpp; the page is
/// docs/pages/entry_point.md.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/kernel_api.h"
#include "common/problem.h"

namespace pa {

/// A rung plan_decode may run for a problem, and why: one row of the choice.
struct RungChoice {
  int step = 0;          ///< ladder number (kernels/NN_name.cuh)
  std::string_view why;  ///< the measured reason, one clause (it goes into DecodePlan::description)
};

/// The rungs plan_decode tries for \p problem, fastest first: bf16 and f16 step 10 then step 09,
/// f32 step 09 (step 10 multiplies 16-bit inputs and refuses f32); for bf16 and f16 with ragged
/// \p context_lens (the host copy of the lengths, one a sequence; the longest at least 1.5 times
/// the mean), step 11 first, whose work list balances the tokens over the device. The first whose
/// plan accepts the problem runs. Without lengths (an empty span) step 11 is not chosen. A
/// problem with fp8 K/V (DecodeProblem::fp8_kv) gets step 12, the one rung that reads them.
std::vector<RungChoice> choose_rungs(const DecodeProblem& problem, std::span<const std::int32_t> context_lens = {});

/// What plan_decode chose for one problem on one device: the rung, its launch, and why. Copyable;
/// made only by plan_decode, so a plan always holds a launch some rung accepted.
class DecodePlan {
 public:
  /// The problem the plan was made for; decode refuses a view of another.
  const DecodeProblem& problem() const { return launch_.problem; }
  /// Where it runs: the backend given to plan_decode.
  Backend backend() const { return kernel_->backend; }
  /// The ladder number of the rung chosen.
  int step() const { return kernel_->step; }
  /// The rung's kernel entry (its name, `weights_in_storage_type` for the oracle check, ...).
  const KernelEntry& kernel() const { return *kernel_; }
  /// The rung's own plan: grid, threads, shared memory, splits, and the knobs as they run.
  const LaunchPlan& launch_plan() const { return launch_; }
  /// Bytes of scratch (DecodeView::workspace) every decode with this plan needs, on the
  /// backend's side: device memory for Backend::cuda (it includes the checked mode's scratch).
  std::size_t workspace_bytes() const { return launch_.workspace_bytes; }
  /// One line: the rung, why it was chosen (and which faster rung refused the problem, if one
  /// did), and its launch: "step 10 (step10_tensor_cores) on the emulator: ...; grid 2 x 4 x 1 ...".
  const std::string& description() const { return description_; }

 private:
  DecodePlan(const KernelEntry& kernel, LaunchPlan launch, std::string description)
      : kernel_(&kernel), launch_(std::move(launch)), description_(std::move(description)) {}
  friend DecodePlan plan_decode(const DecodeProblem& problem, std::span<const std::int32_t> context_lens, Backend backend,
                                const DeviceLimits& device);

  const KernelEntry* kernel_;  // an entry of pa::kernel()'s table, which lives as long as the program
  LaunchPlan launch_;
  std::string description_;
};

/// Plans decode steps of \p problem on \p backend for \p device: checks the problem (validate),
/// tries the rungs of choose_rungs in order and keeps the first whose plan accepts it, with the
/// knobs that rung's plan picks. Throws ArgumentError "pa::plan_decode: ..." for a problem no
/// rung runs, carrying the first rung's message (which names the rung and the argument), and
/// Error for Backend::cuda in a build without CUDA; ArgumentError too for a current CUDA device
/// other than this process's (gpu::require_process_device). Nothing is launched. For
/// Backend::cuda it allocates the checked mode's fault record, once a process, and a plan of steps 11 or 12 its
/// work list in device memory, copied there before plan_decode returns (a synchronous copy, so
/// not while a stream is being captured); that memory is freed with the plan.
DecodePlan plan_decode(const DecodeProblem& problem, Backend backend, const DeviceLimits& device);

/// plan_decode for the backend's own device: the emulator's pretend H200
/// (DeviceLimits::pretend_h200), or the CUDA device (gpu::device_info, which asks once a process:
/// one device a process; CudaError naming the reason when there is none).
DecodePlan plan_decode(const DecodeProblem& problem, Backend backend);

/// plan_decode for a batch whose context lengths the host knows, \p context_lens (one a
/// sequence, as the decodes' will be): a ragged batch gets step 11, whose plan balances its work
/// list by these lengths (choose_rungs); an empty span is plan_decode without lengths. The plan
/// stays right for any lengths of its problem (each launch reads them on the backend's side, so
/// a CUDA graph of it replays with new ones); it is balanced for these. Throws ArgumentError
/// "pa::plan_decode: context_lens.size(): ..." for a count other than problem.num_seqs, and
/// "pa::plan_decode: context_lens[i]: ..." for a length outside [0, max_context_len].
DecodePlan plan_decode(const DecodeProblem& problem, std::span<const std::int32_t> context_lens, Backend backend,
                       const DeviceLimits& device);

/// plan_decode with host lengths for the backend's own device.
DecodePlan plan_decode(const DecodeProblem& problem, std::span<const std::int32_t> context_lens, Backend backend);

/// Runs one decode step of \p plan on \p view, whose tensors live on the plan's backend (host
/// memory for the emulator, device memory for CUDA) and whose problem must be the plan's, with
/// at least plan.workspace_bytes() of workspace (scratch: decodes that may run at the same time,
/// on two streams, need one each). Throws ArgumentError "pa::decode: ..." naming the argument
/// (view.problem, a null pointer, the workspace, an output overlapping an input, and on CUDA a
/// current device other than the plan's); the rung's launch checks the view again, in its own
/// name, which costs microseconds of host time.
/// In checked mode (DecodeView::checked, the default) the context lengths and used block-table
/// entries are checked too: in host memory before the launch on the emulator ("pa::decode: ..."),
/// on the device on CUDA, where a bad one is raised with the rung's name at the host's next wait
/// (gpu::synchronize, a download); and on CUDA each pointer must be memory the device reaches
/// (gpu::require_device_pointers: pageable host memory the device cannot read, or another
/// device's memory, is refused; one driver query a pointer). On CUDA the call is asynchronous on \p stream (a cudaStream_t;
/// nullptr is the default stream), allocates nothing and waits for nothing, so a CUDA graph may
/// capture it; on the emulator \p stream is ignored and the call returns when the output is
/// written.
void decode(const DecodePlan& plan, const DecodeView& view, void* stream = nullptr);

}  // namespace pa
