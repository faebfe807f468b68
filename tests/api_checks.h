#pragma once
/// \file
/// The entry point's checks (api/decode.h) that both backends share: test_api.cpp runs them in
/// the emulator (CI), test_gpu_api.cpp on the GPU (labelled gpu).

#include <cstddef>
#include <string>
#include <vector>

#include "api/decode.h"
#include "harness/harness.h"
#include "tests/catch_compat.h"

namespace pa::testing {

/// The shapes the entry point is checked on: the debug workload's ragged contexts (0, 1,
/// page-1, page, page+1, a few pages) with group sizes 1 and 8 at head dims 128 and 80, in
/// \p dtype.
inline std::vector<WorkloadSpec> api_specs(DType dtype) {
  std::vector<WorkloadSpec> specs;
  for (const int group : {1, 8})
    for (const int head_dim : {128, 80}) {
      WorkloadSpec spec = debug_spec();
      spec.name = cat("group ", group, ", head dim ", head_dim, ", ", dtype_name(dtype));
      spec.num_kv_heads = 2;
      spec.num_q_heads = 2 * group;
      spec.head_dim = head_dim;
      spec.dtype = dtype;
      specs.push_back(spec);
    }
  return specs;
}

/// \p workload's plan from pa::plan_decode on \p backend: with its host lengths when
/// \p with_lengths (a ragged batch of 16-bit storage then gets step 11), else without.
inline DecodePlan api_plan(Backend backend, const Workload& workload, bool with_lengths) {
  return with_lengths ? plan_decode(workload.problem, workload.context_lens, backend) : plan_decode(workload.problem, backend);
}

/// Plans \p workload's problem with pa::plan_decode on \p backend (api_plan) and decodes it with
/// pa::decode (the GPU: the workload copied to the device, out and workspace poisoned first,
/// then downloaded); returns the output.
inline std::vector<std::byte> decode_with_api(Backend backend, const Workload& workload, bool with_lengths = false) {
  const DecodePlan plan = api_plan(backend, workload, with_lengths);
  if (backend == Backend::cuda) {
    DeviceWorkload device(workload);
    const DecodeView view = device.view(plan.workspace_bytes());
    device.poison();
    decode(plan, view, nullptr);
    return device.download_out();  // waits, and raises what the checked mode found
  }
  std::vector<std::byte> out(workload.out_bytes(), std::byte{0xff}), workspace(plan.workspace_bytes(), std::byte{0xff});
  decode(plan, workload.host_view(out.data(), workspace.data(), workspace.size()));
  return out;
}

/// The entry point on every shape of api_specs in bf16, f16 and f32 matches the oracle (the
/// harness's rule: tolerance, NaN, 3x the plain loop of the rung's precision), planned without
/// the lengths and with them (the debug workload's lengths are ragged: 16-bit storage then runs
/// on step 11, f32 still on step 09).
inline void check_api_against_oracle(Backend backend) {
  for (const bool with_lengths : {false, true})
    for (const DType dtype : {DType::bf16, DType::f16, DType::f32})
      for (const WorkloadSpec& spec : api_specs(dtype)) {
        const Workload workload = make_workload(spec);
        const DecodePlan plan = api_plan(backend, workload, with_lengths);
        REQUIRE(plan.step() == (dtype == DType::f32 ? 9 : with_lengths ? 11 : 10));
        const CompareResult result =
            check_against_oracle(workload, oracle_rows(workload), decode_with_api(backend, workload, with_lengths),
                                 plan.kernel().weights_in_storage_type);
        INFO(spec.name << " on " << backend_name(backend) << (with_lengths ? ", planned with the lengths: " : ": ")
                       << plan.description() << ": " << result.summary());
        REQUIRE(result.ok);
      }
}

/// fp8 K/V (q in bf16 and f16) go to step 12, the one rung that reads them, with or without the
/// lengths, and the decode matches the oracle; a second decode with the same plan gives the same
/// bits (docs/design/CATALOGUE.md N9).
inline void check_api_fp8(Backend backend) {
  for (const DType dtype : {DType::bf16, DType::f16}) {
    WorkloadSpec spec = debug_spec();
    spec.dtype = dtype;
    spec.fp8_kv = true;
    const Workload workload = make_workload(spec);
    for (const bool with_lengths : {false, true}) {
      const DecodePlan plan = api_plan(backend, workload, with_lengths);
      REQUIRE(plan.step() == 12);
      const std::vector<std::byte> out = decode_with_api(backend, workload, with_lengths);
      const CompareResult result = check_against_oracle(workload, oracle_rows(workload), out, plan.kernel().weights_in_storage_type);
      INFO(dtype_name(dtype) << " q, fp8 K/V on " << backend_name(backend) << (with_lengths ? ", planned with the lengths: " : ": ")
                             << plan.description() << ": " << result.summary());
      REQUIRE(result.ok);
      const CompareResult again = compare_bitwise(workload.problem, out.data(), decode_with_api(backend, workload, with_lengths).data());
      INFO("a second decode against the first: " << again.summary());
      REQUIRE(again.ok);
    }
  }
}

}  // namespace pa::testing
