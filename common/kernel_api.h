#pragma once
/// \file
/// The one call shape of every kernel step: a problem, the tensors it reads and writes, a few
/// knobs, and the limits of the device it runs on (real, or the emulator's pretend one).
///
/// Host code never reaches a kernel directly: it asks `pa::kernel(step, backend)` (see
/// kernels/registry.h) for a KernelEntry and calls through it, so every step is driven by the
/// same harness, the same tests and the same benchmarks.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/problem.h"

namespace pa {

/// Where a kernel runs.
enum class Backend : std::uint8_t {
  emulator,  ///< the pretend GPU on the CPU (common/emu), with checked memory and race detection
  cuda,      ///< a real GPU
};
/// "emulator" or "cuda".
inline const char* backend_name(Backend backend) { return backend == Backend::cuda ? "cuda" : "emulator"; }

/// What a kernel may assume about the device; host checks use these before a launch.
struct DeviceLimits {
  std::string name = "pretend H200";  ///< device name
  int sm_count = 132;                 ///< multiprocessors
  int max_threads_per_block = 1024;   ///< threads one program may have
  int max_blocks_per_sm = 32;         ///< programs one SM holds at most, whatever their size
  int max_threads_per_sm = 2048;      ///< threads one SM holds at most
  std::size_t shared_per_block = 48 * 1024;          ///< without opting in
  std::size_t shared_per_block_optin = 227 * 1024;   ///< the most one block may ask for
  std::size_t shared_per_sm = 228 * 1024;            ///< shared memory of one SM
  std::size_t l2_bytes = 60u * 1024 * 1024;          ///< L2 cache
  double datasheet_gbps = 4800.0;     ///< memory bandwidth, GB/s (decimal)

  /// The emulator's device: an H200's limits, so host checks answer as they would on the GPU.
  static DeviceLimits pretend_h200() { return {}; }
};

/// Knobs a kernel may expose. 0 means "the kernel chooses"; no knob changes the answer beyond
/// rounding (tests hold each kernel to that). A step declares the knobs it reads
/// (KernelEntry::knobs); a knob it does not read must be 0.
struct KernelOptions {
  int threads_per_block = 0;  ///< threads of one program
  int num_splits = 0;         ///< programs the context of one (sequence, head) is split across
  int partition_tokens = 0;   ///< tokens one split covers (alternative to num_splits)
  int tile_tokens = 0;        ///< tokens a thread group takes per iteration (step 09)
  int variant = 0;            ///< 0: the step's kernel; else one of its ablations (step 09's page lists them)
};

/// The knobs of KernelOptions, as bits of KernelEntry::knobs.
enum Knob : unsigned {
  knob_threads = 1u << 0,    ///< KernelOptions::threads_per_block
  knob_splits = 1u << 1,     ///< KernelOptions::num_splits
  knob_partition = 1u << 2,  ///< KernelOptions::partition_tokens
  knob_tile = 1u << 3,       ///< KernelOptions::tile_tokens
  knob_variant = 1u << 4,    ///< KernelOptions::variant
};

/// Throws ArgumentError, naming \p function, when \p options sets a knob that is not in \p knobs
/// or sets one to a negative value.
void require_knobs(const KernelOptions& options, unsigned knobs, std::string_view function);

/// Tables a plan works out for its launches beyond the grid (step 11's work list). A rung that
/// makes them derives its own from this, and its launch finds them with dynamic_cast, which also
/// tells one backend's from another's. Made by the plan, in the memory the backend's kernels
/// read (the device's for CUDA), so that no launch allocates (a launch captured in a CUDA graph
/// may not); launches only read them.
struct PlanTables {
  virtual ~PlanTables() = default;
};

/// What a kernel runs for one problem, worked out once by KernelEntry::plan (which checks the
/// problem): the launch that KernelEntry::launch then makes, as many times as asked.
struct LaunchPlan {
  DecodeProblem problem;         ///< the problem it was made for (launch refuses another)
  KernelOptions options;         ///< the knobs as they run: the kernel's choices filled in
  unsigned grid[3] = {1, 1, 1};  ///< programs of the main kernel
  int threads = 1;               ///< threads of one program
  std::size_t shared_bytes = 0;  ///< dynamic shared memory of one program
  std::size_t workspace_bytes = 0;  ///< scratch a launch needs; a CUDA entry's holds the checked mode's too
  int splits = 1;                ///< programs one (sequence, head) is split across
  int resident_per_sm = 0;       ///< programs one SM holds at once (0: not asked)
  std::string description;       ///< one line: grid, threads, shared memory, and what the step adds
  /// The plan's tables, for a rung whose launch needs more than the grid (step 11: its work
  /// list); null for the others. The plan's copies share them and the last frees them, so a plan
  /// must outlive its launches, and any CUDA graph that captured one of them.
  std::shared_ptr<const PlanTables> tables;
};

/// "grid 64 x 32 x 1 programs of 128 threads, 4096 B shared memory": the start of every
/// plan's description.
std::string describe_launch(const LaunchPlan& plan);

/// Pointers of one decode call, all on the backend's side (host memory for the emulator,
/// device memory for CUDA: the kernel entries take that as given; the entry point's checked
/// pa::decode asks the driver, gpu::require_device_pointers). Shapes and the cache layout are in
/// `problem`.
struct DecodeView {
  DecodeProblem problem;                       ///< the shapes; a launch refuses one that is not its plan's
  const void* query = nullptr;                 ///< [num_seqs][num_q_heads][head_dim], problem.dtype
  const void* key_cache = nullptr;             ///< pages laid out by problem.layout
  const void* value_cache = nullptr;           ///< same layout as key_cache
  const std::int32_t* block_tables = nullptr;  ///< [num_seqs][max_blocks_per_seq]
  const std::int32_t* context_lens = nullptr;  ///< [num_seqs]
  void* out = nullptr;                         ///< [num_seqs][num_q_heads][head_dim], problem.dtype
  void* workspace = nullptr;                   ///< kernel scratch, workspace_bytes() long
  std::size_t workspace_bytes = 0;             ///< bytes at workspace: at least the plan's workspace_bytes
  /// Checked mode: before the launch, every context length and every block-table entry of a
  /// used prefix is read and checked (validate_tables), so a length of -3 or a page outside
  /// the pool is refused with an ArgumentError naming the sequence, the entry and the value
  /// instead of reaching the kernel. On by default (the step programs, the tests); the
  /// benchmarks turn it off to time the kernel alone and time it on in their `/checked` rows.
  /// Off, those values are the caller's promise: the kernels trust them. On the emulator the
  /// check reads the host tensors and the launch throws. On the GPU nothing waits: a small
  /// kernel on the launch's stream checks the tables (gpu::check_tables_async) and the decode
  /// kernel reads a checked copy of the lengths, 0 for a faulty sequence, so it computes a row
  /// of zeros there and reads none of its pages; the error is raised at the host's next wait
  /// (gpu::synchronize, a download, Event::elapsed_ms) or at the next checked launch
  /// (gpu::raise_table_fault), with the emulator's message.
  bool checked = true;
};

/// Checks a view before a launch: the problem (validate()), null pointers, the output
/// overlapping an input, a workspace that is too small. Throws ArgumentError naming \p function.
void validate_view(const DecodeView& view, std::size_t workspace_needed, std::string_view function);

/// The preamble of every launch: \p view must be the problem \p plan was made for, with valid
/// pointers and the plan's workspace (validate_view); in checked mode (view.checked) its
/// lengths and tables are checked too (validate_tables), read from host memory: the CUDA
/// entries that kernel() hands out check on the device (gpu::check_tables_async) and call the
/// kernel with checked off.
/// Returns false for an empty batch, which launches nothing.
bool begin_launch(const DecodeView& view, const LaunchPlan& plan, std::string_view function);

/// What a step's kernel provides; one per (step, backend). All functions are host functions.
struct KernelEntry {
  int step = -1;                ///< ladder number
  const char* name = "";        ///< e.g. "step03_naive_decode"
  Backend backend = Backend::emulator;  ///< where it runs
  unsigned knobs = 0;           ///< the Knob bits of the KernelOptions fields it reads
  int variants = 0;             ///< its ablations: options.variant 1 .. variants (knob_variant)
  /// Checks the problem and the options for \p device (throws ArgumentError naming the argument
  /// and what is supported) and works out the launch once.
  LaunchPlan (*plan)(const DecodeProblem&, const KernelOptions&, const DeviceLimits&) = nullptr;
  /// Runs the planned decode step on \p view (whose problem must be the plan's). For CUDA,
  /// \p stream is a cudaStream_t and the call is asynchronous, checked mode included
  /// (DecodeView::checked: a bad length or table entry is raised by a later wait).
  void (*launch)(const DecodeView&, const LaunchPlan&, void* stream) = nullptr;
  /// The grid's first axis is the head and its second the sequence (step 09, so that the
  /// programs sharing a KV head are launched together); else the sequence comes first. Tools
  /// that name a program by (sequence, head, z), like `--trace`, use it to find the program.
  bool heads_first = false;
  /// Whether it runs f32 storage (every step before 10; the tensor-core steps multiply 16-bit
  /// inputs and refuse f32 with an ArgumentError naming `dtype`). f16 and bf16 run everywhere.
  bool runs_f32 = true;
  /// Whether it rounds the softmax weights P to the storage type before P·V, as a tensor-core
  /// multiply of 16-bit inputs must (step 10). The plain loop it is held to then rounds them too
  /// (docs/design/CORRECTNESS.md, rule 5).
  bool weights_in_storage_type = false;
  /// For a rung whose plan reads the host copy of the context lengths (step 11 balances its work
  /// by them): plan() for a batch with those lengths, one a sequence, each in
  /// [0, max_context_len] (else an ArgumentError naming the sequence, as validate_tables words
  /// it). The launches still read the lengths on the backend's side, so the plan serves any
  /// lengths of its problem, and the ones it was made for best. nullptr for a rung whose plan
  /// reads the problem alone; plan_for() calls whichever the rung has.
  LaunchPlan (*plan_lengths)(const DecodeProblem&, std::span<const std::int32_t>, const KernelOptions&,
                             const DeviceLimits&) = nullptr;
  /// Whether it reads fp8 e4m3 K/V (DecodeProblem::fp8_kv; step 12). The registry's entries of
  /// the rungs that do not refuse such a problem in their plan, with an ArgumentError naming
  /// `fp8_kv` (kernels/registry.cpp), so their files need not know fp8 exists.
  bool runs_fp8_kv = false;
};

/// \p entry's plan for \p problem when the host copy of its context lengths, \p context_lens, is
/// at hand: entry.plan_lengths where the rung has one, else entry.plan, which needs the problem alone.
LaunchPlan plan_for(const KernelEntry& entry, const DecodeProblem& problem, std::span<const std::int32_t> context_lens,
                    const KernelOptions& options, const DeviceLimits& device);

}  // namespace pa
