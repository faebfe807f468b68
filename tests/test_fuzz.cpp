// The seeded fuzzer (tests/fuzz.h) in CI: a fixed batch of random valid and invalid
// configurations of every kernel step, with a fixed seed; a failure prints the one line that
// reproduces it (`pagedattn_fuzz --config '...'`). The long runs are by hand (pagedattn_fuzz).
#include "tests/fuzz.h"

#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/registry.h"
#include "tests/catch_compat.h"

using pa::fuzz::Config;
using pa::fuzz::Outcome;

namespace {

/// The CI batch: cases per step, one round in three invalid, from one seed. About 6 s a step in
/// the emulator on one core of the CI machine (docs/results/fuzz-20261202.md has a long run).
constexpr int kCasesPerStep = 48;
constexpr std::uint64_t kSeed = 20261202;

/// Runs \p step's batch and requires no failure, listing every failure's line.
void fuzz_step(int step) {
  pa::fuzz::Summary summary;
  for (int i = 0; i < kCasesPerStep; ++i) {
    const Config config = pa::fuzz::draw_case({step}, kSeed + static_cast<std::uint64_t>(step) * 1000000, static_cast<std::uint64_t>(i), 3);
    summary.add(config, pa::fuzz::run_config(config));
  }
  for (const std::string& line : summary.failures) UNSCOPED_INFO(line);
  const pa::fuzz::StepTally& tally = summary.steps[step];
  INFO("step " << step << ": " << tally.valid << " valid, " << tally.invalid << " invalid, " << tally.limited
               << " refused by a documented limit, " << tally.seconds << " s");
  REQUIRE(summary.failures.empty());
  REQUIRE(tally.invalid >= kCasesPerStep / 4);
  REQUIRE(tally.limited <= kCasesPerStep / 8);  // the generator keeps to what the step runs
}

// A planted broken kernel: step 06 with one output element changed after the launch.
void launch_off_by_one(const pa::DecodeView& view, const pa::LaunchPlan& plan, void* stream) {
  pa::kernel(6, pa::Backend::emulator).launch(view, plan, stream);
  if (view.problem.query_elems() > 0)
    pa::store_from_float(view.out, view.problem.dtype, 0, pa::load_as_float(view.out, view.problem.dtype, 0) + 0.5f);
}
// Another: step 06 that skips the checked mode, so a bad table entry reaches the kernel.
void launch_unchecked(const pa::DecodeView& view, const pa::LaunchPlan& plan, void* stream) {
  pa::DecodeView unchecked = view;
  unchecked.checked = false;
  pa::kernel(6, pa::Backend::emulator).launch(unchecked, plan, stream);
}

/// The configuration a failure line holds, read back.
Config reproduced(const std::string& line) {
  const std::string marker = "--config '";
  const std::size_t begin = line.find(marker);
  REQUIRE(begin != std::string::npos);
  const std::size_t end = line.find('\'', begin + marker.size());
  REQUIRE(end != std::string::npos);
  return pa::fuzz::parse_config(line.substr(begin + marker.size(), end - begin - marker.size()));
}

}  // namespace

#define PA_KERNEL_STEP(number)                                                                          \
  TEST_CASE("fuzz step" #number ": a fixed batch of valid and invalid configurations", "[fuzz][step" #number "]") { \
    fuzz_step(1##number - 100);                                                                         \
  }
#include "kernel_list.inc"
#undef PA_KERNEL_STEP

TEST_CASE("fuzz: a configuration's line reads back as the same configuration", "[fuzz]") {
  for (int step : pa::kernel_steps())
    for (std::uint64_t seed = 1; seed <= 40; ++seed)
      for (const Config& config : {pa::fuzz::draw_valid(step, seed), pa::fuzz::draw_invalid(step, seed)}) {
        const std::string line = pa::fuzz::format_config(config);
        INFO(line);
        REQUIRE(line.find('\n') == std::string::npos);
        REQUIRE(pa::fuzz::format_config(pa::fuzz::parse_config(line)) == line);
      }
  // A key left out keeps its default; a bad key or value is refused, naming it.
  const Config minimal = pa::fuzz::parse_config("step=3 context=5,0");
  REQUIRE(minimal.spec.context_lens == std::vector<int>{5, 0});
  REQUIRE(pa::fuzz::run_config(minimal).kind == Outcome::Kind::passed);
  PA_REQUIRE_THROWS_AS_WITH(pa::fuzz::parse_config("step=3 heads=2"), pa::ArgumentError, "'heads'");
  PA_REQUIRE_THROWS_AS_WITH(pa::fuzz::parse_config("step=x"), pa::ArgumentError, "step: expected an integer");
  PA_REQUIRE_THROWS_AS_WITH(pa::fuzz::parse_config("layout=abc"), pa::ArgumentError, "layout");
}

TEST_CASE("fuzz: the same seed draws the same cases, and every step and both kinds come up", "[fuzz]") {
  const std::vector<int> steps = pa::kernel_steps();
  int invalid = 0;
  for (std::uint64_t i = 0; i < 4 * steps.size(); ++i) {
    const Config a = pa::fuzz::draw_case(steps, 99, i, 4);
    REQUIRE(pa::fuzz::format_config(a) == pa::fuzz::format_config(pa::fuzz::draw_case(steps, 99, i, 4)));
    REQUIRE(a.step == steps[i % steps.size()]);
    invalid += !a.fault.empty();
  }
  REQUIRE(invalid == static_cast<int>(steps.size()));  // one round in four
}

TEST_CASE("fuzz: a planted bug fails with one line that reproduces it", "[fuzz]") {
  pa::KernelEntry broken = pa::kernel(6, pa::Backend::emulator);
  broken.launch = &launch_off_by_one;
  int failures = 0;
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const Config config = pa::fuzz::draw_valid(6, seed);
    const Outcome outcome = pa::fuzz::run_config(config, broken);
    if (outcome.kind != Outcome::Kind::failed) continue;  // an empty batch has nothing to change
    ++failures;
    const std::string line = pa::fuzz::failure_line(config, outcome);
    INFO(line);
    REQUIRE(line.find('\n') == std::string::npos);
    REQUIRE(line.find("against the oracle") != std::string::npos);
    const Config again = reproduced(line);
    REQUIRE(pa::fuzz::format_config(again) == pa::fuzz::format_config(config));
    REQUIRE(pa::fuzz::run_config(again, broken).detail == outcome.detail);
    REQUIRE(pa::fuzz::run_config(again).kind == Outcome::Kind::passed);  // the real kernel passes it
  }
  REQUIRE(failures >= 10);

  // The invalid side: a kernel that skips checked mode lets a page outside the pool reach the
  // emulator's checked memory, which is not the ArgumentError the case asks for.
  pa::KernelEntry unchecked = pa::kernel(6, pa::Backend::emulator);
  unchecked.launch = &launch_unchecked;
  Config bad = pa::fuzz::draw_valid(6, 3);
  bad.spec.context_lens = {20, 40};
  bad.fault = "block_tables[1][2]:num_blocks";
  REQUIRE(pa::fuzz::run_config(bad).kind == Outcome::Kind::passed);
  const Outcome missed = pa::fuzz::run_config(bad, unchecked);
  INFO(missed.detail);
  REQUIRE(missed.kind == Outcome::Kind::failed);
  REQUIRE(missed.detail.find("other than ArgumentError") != std::string::npos);
  REQUIRE(missed.detail.find("key_cache") != std::string::npos);
}
