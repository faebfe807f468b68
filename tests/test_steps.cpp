// Every kernel step in the emulator (checked memory, race detection on): the adversarial set
// against the oracle in each storage type, NaN poison invisible, every head dim and page size,
// knobs that do not change the answer, refusals that name the argument, the empty batch, pools
// over 2^31 and 2^32 elements.
// Covers the kernel of every step the build registers (kernels/CMakeLists.txt); then what each
// rung adds (tests/test_gpu_steps.cpp runs the same checks on the GPU).
#include "tests/step_checks.h"
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using pa::Backend;
using pa::DType;
using namespace pa::testing;

namespace {
/// With checked mode off (DecodeView::checked), a page outside the pool in a used entry is not
/// refused: it reaches the kernel, whose read of key_cache the emulator's checked memory stops
/// (on a GPU it would read whatever lies there). The same launch with the mode on is refused.
/// With \p fp8_kv, K and V in fp8.
void check_unchecked_reaches_kernel(int step, bool fp8_kv = false) {
  pa::WorkloadSpec spec = pa::debug_spec();
  if (!runs(step, spec.dtype)) spec.dtype = DType::bf16;
  spec.fp8_kv = fp8_kv;
  spec.context_lens = {37, 20, 16};
  pa::Workload w = pa::make_workload(spec);
  w.block_tables[static_cast<std::size_t>(w.problem.max_blocks_per_seq + 1)] = static_cast<std::int32_t>(w.problem.num_blocks);
  const pa::KernelEntry& entry = pa::kernel(step, Backend::emulator);
  const pa::LaunchPlan plan = entry.plan(w.problem, {}, pa::DeviceLimits::pretend_h200());
  std::vector<std::byte> out(w.out_bytes()), workspace(plan.workspace_bytes);
  pa::DecodeView view = w.host_view(out.data(), workspace.data(), workspace.size());
  REQUIRE(view.checked);  // the default
  PA_REQUIRE_THROWS_AS_WITH(entry.launch(view, plan, nullptr), pa::ArgumentError, "block_tables[1][1]");
  view.checked = false;
  PA_REQUIRE_THROWS_AS_WITH(entry.launch(view, plan, nullptr), pa::KernelError, "key_cache");
}
}  // namespace

#define PA_EMULATED_STEP_TESTS(step, tag)                                                              \
  TEST_CASE("step" tag ": adversarial set against the oracle, f32", "[step" tag "]") {                 \
    check_adversarial(Backend::emulator, step, DType::f32);                                            \
  }                                                                                                    \
  TEST_CASE("step" tag ": adversarial set against the oracle, f16 and bf16", "[step" tag "]") {        \
    check_adversarial(Backend::emulator, step, DType::f16);                                            \
    check_adversarial(Backend::emulator, step, DType::bf16);                                           \
  }                                                                                                    \
  TEST_CASE("step" tag ": NaN poison gives the same bits as zeros", "[step" tag "]") {                  \
    check_poison_is_invisible(Backend::emulator, step, DType::bf16);                                   \
  }                                                                                                    \
  TEST_CASE("step" tag ": head dims 64-256, groups up to 32 and pages 1-64", "[step" tag "]") {         \
    check_shapes(Backend::emulator, step);                                                             \
  }                                                                                                    \
  TEST_CASE("step" tag ": a context of 0 gives zeros, its table row unread", "[step" tag "]") {         \
    check_empty_contexts(Backend::emulator, step);                                                     \
  }                                                                                                    \
  TEST_CASE("step" tag ": every logit near -1e5 gives the top token's V, not zeros", "[step" tag "]") { \
    check_very_negative_logits(Backend::emulator, step, DType::f16);                                   \
    check_very_negative_logits(Backend::emulator, step, DType::bf16);                                  \
  }                                                                                                    \
  TEST_CASE("step" tag ": NaN in one valid V element reaches its channel alone", "[step" tag "]") {     \
    check_nan_in_value(Backend::emulator, step);                                                       \
  }                                                                                                    \
  TEST_CASE("step" tag ": the length cap reached, contexts at a split's end and either side",          \
            "[step" tag "]") {                                                                         \
    check_length_cap(Backend::emulator, step);                                                         \
    check_split_boundaries(Backend::emulator, step);                                                   \
  }                                                                                                    \
  TEST_CASE("step" tag ": knobs do not change the answer, same input same bits", "[step" tag "]") {     \
    check_knobs_and_determinism(Backend::emulator, step, knobs_of(step));                              \
  }                                                                                                    \
  TEST_CASE("step" tag ": refuses what it cannot run and runs an empty batch", "[step" tag "]") {       \
    check_refusals(Backend::emulator, step);                                                           \
    check_empty_batch(Backend::emulator, step);                                                        \
  }                                                                                                    \
  TEST_CASE("step" tag ": checked mode refuses bad lengths and table entries, and off they reach the kernel", \
            "[step" tag "][checked]") {                                                                \
    check_bad_tables_refused(Backend::emulator, step);                                                 \
    check_unchecked_reaches_kernel(step);                                                              \
  }                                                                                                    \
  TEST_CASE("step" tag ": pools over 2^31 and 2^32 elements, the 32-bit limits refused up front",     \
            "[step" tag "][huge]") {                                                                   \
    check_huge_pools(Backend::emulator, step);                                                         \
  }

// One set of tests per kernel step, from the build's list of kernels (pagedattn_add_kernel):
// PA_KERNEL_STEP(NN) for each. 1NN - 100 is NN as a number (08 alone would be an octal error).
#define PA_KERNEL_STEP(number) PA_EMULATED_STEP_TESTS((1##number - 100), #number)
#include "kernel_list.inc"
#undef PA_KERNEL_STEP

// ----- what each rung adds -----------------------------------------------------------------------
#include "kernels/02_pretend_programs.cuh"
#include "kernels/09_memory_pipeline.cuh"
#include "kernels/10_tensor_cores.cuh"
#include "reference/oracle.h"

namespace emu_kernels = pa::kernels_emu;

TEST_CASE("step02: the gather kernel copies every context's pages bit for bit", "[step02]") {
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    pa::WorkloadSpec spec = pa::debug_spec();
    spec.dtype = dtype;
    spec.alias = true;
    const pa::Workload w = pa::make_workload(spec);
    const pa::DecodeProblem& p = w.problem;
    const std::int64_t elems = std::int64_t{p.num_seqs} * p.num_kv_heads * p.max_context_len * p.head_dim;
    emu_kernels::dispatch_dtype(dtype, [&](auto storage) {
      using T = decltype(storage);
      std::vector<T> keys(static_cast<std::size_t>(elems)), values(static_cast<std::size_t>(elems));
      emu_kernels::launch_kernel("gather_kv", emu_kernels::step02::gather_kv<T, 64>, emu_kernels::dim3(p.num_seqs, p.num_kv_heads),
                                 emu_kernels::dim3(1), 0, nullptr, emu_kernels::make_args<T>(w.host_view()),
                                 emu_kernels::gspan<T>(keys.data(), elems, "gathered_keys"),
                                 emu_kernels::gspan<T>(values.data(), elems, "gathered_values"));
      const std::vector<double> expected_keys = pa::reference::gather_cache(w.host_view(), w.key_cache.data());
      const std::vector<double> expected_values = pa::reference::gather_cache(w.host_view(), w.value_cache.data());
      for (int seq = 0; seq < p.num_seqs; ++seq)
        for (std::int64_t i = 0; i < std::int64_t{p.num_kv_heads} * w.context_lens[seq] * p.head_dim; ++i) {
          const std::int64_t head = i / (std::int64_t{w.context_lens[seq]} * p.head_dim);
          const std::int64_t rest = i % (std::int64_t{w.context_lens[seq]} * p.head_dim);
          const auto at = static_cast<std::size_t>(((std::int64_t{seq} * p.num_kv_heads + head) * p.max_context_len) * p.head_dim + rest);
          INFO("seq " << seq << ", kv head " << head << ", element " << rest);
          REQUIRE(emu_kernels::to_float(keys[at]) == expected_keys[at]);
          REQUIRE(emu_kernels::to_float(values[at]) == expected_values[at]);
        }
    });
  }
}

TEST_CASE("step04: refuses, before launching, a context whose logits do not fit in shared memory", "[step04]") {
  const pa::DeviceLimits limits = pa::DeviceLimits::pretend_h200();
  const std::size_t cap = (limits.shared_per_block_optin - emu_kernels::step04::static_shared_bytes(128)) / sizeof(float);
  const pa::KernelEntry& entry = pa::kernel(4, Backend::emulator);
  pa::DecodeProblem fits = pa::make_problem(1, 8, 2, 128, 16, static_cast<int>(cap / 16 + 1), static_cast<int>(cap), 8192, DType::bf16);
  REQUIRE_NOTHROW(entry.plan(fits, {}, limits));
  pa::DecodeProblem too_long = fits;
  too_long.max_context_len = static_cast<int>(cap) + 1;
  PA_REQUIRE_THROWS_AS_WITH(entry.plan(too_long, {}, limits), pa::ArgumentError, "max_context_len");
  PA_REQUIRE_THROWS_AS_WITH(entry.plan(too_long, {}, limits), pa::ArgumentError, "at most " + std::to_string(cap) + " tokens");
  PA_REQUIRE_THROWS_AS_WITH(entry.plan(too_long, {}, limits), pa::ArgumentError, "step 06 removes this cap");
  // Step 06 has no such cap.
  REQUIRE_NOTHROW(pa::kernel(6, Backend::emulator).plan(too_long, {}, limits));
}

TEST_CASE("without a GPU the CUDA path says why, and the emulator and the oracle still run", "[steps]") {
  // docs/design/CATALOGUE.md R1. A CPU build, or a CUDA build on a machine without a usable
  // device (CI): the reason names CUDA, the step programs' GPU column is skipped with it, the
  // GPU tests skip with it (tests/test_gpu_steps.cpp), and the emulated kernel still runs.
  if (pa::cuda_built() && pa::gpu::available()) PA_SKIP("a GPU is here: test_gpu_steps runs the CUDA path");
  const std::string why = pa::gpu::unavailable_reason();
  INFO(why);
  REQUIRE(why.find("CUDA") != std::string::npos);
  const pa::Workload w = pa::make_workload(pa::debug_spec());
  PA_REQUIRE_THROWS_AS_WITH(run_on(Backend::cuda, 6, w), pa::Error, why);  // CudaError where CUDA is built
  const pa::StepReport report = pa::run_step(6, w, {}, pa::StepRunSettings{});
  CHECK(report.gpu_status == "skipped: " + why);
  CHECK(report.emulator_status == "ok");
  CHECK(report.ok);
}

TEST_CASE("a plan is made once and launched only on its own problem", "[steps]") {
  const pa::Workload w = pa::make_workload(pa::debug_spec());
  const pa::KernelEntry& entry = pa::kernel(7, Backend::emulator);
  const pa::LaunchPlan plan = entry.plan(w.problem, {}, pa::DeviceLimits::pretend_h200());
  std::vector<std::byte> out(w.out_bytes()), workspace(plan.workspace_bytes);
  pa::DecodeView view = w.host_view(out.data(), workspace.data(), workspace.size());
  REQUIRE_NOTHROW(entry.launch(view, plan, nullptr));
  view.problem.scale *= 2;  // another problem: the plan's checks and splits may not hold for it
  PA_REQUIRE_THROWS_AS_WITH(entry.launch(view, plan, nullptr), pa::ArgumentError, "the problem the plan was made for");
  view.problem = w.problem;
  view.workspace_bytes = plan.workspace_bytes - 1;
  PA_REQUIRE_THROWS_AS_WITH(entry.launch(view, plan, nullptr), pa::ArgumentError, "workspace_bytes");
}

TEST_CASE("step07: a split holds one slot's share of the work, empty splits give zeros and never NaN", "[step07]") {
  namespace s07 = emu_kernels::step07;
  const pa::DecodeProblem long_single = pa::make_problem(1, 32, 8, 128, 16, 2048, 32768, 2048, DType::bf16);
  const pa::DeviceLimits h200 = pa::DeviceLimits::pretend_h200();
  pa::DeviceLimits small = h200;
  small.sm_count = 8;
  // One sequence, 32 heads, 8 programs an SM: 32768 x 32 tokens over 132 * 8 slots is 993 tokens a
  // split, 33 splits.
  CHECK(s07::choose_splits(long_single, 32, 8, {}, h200) == (132 * 8 + 31) / 32);
  CHECK(s07::choose_splits(long_single, 32, 8, {}, small) == 2);  // fewer SMs, fewer splits
  CHECK(s07::choose_splits(long_single, 32, 2, {}, h200) == (132 * 2 + 31) / 32);  // lower occupancy, fewer
  CHECK(s07::choose_splits(long_single, 1, 32, {}, h200) == 128);  // no split under 256 tokens
  pa::KernelOptions five;
  five.num_splits = 5;
  CHECK(s07::choose_splits(long_single, 32, 8, five, h200) == 5);
  pa::KernelOptions partition;
  partition.partition_tokens = 1000;
  CHECK(s07::choose_splits(long_single, 32, 8, partition, h200) == 33);
  pa::DecodeProblem short_ctx = long_single;
  short_ctx.max_context_len = 300;
  CHECK(s07::choose_splits(short_ctx, 32, 8, {}, h200) == 2);
  short_ctx.max_context_len = 0;
  CHECK(s07::choose_splits(short_ctx, 32, 8, {}, h200) == 1);
  // A long sequence among short ones: a split holds one slot's share of the whole batch's work
  // (66048 tokens x 32 heads over 1056 slots: 2002 tokens), so the long one gets 33 splits,
  // where one wave of programs spread over every pair would give it ceil(1056 / 64) = 17.
  pa::DecodeProblem skewed = pa::make_problem(2, 32, 8, 128, 16, 4096, 65536, 8192, DType::bf16);
  skewed.total_context_len = 65536 + 512;
  CHECK(s07::choose_splits(skewed, 64, 8, {}, h200) == (65536 + 2001) / 2002);
  // The plan asks the occupancy once: in the emulator, the bound from threads (16 programs of
  // 128 threads) and shared memory (the groups' merge of 4 warps).
  const pa::LaunchPlan plan = pa::kernel(7, Backend::emulator).plan(long_single, {}, h200);
  CHECK(plan.shared_bytes == static_cast<std::size_t>(emu_kernels::step06::merge_floats(4, 128)) * 4);
  CHECK(plan.resident_per_sm == 16);
  CHECK(plan.splits == s07::choose_splits(long_single, 32, 16, {}, h200));
  CHECK(plan.workspace_bytes == s07::partials_bytes(long_single, plan.splits));
  INFO(plan.description);
  CHECK(plan.description.find("grid 1 x 32 x " + std::to_string(plan.splits) + " programs of 128 threads") != std::string::npos);
  CHECK(plan.description.find(std::to_string(plan.splits) + " splits of " +
                              std::to_string(s07::partition_of(long_single, plan.splits)) + " tokens") != std::string::npos);

  pa::KernelOptions many;
  many.num_splits = 64;
  for (int step : pa::kernel_steps()) {  // every step that splits (07 on)
    if ((pa::kernel(step, Backend::emulator).knobs & pa::knob_splits) == 0) continue;
    pa::WorkloadSpec spec = pa::debug_spec();
    if (!runs(step, spec.dtype)) spec.dtype = DType::bf16;
    spec.context_lens = {0, 1, 5, 0};
    const pa::Workload w = pa::make_workload(spec);
    INFO("step " << step);
    const pa::RunOutput run = pa::run_emulator(pa::kernel(step, Backend::emulator), w, many);
    const std::string nonzero = first_bad_element(w, run.out, [&](int seq, int, int, float value) {
      return w.context_lens[static_cast<std::size_t>(seq)] == 0 && !(value == 0.0f);
    });
    INFO("an empty sequence's element " << nonzero);
    REQUIRE(nonzero.empty());
    const pa::CompareResult result = pa::check_against_oracle(w, pa::oracle_rows(w), run.out);
    INFO(result.summary());
    REQUIRE(result.ok);
    // The sampled check of the big workloads: each listed sequence alone, a batch of one (whose
    // problem must not keep the whole batch's total_context_len).
    const pa::CompareResult sampled = pa::check_against_oracle(w, pa::oracle_rows(w, {1, 2}), run.out);
    INFO(sampled.summary());
    REQUIRE(sampled.ok);
  }
}

TEST_CASE("step09: the wave plan for few long sequences of equal length, and the default plan otherwise", "[step09]") {
  namespace s09 = emu_kernels::step09;
  const pa::DeviceLimits h200 = pa::DeviceLimits::pretend_h200();
  pa::DecodeProblem long_single = pa::make_problem(1, 32, 8, 128, 16, 2048, 32768, 2048, DType::bf16);
  pa::DecodeProblem uniform = long_single;
  uniform.total_context_len = 32768;  // the caller says the lengths are equal
  const pa::KernelEntry& entry = pa::kernel(9, Backend::emulator);
  // One program of 512 threads at tile 1 an SM; 8 (sequence, KV head) pairs: 132 / 8 = 16 splits.
  const pa::LaunchPlan wave = entry.plan(uniform, {}, h200);
  CHECK(wave.threads == s09::kWaveShape.threads);
  CHECK(wave.threads == 512);
  CHECK(wave.options.tile_tokens == 1);
  CHECK(wave.splits == 132 / 8);
  CHECK(wave.workspace_bytes == s09::partials_bytes(uniform, 132 / 8));
  CHECK(wave.description.find("grid 8 x 1 x 16 programs of 512 threads") != std::string::npos);
  CHECK(wave.description.find("16 splits of 2048 tokens") != std::string::npos);
  // Unknown lengths: kRounds rounds of what every SM holds.
  const pa::LaunchPlan rounds = entry.plan(long_single, {}, h200);
  CHECK(rounds.threads == s09::kDefaultThreads);
  CHECK(rounds.splits == s09::choose_splits(long_single, 8, rounds.resident_per_sm, rounds.threads, {}, h200));
  CHECK(rounds.splits == std::min<int>((s09::kRounds * 132 * rounds.resident_per_sm + 7) / 8, 128));
  // Anything asked for (threads, splits or the tile), variant kNoWavePlan, as many pairs as SMs,
  // or under kWaveMinTokens tokens of a sequence an SM: the asked options.
  pa::KernelOptions asked;
  asked.threads_per_block = 64;
  CHECK(entry.plan(uniform, asked, h200).threads == 64);
  asked = {};
  asked.num_splits = 16;
  CHECK(entry.plan(uniform, asked, h200).threads == s09::kDefaultThreads);
  asked = {};
  asked.variant = s09::kNoWavePlan;
  CHECK(entry.plan(uniform, asked, h200).threads == s09::kDefaultThreads);
  pa::DecodeProblem many_pairs = pa::make_problem(1, 132, 132, 128, 16, 2048, 32768, 2048, DType::bf16);
  many_pairs.total_context_len = 32768;
  CHECK(entry.plan(many_pairs, {}, h200).threads == s09::kDefaultThreads);
  pa::DecodeProblem short_uniform = uniform;
  short_uniform.max_context_len = short_uniform.total_context_len = s09::kWaveMinTokens * (132 / 8) - 1;
  CHECK(entry.plan(short_uniform, {}, h200).threads == s09::kDefaultThreads);
  // The wave's program must fit: with 64 KB an SM, 512 threads' 64 KB of copy slots do not fit
  // beside the merge kernel's... they fit once, so the wave stays; with 32 KB it falls back.
  pa::DeviceLimits small_sm = h200;
  small_sm.shared_per_sm = 32 * 1024;
  const pa::LaunchPlan fallback = entry.plan(uniform, {}, small_sm);
  CHECK(fallback.threads == s09::kDefaultThreads);
  CHECK(fallback.options.tile_tokens == s09::kDefaultTileTokens);
  // A program that fits no SM is refused before launch, naming the thread count (on the GPU
  // registers can be what does not fit; here, an SM with less shared memory than one program).
  pa::DeviceLimits cramped = h200;
  cramped.shared_per_sm = 8 * 1024;
  PA_REQUIRE_THROWS_AS_WITH(entry.plan(long_single, {}, cramped), pa::ArgumentError, "fits one SM");
  // The sequences are the grid's second axis.
  pa::DecodeProblem many = long_single;
  many.num_seqs = 65536;
  PA_REQUIRE_THROWS_AS_WITH(entry.plan(many, {}, h200), pa::ArgumentError, "at most 65535");
}

// docs/design/CATALOGUE.md R3 for the tensor-core rungs: their program's size follows from the
// group and the head dim, so the refusal names those, before any launch.
TEST_CASE("steps 10-12: a program that fits no SM is refused by the plan, naming the group and head dim",
          "[step10][step11][step12]") {
  pa::DeviceLimits cramped = pa::DeviceLimits::pretend_h200();
  cramped.shared_per_sm = 8 * 1024;
  for (const int step : {10, 11, 12}) {
    pa::DecodeProblem p = pa::make_problem(4, 32, 8, 128, 16, 64, 1024, 256, DType::bf16);
    p.fp8_kv = step == 12;
    const pa::KernelEntry& entry = pa::kernel(step, Backend::emulator);
    INFO("step " << step);
    REQUIRE_NOTHROW(entry.plan(p, {}, pa::DeviceLimits::pretend_h200()));
    PA_REQUIRE_THROWS_AS_WITH(entry.plan(p, {}, cramped), pa::ArgumentError,
                              pa::cat(entry.name, ": num_q_heads / num_kv_heads and head_dim: expected a group and head dim "
                                                  "whose program fits one SM of "));
    PA_REQUIRE_THROWS_AS_WITH(entry.plan(p, {}, cramped), pa::ArgumentError, "got a group of 4 at head dim 128: ");
  }
}

// An output the epilogue's vector stores cannot write is refused before the launch, naming out
// (on the GPU the stores would fault): steps 10 and 11 store 2 values at once, step 12 four.
TEST_CASE("steps 10-12: an output not aligned for the epilogue's stores is refused, naming out",
          "[step10][step11][step12]") {
  for (const int step : {10, 11, 12}) {
    pa::WorkloadSpec spec = pa::debug_spec();
    spec.dtype = DType::bf16;
    spec.fp8_kv = step == 12;
    const pa::Workload w = pa::make_workload(spec);
    const pa::KernelEntry& entry = pa::kernel(step, Backend::emulator);
    const pa::LaunchPlan plan = pa::plan_for(entry, w.problem, w.context_lens, {}, pa::DeviceLimits::pretend_h200());
    std::vector<std::byte> out(w.out_bytes() + 16), workspace(plan.workspace_bytes + 16);
    auto* misaligned = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(out.data()) + 15) / 16 * 16 + 2);
    const pa::DecodeView view = w.host_view(misaligned, workspace.data(), plan.workspace_bytes);
    INFO("step " << step);
    PA_REQUIRE_THROWS_AS_WITH(entry.launch(view, plan, nullptr), pa::ArgumentError,
                              pa::cat(entry.name, ": out: expected a ", step == 12 ? 8 : 4, "-byte aligned pointer"));
  }
}

TEST_CASE("step10: short equal or unknown lengths split toward 4 programs an SM, a tile or more each, the rest as step 09 does", "[step10]") {
  namespace s09 = emu_kernels::step09;
  namespace s10 = emu_kernels::step10;
  const pa::DeviceLimits h200 = pa::DeviceLimits::pretend_h200();
  const pa::KernelEntry& entry = pa::kernel(10, Backend::emulator);
  auto equal = [](int seqs, int q_heads, int context) {
    pa::DecodeProblem p = pa::make_problem(seqs, q_heads, 8, 128, 16, context, context, seqs * context, DType::bf16);
    p.total_context_len = std::int64_t{seqs} * context;  // the caller says the lengths are equal
    return p;
  };
  const pa::LaunchPlan single = entry.plan(equal(1, 32, 16384), {}, h200);
  REQUIRE(single.resident_per_sm >= s10::kWavePrograms);
  // 132 * 4 = 528 programs over 8 (sequence, KV head) pairs: 66 splits wanted, 512 tiles of 32
  // tokens, so 8 tiles a split (7.8 rounded up to whole tiles) and 64 splits of 256 tokens.
  INFO(single.description);
  CHECK(single.splits == 64);
  CHECK(single.description.find("64 splits of 256 tokens") != std::string::npos);
  CHECK(entry.plan(equal(1, 32, 32768), {}, h200).splits == 64);  // long-single: 512 tokens, not 66 of 497
  CHECK(entry.plan(equal(1, 32, 1024), {}, h200).splits == 1024 / 32);  // no split under a tile
  CHECK(entry.plan(equal(1, 32, 1000), {}, h200).splits == 32);  // the last tile partly past the end
  CHECK(entry.plan(equal(1, 32, 20), {}, h200).splits == 1);
  // Long enough that 512-token splits fill the wave: step 09's count (its wave over 8 pairs).
  const pa::LaunchPlan longer = entry.plan(equal(1, 32, 131072), {}, h200);
  CHECK(longer.splits == 115);  // 132 SMs x 7 programs over 8 pairs
  CHECK(entry.plan(equal(8, 64, 4096), {}, h200).splits == 8);  // small-batch: 528 / 64 pairs
  CHECK(entry.plan(equal(64, 64, 8192), {}, h200).splits == 1);  // gqa-batch: the pairs fill the wave
  // Fewer SMs: 10 * 4 programs over 8 pairs want only 5 splits; step 09's 8 (its wave of 10 * 7
  // slots over 8 pairs) stand.
  pa::DeviceLimits tight = h200;
  tight.sm_count = 10;
  const pa::LaunchPlan few = entry.plan(equal(1, 32, 16384), {}, tight);
  CHECK(few.splits == 8);
  // A short sequence on a small device: 10 * 4 programs over 8 pairs, 5 splits of 7 tiles or fewer.
  CHECK(entry.plan(equal(1, 32, 1024), {}, tight).splits == 5);
  // Unequal lengths: step 09's rounds, with splits of kMinTokensPerSplit tokens or more.
  pa::DecodeProblem ragged = equal(2, 32, 65536);
  ragged.total_context_len = 65536 + 512;
  const pa::LaunchPlan rounds = entry.plan(ragged, {}, h200);
  CHECK(rounds.splits == 128);  // 8 rounds of the slots over 16 pairs want more; 512-token splits cap it
  pa::DecodeProblem short_ragged = equal(2, 32, 1024);
  short_ragged.total_context_len = 1024 + 100;
  CHECK(entry.plan(short_ragged, {}, h200).splits == 1024 / s10::kMinTokensPerSplit);
  // The floor's 256 programs of 4 tiles are not too few (the merge would cost more than the
  // shorter chain saves); 64 programs of 16 tiles are.
  CHECK(entry.plan(equal(32, 32, 128), {}, h200).splits == 1);
  CHECK(entry.plan(equal(8, 32, 512), {}, h200).splits == 8);
  CHECK(s10::few_programs(131, 1, h200));
  CHECK_FALSE(s10::few_programs(256, s10::kLongChainTiles - 1, h200));
  CHECK(s10::few_programs(256, s10::kLongChainTiles, h200));
  CHECK_FALSE(s10::few_programs(264, 1000, h200));
  // Lengths not given (total_context_len 0): max_context_len is a capacity, split as if equal.
  auto unknown = [&](int seqs, int q_heads, int context) {
    pa::DecodeProblem p = equal(seqs, q_heads, context);
    p.total_context_len = 0;
    return p;
  };
  CHECK(entry.plan(unknown(1, 32, 512), {}, h200).splits == 16);
  CHECK(entry.plan(unknown(1, 32, 1024), {}, h200).splits == 32);
  CHECK(entry.plan(unknown(32, 32, 128), {}, h200).splits == 1);
  CHECK(entry.plan(unknown(1, 32, 32768), {}, h200).splits == 64);  // step 09's rounds, 512 tokens a split
  // Asked splits or partitions win.
  pa::KernelOptions five;
  five.num_splits = 5;
  CHECK(entry.plan(equal(1, 32, 16384), five, h200).splits == 5);
  pa::KernelOptions partition;
  partition.partition_tokens = 1000;
  CHECK(entry.plan(equal(1, 32, 16384), partition, h200).splits == 17);
}

TEST_CASE("step09: every ablation variant gives the oracle's answer where it is compiled, and is refused elsewhere", "[step09]") {
  check_variants(Backend::emulator, 9, {700, 1, 0, 129, 64});
  pa::WorkloadSpec other = pa::debug_spec();  // f32 at head dim 64: the copy-layout variants are not compiled
  pa::KernelOptions options;
  options.variant = emu_kernels::step09::kInterleavedSlots;
  PA_REQUIRE_THROWS_AS_WITH(run_on(Backend::emulator, 9, pa::make_workload(other), options), pa::ArgumentError,
                            "options.variant");
  options.variant = 6;
  PA_REQUIRE_THROWS_AS_WITH(run_on(Backend::emulator, 9, pa::make_workload(other), options), pa::ArgumentError,
                            "0 (every idea) to 5");
}

TEST_CASE("steps 08 and 09 read K and V once per KV head, step 07 once per query head", "[step08]") {
  pa::WorkloadSpec spec = pa::debug_spec();
  spec.num_q_heads = 8;
  spec.num_kv_heads = 2;
  spec.dtype = DType::bf16;
  const pa::Workload w = pa::make_workload(spec);
  std::uint64_t tokens = 0;
  for (int len : w.context_lens) tokens += static_cast<std::uint64_t>(len);
  const std::uint64_t once = tokens * w.problem.num_kv_heads * w.problem.head_dim * 2;  // bytes of K (bf16)
  const pa::RunOutput step7 = pa::run_emulator(pa::kernel(7, Backend::emulator), w);
  CHECK(step7.traffic.tensors.at("key_cache").bytes_read == once * 4);
  for (int step : {8, 9}) {
    const pa::RunOutput run = pa::run_emulator(pa::kernel(step, Backend::emulator), w);
    CHECK(run.traffic.tensors.at("key_cache").bytes_read == once);
    CHECK(run.traffic.tensors.at("value_cache").bytes_read == once);
  }
}

TEST_CASE("the trace flag names a program by sequence, head and split, whatever the grid's order", "[step09]") {
  // Step 09's grid is (KV head, sequence, split), step 07's (sequence, head, split): the flag means the same in both.
  auto trace_of = [](int step, std::vector<std::string> args) {
    args.insert(args.begin(), "step");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    std::ostringstream out;
    struct Restore {  // std::cout back to its own buffer, also when the step throws
      std::streambuf* saved;
      ~Restore() { std::cout.rdbuf(saved); }
    } restore{std::cout.rdbuf(out.rdbuf())};
    CHECK(pa::kernel_step_main(step, static_cast<int>(argv.size()), argv.data()) == 0);
    return out.str();
  };
  const std::vector<std::string> workload = {"--q-heads", "8", "--kv-heads", "2", "--dtype", "bf16", "--head-dim", "128",
                                             "--context", "600,37", "--no-gpu"};
  std::vector<std::string> args = workload;
  for (const char* a : {"--splits", "3", "--trace", "0,5,1"}) args.emplace_back(a);
  const std::string split = trace_of(7, args);
  INFO(split);
  CHECK(split.find("trace of program 0,5,1 (sequence 0)") != std::string::npos);
  CHECK(split.find("kv heads {1}, tokens 200..399 (200 distinct)") != std::string::npos);  // head 5 is KV head 1; split 1 of 3
  args = workload;
  for (const char* a : {"--splits", "3", "--trace", "0,1,1"}) args.emplace_back(a);
  const std::string pipelined = trace_of(9, args);  // its head axis is the KV head
  INFO(pipelined);
  CHECK(pipelined.find("trace of program 1,0,1 (sequence 0)") != std::string::npos);
  CHECK(pipelined.find("kv heads {1}, tokens 200..399 (200 distinct)") != std::string::npos);
  args = workload;
  for (const char* a : {"--trace", "1,2"}) args.emplace_back(a);
  const std::string whole = trace_of(6, args);
  INFO(whole);
  CHECK(whole.find("trace of program 1,2,0 (sequence 1)") != std::string::npos);
  CHECK(whole.find("kv heads {0}, tokens 0..36 (37 distinct)") != std::string::npos);  // sequence 1 has 37 tokens
}

// ----- step 12: fp8 K/V ------------------------------------------------------------------------
#include "kernels/12_fp8_cache.cuh"

TEST_CASE("step12: fp8 K/V, the adversarial set against the oracle, q in f16 and bf16", "[step12][fp8]") {
  check_adversarial(Backend::emulator, 12, DType::f16, 300, true);
  check_adversarial(Backend::emulator, 12, DType::bf16, 300, true);
}

TEST_CASE("step12: fp8 K/V, NaN poison (0x7f) gives the same bits as zeros", "[step12][fp8]") {
  check_poison_is_invisible(Backend::emulator, 12, DType::bf16, true);
  check_poison_is_invisible(Backend::emulator, 12, DType::f16, true);
}

TEST_CASE("step12: fp8 K/V, head dims 64-256, groups up to 32 and pages 1-64", "[step12][fp8]") {
  check_fp8_shapes(Backend::emulator, 12);
}

// (The portions' ends, check_split_boundaries, run in fp8 for step 12 in the set above.)
TEST_CASE("step12: fp8 K/V, empty contexts, logits near -1e5, NaN in one V element", "[step12][fp8]") {
  check_empty_contexts(Backend::emulator, 12, true);
  check_very_negative_logits(Backend::emulator, 12, DType::f16, true);
  check_very_negative_logits(Backend::emulator, 12, DType::bf16, true);
  check_nan_in_value(Backend::emulator, 12, true);
}

TEST_CASE("step12: fp8 K/V, checked mode refuses a bad table entry, and off it reaches the kernel", "[step12][fp8][checked]") {
  check_unchecked_reaches_kernel(12, true);
}

TEST_CASE("step12: fp8 K/V, the partition knob does not change the answer, same input same bits", "[step12][fp8]") {
  check_knobs_and_determinism(Backend::emulator, 12, knobs_of(12), true);
}

TEST_CASE("step12: fp8 K/V, pools over 2^31 and 2^32 bytes, the used pages at the top", "[step12][fp8][huge]") {
  check_huge_fp8_pools(Backend::emulator, 12);
}

TEST_CASE("steps before 12 refuse fp8 K/V in their plan, naming fp8_kv", "[step12][fp8]") {
  check_fp8_refused_below(Backend::emulator, 12);
  REQUIRE(pa::kernel(12, Backend::emulator).runs_fp8_kv);
}

TEST_CASE("step12: fp8 K read as e5m2 (a planted wrong conversion) gives numbers the oracle rejects", "[step12][fp8]") {
  for (DType dtype : {DType::bf16, DType::f16}) {
    pa::WorkloadSpec spec = pa::debug_spec();
    spec.dtype = dtype;
    spec.fp8_kv = true;
    spec.num_q_heads = 16;
    spec.num_kv_heads = 2;
    spec.context_lens = {40, 17, 130};
    const pa::Workload workload = pa::make_workload(spec);
    const pa::OracleRows oracle = pa::oracle_rows(workload);
    pa::KernelEntry planted = pa::kernel(12, Backend::emulator);
    planted.launch = [](const pa::DecodeView& view, const pa::LaunchPlan& plan, void* stream) {
      emu_kernels::step12::launch_as(view, plan, stream, true);
    };
    const pa::KernelEntry& step12 = pa::kernel(12, Backend::emulator);
    const pa::CompareResult right = pa::check_against_oracle(workload, oracle, pa::run_emulator(step12, workload, {}).out, true);
    const pa::CompareResult wrong = pa::check_against_oracle(workload, oracle, pa::run_emulator(planted, workload, {}).out, true);
    INFO(pa::dtype_name(dtype) << ": right " << right.summary() << "; e5m2 " << wrong.summary());
    REQUIRE(right.ok);
    REQUIRE_FALSE(wrong.ok);
  }
}

TEST_CASE("step12: fp8 K/V are read once per KV head, one byte an element", "[step12][fp8]") {
  pa::WorkloadSpec spec = pa::debug_spec();
  spec.num_q_heads = 8;
  spec.num_kv_heads = 2;
  spec.dtype = DType::bf16;
  spec.fp8_kv = true;
  spec.context_lens = {700, 1, 0, 129, 64};
  const pa::Workload w = pa::make_workload(spec);
  std::uint64_t tokens = 0;
  for (int len : w.context_lens) tokens += static_cast<std::uint64_t>(len);
  const std::uint64_t once = tokens * w.problem.num_kv_heads * w.problem.head_dim;  // bytes of K (e4m3)
  const pa::RunOutput run = pa::run_emulator(pa::kernel(12, Backend::emulator), w);
  CHECK(run.traffic.tensors.at("key_cache").bytes_read == once);
  CHECK(run.traffic.tensors.at("value_cache").bytes_read == once);
}

TEST_CASE("step12: fp8 plans say which copies they take, the runs or a lookup a row", "[step12][fp8]") {
  // takes_runs, which the kernel asks of each item: pages of 16+ (a power of two) in HND, one warp.
  struct Case {
    int head_dim, page, q_heads;
    pa::LayoutKind layout;
    bool runs;
  };
  for (const Case& c : {Case{128, 16, 8, pa::LayoutKind::hnd, true}, Case{64, 32, 8, pa::LayoutKind::hnd, true},
                        Case{128, 8, 8, pa::LayoutKind::hnd, false}, Case{128, 16, 8, pa::LayoutKind::nhd, false},
                        Case{80, 16, 8, pa::LayoutKind::hnd, false}, Case{256, 16, 8, pa::LayoutKind::hnd, false},
                        Case{128, 16, 64, pa::LayoutKind::hnd, false}}) {
    pa::WorkloadSpec spec = pa::debug_spec();
    spec.head_dim = c.head_dim;
    spec.block_size = c.page;
    spec.num_q_heads = c.q_heads;
    spec.num_kv_heads = 2;
    spec.layout = c.layout;
    spec.dtype = DType::bf16;
    spec.fp8_kv = true;
    spec.context_lens = {40, 300};
    const pa::Workload w = pa::make_workload(spec);
    const pa::RunOutput run = pa::run_emulator(pa::kernel(12, Backend::emulator), w);
    INFO(run.plan.description);
    CHECK((run.plan.description.find("copies on the runs") != std::string::npos) == c.runs);
    CHECK((run.plan.description.find("copies looked up a row at a time") != std::string::npos) == !c.runs);
    CHECK(emu_kernels::step12::takes_runs(c.head_dim, run.plan.threads, c.page, w.problem.layout.token_stride, 0) ==
          c.runs);
  }
  CHECK_FALSE(emu_kernels::step12::takes_runs(128, 32, 16, 128, 8));  // an item from token 8
  CHECK_FALSE(emu_kernels::step12::takes_runs(128, 32, 48, 128, 0));  // a page of 48: no power of two
}

TEST_CASE("step12: q·Kᵀ's k order and the planned fp8 fragments", "[step12][fp8]") {
  // channel_of_k is a permutation of a 16-channel block, pairs kept together (a register holds
  // channels 2i, 2i+1 of q).
  std::vector<int> seen;
  for (int k = 0; k < 16; ++k) seen.push_back(emu_kernels::step12::channel_of_k(k));
  std::vector<int> sorted = seen;
  std::sort(sorted.begin(), sorted.end());
  for (int k = 0; k < 16; ++k) REQUIRE(sorted[static_cast<std::size_t>(k)] == k);
  for (int k = 0; k < 16; k += 2) REQUIRE(seen[static_cast<std::size_t>(k) + 1] == seen[static_cast<std::size_t>(k)] + 1);
  // value_registers: bytes V[2t][2g], V[2t][2g+1], V[2t+1][2g], V[2t+1][2g+1] = 0x38 (1.0),
  // 0x40 (2.0), 0x44 (3.0), 0x48 (4.0): even channel tokens (1, 3), odd (2, 4), as f16.
  unsigned even = 0, odd = 0;
  emu_kernels::step12::value_registers(0x48444038u, even, odd);
  REQUIRE(even == (0x3c00u | 0x4200u << 16));
  REQUIRE(odd == (0x4000u | 0x4400u << 16));
}

TEST_CASE("fp8 K/V: the quantisation error against unquantised K/V (information)", "[step12][fp8]") {
  // The oracle on the fp8 caches against the oracle on the same values unquantised (f32): what
  // storing K/V in e4m3 costs, before any kernel. Docs/design/CORRECTNESS.md quotes it.
  pa::AdversarialOptions options;
  options.dtype = DType::f32;
  double worst = 0, worst_sum = 0;
  std::size_t count = 0;
  for (pa::WorkloadSpec spec : pa::adversarial_specs(options)) {
    if (spec.nan_sequence >= 0 || spec.query_multiplier == 0.0f || spec.query_multiplier > 1.0f) continue;
    const std::vector<double> exact = pa::reference::paged_attention(pa::make_workload(spec).host_view());
    spec.fp8_kv = true;
    const std::vector<double> quantised = pa::reference::paged_attention(pa::make_workload(spec).host_view());
    for (std::size_t i = 0; i < exact.size(); ++i) {
      const double error = std::abs(quantised[i] - exact[i]);
      worst = std::max(worst, error);
      worst_sum += error;
      ++count;
    }
  }
  WARN("fp8 e4m3 K/V against unquantised f32 K/V, adversarial set (ordinary logits), outputs in [-1, 1]: max |d| "
       << worst << ", mean |d| " << worst_sum / static_cast<double>(count));
  CHECK(worst > 0);
  CHECK(worst < 0.1);
}

TEST_CASE("vocabulary: e4m3x2_to_f16x2 is exact for all 65536 byte pairs in either half, byte_perm picks bytes", "[step12][fp8]") {
  for (unsigned pair = 0; pair < 65536; ++pair) {
    // The pair in the low half (the top half ignored), then in the high half (the low ignored).
    const unsigned got[2] = {emu_kernels::e4m3x2_to_f16x2<0>(pair | 0xabcd0000u),
                             emu_kernels::e4m3x2_to_f16x2<1>(pair << 16 | 0x1234u)};
    for (int at = 0; at < 4; ++at) {
      const int half = at % 2;
      const float value = pa::e4m3_to_float({static_cast<std::uint8_t>(pair >> (8 * half))});
      const pa::f16_t h{static_cast<std::uint16_t>(got[at / 2] >> (16 * half))};
      INFO("pair " << pair << (at < 2 ? " in the low half" : " in the high half") << ", element " << half);
      if (std::isnan(value)) REQUIRE(std::isnan(pa::f16_to_float(h)));
      else REQUIRE(pa::f16_to_float(h) == value);  // signed zeros included: == does not tell them apart,
      if (!std::isnan(value)) REQUIRE(std::signbit(pa::f16_to_float(h)) == std::signbit(value));  // this does
    }
  }
  REQUIRE(emu_kernels::byte_perm(0x33221100u, 0x77665544u, 0x3120u) == 0x33112200u);
  REQUIRE(emu_kernels::byte_perm(0x33221100u, 0x77665544u, 0x7654u) == 0x77665544u);
  REQUIRE(emu_kernels::byte_perm(0x33221100u, 0x77665544u, 0x0040u) == 0x00004400u);
}
