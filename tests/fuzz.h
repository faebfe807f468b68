#pragma once
/// \file
/// The seeded fuzzer: random valid configurations of every kernel step (batch, ragged lengths
/// with 0 and 1, query heads and groups 1 to 32, the ladder's head dims, pages 1 to 256, every
/// storage type, scattered, aliased and top-of-pool tables, the step's knobs) run in the emulator
/// against the oracle, and random invalid ones (one argument made wrong) against the error they
/// must give. tests/test_fuzz.cpp runs a fixed batch in CI; the program pagedattn_fuzz runs as
/// many as asked by hand (`pagedattn_fuzz --help`).
///
/// A configuration is one line of `key=value` words (format_config), and that line is all it
/// takes to run it again (`pagedattn_fuzz --config '<line>'`): a failure is reported as one line
/// that holds it.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/kernel_api.h"
#include "common/workload.h"

namespace pa::fuzz {

/// One configuration: the workload, the step and its knobs, the thread order of the twin run,
/// and for an invalid configuration the one argument made wrong.
struct Config {
  int step = 0;
  WorkloadSpec spec;
  KernelOptions options;
  std::uint64_t order_seed = 1;  ///< the shuffled thread order of the twin run
  /// "" for a valid configuration; else `argument:value`, the change that makes it invalid
  /// (`context_lens[2]:-3`, `options.num_splits:-1`, `null:query`; fuzz.cpp lists them).
  std::string fault;
};

/// The configuration as one line: `step=7 seed=12 dtype=bf16 q_heads=8 kv_heads=2 ...`.
std::string format_config(const Config& config);
/// The configuration a format_config line describes (keys in any order; a key left out keeps
/// its default). Throws ArgumentError naming the key for an unknown key or a bad value.
Config parse_config(std::string_view line);

/// A random valid configuration of \p step, drawn from \p seed alone.
Config draw_valid(int step, std::uint64_t seed);
/// A random invalid configuration of \p step: a valid one with one argument made wrong.
Config draw_invalid(int step, std::uint64_t seed);
/// Case \p index of a run from \p seed: its step is \p steps[index % size], one case in
/// \p invalid_every is invalid (0: none), and its own seed is seed + index.
Config draw_case(const std::vector<int>& steps, std::uint64_t seed, std::uint64_t index, int invalid_every);

/// What running one configuration gave.
struct Outcome {
  enum class Kind : std::uint8_t {
    passed,   ///< valid: matched the oracle, and the twin run gave the same bits; invalid: refused as it must be
    limited,  ///< valid by the generator's rules (for an invalid case: before its fault), refused by a
              ///< limit the step documents (named in detail)
    failed,   ///< anything else (detail says what)
  };
  Kind kind = Kind::passed;
  std::string detail;   ///< why it failed, or the limit that refused it
  double seconds = 0;   ///< CPU wall time of the case
};

/// Runs \p config in the emulator with the step's kernel from the registry.
Outcome run_config(const Config& config);
/// The same with \p entry as the step's kernel (tests plant a broken one).
Outcome run_config(const Config& config, const KernelEntry& entry);

/// One line that reproduces a failed case: `FAIL step 07 (<detail>) | reproduce: pagedattn_fuzz
/// --config '<line>'`, with no newline inside.
std::string failure_line(const Config& config, const Outcome& outcome);

/// Counts of a run, per step.
struct StepTally {
  std::int64_t valid = 0;
  std::int64_t invalid = 0;
  std::int64_t limited = 0;  ///< cases a documented limit refused (an invalid one's before its fault)
  std::int64_t failed = 0;
  double seconds = 0;
};
/// What a run of many cases gave.
struct Summary {
  std::map<int, StepTally> steps;
  std::vector<std::string> failures;        ///< failure_line of each
  std::map<std::string, std::int64_t> limits;  ///< documented refusals by message, with counts
  std::map<std::string, std::int64_t> faults;  ///< invalid cases by argument made wrong
  std::uint64_t first_seed = 0;
  std::uint64_t cases = 0;
  double seconds = 0;
  /// Records one case.
  void add(const Config& config, const Outcome& outcome);
};

}  // namespace pa::fuzz
