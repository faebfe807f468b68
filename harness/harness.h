#pragma once
/// \file
/// The one harness every kernel step is driven through: run a kernel on a workload in the
/// emulator or on the GPU (outputs and scratch poisoned first), compare with the oracle, time
/// it, and print one table. Step programs, the tour, the tests and the benchmarks all call these
/// functions, so no step carries a harness of its own.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
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

/// Seconds on the host's steady clock since \p start.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The output of one kernel run, with what it cost.
struct RunOutput {
  std::vector<std::byte> out;  ///< [num_seqs][num_q_heads][head_dim] in the workload's dtype
  double seconds = 0;          ///< emulator: CPU wall time; GPU: median device time of the timed runs
  emu::Counters traffic;       ///< bytes the emulator counted (emulator runs only)
  LaunchPlan plan;             ///< what ran
};

/// Runs \p kernel in the emulator on the workload's host tensors, planned for the workload's
/// lengths (plan_for). Output and workspace are filled with NaN first (docs/design/CORRECTNESS.md
/// rule 1). Kernel faults throw KernelError.
RunOutput run_emulator(const KernelEntry& kernel, const Workload& workload,
                       const KernelOptions& options = {});

/// A workload copied to the GPU, with poisoned output and workspace buffers. Of a sparse
/// workload (WorkloadSpec::sparse) only the pages the tables use are copied; every other page
/// of the device's pool is poison (NaN).
class DeviceWorkload {
 public:
  explicit DeviceWorkload(const Workload& workload);
  /// A view over the device tensors with a workspace of at least \p workspace_bytes.
  DecodeView view(std::size_t workspace_bytes);
  /// Fills out and workspace with poison (words of 0x7fffffff: NaN as floats, 16-bit or 32-bit,
  /// and INT_MAX as ints), or with zeros for a workload without poison (WorkloadSpec::poison).
  void poison();
  /// Copies the output back.
  std::vector<std::byte> download_out() const;
  const DecodeProblem& problem() const { return problem_; }

 private:
  void fill_poison(gpu::Buffer& buffer);

  DecodeProblem problem_;
  bool poison_ = true;  ///< the workload's WorkloadSpec::poison
  gpu::Buffer query_, key_cache_, value_cache_, block_tables_, context_lens_, out_, workspace_;
};

/// Runs \p kernel on the GPU, planned for the workload's lengths (plan_for): uploads, poisons,
/// launches once (checked: launch errors, and the checked mode's tables and lengths,
/// DecodeView::checked), downloads; with \p timed_runs > 0
/// also times that many further launches (L2 flushed before each; checked mode off, as in the
/// benchmarks) and reports the median. Throws CudaError if no GPU (check gpu::available() first).
RunOutput run_gpu(const KernelEntry& kernel, const Workload& workload, const KernelOptions& options = {},
                  int timed_runs = 0);

/// Median device time of \p runs launches of \p plan on an uploaded workload (L2 flushed before
/// each; two warm-up launches first). Used by run_gpu and the benchmarks. With \p checked, each
/// launch runs in checked mode (DecodeView::checked): the time then includes its check
/// kernel, which is what the mode costs.
double time_gpu_launches(const KernelEntry& kernel, DeviceWorkload& device, const LaunchPlan& plan, int runs,
                         bool checked = false);

/// What a run is checked against: the oracle in double and the plainest float loop (whose
/// error bounds the kernel's, docs/design/CORRECTNESS.md rule 5), for all sequences or a sample.
struct OracleRows {
  std::vector<double> exact;  ///< [num_seqs][num_q_heads][head_dim]; NaN in rows not computed
  std::vector<float> plain;   ///< the plain float loop, same shape
  /// The plain loop with its weights rounded to the storage type (16-bit storage only; empty
  /// for f32): the loop a kernel with KernelEntry::weights_in_storage_type is held to.
  std::vector<float> plain_storage_weights;
  std::vector<int> sequences; ///< the rows computed (empty: all)
};

/// The oracle for \p sequences (an empty list means all). Big workloads are checked on a
/// sample this way: the full oracle on gigabytes of K/V would take minutes. A sample is computed
/// on every hardware thread, each (sequence, KV head) and each loop a piece of its own (common/
/// parallel.h), with the same bits as the whole oracle's rows; the whole oracle runs on one.
OracleRows oracle_rows(const Workload& workload, const std::vector<int>& sequences = {});

/// The same for a view over host tensors that are not a Workload (a caller's own cache: the
/// examples); its out and workspace are not read.
OracleRows oracle_rows(const DecodeView& host_view, const std::vector<int>& sequences = {});

/// The sample big workloads are checked on: the first, middle and last sequence.
std::vector<int> sample_sequences(const Workload& workload);

/// Compares a run's output with the oracle and with the plain float loop's error,
/// docs/design/CORRECTNESS.md rule 5: every element within the dtype's tolerance, its atol
/// raised to 3x the plain loop's largest error where that is larger (NaN and Inf fail), and the
/// largest error at most 3x the plain loop's. \p weights_in_storage_type: the kernel's
/// KernelEntry::weights_in_storage_type, which picks the plain loop. Only the oracle's rows are
/// checked.
CompareResult check_against_oracle(const Workload& workload, const OracleRows& oracle,
                                   const std::vector<std::byte>& out, bool weights_in_storage_type = false);

/// The same for an output of \p problem that is not a Workload's (the oracle from a host view).
CompareResult check_against_oracle(const DecodeProblem& problem, const OracleRows& oracle,
                                   const std::vector<std::byte>& out, bool weights_in_storage_type = false);

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
  std::uint64_t bytes_must_move = 0;  ///< the workload's Workload::bytes_moved(): the least a decode step moves
  std::optional<KernelOptions> ran;  ///< the knobs as they ran (the GPU's plan where it ran)
  bool ok = true;        ///< no backend that ran disagreed with the oracle or faulted
  bool refused = false;  ///< a backend refused the problem or the knobs (ArgumentError)
  bool faulted = false;  ///< a backend stopped with an error (a KernelError, a CUDA error), not a wrong answer

  /// Some backend checked the workload against the oracle (ran to the end), or said why not:
  /// refused or faulted. False when every backend was skipped: nothing is known of the answer.
  bool checked() const { return emulator_ran || gpu_ran || refused || faulted; }

  /// The emulator finished (matched the oracle or not): its error, time and bytes were measured.
  /// A run that refused, faulted or was skipped measured nothing.
  bool emulator_ran = false;
  /// The GPU finished (matched or not): its error was measured, and its time when timed runs
  /// were asked for (gpu_seconds > 0). `ran` then holds the GPU's plan.
  bool gpu_ran = false;

  /// Emulator bytes over bytes_must_move: 1 is the floor (every byte once); 0 when not measured.
  double times_minimum_bytes() const {
    return emulator_ran && bytes_must_move > 0 ? static_cast<double>(emulator_bytes) / static_cast<double>(bytes_must_move) : 0;
  }
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

/// Prints reports as one side-by-side table, at most 100 characters wide: the emulator's
/// columns, and the GPU's only when some report's GPU ran (or refused, or failed); when none did,
/// one line says why. A backend that did not run prints "-" where a number would be; the reason
/// of a run that was not ok is a note under the table. step_table_legend() says what each column means.
void print_step_table(const std::vector<StepReport>& reports, std::ostream& out);

/// The meaning of print_step_table's columns, one block (the tour prints it once), with the
/// GPU's columns when \p gpu_columns, and why a 16-bit error can be exactly zero when
/// \p dtype is bf16 or f16.
std::string step_table_legend(bool gpu_columns, DType dtype);

/// \p text as lines of at most \p width columns, broken at spaces (a word longer than a line
/// keeps its own line): the first starts with \p first, the rest with \p rest; ends with '\n'.
std::string wrapped(const std::string& text, std::size_t width, const std::string& first, const std::string& rest);

/// True when print_step_table shows GPU columns for \p reports: some GPU run was not skipped.
bool step_table_has_gpu(const std::vector<StepReport>& reports);

/// What the traced program read of one tensor, from emu::trace() (reads only).
struct TraceRead {
  std::string kernel;  ///< the kernel that read it (a launch may run several, e.g. a split and a merge)
  std::string tensor;  ///< "key_cache", "query", ...
  std::int64_t elements = 0;
  std::int64_t lowest = 0, highest = 0;  ///< the element indices read span [lowest, highest]
  bool cache = false;                  ///< key_cache or value_cache: the fields below are filled
  std::vector<std::int32_t> pages;     ///< physical pages, in order of first access
  std::vector<int> kv_heads;           ///< ascending
  std::vector<std::int64_t> tokens;    ///< positions in the sequence, ascending, distinct
  std::vector<std::int32_t> foreign;   ///< pages read that are not in the sequence's table
};

/// What the traced program read, tensor by tensor in order of first read; \p seq is the
/// sequence the program serves (tokens are positions in its table).
std::vector<TraceRead> summarize_trace(const Workload& workload, int seq);

/// summarize_trace as lines of text; \p grid_note replaces "(the traced program read nothing)"
/// when it is not empty (the caller knows why, e.g. the program is not in the grid).
std::string describe_trace(const Workload& workload, int seq, const std::string& grid_note = "");

/// The exit codes of the step programs and of pagedattn_fuzz, one list for both
/// (docs/design/CORRECTNESS.md, "Exit codes"). When several apply, exit_fault wins over
/// exit_wrong, exit_wrong over exit_refused, and exit_refused over exit_unchecked.
enum ExitCode : int {
  exit_ok = 0,            ///< every run matched the oracle (the fuzzer: no case failed)
  exit_wrong = 1,         ///< a wrong answer (the fuzzer: a case failed; its line reproduces it)
  exit_bad_argument = 2,  ///< a bad flag or value, or a bad PAGEDATTN_EMU_SHUFFLE; nothing ran
  exit_refused = 3,       ///< the kernel refused the workload or a knob, and nothing was wrong
  exit_fault = 4,         ///< a fault or an error: an emulator fault, a CUDA error, host memory, an output file
  exit_unchecked = 5,     ///< a workload no backend checked (too big to emulate, and no GPU ran), nothing wrong
};

/// \p status followed by the emulator's thread order when it is shuffled
/// (" [shuffled order, seed S (PAGEDATTN_EMU_SHUFFLE=S repeats it)]"), so that a wrong answer
/// seen in a shuffled order says how to see it again, as a fault there does; \p status alone in
/// the fixed order.
std::string with_thread_order(const std::string& status);

/// main() of every kernel step program (steps 02 onward): flags choose the workload
/// (`--batch --context --q-heads --kv-heads --head-dim --page --dtype --kv-dtype --seed --layout`,
/// or `--workload NAME`), the knobs the kernel declares (`--threads --splits --partition --tile
/// --variant`), `--adversarial` runs the whole adversarial set,
/// `--json FILE` writes results (whole or not at all), `--trace SEQ,HEAD` shows what a program
/// read, `--quiet` prints nothing unless something fails or is refused. Every flag value is
/// checked, and so is PAGEDATTN_EMU_SHUFFLE. Returns an ExitCode (tests/test_programs.cpp).
/// \p own_flags: the lines `--help` adds for flags the step's main() answers itself (step 10's
/// `--fragments`, step 11's `--schedule`).
int kernel_step_main(int step, int argc, char** argv, std::string_view own_flags = {});

}  // namespace pa
