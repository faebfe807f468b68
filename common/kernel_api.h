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
#include <string>

#include "common/problem.h"

namespace pa {

/// Where a kernel runs.
enum class Backend : std::uint8_t {
  emulator,  ///< the pretend GPU on the CPU (common/emu), with checked memory and race detection
  cuda,      ///< a real GPU
};
inline const char* backend_name(Backend backend) { return backend == Backend::cuda ? "cuda" : "emulator"; }

/// What a kernel may assume about the device; host checks use these before a launch.
struct DeviceLimits {
  std::string name = "pretend H200";  ///< device name
  int sm_count = 132;                 ///< multiprocessors
  int max_threads_per_block = 1024;
  int max_blocks_per_sm = 32;
  int max_threads_per_sm = 2048;
  std::size_t shared_per_block = 48 * 1024;          ///< without opting in
  std::size_t shared_per_block_optin = 227 * 1024;   ///< the most one block may ask for
  std::size_t shared_per_sm = 228 * 1024;
  std::size_t l2_bytes = 60u * 1024 * 1024;
  double datasheet_gbps = 4800.0;     ///< memory bandwidth, GB/s (decimal)

  /// The emulator's device: an H200's limits, so host checks answer as they would on the GPU.
  static DeviceLimits pretend_h200() { return {}; }
};

/// Knobs a kernel may expose. 0 means "the kernel chooses"; no knob changes the answer beyond
/// rounding (tests hold each kernel to that).
struct KernelOptions {
  int threads_per_block = 0;  ///< threads of one program
  int num_splits = 0;         ///< programs the context of one (sequence, head) is split across
  int partition_tokens = 0;   ///< tokens one split covers (alternative to num_splits)
  int tile_tokens = 0;        ///< tokens a thread group takes per iteration (steps 06+; 0: the step's choice)
};

/// Pointers of one decode call, all on the backend's side (host memory for the emulator,
/// device memory for CUDA). Shapes and the cache layout are in `problem`.
struct DecodeView {
  DecodeProblem problem;
  const void* query = nullptr;                 ///< [num_seqs][num_q_heads][head_dim], problem.dtype
  const void* key_cache = nullptr;             ///< pages laid out by problem.layout
  const void* value_cache = nullptr;           ///< same layout as key_cache
  const std::int32_t* block_tables = nullptr;  ///< [num_seqs][max_blocks_per_seq]
  const std::int32_t* context_lens = nullptr;  ///< [num_seqs]
  void* out = nullptr;                         ///< [num_seqs][num_q_heads][head_dim], problem.dtype
  void* workspace = nullptr;                   ///< kernel scratch, workspace_bytes() long
  std::size_t workspace_bytes = 0;
};

/// Checks a view before a launch: the problem (validate()), null pointers, the output
/// overlapping an input, a workspace that is too small. Throws ArgumentError naming \p function.
void validate_view(const DecodeView& view, std::size_t workspace_needed, std::string_view function);

/// What a step's kernel provides; one per (step, backend). All functions are host functions.
struct KernelEntry {
  int step = -1;                ///< ladder number
  const char* name = "";        ///< e.g. "step03_naive_decode"
  Backend backend = Backend::emulator;
  /// Throws ArgumentError when the kernel cannot run this problem (head dim, context length,
  /// shared memory), naming the argument and listing what it supports.
  void (*check)(const DecodeProblem&, const KernelOptions&, const DeviceLimits&) = nullptr;
  /// Scratch bytes the kernel needs (0 if none).
  std::size_t (*workspace_bytes)(const DecodeProblem&, const KernelOptions&,
                                 const DeviceLimits&) = nullptr;
  /// Runs the decode step. For CUDA, \p stream is a cudaStream_t and the call is asynchronous.
  void (*launch)(const DecodeView&, const KernelOptions&, const DeviceLimits&, void* stream) = nullptr;
  /// How the kernel launches this problem on \p device, in one line (grid, threads, shared
  /// memory, and for the split steps the split count), computed by the same code the launch
  /// uses. nullptr where a step has nothing beyond its grid to say.
  std::string (*describe)(const DecodeProblem&, const KernelOptions&, const DeviceLimits&) = nullptr;
  /// The grid's first axis is the head and its second the sequence (steps 07 and 08, so that
  /// the programs sharing a KV head are launched together); else the sequence comes first.
  /// Tools that name a program by (sequence, head, z), like `--trace`, use it to find the program.
  bool heads_first = false;
};

}  // namespace pa
