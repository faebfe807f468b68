// Every kernel step on the GPU: the checks of the emulator tests, the GPU against the emulator
// on the adversarial set, contexts up to 128k, and pools over 2^31 and 2^32 elements. Labelled
// gpu; skipped, with the reason, where there is no device.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/step_checks.h"
#include "tests/test_util.h"

#if PAGEDATTN_HAVE_CUDA
#include <cuda_runtime.h>
#endif

using pa::Backend;
using pa::DType;
using namespace pa::testing;

namespace {

/// Empty when the GPU path can run; otherwise why not.
std::string no_gpu_reason() {
  if (!pa::cuda_built()) return "pagedattn was built without CUDA";
  return pa::gpu::unavailable_reason();
}

/// The GPU and the emulator agree on every adversarial workload (both within tolerance of the
/// oracle, and within the same tolerance of each other); with \p fp8_kv, in fp8 K/V.
void check_gpu_against_emulator(int step, DType dtype, bool fp8_kv = false) {
  pa::AdversarialOptions options;
  options.dtype = dtype;
  options.fp8_kv = fp8_kv;
  for (const pa::WorkloadSpec& spec : pa::adversarial_specs(options)) {
    const pa::Workload w = pa::make_workload(spec);
    const pa::RunOutput gpu = run_on(Backend::cuda, step, w);
    const pa::RunOutput emulated = run_on(Backend::emulator, step, w);
    std::vector<double> emulated_values(emulated.out.size() / pa::dtype_size(w.problem.dtype));
    for (std::size_t i = 0; i < emulated_values.size(); ++i)
      emulated_values[i] = pa::load_as_float(emulated.out.data(), w.problem.dtype, i);
    const pa::CompareResult agree = pa::compare_to_reference(w.problem, emulated_values, gpu.out.data(),
                                                             pa::Tolerance::for_dtype(dtype));
    INFO(describe_run(Backend::cuda, step, w, {}) << ", GPU against emulator: " << agree.summary());
    REQUIRE(agree.ok);
  }
}

/// One sequence of 128k tokens (and a ragged companion), checked against the oracle.
void check_long_context(int step) {
  pa::WorkloadSpec spec = pa::debug_spec();
  spec.name = "128k";
  spec.dtype = DType::bf16;
  spec.num_q_heads = 8;
  spec.num_kv_heads = 2;
  spec.head_dim = 128;
  spec.context_lens = {131072, 4097};
  require_oracle_match(Backend::cuda, step, pa::make_workload(spec));
}

/// One checked launch on the GPU of \p bad, \p good with bad lengths, table entries or total:
/// the launch returns without an error, the wait after it raises \p expected, which must also be
/// validate_tables's message on the host (the emulator's launch throws it), and a second wait
/// raises nothing: the record is cleared. The launch computed what it could: each sequence of
/// \p faulty is a row of exact zeros (read as length 0: none of its pages is read), every other
/// one matches the oracle of \p good. The next checked call, \p good, runs clean.
void check_raised_at_the_wait(int step, const pa::Workload& good, const pa::Workload& bad, const std::string& expected,
                              const std::vector<int>& faulty) {
  const pa::KernelEntry& entry = pa::kernel(step, Backend::cuda);
  INFO("step " << step << " on the GPU, expecting \"" << expected << "\"");
  REQUIRE(error_message([&] { pa::validate_tables(bad.problem, bad.block_tables, bad.context_lens, entry.name); }) ==
          expected);
  const pa::LaunchPlan plan = entry.plan(bad.problem, {}, pa::gpu::device_info().limits);
  pa::DeviceWorkload device(bad);
  const pa::DecodeView view = device.view(plan.workspace_bytes);
  device.poison();
  REQUIRE(error_message([&] { entry.launch(view, plan, nullptr); }) == "");
  REQUIRE(error_message([] { pa::gpu::synchronize("the faulty launch"); }) == expected);
  REQUIRE(error_message([] { pa::gpu::synchronize("the faulty launch, again"); }) == "");
  const std::vector<std::byte> out = device.download_out();
  const auto is_faulty = [&](int seq) { return std::find(faulty.begin(), faulty.end(), seq) != faulty.end(); };
  const std::string nonzero =
      first_bad_element(bad, out, [&](int seq, int, int, float value) { return is_faulty(seq) && !(value == 0.0f); });
  INFO("a faulty sequence's element " << nonzero);
  REQUIRE(nonzero.empty());
  std::vector<int> computed;
  for (int seq = 0; seq < bad.problem.num_seqs; ++seq)
    if (!is_faulty(seq)) computed.push_back(seq);
  if (!computed.empty()) {
    const pa::CompareResult result =
        pa::check_against_oracle(good, pa::oracle_rows(good, computed), out, entry.weights_in_storage_type);
    INFO("the sequences without a fault against the oracle: " << result.summary());
    REQUIRE(result.ok);
  }
  require_oracle_match(Backend::cuda, step, good);
}

/// The debug workload of check_bad_tables_refused: lengths 37, 20 and 16 in pages of 16, rows
/// of 4 entries, in a storage type \p step runs.
pa::Workload three_sequences(int step) {
  pa::WorkloadSpec spec = pa::debug_spec();
  if (!runs(step, spec.dtype)) spec.dtype = DType::bf16;
  spec.context_lens = {37, 20, 16};
  return pa::make_workload(spec);
}

/// Checked mode on the GPU (DecodeView::checked): every fault validate_tables names, raised at
/// the wait after the launch with its exact message; with several faults in one call, the first
/// in validate_tables's order (by sequence, the length before the row's entries, then by entry),
/// also among 700 sequences, more than the check kernel's last program, which finds it, has
/// threads (512).
void check_faults_raised_at_the_wait(int step) {
  const pa::Workload good = three_sequences(step);
  const pa::DecodeProblem& p = good.problem;
  REQUIRE(p.max_blocks_per_seq == 4);
  const std::string name = pa::kernel(step, Backend::cuda).name;
  const std::string pool = std::to_string(p.num_blocks);
  const auto at = [&](int seq, int entry) { return static_cast<std::size_t>(seq * p.max_blocks_per_seq + entry); };
  const std::string length_1 =
      ": context_lens[1]: expected the length of sequence 1 in [0, max_context_len = 37] (a block-table row holds "
      "4 pages of 16 = 64 tokens), got ";
  const std::string entry_0_2 = ": block_tables[0][2]: expected a page in [0, num_blocks = " + pool +
                                ") (entry 2 of sequence 0 holds its tokens 32..36 of context_lens[0] = 37), got -1";
  {
    pa::Workload bad = good;
    bad.context_lens[1] = -3;
    check_raised_at_the_wait(step, good, bad, name + length_1 + "-3", {1});
  }
  {
    pa::Workload bad = good;
    bad.block_tables[at(0, 2)] = -1;
    check_raised_at_the_wait(step, good, bad, name + entry_0_2, {0});
  }
  {
    pa::Workload bad = good;
    bad.block_tables[at(1, 1)] = static_cast<std::int32_t>(p.num_blocks);
    check_raised_at_the_wait(step, good, bad,
                             name + ": block_tables[1][1]: expected a page in [0, num_blocks = " + pool +
                                 ") (entry 1 of sequence 1 holds its tokens 16..19 of context_lens[1] = 20), got " + pool,
                             {1});
  }
  {
    pa::Workload bad = good;  // every table valid: every sequence computed, the hint raised
    bad.problem.total_context_len += 1;
    check_raised_at_the_wait(step, good, bad,
                             name + ": total_context_len: expected 0 (unknown) or the sum of context_lens = 73, got 74",
                             {});
  }
  {
    pa::Workload bad = good;  // an entry of sequence 0 before a length of sequence 2
    bad.block_tables[at(0, 2)] = -1;
    bad.context_lens[2] = -5;
    check_raised_at_the_wait(step, good, bad, name + entry_0_2, {0, 2});
  }
  {
    pa::Workload bad = good;  // a sequence's length before its own entries, and before a later row's
    bad.context_lens[1] = 38;
    bad.block_tables[at(1, 0)] = -1;
    bad.block_tables[at(2, 0)] = -2;
    check_raised_at_the_wait(step, good, bad, name + length_1 + "38", {1, 2});
  }
  {
    pa::Workload bad = good;  // entry 0 before entry 1 of the same row (two threads of its program)
    bad.block_tables[at(1, 1)] = -7;
    bad.block_tables[at(1, 0)] = static_cast<std::int32_t>(p.num_blocks) + 5;
    bad.context_lens[2] = 99;
    check_raised_at_the_wait(step, good, bad,
                             name + ": block_tables[1][0]: expected a page in [0, num_blocks = " + pool +
                                 ") (entry 0 of sequence 1 holds its tokens 0..15 of context_lens[1] = 20), got " +
                                 std::to_string(p.num_blocks + 5),
                             {1, 2});
  }
  pa::WorkloadSpec spec = pa::debug_spec();
  if (!runs(step, spec.dtype)) spec.dtype = DType::bf16;
  spec.name = "700-sequences";
  spec.context_lens.resize(700);
  for (std::size_t seq = 0; seq < spec.context_lens.size(); ++seq) spec.context_lens[seq] = 1 + static_cast<int>(seq % 40);
  const pa::Workload wide = pa::make_workload(spec);
  const std::size_t row = static_cast<std::size_t>(wide.problem.max_blocks_per_seq);
  {
    pa::Workload bad = wide;  // sequences 557, 513 and 300: threads 45, 1 and 300 of the last program
    bad.context_lens[557] = -1;
    bad.block_tables[513 * row] = -1;
    bad.block_tables[300 * row] = -4;
    check_raised_at_the_wait(step, wide, bad,
                             name + ": block_tables[300][0]: expected a page in [0, num_blocks = " +
                                 std::to_string(wide.problem.num_blocks) +
                                 ") (entry 0 of sequence 300 holds its tokens 0..15 of context_lens[300] = 21), got -4",
                             {300, 513, 557});
  }
  {
    pa::Workload bad = wide;  // the lengths' sum, added across the last program's threads
    bad.problem.total_context_len -= 1;
    const std::int64_t sum = wide.problem.total_context_len;
    check_raised_at_the_wait(step, wide, bad,
                             pa::cat(name, ": total_context_len: expected 0 (unknown) or the sum of context_lens = ", sum,
                                     ", got ", sum - 1),
                             {});
  }
}

}  // namespace

#define PA_GPU_STEP_TESTS(step, tag)                                                                 \
  TEST_CASE("gpu step" tag ": adversarial set against the oracle, every dtype", "[gpu][step" tag "]") { \
    if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);                         \
    for (DType dtype : {DType::f32, DType::f16, DType::bf16}) check_adversarial(Backend::cuda, step, dtype); \
  }                                                                                                  \
  TEST_CASE("gpu step" tag ": agrees with the emulator", "[gpu][step" tag "]") {                     \
    if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);                         \
    check_gpu_against_emulator(step, DType::bf16);                                                   \
    check_gpu_against_emulator(step, runs(step, DType::f32) ? DType::f32 : DType::f16);              \
  }                                                                                                  \
  TEST_CASE("gpu step" tag ": NaN poison invisible, shapes, knobs, refusals", "[gpu][step" tag "]") { \
    if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);                         \
    check_poison_is_invisible(Backend::cuda, step, DType::bf16);                                     \
    check_shapes(Backend::cuda, step);                                                               \
    check_knobs_and_determinism(Backend::cuda, step, knobs_of(step));                                \
    check_refusals(Backend::cuda, step);                                                             \
    check_empty_batch(Backend::cuda, step);                                                          \
  }                                                                                                  \
  TEST_CASE("gpu step" tag ": empty contexts, logits near -1e5, NaN in V, the length cap, split ends", \
            "[gpu][step" tag "]") {                                                                  \
    if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);                         \
    check_empty_contexts(Backend::cuda, step);                                                       \
    check_very_negative_logits(Backend::cuda, step, DType::f16);                                     \
    check_very_negative_logits(Backend::cuda, step, DType::bf16);                                    \
    check_nan_in_value(Backend::cuda, step);                                                         \
    check_length_cap(Backend::cuda, step);                                                           \
    check_split_boundaries(Backend::cuda, step);                                                     \
  }                                                                                                  \
  TEST_CASE("gpu step" tag ": checked mode on the device raises bad lengths and table entries at the " \
            "next wait, the other sequences computed",                                               \
            "[gpu][step" tag "][checked]") {                                                         \
    if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);                         \
    check_bad_tables_refused(Backend::cuda, step);                                                   \
    check_faults_raised_at_the_wait(step);                                                           \
  }                                                                                                  \
  TEST_CASE("gpu step" tag ": pools over 2^31 and 2^32 elements (18 GB of device memory)",           \
            "[gpu][step" tag "][huge]") {                                                            \
    if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);                         \
    check_huge_pools(Backend::cuda, step);                                                           \
  }

// One set per kernel step of the build (see tests/test_steps.cpp).
#define PA_KERNEL_STEP(number) PA_GPU_STEP_TESTS((1##number - 100), #number)
#include "kernel_list.inc"
#undef PA_KERNEL_STEP

TEST_CASE("gpu: a table fault is raised once, by the first wait or checked launch after it, and one found "
          "meanwhile is dropped",
          "[gpu][checked]") {
  // gpu::raise_table_fault: after synchronize, a download, Event::elapsed_ms, and at the start
  // of a checked launch; the record holds one fault until it is raised.
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  const pa::Workload good = three_sequences(6);
  pa::Workload bad_length = good, bad_entry = good;
  bad_length.context_lens[1] = -3;
  bad_entry.block_tables[2] = -1;  // block_tables[0][2]
  const pa::KernelEntry& entry = pa::kernel(6, Backend::cuda);
  const std::string length_message =
      "step06_online_softmax: context_lens[1]: expected the length of sequence 1 in [0, max_context_len = 37] (a "
      "block-table row holds 4 pages of 16 = 64 tokens), got -3";
  const pa::LaunchPlan plan = entry.plan(good.problem, {}, pa::gpu::device_info().limits);
  pa::DeviceWorkload good_device(good), length_device(bad_length), entry_device(bad_entry);
  const pa::DecodeView good_view = good_device.view(plan.workspace_bytes);
  const pa::DecodeView length_view = length_device.view(plan.workspace_bytes);
  const pa::DecodeView entry_view = entry_device.view(plan.workspace_bytes);
  SECTION("two faulty launches before a wait: the first's fault is raised, the second's dropped") {
    // About 6 ms of reads ahead of them on the stream (200 L2 flushes of 2 x 60 MiB), so both are
    // launched before either check runs: the second launch finds nothing to raise at its start.
    for (int i = 0; i < 200; ++i) pa::gpu::flush_l2();
    REQUIRE(error_message([&] { entry.launch(length_view, plan, nullptr); }) == "");
    REQUIRE(error_message([&] { entry.launch(entry_view, plan, nullptr); }) == "");
    REQUIRE(error_message([] { pa::gpu::synchronize("two faulty launches"); }) == length_message);
    REQUIRE(error_message([] { pa::gpu::synchronize("two faulty launches, again"); }) == "");
  }
  SECTION("a download raises it, after copying") {
    entry.launch(length_view, plan, nullptr);
    REQUIRE(error_message([&] { length_device.download_out(); }) == length_message);
    REQUIRE(error_message([&] { length_device.download_out(); }) == "");
  }
  SECTION("Event::elapsed_ms raises it") {
    pa::gpu::Event start, stop;
    start.record();
    entry.launch(length_view, plan, nullptr);
    stop.record();
    REQUIRE(error_message([&] { pa::gpu::Event::elapsed_ms(start, stop); }) == length_message);
    REQUIRE(error_message([&] { pa::gpu::Event::elapsed_ms(start, stop); }) == "");
  }
  SECTION("the next checked launch raises it before launching; an unchecked one does not") {
    entry.launch(length_view, plan, nullptr);
    pa::DecodeView unchecked = good_view;
    unchecked.checked = false;
    // The check kernel's fault reaches the record when it finishes: the good launches before
    // that are clean, and the first after it raises (10 s is ample: they take microseconds).
    std::string message;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (message.empty() && std::chrono::steady_clock::now() < deadline) {
      REQUIRE(error_message([&] { entry.launch(unchecked, plan, nullptr); }) == "");
      message = error_message([&] { entry.launch(good_view, plan, nullptr); });
      if (message.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE(message == length_message);
    REQUIRE(error_message([] { pa::gpu::synchronize("the good launches"); }) == "");
  }
  // Whatever ran above, the next call is clean and right.
  require_oracle_match(Backend::cuda, 6, good);
}

TEST_CASE("gpu: checked mode counts the check's finished programs in a workspace that holds anything", "[gpu][checked]") {
  // The count at the workspace's front (finished_last in common/cuda/runtime.cu) starts as what
  // is there: fresh, poisoned, or what the check before left. From each, a faulty launch raises
  // its fault, twice running, and a good one after it nothing.
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  const pa::Workload good = three_sequences(6);
  pa::Workload bad = good;
  bad.context_lens[1] = -3;
  const pa::KernelEntry& entry = pa::kernel(6, Backend::cuda);
  const std::string length_message =
      "step06_online_softmax: context_lens[1]: expected the length of sequence 1 in [0, max_context_len = 37] (a "
      "block-table row holds 4 pages of 16 = 64 tokens), got -3";
  const pa::LaunchPlan plan = entry.plan(good.problem, {}, pa::gpu::device_info().limits);
  pa::DeviceWorkload good_device(good), bad_device(bad);
  for (const unsigned char fill : {0x00, 0x01, 0x5a, 0x80, 0xff}) {
    INFO("a workspace of bytes " << static_cast<int>(fill));
    pa::gpu::Buffer workspace(plan.workspace_bytes, "workspace");
    workspace.fill(fill);
    pa::DecodeView good_view = good_device.view(plan.workspace_bytes), bad_view = bad_device.view(plan.workspace_bytes);
    for (pa::DecodeView* view : {&good_view, &bad_view}) {
      view->workspace = workspace.data();
      view->workspace_bytes = workspace.size();
    }
    for (int call = 0; call < 2; ++call) {
      REQUIRE(error_message([&] { entry.launch(bad_view, plan, nullptr); }) == "");
      REQUIRE(error_message([] { pa::gpu::synchronize("the faulty launch"); }) == length_message);
    }
    REQUIRE(error_message([&] { entry.launch(good_view, plan, nullptr); }) == "");
    REQUIRE(error_message([] { pa::gpu::synchronize("the good launch"); }) == "");
  }
}

TEST_CASE("gpu: contexts up to 128k for the steps without a length cap (06 on)", "[gpu]") {
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  for (int step : pa::kernel_steps())
    if (step >= 6) check_long_context(step);
}

TEST_CASE("gpu: every ablation variant of a step that has them matches the oracle", "[gpu]") {
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  for (int step : pa::kernel_steps()) check_variants(Backend::cuda, step, {4097, 1, 0, 129, 700});
}

TEST_CASE("gpu: the roof and the device stamp are measured, not assumed", "[gpu]") {
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  const pa::gpu::DeviceInfo& info = pa::gpu::device_info();
  INFO(info.name << ", datasheet " << info.limits.datasheet_gbps << " GB/s");
  REQUIRE(info.limits.sm_count > 0);
  REQUIRE(info.limits.datasheet_gbps > 100);
  const double roof = pa::gpu::measure_roof_gbps(std::size_t{1} << 30, 5);
  INFO("roof " << roof << " GB/s");
  REQUIRE(roof > 0.3 * info.limits.datasheet_gbps);
  REQUIRE(roof < 1.05 * info.limits.datasheet_gbps);
}

TEST_CASE("gpu: the SM clock is measured, near the clock the device reports", "[gpu]") {
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  const double reported = pa::gpu::device_info().sm_clock_mhz;
  const double measured = pa::gpu::measure_sm_clock_mhz();
  INFO("measured " << measured << " MHz, reported (the maximum) " << reported << " MHz");
  REQUIRE(measured > 100);
  if (reported > 0) REQUIRE(measured < 1.1 * reported);  // a clock above the maximum would be a bad count
}

TEST_CASE("gpu: a bare read times real reads and refuses bad arguments", "[gpu]") {
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  const double datasheet = pa::gpu::device_info().limits.datasheet_gbps;
  const std::size_t bytes = std::size_t{256} << 20;  // over the L2, so the reads reach memory
  const std::size_t chunk = std::size_t{128} << 10;
  const double once_ms = pa::gpu::time_bare_read_ms(bytes, chunk, 1, 128, 5);
  const double twice_ms = pa::gpu::time_bare_read_ms(2 * bytes, chunk, 1, 128, 5);
  const double per_group_ms = pa::gpu::time_bare_read_ms(bytes, chunk, 4, 128, 5);
  INFO("once " << once_ms << " ms, twice the bytes " << twice_ms << " ms, each chunk by 4 programs " << per_group_ms << " ms");
  const double gbps = static_cast<double>(bytes) / (once_ms * 1e-3) / 1e9;
  CHECK(gbps > 0.3 * datasheet);
  CHECK(gbps < 1.05 * datasheet);
  CHECK(twice_ms > 1.5 * once_ms);       // the time grows with the bytes: the reads happen
  CHECK(per_group_ms > 1.02 * once_ms);  // four programs a chunk take longer than one
  PA_REQUIRE_THROWS_AS_WITH(pa::gpu::time_bare_read_ms(bytes, 100, 1, 128, 1), pa::ArgumentError, "chunk_bytes");
  PA_REQUIRE_THROWS_AS_WITH(pa::gpu::time_bare_read_ms(bytes, chunk, 0, 128, 1), pa::ArgumentError, "readers");
  PA_REQUIRE_THROWS_AS_WITH(pa::gpu::time_bare_read_ms(bytes, chunk, 1, 100, 1), pa::ArgumentError, "threads");
}

TEST_CASE("gpu: a word fill sets every word and continues the pattern into a short tail", "[gpu]") {
  // The harness poisons out and the workspace with it (words of 0x7fffffff) before every run.
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  const std::uint32_t word = 0x7fffffffu;
  unsigned char pattern[4];
  std::memcpy(pattern, &word, sizeof word);
  // No tail, tails of 1 to 3 bytes, and more words than the fill's grid covers in one pass.
  for (const std::size_t bytes : {std::size_t{4}, std::size_t{5}, std::size_t{6}, std::size_t{7},
                                  std::size_t{4} * 4096 * 256 * 3 + 2}) {
    pa::gpu::Buffer buffer(bytes, "word fill");
    buffer.fill(0x00);
    buffer.fill_words(word);
    std::vector<unsigned char> back(bytes);
    buffer.download(back.data(), bytes);
    for (std::size_t i = 0; i < bytes; ++i)
      if (back[i] != pattern[i % 4])
        FAIL(pa::cat("buffer of ", bytes, " bytes: byte ", i, " is ", int{back[i]}, ", expected ", int{pattern[i % 4]}));
  }
}

TEST_CASE("gpu: out of device memory names the buffer and the bytes, and is not sticky", "[gpu]") {
  // docs/design/CATALOGUE.md R2: nothing half-built, and a smaller request works afterwards.
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  const std::size_t too_much = std::size_t{1} << 50;  // a petabyte
  PA_REQUIRE_THROWS_AS_WITH(pa::gpu::Buffer(too_much, "a pool too big"), pa::CudaError,
                            pa::cat("cudaMalloc of ", too_much, " bytes for a pool too big failed: "));
  PA_REQUIRE_THROWS_AS_WITH(pa::gpu::Buffer(too_much, "a pool too big"), pa::CudaError, " bytes free)");
  const pa::gpu::Buffer fits(std::size_t{1} << 20, "a pool that fits");
  REQUIRE(fits.data() != nullptr);
  require_oracle_match(Backend::cuda, 6, pa::make_workload(pa::debug_spec()));
}

TEST_CASE("gpu: a launch the device rejects names the kernel and its configuration", "[gpu]") {
  // docs/design/CATALOGUE.md R4: caught right after the launch, and the next launch runs.
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  const pa::Workload w = pa::make_workload(pa::debug_spec());
  const pa::KernelEntry& entry = pa::kernel(4, Backend::cuda);
  pa::LaunchPlan plan = entry.plan(w.problem, {}, pa::gpu::device_info().limits);
  pa::DeviceWorkload device(w);
  const pa::DecodeView view = device.view(plan.workspace_bytes);
  plan.threads = 2048;  // more threads than a program may have: an invalid configuration
  PA_REQUIRE_THROWS_AS_WITH(entry.launch(view, plan, nullptr), pa::CudaError, "launch of step04");
  PA_REQUIRE_THROWS_AS_WITH(entry.launch(view, plan, nullptr), pa::CudaError, "block 2048");
  pa::gpu::synchronize("the rejected launch");  // nothing sticky was left behind
  require_oracle_match(Backend::cuda, 4, w);
}

TEST_CASE("gpu: once uploaded, the block tables are the device's own: reusing the host copy changes nothing", "[gpu]") {
  // docs/design/CATALOGUE.md A11: the host tables and lengths are overwritten (as a serving
  // engine's staging buffer is, for the next step) right after an asynchronous launch.
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  pa::Workload w = pa::make_workload(pa::debug_spec());
  const pa::Workload original = w;
  const pa::KernelEntry& entry = pa::kernel(6, Backend::cuda);
  const pa::LaunchPlan plan = entry.plan(w.problem, {}, pa::gpu::device_info().limits);
  pa::DeviceWorkload device(w);
  device.poison();
  const pa::DecodeView view = device.view(plan.workspace_bytes);
  entry.launch(view, plan, nullptr);  // asynchronous, checked mode included: its check runs on the device
  std::fill(w.block_tables.begin(), w.block_tables.end(), 0);
  std::fill(w.context_lens.begin(), w.context_lens.end(), 1);
  pa::gpu::synchronize("the launch");
  const pa::CompareResult result = pa::check_against_oracle(original, pa::oracle_rows(original), device.download_out(),
                                                             entry.weights_in_storage_type);
  INFO(result.summary());
  REQUIRE(result.ok);
}

namespace {
/// A spec with fp8 K/V and bf16 q, 8 query heads over 2 KV heads, head dim 128, named \p name.
pa::WorkloadSpec fp8_spec(const char* name) {
  pa::WorkloadSpec spec = pa::debug_spec();
  spec.name = name;
  spec.dtype = DType::bf16;
  spec.fp8_kv = true;
  spec.num_q_heads = 8;
  spec.num_kv_heads = 2;
  spec.head_dim = 128;
  return spec;
}
}  // namespace

#if PAGEDATTN_HAVE_CUDA
namespace {
/// One launch of \p step's plan for \p planned (made for \p device), captured in a CUDA graph,
/// replayed with each lengths of \p replays (a serving engine's decode steps: each replay reads
/// the lengths of the moment), in checked mode off and on: the oracle's answer each time, and
/// the first replay's bits again at the last (the same lengths). \p full holds every sequence's
/// cache to its capacity. Returns the plan's description.
std::string check_graph_replays(int step, const pa::Workload& full, const std::vector<std::int32_t>& planned,
                                const std::vector<std::vector<std::int32_t>>& replays, const pa::DeviceLimits& device_limits) {
  const auto require_ok = [](cudaError_t status, const char* what) {
    INFO(what << ": " << cudaGetErrorString(status));
    REQUIRE(status == cudaSuccess);
  };
  const pa::KernelEntry& entry = pa::kernel(step, Backend::cuda);
  const pa::LaunchPlan plan = pa::plan_for(entry, full.problem, planned, {}, device_limits);
  pa::DeviceWorkload device(full);
  for (const bool checked : {false, true}) {
    INFO("checked mode " << (checked ? "on" : "off") << "; " << plan.description);
    pa::DecodeView view = device.view(plan.workspace_bytes);
    view.checked = checked;
    cudaStream_t stream = nullptr;
    require_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    require_ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
    const std::string launched = error_message([&] { entry.launch(view, plan, stream); });
    require_ok(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    REQUIRE(launched == "");
    require_ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    std::vector<std::byte> first;
    for (std::size_t k = 0; k < replays.size(); ++k) {
      INFO("replay " << k);
      const std::vector<std::int32_t>& lengths = replays[k];
      require_ok(cudaMemcpy(const_cast<std::int32_t*>(view.context_lens), lengths.data(), lengths.size() * sizeof(std::int32_t),
                            cudaMemcpyHostToDevice),
                 "uploading the lengths");
      device.poison();
      require_ok(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
      require_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      const std::vector<std::byte> out = device.download_out();
      pa::Workload now = full;
      now.context_lens = lengths;
      const pa::CompareResult result = pa::check_against_oracle(now, pa::oracle_rows(now), out, entry.weights_in_storage_type);
      INFO(result.summary());
      REQUIRE(result.ok);
      if (k == 0) first = out;
      if (k + 1 == replays.size()) {
        const pa::CompareResult same = pa::compare_bitwise(full.problem, first.data(), out.data());
        INFO("the last replay against the first: " << same.summary());
        REQUIRE(same.ok);
      }
    }
    require_ok(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
    require_ok(cudaGraphDestroy(graph), "cudaGraphDestroy");
    require_ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
  }
  return plan.description;
}
}  // namespace
#endif

TEST_CASE("gpu step11: one launch captured in a CUDA graph, replayed with new lengths, gives the oracle's answer each time",
          "[gpu][step11]") {
  // A serving engine captures the decode call once and replays it every step with the lengths
  // its staging buffer uploaded: step 11's plan (its work list in device memory) is made for the
  // first lengths, and each replay reads the lengths of the moment.
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
#if PAGEDATTN_HAVE_CUDA
  pa::WorkloadSpec spec = pa::debug_spec();  // 4 query heads over 2 KV heads, head dim 64
  spec.name = "graph-replay";
  spec.dtype = DType::bf16;
  spec.context_lens.assign(6, 9000);  // every sequence's cache holds 9000 tokens: each replay uses a prefix
  pa::Workload full = pa::make_workload(spec);
  full.problem.total_context_len = 0;  // unknown: the lengths change from replay to replay
  const std::vector<std::int32_t> planned = {6000, 500, 200, 3000, 32, 0};
  check_graph_replays(11, full, planned,
                      {
                          planned,                              // as planned
                          {6001, 501, 201, 3001, 33, 1},        // a token later
                          {9000, 700, 300, 4100, 64, 2},        // all longer than planned, one to the capacity
                          {0, 0, 0, 0, 0, 0},                   // every sequence empty
                          {64, 9000, 0, 1, 4100, 2},            // the long one moved
                          planned,                              // as planned again: the same bits as the first
                      },
                      pa::gpu::device_info().limits);
#endif
}

TEST_CASE("gpu step12: fp8 K/V with claimed tails, in a CUDA graph replayed with new lengths", "[gpu][step12][fp8]") {
  // Claims need long portions: the plan is made for 2 of the device's SMs (24 programs at 12 an
  // SM), so these lengths give each program about 70 tiles. The claims' count is set to 0 by the launch
  // (a node of the graph), so every replay claims from the first item again.
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
#if PAGEDATTN_HAVE_CUDA
  pa::WorkloadSpec spec = fp8_spec("graph-replay-fp8");
  spec.context_lens.assign(6, 9000);
  pa::Workload full = pa::make_workload(spec);
  full.problem.total_context_len = 0;
  const std::vector<std::int32_t> planned = {9000, 9000, 200, 9000, 32, 0};
  pa::DeviceLimits two_sms = pa::gpu::device_info().limits;
  two_sms.sm_count = 2;
  const std::string description = check_graph_replays(12, full, planned,
                                                      {
                                                          planned,
                                                          {8999, 9000, 201, 7000, 33, 1},
                                                          {0, 0, 0, 0, 0, 0},
                                                          {64, 9000, 9000, 1, 9000, 2},
                                                          planned,
                                                      },
                                                      two_sms);
  INFO(description);
  REQUIRE(description.find("claimed at run time") != std::string::npos);
#endif
}

TEST_CASE("gpu step12: fp8 K/V, the adversarial set against the oracle and the emulator, q in f16 and bf16",
          "[gpu][step12][fp8]") {
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  for (DType dtype : {DType::f16, DType::bf16}) {
    check_adversarial(Backend::cuda, 12, dtype, 300, true);
    check_gpu_against_emulator(12, dtype, true);
  }
}

TEST_CASE("gpu step12: fp8 K/V, NaN poison invisible, shapes, same input same bits", "[gpu][step12][fp8]") {
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  check_poison_is_invisible(Backend::cuda, 12, DType::bf16, true);
  check_poison_is_invisible(Backend::cuda, 12, DType::f16, true);
  check_fp8_shapes(Backend::cuda, 12);
  check_knobs_and_determinism(Backend::cuda, 12, knobs_of(12), true);
  check_fp8_refused_below(Backend::cuda, 12);
}

TEST_CASE("gpu step12: fp8 K/V, empty contexts, logits near -1e5, NaN in one V element", "[gpu][step12][fp8]") {
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  check_empty_contexts(Backend::cuda, 12, true);
  check_very_negative_logits(Backend::cuda, 12, DType::f16, true);
  check_very_negative_logits(Backend::cuda, 12, DType::bf16, true);
  check_nan_in_value(Backend::cuda, 12, true);
}

TEST_CASE("gpu step12: fp8 K/V, pools over 2^31 and 2^32 bytes (9 GB of device memory)", "[gpu][step12][fp8][huge]") {
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  check_huge_fp8_pools(Backend::cuda, 12);
}

TEST_CASE("gpu step12: fp8 K/V, one sequence of 128k tokens", "[gpu][step12][fp8]") {
  if (const std::string why = no_gpu_reason(); !why.empty()) PA_SKIP(why);
  pa::WorkloadSpec spec = fp8_spec("128k-fp8");
  spec.context_lens = {131072, 4097};
  require_oracle_match(Backend::cuda, 12, pa::make_workload(spec));
}
