#include "api/decode.h"

#include <iterator>

#include "common/cuda/runtime.h"
#include "common/error.h"
#include "kernels/registry.h"

namespace pa {
namespace {

constexpr const char* kPlanDecode = "pa::plan_decode";
constexpr const char* kDecode = "pa::decode";

// The choice, from the recorded H200 run (docs/results/nvidia-h200-20261202-7d22494521.json: bf16,
// gqa-batch's 64 sequences of 8192 tokens, one thing changed at a time; % of the datasheet
// bandwidth, median of 20 launches):
//  - step 10 ran 85.3-90.3% at every group size (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 32) and head dim
//    (64, 80, 96, 112, 128, 256). Step 09 fell to 30.8, 18.5, 30.6, 13.2, 44.8, 30.0, 22.5 and
//    11.3% at groups 3, 5, 6, 7, 8, 12, 16 and 32, and to 8.9, 17.6 and 8.5% at head dims 80, 96
//    and 112. Where step 09 led (group 1: 91.2 against 90.3; group 2: 90.8 against 90.2; head
//    dim 256: 90.4 against 88.2) it led by 2.2 points or less in one run each: not enough for a
//    shape-by-shape rule. On the named workloads step 10 led or trailed by 0.5 points at most
//    (small-batch 71.3 against 35.8, ragged-skew 27.6 against 22.4, ragged-uniform 81.7 against
//    77.0; mha-batch 91.0 against 91.5, long-single 65.4 against 65.5).
//  - f32: step 10 refuses it (tensor cores multiply 16-bit inputs here). Step 09 is the fastest
//    rung that runs it; no f32 run is recorded, so that rests on the bf16 rows (step 09 at 22.4
//    to 91.5% on the named workloads, the best of steps 02-08 at 11.1 to 67.3%).
// Step 09 stays behind step 10 for 16-bit storage: it runs what step 10's plan refuses (a group
// too large for its 32 warps at that head dim).
constexpr std::string_view kWhyTensorCores =
    "chosen for bf16 and f16, within a few points of the fastest rung at every group size and head dim "
    "recorded (H200, docs/results) and far ahead at most of them";
constexpr std::string_view kWhyNextFor16Bit = "the next fastest for bf16 and f16";
constexpr std::string_view kWhyF32 = "the fastest rung that runs f32 (step 10 multiplies 16-bit inputs only)";

/// One row of the choice: a storage type and a rung to try for it.
struct ChoiceRow {
  DType dtype;
  RungChoice choice;
};

/// Fastest first: choose_rungs keeps the rows of the problem's storage type, in this order. A
/// later rung goes above the rows it beats; one that wins only on some shapes (a persistent
/// scheduler on ragged batches) would add a condition on the problem to its row.
// TODO(step 11): step 11 (step11_persistent, the persistent programs over a planned work list)
// is not in the choice until a GPU run measures it against step 10. Its plan reads the host copy
// of the lengths (KernelEntry::plan_lengths, through pa::plan_for); plan_decode has no lengths to
// give it, so choosing it would plan every sequence at max_context_len (its plain plan: right for
// any lengths, balanced only for equal ones). Adding it means a plan_decode that takes the host
// lengths too, and a row above step 10's for bf16 and f16 where the measurements say so.
constexpr ChoiceRow kFastestFirst[] = {
    {DType::bf16, {10, kWhyTensorCores}},  {DType::f16, {10, kWhyTensorCores}},
    {DType::bf16, {9, kWhyNextFor16Bit}},  {DType::f16, {9, kWhyNextFor16Bit}},
    {DType::f32, {9, kWhyF32}},
};

std::string two_digits(int step) { return cat(step < 10 ? "0" : "", step); }

}  // namespace

std::vector<RungChoice> choose_rungs(const DecodeProblem& problem) {
  std::vector<RungChoice> rungs;
  for (const ChoiceRow& row : kFastestFirst)
    if (row.dtype == problem.dtype) rungs.push_back(row.choice);
  return rungs;
}

DecodePlan plan_decode(const DecodeProblem& problem, Backend backend, const DeviceLimits& device) {
  validate(problem, kPlanDecode);
  const std::vector<RungChoice> rungs = choose_rungs(problem);
  PA_REQUIRE(!rungs.empty(), kPlanDecode, "problem.dtype", "a storage type some rung runs", dtype_name(problem.dtype));
  std::string first_refusal, refusals;
  for (const RungChoice& rung : rungs) {
    const KernelEntry& entry = kernel(rung.step, backend);
    try {
      // Every knob 0: the rung's plan chooses them, as it did in the runs the choice rests on.
      LaunchPlan launch = entry.plan(problem, KernelOptions{}, device);
      std::string description =
          cat("step ", two_digits(entry.step), " (", entry.name, ") on ",
              backend == Backend::cuda ? "the GPU" : "the emulator", ": ", rung.why, refusals, "; ", launch.description);
      return DecodePlan(entry, std::move(launch), std::move(description));
    } catch (const ArgumentError& refusal) {
      if (first_refusal.empty()) first_refusal = refusal.what();
      refusals += cat(", as step ", two_digits(entry.step), " refused the problem (", refusal.what(), ")");
    }
  }
  throw ArgumentError(cat(kPlanDecode, ": ", first_refusal));
}

DecodePlan plan_decode(const DecodeProblem& problem, Backend backend) {
  return plan_decode(problem, backend,
                     backend == Backend::cuda ? gpu::device_info().limits : DeviceLimits::pretend_h200());
}

void decode(const DecodePlan& plan, const DecodeView& view, void* stream) {
  // Checked here in the API's name: the problem, the pointers, the workspace, and (emulator)
  // the lengths and tables. A CUDA view's tables are device memory: the CUDA entry checks them
  // on the device, without a wait (DecodeView::checked), so the host does not read them here.
  DecodeView host_checks = view;
  if (plan.backend() == Backend::cuda) host_checks.checked = false;
  if (!begin_launch(host_checks, plan.launch_plan(), kDecode)) return;
  plan.kernel().launch(view, plan.launch_plan(), stream);
}

}  // namespace pa
