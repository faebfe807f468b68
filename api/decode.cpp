#include "api/decode.h"

#include <algorithm>
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

// Step 11 (the persistent programs over a work list balanced by the lengths) goes first for a
// ragged batch whose host lengths plan_decode is given. Measured in the recorded run
// nvidia-h200-20261204-22d130bc3c (its JSON in docs/results/, or in lab/runs/ once a newer run
// replaces it; docs/pages/entry_point.md quotes the newest), bf16, one run for steps 10 and 11:
// ragged-skew (one sequence of 65536 tokens, 63 of 512; the longest 43 times the mean) 104.0 µs
// against step 10's 289 (80.2 against 28.9%), ragged-uniform (uniform in [128, 16384]; the
// longest 2.0 times the mean) 486 against 520 (90.5 against 84.6%). Where the lengths are equal
// step 10 leads: gqa-batch 478 against 494 µs, small-batch 37.7 against 40.6, long-single 37.9
// against 39.4, and the one-sequence points from 1k to 1M (by 1-3% from 32k). The rule "the
// longest at least 1.5 times the mean" sits between the ratios measured (1.0: step 10; 2.0 and
// 43: step 11); none between them was measured.
constexpr std::string_view kWhyPersistent =
    "chosen for a ragged batch (the longest sequence at least 1.5 times the mean) in bf16 and f16: its work list "
    "balances the tokens over the device (H200, docs/results: ragged-skew 2.8 times as fast as step 10, "
    "ragged-uniform 7% faster)";
constexpr double kRaggedRatio = 1.5;

/// Whether \p context_lens are ragged enough for step 11: the longest at least kRaggedRatio
/// times the mean. False for no lengths (plan_decode without them) and for a batch of no tokens.
bool ragged(std::span<const std::int32_t> context_lens) {
  if (context_lens.empty()) return false;
  double sum = 0;
  std::int32_t longest = 0;
  for (const std::int32_t length : context_lens) sum += length, longest = std::max(longest, length);
  return sum > 0 && longest >= kRaggedRatio * sum / static_cast<double>(context_lens.size());
}

// fp8 K/V (DecodeProblem::fp8_kv): step 12 is the one rung that reads them; the others refuse.
constexpr std::string_view kWhyFp8 = "the one rung that reads fp8 e4m3 K/V";

/// One row of the choice: a storage type (of q and the output), whether K/V are fp8, a rung to
/// try for it, and whether only for a ragged batch.
struct ChoiceRow {
  DType dtype;
  bool fp8_kv;
  RungChoice choice;
  bool ragged_only = false;
};

/// Fastest first: choose_rungs keeps the rows of the problem's storage type and K/V storage (a
/// ragged_only row only for ragged lengths), in this order.
constexpr ChoiceRow kFastestFirst[] = {
    {DType::bf16, true, {12, kWhyFp8}},
    {DType::f16, true, {12, kWhyFp8}},
    {DType::bf16, false, {11, kWhyPersistent}, true},
    {DType::f16, false, {11, kWhyPersistent}, true},
    {DType::bf16, false, {10, kWhyTensorCores}},
    {DType::f16, false, {10, kWhyTensorCores}},
    {DType::bf16, false, {9, kWhyNextFor16Bit}},
    {DType::f16, false, {9, kWhyNextFor16Bit}},
    {DType::f32, false, {9, kWhyF32}},
};

std::string two_digits(int step) { return cat(step < 10 ? "0" : "", step); }

}  // namespace

std::vector<RungChoice> choose_rungs(const DecodeProblem& problem, std::span<const std::int32_t> context_lens) {
  const bool is_ragged = ragged(context_lens);
  std::vector<RungChoice> rungs;
  for (const ChoiceRow& row : kFastestFirst)
    if (row.dtype == problem.dtype && row.fp8_kv == problem.fp8_kv && (!row.ragged_only || is_ragged))
      rungs.push_back(row.choice);
  return rungs;
}

DecodePlan plan_decode(const DecodeProblem& problem, std::span<const std::int32_t> context_lens, Backend backend,
                       const DeviceLimits& device) {
  validate(problem, kPlanDecode);
  // Where there is no GPU, the rung's plan says why (CudaError with gpu::unavailable_reason).
  if (backend == Backend::cuda && gpu::available()) gpu::require_process_device(kPlanDecode);
  // Bad lengths are the caller's, not a rung's refusal: checked here, before any rung is tried.
  if (!context_lens.empty()) validate_lengths(problem, context_lens, kPlanDecode);
  const std::vector<RungChoice> rungs = choose_rungs(problem, context_lens);
  PA_REQUIRE(!rungs.empty(), kPlanDecode, "problem.dtype",
             problem.fp8_kv ? "bf16 or f16 with fp8 K/V (fp8_kv: step 12, the one rung that reads them, multiplies 16-bit q)"
                            : "a storage type some rung runs",
             dtype_name(problem.dtype));
  std::string first_refusal, refusals;
  for (const RungChoice& rung : rungs) {
    const KernelEntry& entry = kernel(rung.step, backend);
    try {
      // Every knob 0: the rung's plan chooses them, as it did in the runs the choice rests on.
      LaunchPlan launch = context_lens.empty() ? entry.plan(problem, KernelOptions{}, device)
                                               : plan_for(entry, problem, context_lens, KernelOptions{}, device);
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

DecodePlan plan_decode(const DecodeProblem& problem, Backend backend, const DeviceLimits& device) {
  return plan_decode(problem, {}, backend, device);
}

DecodePlan plan_decode(const DecodeProblem& problem, std::span<const std::int32_t> context_lens, Backend backend) {
  return plan_decode(problem, context_lens, backend,
                     backend == Backend::cuda ? gpu::device_info().limits : DeviceLimits::pretend_h200());
}

DecodePlan plan_decode(const DecodeProblem& problem, Backend backend) { return plan_decode(problem, {}, backend); }

void decode(const DecodePlan& plan, const DecodeView& view, void* stream) {
  // Checked here in the API's name: the problem, the pointers, the workspace, and (emulator)
  // the lengths and tables. A CUDA view's tables are device memory: the CUDA entry checks them
  // on the device, without a wait (DecodeView::checked), so the host does not read them here;
  // in checked mode the host asks the driver where each pointer lives instead (a pointer the
  // device cannot reach would fault and lose the process's CUDA context).
  DecodeView host_checks = view;
  if (plan.backend() == Backend::cuda) host_checks.checked = false;
  if (!begin_launch(host_checks, plan.launch_plan(), kDecode)) return;
  if (plan.backend() == Backend::cuda) {
    gpu::require_process_device(kDecode);
    if (view.checked) gpu::require_device_pointers(view, kDecode);
  }
  plan.kernel().launch(view, plan.launch_plan(), stream);
}

}  // namespace pa
