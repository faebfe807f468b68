// The entry point (api/decode.h) in the emulator: the rung it picks for each storage type, the
// plan it records, decodes against the oracle, and refusals with their exact messages.
// tests/test_gpu_api.cpp runs the decodes on the GPU.
#include <limits>
#include <string>
#include <vector>

#include "common/cuda/runtime.h"
#include "kernels/registry.h"
#include "tests/api_checks.h"
#include "tests/test_util.h"

using pa::Backend;
using pa::DType;
using namespace pa::testing;

namespace {

/// A problem of the debug workload's shape in \p dtype.
pa::Workload debug_workload(DType dtype) {
  pa::WorkloadSpec spec = pa::debug_spec();
  spec.dtype = dtype;
  return pa::make_workload(spec);
}

std::vector<int> steps_of(const std::vector<pa::RungChoice>& rungs) {
  std::vector<int> steps;
  for (const pa::RungChoice& rung : rungs) steps.push_back(rung.step);
  return steps;
}

}  // namespace

TEST_CASE("api: bf16 and f16 run on step 10, f32 on step 09", "[api]") {
  for (const DType dtype : {DType::bf16, DType::f16}) {
    const pa::DecodeProblem problem = debug_workload(dtype).problem;
    REQUIRE(steps_of(pa::choose_rungs(problem)) == std::vector<int>{10, 9});
    REQUIRE(pa::plan_decode(problem, Backend::emulator).step() == 10);
  }
  const pa::DecodeProblem f32 = debug_workload(DType::f32).problem;
  REQUIRE(steps_of(pa::choose_rungs(f32)) == std::vector<int>{9});
  const pa::DecodePlan plan = pa::plan_decode(f32, Backend::emulator);
  REQUIRE(plan.step() == 9);
  REQUIRE(plan.kernel().name == std::string("step09_memory_pipeline"));
  REQUIRE(plan.backend() == Backend::emulator);
}

TEST_CASE("api: with the host lengths, a ragged batch of bf16 or f16 runs on step 11", "[api]") {
  pa::WorkloadSpec spec = pa::named_spec("ragged-skew");  // one sequence of 65536 tokens, 63 of 512
  spec.context_lens = {4096, 512, 512, 512};               // the longest 2.3 times the mean
  for (const DType dtype : {DType::bf16, DType::f16}) {
    spec.dtype = dtype;
    const pa::DecodeProblem problem = pa::make_workload(spec).problem;
    REQUIRE(steps_of(pa::choose_rungs(problem, spec.context_lens)) == std::vector<int>{11, 10, 9});
    const pa::DecodePlan plan = pa::plan_decode(problem, spec.context_lens, Backend::emulator);
    REQUIRE(plan.step() == 11);
    // The plan is step 11's own for these lengths: its work list, balanced by them.
    const pa::LaunchPlan own = pa::kernel(11, Backend::emulator)
                                   .plan_lengths(problem, spec.context_lens, pa::KernelOptions{}, pa::DeviceLimits::pretend_h200());
    REQUIRE(plan.launch_plan().description == own.description);
    REQUIRE(plan.description().starts_with("step 11 (step11_persistent) on the emulator: chosen for a ragged batch"));
  }
  // Equal lengths, lengths just under the ratio, no lengths, f32: not step 11.
  spec.dtype = DType::bf16;
  pa::DecodeProblem problem = pa::make_workload(spec).problem;
  problem.total_context_len = 0;  // unknown: other lengths than the workload's
  const std::vector<std::int32_t> even(4, 1024), under = {1400, 1000, 1000, 1000};  // 1400 < 1.5 * 1100
  REQUIRE(steps_of(pa::choose_rungs(problem, even)) == std::vector<int>{10, 9});
  REQUIRE(steps_of(pa::choose_rungs(problem, under)) == std::vector<int>{10, 9});
  REQUIRE(steps_of(pa::choose_rungs(problem)) == std::vector<int>{10, 9});
  REQUIRE(pa::plan_decode(problem, even, Backend::emulator).step() == 10);
  spec.dtype = DType::f32;
  REQUIRE(steps_of(pa::choose_rungs(pa::make_workload(spec).problem, spec.context_lens)) == std::vector<int>{9});
}

TEST_CASE("api: fp8 K/V run on step 12 and match the oracle", "[api]") {
  for (const DType dtype : {DType::bf16, DType::f16}) {
    pa::WorkloadSpec spec = pa::debug_spec();
    spec.dtype = dtype;
    spec.fp8_kv = true;
    const pa::Workload workload = pa::make_workload(spec);
    REQUIRE(steps_of(pa::choose_rungs(workload.problem)) == std::vector<int>{12});
    REQUIRE(steps_of(pa::choose_rungs(workload.problem, workload.context_lens)) == std::vector<int>{12});
  }
  check_api_fp8(Backend::emulator);
}

TEST_CASE("api: plan_decode refuses lengths that are not one a sequence, or out of range", "[api]") {
  const pa::Workload workload = debug_workload(DType::bf16);
  const std::vector<std::int32_t> three(3, 1);
  REQUIRE(error_message([&] { pa::plan_decode(workload.problem, three, Backend::emulator); }) ==
          pa::cat("pa::plan_decode: context_lens.size(): expected num_seqs = ", workload.problem.num_seqs, ", got 3"));
  // A length out of range is the caller's error, not a rung's refusal: no rung is tried.
  std::vector<std::int32_t> too_long = workload.context_lens;
  too_long.back() = workload.problem.max_context_len + 1;
  const int last = workload.problem.num_seqs - 1;
  REQUIRE(error_message([&] { pa::plan_decode(workload.problem, too_long, Backend::emulator); })
              .starts_with(pa::cat("pa::plan_decode: context_lens[", last, "]: expected the length of sequence ", last,
                                   " in [0, max_context_len = ", workload.problem.max_context_len, "]")));
}

TEST_CASE("api: the plan is the rung's own, with the knobs it picks, and says why", "[api]") {
  for (const DType dtype : {DType::bf16, DType::f32}) {
    const pa::DecodeProblem problem = debug_workload(dtype).problem;
    const pa::DecodePlan plan = pa::plan_decode(problem, Backend::emulator);
    const pa::KernelEntry& entry = pa::kernel(plan.step(), Backend::emulator);
    const pa::LaunchPlan own = entry.plan(problem, pa::KernelOptions{}, pa::DeviceLimits::pretend_h200());
    REQUIRE(plan.problem() == problem);
    REQUIRE(plan.workspace_bytes() == own.workspace_bytes);
    REQUIRE(plan.launch_plan().description == own.description);
    REQUIRE(plan.launch_plan().splits == own.splits);
    REQUIRE(plan.launch_plan().options.num_splits == own.options.num_splits);
    // The rung, the reason it was chosen (its first words), and the rung's own description.
    const std::string head = pa::cat("step ", dtype == DType::f32 ? "09" : "10", " (", entry.name, ") on the emulator: ",
                                     dtype == DType::f32 ? "the fastest rung that runs f32 " : "chosen for bf16 and f16, ");
    INFO(plan.description());
    REQUIRE(plan.description().starts_with(head));
    REQUIRE(plan.description().ends_with("; " + own.description));
  }
}

TEST_CASE("api: a faster rung that refuses the problem is passed over, and the plan says so", "[api]") {
  // A group of 512 heads at head dim 256: more than step 10's 32 warps a program hold.
  const pa::DecodeProblem problem = pa::make_problem(2, 512, 1, 256, 16, 8, 128, 32, DType::bf16);
  const std::string refusal = error_message([&] {
    pa::kernel(10, Backend::emulator).plan(problem, pa::KernelOptions{}, pa::DeviceLimits::pretend_h200());
  });
  REQUIRE(refusal ==
          "step10_tensor_cores: num_q_heads / num_kv_heads: expected a group of at most 256 heads at head dim 256 (one warp "
          "per 16 heads, 32 warps a program), got 512");
  const pa::DecodePlan plan = pa::plan_decode(problem, Backend::emulator);
  REQUIRE(plan.step() == 9);
  REQUIRE(plan.description().starts_with(pa::cat("step 09 (step09_memory_pipeline) on the emulator: the next fastest for bf16 "
                                                 "and f16, as step 10 refused the problem (", refusal, "); grid ")));
}

TEST_CASE("api: decode matches the oracle in the emulator (groups 1 and 8, head dims 128 and 80, every dtype)", "[api]") {
  check_api_against_oracle(Backend::emulator);
}

TEST_CASE("api: one plan decodes again and again, bit for bit the rung's own launch", "[api]") {
  for (const DType dtype : {DType::bf16, DType::f32}) {
    const pa::Workload workload = debug_workload(dtype);
    const pa::DecodePlan plan = pa::plan_decode(workload.problem, Backend::emulator);
    const pa::RunOutput own = pa::run_emulator(plan.kernel(), workload, pa::KernelOptions{});
    for (int repeat = 0; repeat < 2; ++repeat) {
      const std::vector<std::byte> out = decode_with_api(Backend::emulator, workload);
      const pa::CompareResult same = pa::compare_bitwise(workload.problem, own.out.data(), out.data());
      INFO(pa::dtype_name(dtype) << ", decode " << repeat << ": " << same.summary());
      REQUIRE(same.ok);
    }
  }
}

TEST_CASE("api: plan_decode refuses a bad problem, naming itself, the rung and the argument", "[api]") {
  pa::DecodeProblem problem = debug_workload(DType::bf16).problem;
  problem.num_seqs = -1;
  REQUIRE(error_message([&] { pa::plan_decode(problem, Backend::emulator); }) ==
          "pa::plan_decode: num_seqs: expected >= 0, got -1");
  // Every rung refuses head dim 72: the message is the fastest rung's.
  const pa::DecodeProblem odd_head_dim = pa::make_problem(2, 4, 2, 72, 16, 4, 64, 16, DType::bf16);
  REQUIRE(error_message([&] { pa::plan_decode(odd_head_dim, Backend::emulator); }) ==
          "pa::plan_decode: step10_tensor_cores: head_dim: expected one of the head dims this kernel is built for: 64, 80, "
          "96, 112, 128, 256, got 72");
  PA_REQUIRE_THROWS_AS_WITH(pa::plan_decode(odd_head_dim, Backend::emulator), pa::ArgumentError, "pa::plan_decode");
  // docs/design/CATALOGUE.md H1, H3 and H12's scale, through the entry point.
  pa::DecodeProblem odd_group = debug_workload(DType::bf16).problem;
  odd_group.num_kv_heads = 3;  // 4 query heads
  REQUIRE(error_message([&] { pa::plan_decode(odd_group, Backend::emulator); }) ==
          "pa::plan_decode: num_q_heads % num_kv_heads: expected 0 (each KV head serves a whole group of query heads), "
          "got 1 (num_q_heads=4, num_kv_heads=3)");
  pa::DecodeProblem fp8_f32 = debug_workload(DType::f32).problem;
  fp8_f32.fp8_kv = true;
  REQUIRE(error_message([&] { pa::plan_decode(fp8_f32, Backend::emulator); }) ==
          "pa::plan_decode: problem.dtype: expected bf16 or f16 with fp8 K/V (fp8_kv: step 12, the one rung that reads "
          "them, multiplies 16-bit q), got f32");
  pa::DecodeProblem fp8_storage = debug_workload(DType::bf16).problem;
  fp8_storage.dtype = DType::e4m3;  // the K/V type given as q's
  REQUIRE(error_message([&] { pa::plan_decode(fp8_storage, Backend::emulator); }) ==
          "pa::plan_decode: dtype: expected f32, f16 or bf16 (the storage of q and out; fp8 K/V are fp8_kv), got e4m3");
  pa::DecodeProblem no_page = debug_workload(DType::bf16).problem;
  no_page.block_size = 0;
  REQUIRE(error_message([&] { pa::plan_decode(no_page, Backend::emulator); }) ==
          "pa::plan_decode: block_size: expected > 0, got 0");
  for (const float scale : {0.0f, -0.125f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    pa::DecodeProblem bad_scale = debug_workload(DType::bf16).problem;
    bad_scale.scale = scale;
    const std::string message = error_message([&] { pa::plan_decode(bad_scale, Backend::emulator); });
    INFO("scale " << scale << ": " << message);
    REQUIRE(message.starts_with("pa::plan_decode: scale: expected finite and > 0, got "));
  }
}

TEST_CASE("api: plan_decode for the GPU where there is none says why", "[api]") {
  if (pa::gpu::available()) PA_SKIP("a GPU is present (tests/test_gpu_api.cpp plans for it)");
  const pa::DecodeProblem problem = debug_workload(DType::bf16).problem;
  const std::string message = error_message([&] { pa::plan_decode(problem, Backend::cuda); });
  INFO(message);
  REQUIRE(message.find(pa::gpu::unavailable_reason()) != std::string::npos);
}

TEST_CASE("api: decode refuses a view that is not the plan's, naming pa::decode and the argument", "[api]") {
  const pa::Workload workload = debug_workload(DType::bf16);
  const pa::DecodePlan plan = pa::plan_decode(workload.problem, Backend::emulator);
  std::vector<std::byte> out(workload.out_bytes()), workspace(plan.workspace_bytes());
  const pa::DecodeView good = workload.host_view(out.data(), workspace.data(), workspace.size());

  SECTION("another problem") {
    pa::WorkloadSpec spec = workload.spec;
    spec.context_lens.pop_back();
    const pa::Workload other = pa::make_workload(spec);
    std::vector<std::byte> other_out(other.out_bytes());
    const pa::DecodeView view = other.host_view(other_out.data(), workspace.data(), workspace.size());
    REQUIRE(error_message([&] { pa::decode(plan, view); }) ==
            pa::cat("pa::decode: view.problem: expected the problem the plan was made for, got ", pa::describe(other.problem),
                    " (the plan's: ", pa::describe(workload.problem), ")"));
  }
  SECTION("a null pointer") {
    pa::DecodeView view = good;
    view.query = nullptr;
    REQUIRE(error_message([&] { pa::decode(plan, view); }) == "pa::decode: query: expected a non-null pointer, got nullptr");
    view = good;
    view.value_cache = nullptr;
    REQUIRE(error_message([&] { pa::decode(plan, view); }) ==
            "pa::decode: value_cache: expected a non-null pointer, got nullptr");
    view = good;
    view.block_tables = nullptr;
    REQUIRE(error_message([&] { pa::decode(plan, view); }) ==
            "pa::decode: block_tables: expected a non-null pointer, got nullptr");
  }
  SECTION("an output that overlaps an input (docs/design/CATALOGUE.md H12)") {
    pa::DecodeView view = good;
    view.out = const_cast<void*>(view.query);
    REQUIRE(error_message([&] { pa::decode(plan, view); }) ==
            "pa::decode: out: expected memory disjoint from query, got an overlapping range");
    view = good;
    view.out = const_cast<void*>(view.key_cache);
    REQUIRE(error_message([&] { pa::decode(plan, view); }) ==
            "pa::decode: out: expected memory disjoint from key_cache, got an overlapping range");
  }
  SECTION("a workspace smaller than the plan's") {
    pa::DecodeView view = good;
    view.workspace_bytes = plan.workspace_bytes() - 1;
    REQUIRE(error_message([&] { pa::decode(plan, view); }) ==
            pa::cat("pa::decode: workspace_bytes: expected >= ", plan.workspace_bytes(), " for this problem, got ",
                    plan.workspace_bytes() - 1));
  }
  SECTION("a context length out of range (checked mode)") {
    pa::Workload bad = workload;
    bad.context_lens[1] = -3;
    const pa::DecodeView view = bad.host_view(out.data(), workspace.data(), workspace.size());
    const std::string expected =
        error_message([&] { pa::validate_tables(bad.problem, bad.block_tables, bad.context_lens, "pa::decode"); });
    REQUIRE(expected.starts_with("pa::decode: context_lens[1]: "));
    REQUIRE(error_message([&] { pa::decode(plan, view); }) == expected);
  }
  SECTION("a block-table entry outside the pool (checked mode, docs/design/CATALOGUE.md H8)") {
    pa::Workload bad = workload;
    REQUIRE(bad.context_lens[3] > 0);  // sequence 3's first page, one past the pool
    bad.block_tables[static_cast<std::size_t>(3 * bad.problem.max_blocks_per_seq)] = static_cast<std::int32_t>(bad.problem.num_blocks);
    const pa::DecodeView view = bad.host_view(out.data(), workspace.data(), workspace.size());
    const std::string expected =
        error_message([&] { pa::validate_tables(bad.problem, bad.block_tables, bad.context_lens, "pa::decode"); });
    REQUIRE(expected.starts_with("pa::decode: block_tables[3][0]: "));
    REQUIRE(error_message([&] { pa::decode(plan, view); }) == expected);
  }
  SECTION("the good view decodes") {
    REQUIRE(error_message([&] { pa::decode(plan, good); }) == "");
  }
}

TEST_CASE("api: an empty batch plans and decodes nothing", "[api]") {
  pa::WorkloadSpec spec = pa::debug_spec();
  spec.dtype = DType::bf16;
  spec.context_lens.clear();
  const pa::Workload empty = pa::make_workload(spec);
  const pa::DecodePlan plan = pa::plan_decode(empty.problem, Backend::emulator);
  pa::DecodeView view;
  view.problem = empty.problem;  // no tensors at all
  REQUIRE(error_message([&] { pa::decode(plan, view); }) == "");
}
