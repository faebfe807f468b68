// Every kernel step in the emulator (checked memory, race detection on): the adversarial set
// against the oracle in each storage type, NaN poison invisible, every head dim and page size,
// knobs that do not change the answer, refusals that name the argument, the empty batch.
// Covers the kernels of steps/02_pretend_programs, steps/03_naive_decode, steps/04_block_threads,
// steps/05_warps_and_vectors, steps/06_online_softmax, steps/07_split_kv and steps/08_gqa_sharing
// (tests/test_gpu_steps.cpp runs the same checks on the GPU).
#include "tests/step_checks.h"
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using pa::Backend;
using pa::DType;
using namespace pa::testing;

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
  TEST_CASE("step" tag ": head dims 64-256 and pages 1-64", "[step" tag "]") {                          \
    check_shapes(Backend::emulator, step);                                                             \
  }                                                                                                    \
  TEST_CASE("step" tag ": knobs do not change the answer, same input same bits", "[step" tag "]") {     \
    check_knobs_and_determinism(Backend::emulator, step, knobs_of(step));                              \
  }                                                                                                    \
  TEST_CASE("step" tag ": refuses what it cannot run and runs an empty batch", "[step" tag "]") {       \
    check_refusals(Backend::emulator, step);                                                           \
    check_empty_batch(Backend::emulator, step);                                                        \
  }

PA_EMULATED_STEP_TESTS(2, "02")
PA_EMULATED_STEP_TESTS(3, "03")
PA_EMULATED_STEP_TESTS(4, "04")
PA_EMULATED_STEP_TESTS(5, "05")
PA_EMULATED_STEP_TESTS(6, "06")
PA_EMULATED_STEP_TESTS(7, "07")
PA_EMULATED_STEP_TESTS(8, "08")

TEST_CASE("every registered kernel step is tested here", "[steps]") {
  // The macros above list steps 2-8; a new rung must be added there.
  REQUIRE(pa::kernel_steps() == std::vector<int>{2, 3, 4, 5, 6, 7, 8});
}

// ----- what each rung adds -----------------------------------------------------------------------
#include "kernels/02_pretend_programs.cuh"
#include "kernels/08_gqa_sharing.cuh"
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
  REQUIRE_NOTHROW(entry.check(fits, {}, limits));
  pa::DecodeProblem too_long = fits;
  too_long.max_context_len = static_cast<int>(cap) + 1;
  PA_REQUIRE_THROWS_AS_WITH(entry.check(too_long, {}, limits), pa::ArgumentError, "max_context_len");
  PA_REQUIRE_THROWS_AS_WITH(entry.check(too_long, {}, limits), pa::ArgumentError, "at most " + std::to_string(cap) + " tokens");
  PA_REQUIRE_THROWS_AS_WITH(entry.check(too_long, {}, limits), pa::ArgumentError, "step 06 removes this cap");
  // Step 06 has no such cap.
  REQUIRE_NOTHROW(pa::kernel(6, Backend::emulator).check(too_long, {}, limits));
}

TEST_CASE("step07: the split count comes from the device; empty splits give zeros, never NaN", "[step07]") {
  pa::DecodeProblem long_single = pa::make_problem(1, 32, 8, 128, 16, 2048, 32768, 2048, DType::bf16);
  pa::DeviceLimits h200 = pa::DeviceLimits::pretend_h200();
  pa::DeviceLimits small = h200;
  small.sm_count = 8;
  // 8 programs a multiprocessor: the thread bound for 128-thread programs would be 16.
  const int many = emu_kernels::step07::choose_splits(long_single, 32, 8, {}, h200);
  const int few = emu_kernels::step07::choose_splits(long_single, 32, 8, {}, small);
  CHECK(many > few);
  CHECK(many * 32 >= std::min(emu_kernels::step07::kRounds * h200.sm_count * 8, 128 * 32));  // rounds, or the 256-token floor
  CHECK(emu_kernels::step07::choose_splits(long_single, 32, 2, {}, h200) < many);  // lower occupancy, fewer splits
  CHECK(emu_kernels::step07::choose_splits(long_single, 32, 8, {0, 5, 0}, h200) == 5);
  pa::DecodeProblem short_ctx = long_single;
  short_ctx.max_context_len = 300;
  CHECK(emu_kernels::step07::choose_splits(short_ctx, 32, 8, {}, h200) == 2);  // no split under 256 tokens
  // Known equal lengths and fewer pairs than slots: one wave of equal splits, at most
  // kWaveWarps = 16 warps (4 programs of 128 threads) an SM: 132 * 4 / 32 = 16 with 5 or 6
  // resident, 132 * 2 / 32 with 2.
  pa::DecodeProblem uniform = long_single;
  uniform.total_context_len = 32768;
  CHECK(emu_kernels::step07::choose_splits(uniform, 32, 5, {}, h200) == 132 * 4 / 32);
  CHECK(emu_kernels::step07::choose_splits(uniform, 32, 6, {}, h200) == 132 * 4 / 32);
  CHECK(emu_kernels::step07::choose_splits(uniform, 32, 2, {}, h200) == 132 * 2 / 32);
  CHECK(emu_kernels::step07::choose_splits(uniform, 600, 5, {}, h200) == 1);  // past the wave, within the slots: unsplit
  CHECK(emu_kernels::step07::choose_splits(uniform, 8, 4, {}, h200) == 132 * 4 / 8);  // step 08's 8 pairs: 66
  pa::DecodeProblem ragged = uniform;
  ragged.num_seqs = 2;
  ragged.total_context_len = 32768 + 512;  // two sequences of different lengths: rounds again
  CHECK(emu_kernels::step07::choose_splits(ragged, 64, 5, {}, h200) ==
        std::min<std::int64_t>((emu_kernels::step07::kRounds * 132 * 5 + 63) / 64, 128));
  // The emulator's occupancy is the bound from threads (16 programs of 128) and shared memory
  // (the merge and the copy slots of a 128-thread program).
  const auto shared = static_cast<std::size_t>(emu_kernels::step06::attend_floats<emu_kernels::bf16, 128, 1, 1>(128) * 4);
  const int resident = static_cast<int>(std::min<std::size_t>(16, h200.shared_per_sm / shared));
  CHECK(resident < 16);  // the copy slots, not the threads, bound it at bf16 and head dim 128
  const emu_kernels::step07::SplitPlan plan = emu_kernels::step07::make_plan(long_single, {}, h200);
  CHECK(plan.resident_per_sm == resident);
  CHECK(plan.shared_bytes == static_cast<std::int64_t>(shared));
  CHECK(plan.splits == emu_kernels::step07::choose_splits(long_single, 32, resident, {}, h200));
  // The launch line the programs print and the benchmarks record says the same.
  for (int step : {7, 8}) {
    const pa::KernelEntry& entry = pa::kernel(step, Backend::emulator);
    REQUIRE(entry.describe != nullptr);
    const int splits = step == 7 ? emu_kernels::step07::make_plan(long_single, {}, h200).splits
                                 : emu_kernels::step08::make_plan(long_single, {}, h200).splits;
    const std::string line = entry.describe(long_single, {}, h200);
    INFO(line);
    CHECK(line.find(std::to_string(splits) + " splits of " +
                    std::to_string(emu_kernels::step07::partition_of(long_single, splits)) + " tokens") !=
          std::string::npos);
    CHECK(line.find(std::string("grid ") + (step == 7 ? "32" : "8") + " x 1 x " + std::to_string(splits)) !=
          std::string::npos);
  }

  // Known equal lengths and fewer pairs than SMs: the step's wave program (wants_wave_program).
  // Step 07: two programs of 256 threads an SM at tile 2; long-single's 32 query-head pairs get
  // 132 * 2 / 32 = 8 splits of 4096 tokens. Step 08: one of 512 threads at tile 1, 132 / 8 = 16.
  namespace s07 = emu_kernels::step07;
  namespace s08 = emu_kernels::step08;
  const s07::SplitPlan wave = s07::make_plan(uniform, {}, h200);
  CHECK(wave.options.threads_per_block == s07::kWaveShape.threads);
  CHECK(wave.options.threads_per_block == 256);
  CHECK(wave.options.tile_tokens == 2);
  CHECK(wave.resident_per_sm == 2);
  CHECK(wave.splits == 132 * 2 / 32);
  CHECK(pa::kernel(7, Backend::emulator).workspace_bytes(uniform, {}, h200) == s07::partials_bytes(uniform, 132 * 2 / 32));
  const s07::SplitPlan wave08 = s08::make_plan(uniform, {}, h200);
  CHECK(wave08.options.threads_per_block == s08::kWaveShape.threads);
  CHECK(wave08.options.threads_per_block == 512);
  CHECK(wave08.options.tile_tokens == 1);
  CHECK(wave08.splits == 132 / 8);
  CHECK(pa::kernel(7, Backend::emulator).describe(uniform, {}, h200).find("8 splits of 4096 tokens") != std::string::npos);
  CHECK(pa::kernel(7, Backend::emulator).describe(uniform, {}, h200).find("of 256 threads at tile 2,") != std::string::npos);
  CHECK(pa::kernel(8, Backend::emulator).describe(uniform, {}, h200).find("of 512 threads at tile 1,") != std::string::npos);
  // Anything asked for (threads, splits or the tile), unequal or unknown lengths, as many pairs
  // as SMs, or under kWaveMinTokens tokens of a sequence an SM: the asked options.
  CHECK(s07::make_plan(uniform, {64}, h200).options.threads_per_block == 64);
  CHECK(s07::make_plan(uniform, {0, 16}, h200).options.threads_per_block == 0);
  CHECK(s07::make_plan(uniform, {0, 0, 0, 1}, h200).options.threads_per_block == 0);
  CHECK(s07::make_plan(uniform, {0, 0, 0, 1}, h200).options.tile_tokens == 1);
  CHECK(s07::make_plan(long_single, {}, h200).options.threads_per_block == 0);  // total_context_len unknown
  CHECK(s07::make_plan(ragged, {}, h200).options.threads_per_block == 0);
  pa::DecodeProblem many_pairs = uniform;
  many_pairs.num_q_heads = 132;
  many_pairs.num_kv_heads = 132;
  CHECK(s07::make_plan(many_pairs, {}, h200).options.threads_per_block == 0);
  // A program that fits no SM is refused before launch, naming the thread count (on the GPU
  // the registers can be what does not fit; here, an SM with less shared memory than a block may ask for).
  pa::DeviceLimits cramped = h200;
  cramped.shared_per_sm = 8 * 1024;  // step 07's program takes 32 KB, step 08's 16 KB
  for (int step : {7, 8})
    PA_REQUIRE_THROWS_AS_WITH(pa::kernel(step, Backend::emulator).check(long_single, {}, cramped), pa::ArgumentError,
                              "fits one SM");
  // describe still says what would run (no occupancy asked past the shared-memory limit).
  CHECK(pa::kernel(7, Backend::emulator).describe(long_single, {}, cramped).find("0 programs an SM") != std::string::npos);
  // The wave's program must fit as well: with 64 KB an SM, the 96 KB of copy slots of 256
  // threads at tile 2 do not, 128 threads' 32 KB at tile 1 do (twice), so the plan keeps the
  // default threads and tile.
  pa::DeviceLimits small_sm = h200;
  small_sm.shared_per_sm = 64 * 1024;
  const s07::SplitPlan fallback = s07::make_plan(uniform, {}, small_sm);
  CHECK(fallback.options.threads_per_block == 0);
  CHECK(fallback.options.tile_tokens == 0);
  CHECK(fallback.resident_per_sm == 2);
  CHECK(fallback.splits == 132 * 2 / 32);
  pa::DecodeProblem short_uniform = uniform;
  short_uniform.max_context_len = short_uniform.total_context_len = s07::kWaveMinTokens * (132 / 32) - 1;
  CHECK(s07::make_plan(short_uniform, {}, h200).options.threads_per_block == 0);

  pa::WorkloadSpec spec = pa::debug_spec();
  spec.context_lens = {0, 1, 5, 0};
  const pa::Workload w = pa::make_workload(spec);
  for (int step : {7, 8}) {
    const pa::RunOutput run = pa::run_emulator(pa::kernel(step, Backend::emulator), w, {0, 64, 0});
    const std::size_t row = static_cast<std::size_t>(w.problem.num_q_heads) * w.problem.head_dim;
    for (int seq : {0, 3})
      for (std::size_t i = 0; i < row; ++i) REQUIRE(pa::load_as_float(run.out.data(), w.problem.dtype, seq * row + i) == 0.0f);
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

TEST_CASE("step08 reads K and V once per KV head; step 07 once per query head", "[step08]") {
  pa::WorkloadSpec spec = pa::debug_spec();
  spec.num_q_heads = 8;
  spec.num_kv_heads = 2;
  spec.dtype = DType::bf16;
  const pa::Workload w = pa::make_workload(spec);
  std::uint64_t tokens = 0;
  for (int len : w.context_lens) tokens += static_cast<std::uint64_t>(len);
  const std::uint64_t once = tokens * w.problem.num_kv_heads * w.problem.head_dim * 2;  // bytes of K (bf16)
  const pa::RunOutput step7 = pa::run_emulator(pa::kernel(7, Backend::emulator), w);
  const pa::RunOutput step8 = pa::run_emulator(pa::kernel(8, Backend::emulator), w);
  CHECK(step7.traffic.tensors.at("key_cache").bytes_read == once * 4);
  CHECK(step8.traffic.tensors.at("key_cache").bytes_read == once);
  CHECK(step8.traffic.tensors.at("value_cache").bytes_read == once);
}

TEST_CASE("the trace flag names a program by sequence, head and split, whatever the grid's order", "[step07]") {
  // Step 07's grid is (head, sequence, split), step 06's (sequence, head): the flag means the same in both.
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
  CHECK(split.find("trace of program 5,0,1 (sequence 0)") != std::string::npos);
  CHECK(split.find("kv heads {1}, tokens 200..399 (200 distinct)") != std::string::npos);  // head 5 is KV head 1; split 1 of 3
  args = workload;
  for (const char* a : {"--trace", "1,2"}) args.emplace_back(a);
  const std::string whole = trace_of(6, args);
  INFO(whole);
  CHECK(whole.find("trace of program 1,2,0 (sequence 1)") != std::string::npos);
  CHECK(whole.find("kv heads {0}, tokens 0..36 (37 distinct)") != std::string::npos);  // sequence 1 has 37 tokens
}
