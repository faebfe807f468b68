// pagedattn_fuzz: the seeded fuzzer of tests/fuzz.h, run by hand for as many cases or as long as
// asked (tests/test_fuzz.cpp runs a fixed batch in CI). `pagedattn_fuzz --help` lists the flags.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/report.h"
#include "harness/harness.h"
#include "kernels/registry.h"
#include "tests/fuzz.h"

namespace {

const char* kUsage = R"(usage: %s [flags]
Random valid configurations of the kernel steps, run in the emulator against the oracle (and a
twin with zeros for poison in a shuffled thread order, which must give the same bits), and random
invalid ones (one argument made wrong), which must be refused with an ArgumentError naming the
kernel and the argument. A failure prints one line that reproduces it with --config.

  --seed S           the first case's seed (default 1): case i has seed S + i and step i mod
                     the number of steps
  --count N          cases to run (default 200)
  --seconds T        stop after T seconds as well (default: no limit)
  --steps A,B,...    the steps to fuzz (default: every kernel step)
  --invalid-every K  one round of the steps in K is invalid cases (default 4; 0: none)
  --config LINE      run this one configuration (a failure's line) and say what it gave
  --print            print each case's line and time after running it
  --summary FILE     also write the summary as Markdown
  --quiet            no progress lines (every 100 cases or minute, on stderr)
exit codes (docs/design/CORRECTNESS.md lists them, the step programs' own): 0 no failure; 1 a
  failure (a line each, on stdout); 2 a bad flag or value, or a bad PAGEDATTN_EMU_SHUFFLE
  (nothing ran); 4 the summary file could not be written (nothing half-written is left)
)";

long long integer_flag(const std::string& flag, const std::string& text, long long least) {
  try {
    std::size_t used = 0;
    const long long value = std::stoll(text, &used);
    if (used == text.size() && value >= least) return value;
  } catch (const std::logic_error&) {
  }
  pa::throw_argument("pagedattn_fuzz", flag, pa::cat("an integer >= ", least), pa::cat('\'', text, '\''));
}

std::string two_digits(int step) { return pa::cat(step < 10 ? "0" : "", step); }

/// The summary as a Markdown table, one row per step.
std::string summary_table(const pa::fuzz::Summary& summary) {
  std::ostringstream out;
  out << "| step | kernel | valid | invalid | refused by a documented limit | failures | seconds |\n"
      << "|---|---|---|---|---|---|---|\n";
  pa::fuzz::StepTally total;
  for (const auto& [step, t] : summary.steps) {
    out << "| " << two_digits(step) << " | `" << pa::kernel(step, pa::Backend::emulator).name << "` | " << t.valid << " | "
        << t.invalid << " | " << t.limited << " | " << t.failed << " | " << static_cast<long long>(t.seconds + 0.5) << " |\n";
    total.valid += t.valid;
    total.invalid += t.invalid;
    total.limited += t.limited;
    total.failed += t.failed;
    total.seconds += t.seconds;
  }
  out << "| all | | " << total.valid << " | " << total.invalid << " | " << total.limited << " | " << total.failed << " | "
      << static_cast<long long>(total.seconds + 0.5) << " |\n";
  return out.str();
}

std::string markdown(const pa::fuzz::Summary& summary, const std::string& command) {
  std::ostringstream out;
  out << "Command: `" << command << "`\n\n"
      << "Cases: " << summary.cases << ", seeds " << summary.first_seed << " to " << summary.first_seed + summary.cases - 1
      << " (case i: seed first + i, step i mod the steps), " << static_cast<long long>(summary.seconds + 0.5)
      << " s of one core.\n\n"
      << summary_table(summary) << "\nInvalid cases by the argument made wrong:";
  for (const auto& [argument, count] : summary.faults) out << " `" << argument << "` " << count << ";";
  out << "\n\nCases refused by a limit the step documents (an invalid case's before its fault):";
  if (summary.limits.empty()) out << " none.";
  for (const auto& [limit, count] : summary.limits) out << "\n- " << limit << ": " << count;
  out << "\n\nFailures: " << (summary.failures.empty() ? "none." : "");
  for (const std::string& line : summary.failures) out << "\n- `" << line << "`";
  out << '\n';
  return out.str();
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seed = 1;
  long long count = 200, seconds = 0, invalid_every = 4;
  std::vector<int> steps = pa::kernel_steps();
  std::string config_line, summary_path;
  bool print = false, quiet = false;
  std::string command = "pagedattn_fuzz";
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      command += pa::cat(" ", flag);
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) pa::throw_argument("pagedattn_fuzz", flag, "a value after it", "nothing");
        command += pa::cat(" ", argv[i + 1]);
        return argv[++i];
      };
      if (flag == "--help" || flag == "-h") {
        std::printf(kUsage, argv[0]);
        return 0;
      } else if (flag == "--seed") seed = static_cast<std::uint64_t>(integer_flag(flag, value(), 0));
      else if (flag == "--count") count = integer_flag(flag, value(), 1);
      else if (flag == "--seconds") seconds = integer_flag(flag, value(), 1);
      else if (flag == "--invalid-every") invalid_every = integer_flag(flag, value(), 0);
      else if (flag == "--steps") {
        steps.clear();
        std::stringstream items(value());
        std::string item;
        while (std::getline(items, item, ',')) {
          const int step = static_cast<int>(integer_flag(flag, item, 0));
          pa::kernel(step, pa::Backend::emulator);  // a step without a kernel is refused, listing those with one
          steps.push_back(step);
        }
        if (steps.empty()) pa::throw_argument("pagedattn_fuzz", flag, "a comma-separated list of steps", "''");
      } else if (flag == "--config") config_line = value();
      else if (flag == "--summary") summary_path = value();
      else if (flag == "--print") print = true;
      else if (flag == "--quiet") quiet = true;
      else pa::throw_argument("pagedattn_fuzz", "flag", "one of the flags --help lists", flag);
    }
    pa::emu::thread_order();  // a bad PAGEDATTN_EMU_SHUFFLE is a bad argument: it throws here
    if (!config_line.empty()) {
      const pa::fuzz::Config config = pa::fuzz::parse_config(config_line);
      pa::kernel(config.step, pa::Backend::emulator);
      const pa::fuzz::Outcome outcome = pa::fuzz::run_config(config);
      if (outcome.kind == pa::fuzz::Outcome::Kind::failed) {
        std::cout << pa::fuzz::failure_line(config, outcome) << '\n';
        return pa::exit_wrong;
      }
      std::cout << (outcome.kind == pa::fuzz::Outcome::Kind::passed ? "passed" : "refused by a documented limit: ")
                << outcome.detail << " (" << outcome.seconds << " s): " << pa::fuzz::format_config(config) << '\n';
      return pa::exit_ok;
    }
  } catch (const pa::Error& bad) {
    std::fprintf(stderr, "%s: %s\n(see --help)\n", argv[0], bad.what());
    return pa::exit_bad_argument;
  }

  pa::fuzz::Summary summary;
  summary.first_seed = seed;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  double last_note = 0;
  for (long long index = 0; index < count; ++index) {
    if (seconds > 0 && elapsed() >= static_cast<double>(seconds)) break;
    const pa::fuzz::Config config =
        pa::fuzz::draw_case(steps, seed, static_cast<std::uint64_t>(index), static_cast<int>(invalid_every));
    const pa::fuzz::Outcome outcome = pa::fuzz::run_config(config);
    if (print) std::cout << outcome.seconds << " s: " << pa::fuzz::format_config(config) << std::endl;
    summary.add(config, outcome);
    if (outcome.kind == pa::fuzz::Outcome::Kind::failed) std::cout << summary.failures.back() << std::endl;
    if (!quiet && ((index + 1) % 100 == 0 || elapsed() - last_note > 60)) {
      last_note = elapsed();
      std::fprintf(stderr, "pagedattn_fuzz: %llu cases, %zu failures, %.0f s\n",
                   static_cast<unsigned long long>(summary.cases), summary.failures.size(), last_note);
    }
  }
  summary.seconds = elapsed();
  std::cout << summary_table(summary);
  if (!summary_path.empty()) {
    try {
      pa::write_file_whole(summary_path, [&](std::ostream& file) { file << markdown(summary, command); });
    } catch (const pa::Error& error) {
      std::fprintf(stderr, "%s: %s\n", argv[0], error.what());
      return pa::exit_fault;
    }
  }
  return summary.failures.empty() ? pa::exit_ok : pa::exit_wrong;
}
