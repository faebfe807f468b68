#pragma once
/// \file
/// The one harness every kernel step is driven through: run a kernel on a workload in the
/// emulator or on the GPU (outputs and scratch poisoned first), compare with the oracle, time
/// it, and print one table. Step programs, the tour, the tests and the benchmarks all call these
/// functions, so no step carries a harness of its own.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/cuda/runtime.h"
#include "common/emu/emu.h"
#include "common/kernel_api.h"
#include "common/workload.h"

namespace pa {

/// The output of one kernel run, with what it cost.
struct RunOutput {
  std::vector<std::byte> out;  ///< [num_seqs][num_q_heads][head_dim] in the workload's dtype
  double seconds = 0;          ///< emulator: CPU wall time; GPU: median device time of the timed runs
  emu::Counters traffic;       ///< bytes the emulator counted (emulator runs only)
  LaunchPlan plan;             ///< what ran
};

/// Runs \p kernel in the emulator on the workload's host tensors. Output and workspace are
/// filled with NaN first (docs/design/CORRECTNESS.md rule 1). Kernel faults throw KernelError.
RunOutput run_emulator(const KernelEntry& kernel, const Workload& workload,
                       const KernelOptions& options = {});

/// A workload copied to the GPU, with poisoned output and workspace buffers.
class DeviceWorkload {
 public:
  explicit DeviceWorkload(const Workload& workload);
  /// A view over the device tensors with a workspace of at least \p workspace_bytes.
  DecodeView view(std::size_t workspace_bytes);
  /// Fills out and workspace with NaN (0xff bytes).
  void poison();
  /// Copies the output back.
  std::vector<std::byte> download_out() const;
  const DecodeProblem& problem() const { return problem_; }

 private:
  DecodeProblem problem_;
  gpu::Buffer query_, key_cache_, value_cache_, block_tables_, context_lens_, out_, workspace_;
};

/// Runs \p kernel on the GPU: uploads, poisons, launches once (checked: launch errors, and the
/// checked mode's tables and lengths, DecodeView::checked), downloads; with \p timed_runs > 0
/// also times that many further launches (L2 flushed before each; checked mode off, as in the
/// benchmarks) and reports the median. Throws CudaError if no GPU (check gpu::available() first).
RunOutput run_gpu(const KernelEntry& kernel, const Workload& workload, const KernelOptions& options = {},
                  int timed_runs = 0);

/// Median device time of \p runs launches of \p plan on an uploaded workload (L2 flushed before
/// each; two warm-up launches first). Used by run_gpu and the benchmarks. With \p checked, each
/// launch runs in checked mode (DecodeView::checked): the time then includes the check kernel
/// and the wait for its answer, which is what the mode costs.
double time_gpu_launches(const KernelEntry& kernel, DeviceWorkload& device, const LaunchPlan& plan, int runs,
                         bool checked = false);

/// What a run is checked against: the oracle in double and the plainest float loop (whose
/// error bounds the kernel's, docs/design/CORRECTNESS.md rule 5), for all sequences or a sample.
struct OracleRows {
  std::vector<double> exact;  ///< [num_seqs][num_q_heads][head_dim]; NaN in rows not computed
  std::vector<float> plain;   ///< the plain float loop, same shape
  std::vector<int> sequences; ///< the rows computed (empty: all)
};

/// The oracle for \p sequences (an empty list means all). Big workloads are checked on a
/// sample this way: the full oracle on gigabytes of K/V would take minutes.
OracleRows oracle_rows(const Workload& workload, const std::vector<int>& sequences = {});

/// The sample big workloads are checked on: the first, middle and last sequence.
std::vector<int> sample_sequences(const Workload& workload);

/// Compares a run's output with the oracle (tolerance per dtype, NaN and Inf fail) and with
/// the plain float loop's error (at most 3x); only the oracle's rows are checked.
CompareResult check_against_oracle(const Workload& workload, const OracleRows& oracle,
                                   const std::vector<std::byte>& out);

/// One step run on one workload, as a table row (the step programs and the tour print these).
struct StepReport {
  int step = 0;
  std::string kernel;
  double oracle_seconds = 0;
  std::string emulator_status;  ///< "ok", "FAIL ..." or "skipped: ..."
  double emulator_error = 0;    ///< max |d| vs oracle
  double emulator_seconds = 0;
  std::uint64_t emulator_bytes = 0;  ///< global bytes the emulator counted
  std::string gpu_status;       ///< "ok", "FAIL ...", or "skipped: <reason>"
  double gpu_error = 0;
  double gpu_vs_emulator = 0;   ///< max |gpu - emulator|
  double gpu_seconds = 0;       ///< median
  double gpu_gbps = 0;          ///< workload bytes (docs/design/BENCHMARKS.md) / median time
  double roof_gbps = 0;         ///< measured in this run (0 when no GPU)
  std::optional<KernelOptions> ran;  ///< the knobs as they ran (the GPU's plan where it ran)
  bool ok = true;        ///< no backend that ran disagreed with the oracle or faulted
  bool refused = false;  ///< a backend refused the problem or the knobs (ArgumentError)
  bool faulted = false;  ///< a backend stopped with an error (a KernelError, a CUDA error), not a wrong answer
};

/// Settings of the step programs and the tour.
struct StepRunSettings {
  bool run_emulator = true;
  bool run_gpu = true;     ///< when a GPU is available
  bool sample = false;     ///< check only sample_sequences() against the oracle (big workloads)
  int gpu_timed_runs = 20;
  double roof_gbps = 0;    ///< measured roof (0: not measured)
};

/// Runs one step on one workload: oracle, emulator, GPU (when available), compared side by side.
StepReport run_step(int step, const Workload& workload, const KernelOptions& options,
                    const StepRunSettings& settings);

/// Prints reports as one side-by-side table.
void print_step_table(const std::vector<StepReport>& reports, std::ostream& out);

/// Describes what the traced program read (pages, tokens), from emu::trace().
std::string describe_trace(const Workload& workload, int seq);

/// main() of every kernel step program (steps 02 onward): flags choose the workload
/// (`--batch --context --q-heads --kv-heads --head-dim --page --dtype --seed --layout`), the
/// kernel's knobs (`--threads --splits`), `--adversarial` runs the whole adversarial set,
/// `--json FILE` writes results (whole or not at all), `--trace SEQ,HEAD` shows what a program
/// read, `--quiet` prints nothing unless something fails or is refused. Every flag value is
/// checked. Returns the exit code: 0 every run matched the oracle, 1 a wrong answer, 2 a bad flag
/// or value, 3 a refused workload or knob (and nothing wrong), 4 a fault or error (an emulator
/// fault, a CUDA error, host memory, the JSON file); 4 wins over 1, 1 over 3
/// (tests/test_programs.cpp).
int kernel_step_main(int step, int argc, char** argv);

}  // namespace pa
