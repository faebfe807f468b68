#pragma once
/// \file
/// What every decode kernel shares: the kernel-side arguments, head-dim dispatch and the
/// host-side checks. Each step's own file holds only what that step changes.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "common/kernel_api.h"
#include "kernels/portable/portable.h"

namespace pa::PA_KERNELS {

/// The tensors and shapes of one decode call, as a kernel sees them. Built on the host by
/// make_args(); in the emulator every span is named and bounds-checked.
template <class T>
struct DecodeArgs {
  gspan<const T> query;                    ///< [num_seqs][num_q_heads][head_dim]
  gspan<const T> key_cache;                ///< pages: layout strides below
  gspan<const T> value_cache;              ///< same layout as key_cache
  gspan<const std::int32_t> block_tables;  ///< [num_seqs][max_blocks_per_seq]
  gspan<const std::int32_t> context_lens;  ///< [num_seqs]
  gspan<T> out;                            ///< [num_seqs][num_q_heads][head_dim]
  int num_q_heads;
  int num_kv_heads;
  int block_size;
  int max_blocks_per_seq;
  int max_context_len;
  float scale;
  std::int64_t block_stride;  ///< elements between pages
  std::int64_t head_stride;   ///< elements between kv heads of one page
  std::int64_t token_stride;  ///< elements between slots of one page
  int block_shift;            ///< log2(block_size) when it is a power of two, else -1

  /// Query heads per KV head.
  __device__ __forceinline__ int group_size() const { return num_q_heads / num_kv_heads; }
  /// Offset of channel 0 of the token at \p slot of \p page for \p kv_head. The page's start
  /// needs 64 bits (pools over 2^31 elements are ordinary); an offset inside a page fits in 32
  /// (validate() keeps a page under 2^31 elements), so the sum is one wide multiply-add instead
  /// of three 64-bit products.
  __device__ __forceinline__ std::int64_t kv_offset(std::int32_t page, int kv_head, int slot) const {
    const auto within = static_cast<std::uint32_t>(kv_head * static_cast<int>(head_stride) +
                                                   slot * static_cast<int>(token_stride));
    return static_cast<std::int64_t>(std::uint64_t{static_cast<std::uint32_t>(page)} *
                                         static_cast<std::uint32_t>(block_stride) +
                                     within);
  }
  /// Offset of channel 0 of token \p token of sequence \p seq, read through its block table.
  /// A power-of-two page size (every common one) takes a shift and a mask instead of an integer
  /// division, which the GPU has no instruction for (nvcc emits a sequence of many).
  __device__ __forceinline__ std::int64_t token_offset(int seq, int kv_head, int token) const {
    const int index = block_shift >= 0 ? token >> block_shift : token / block_size;
    const int slot = block_shift >= 0 ? token & (block_size - 1) : token % block_size;
    const std::int32_t page = block_tables[static_cast<std::int64_t>(seq) * max_blocks_per_seq + index];
    return kv_offset(page, kv_head, slot);
  }
};

/// The kernel-side arguments of \p view, with storage type \p T.
template <class T>
DecodeArgs<T> make_args(const DecodeView& view) {
  const DecodeProblem& p = view.problem;
  const std::int64_t io_elems = p.query_elems();
  const std::int64_t cache_elems = p.cache_elems();
  // The caches' pages come from block_tables: the emulator's out-of-bounds reports use it.
  const Paging paging{"block_tables", p.layout.block_stride};
  DecodeArgs<T> args{
      gspan<const T>(static_cast<const T*>(view.query), io_elems, "query"),
      gspan<const T>(static_cast<const T*>(view.key_cache), cache_elems, "key_cache", paging),
      gspan<const T>(static_cast<const T*>(view.value_cache), cache_elems, "value_cache", paging),
      gspan<const std::int32_t>(view.block_tables, std::int64_t{p.num_seqs} * p.max_blocks_per_seq,
                                "block_tables"),
      gspan<const std::int32_t>(view.context_lens, p.num_seqs, "context_lens"),
      gspan<T>(static_cast<T*>(view.out), io_elems, "out"),
      p.num_q_heads,
      p.num_kv_heads,
      p.block_size,
      p.max_blocks_per_seq,
      p.max_context_len,
      p.scale,
      p.layout.block_stride,
      p.layout.head_stride,
      p.layout.token_stride,
      std::has_single_bit(static_cast<unsigned>(p.block_size)) ? std::countr_zero(static_cast<unsigned>(p.block_size))
                                                                 : -1};
  return args;
}

/// The head dims every kernel of the ladder is compiled for.
#define PA_HEAD_DIMS 64, 80, 96, 112, 128, 256

/// Throws ArgumentError unless \p head_dim is one of \p supported (the message lists them).
inline void require_head_dim(int head_dim, std::initializer_list<int> supported, const char* kernel) {
  for (int d : supported)
    if (d == head_dim) return;
  std::string list;
  for (int d : supported) list += (list.empty() ? "" : ", ") + std::to_string(d);
  throw_argument(kernel, "head_dim", cat("one of the head dims this kernel is built for: ", list),
                 std::to_string(head_dim));
}

/// Calls `f(std::integral_constant<int, D>{})` for the compiled head dim D equal to \p head_dim.
template <int... Dims, class F>
void dispatch_head_dim(int head_dim, F&& f) {
  const bool found = ((head_dim == Dims ? (f(std::integral_constant<int, Dims>{}), true) : false) || ...);
  if (!found) throw_argument("dispatch_head_dim", "head_dim", "a compiled head dim", std::to_string(head_dim));
}

/// Calls `f(T{}, std::integral_constant<int, D>{})` with the kernel-side storage type T and the
/// compiled head dim D of \p p: the dispatch of every kernel launch.
template <class F>
void dispatch_problem(const DecodeProblem& p, F&& f) {
  dispatch_dtype(p.dtype, [&](auto storage) {
    dispatch_head_dim<PA_HEAD_DIMS>(p.head_dim, [&](auto head_dim) { f(storage, head_dim); });
  });
}

/// Launches the kernel that `kernel_of(T{}, head_dim)` names for the problem's storage type T
/// and head dim on \p plan's grid, threads and shared memory, with make_args<T>(\p view): the
/// launch of every step with one kernel and no workspace.
template <class KernelOf>
void launch_planned(const char* name, const DecodeView& view, const LaunchPlan& plan, void* stream, KernelOf kernel_of) {
  dispatch_problem(view.problem, [&](auto storage, auto head_dim) {
    launch_kernel(name, kernel_of(storage, head_dim), dim3(plan.grid[0], plan.grid[1], plan.grid[2]), dim3(plan.threads),
                  plan.shared_bytes, stream, make_args<decltype(storage)>(view));
  });
}

/// Calls `f(std::integral_constant<int, V>{})` for the compiled value V equal to \p value of the
/// knob \p what (a tile size, say); other values throw ArgumentError naming it.
template <int... Values, class F>
void dispatch_compiled(int value, const char* what, F&& f) {
  const bool found = ((value == Values ? (f(std::integral_constant<int, Values>{}), true) : false) || ...);
  if (!found) throw_argument("dispatch_compiled", what, "a compiled value", std::to_string(value));
}

/// The plan of a kernel launched on a grid of x by y programs of \p threads threads, each with
/// \p shared_bytes of dynamic shared memory, with a workspace of \p workspace_bytes.
inline LaunchPlan make_plan(const DecodeProblem& p, const KernelOptions& options, unsigned x, unsigned y, int threads,
                            std::size_t shared_bytes, std::size_t workspace_bytes = 0) {
  LaunchPlan out;
  out.problem = p;
  out.options = options;
  out.grid[0] = x;
  out.grid[1] = y;
  out.threads = threads;
  out.shared_bytes = shared_bytes;
  out.workspace_bytes = workspace_bytes;
  out.description = describe_launch(out);
  return out;
}

/// The checks every one-thread-program step shares: the problem, its head dim, no knobs.
inline void check_one_thread(const DecodeProblem& p, const KernelOptions& options, const char* kernel) {
  validate(p, kernel);
  require_knobs(options, 0, kernel);
  require_head_dim(p.head_dim, {PA_HEAD_DIMS}, kernel);
}

/// Rounds \p bytes up to a multiple of 256 (workspace sections start 256-byte aligned).
constexpr std::size_t align_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace pa::PA_KERNELS
