#pragma once
/// \file
/// Step 07, split-KV: the context of one (sequence, head) is split across programs, and a
/// second kernel merges their partial results with log-sum-exp.
///
/// What changed since step 06: a batch with few (sequence, head) pairs and long contexts
/// (`long-single`: 32 programs for 132 SMs) leaves most of the GPU idle. Here the grid has a
/// third axis, the split: program (seq, head, split) runs step 06's pass over its slice of the
/// context and writes its unnormalised state (max, sum, acc[head_dim]) to a workspace;
/// merge_splits then combines the splits of each (seq, head) in split order, so the same input
/// gives the same bits. The split count comes from the device: a split holds about one slot's
/// share of the batch's work (occupancy calculator), no fewer than kMinTokensPerSplit tokens. A
/// split past a short sequence's end is empty: it writes sum 0, which weighs nothing.
///
///     build/cpu/steps/step07_split_kv --help

#include "kernels/06_online_softmax.cuh"

namespace pa::PA_KERNELS::step07 {

using step05::Slices;
using step06::OnlineSoftmax;

/// Where the partial results live in the workspace: maxes and sums
/// `[num_seqs][num_q_heads][splits]`, accs `[num_seqs][num_q_heads][splits][head_dim]`.
struct Partials {
  gspan<float> maxes;
  gspan<float> sums;
  gspan<float> accs;
  int splits;
  int partition;  ///< tokens per split
};

// [split]
/// Program (seq, q_head, split): step 06's pass over tokens [split * partition, ...), its
/// unnormalised state written to the partials.
template <class T, int HEAD_DIM>
__global__ void split_decode(DecodeArgs<T> args, Partials partials) {
  using S = Slices<T, HEAD_DIM>;
  PA_DYNAMIC_SHARED(float, shared);
  const int seq = blockIdx.x;
  const int q_head = blockIdx.y;
  const int split = blockIdx.z;
  const int context_len = args.context_lens[seq];
  const int begin = std::min(split * partials.partition, context_len);  // empty past the end
  const int end = std::min(begin + partials.partition, context_len);
  float q[S::kElems];
  step05::load_slice<T, HEAD_DIM>(args.query, (static_cast<std::int64_t>(seq) * args.num_q_heads + q_head) * HEAD_DIM,
                                  threadIdx.x % S::kGroup, q);
  PA_UNROLL
  for (int e = 0; e < S::kElems; ++e) q[e] *= args.scale;
  OnlineSoftmax<S::kElems> state;
  step06::for_each_token<T, HEAD_DIM>(args, seq, q_head / args.group_size(), begin, end,
                                      [&](bool valid, const float (&k)[S::kElems], const float (&v)[S::kElems]) {
                                        float dot = 0.0f;
                                        PA_UNROLL
                                        for (int e = 0; e < S::kElems; ++e) dot += q[e] * k[e];
                                        dot = step05::group_sum<S::kGroup>(dot);
                                        if (valid) state.add(dot, v);
                                      });
  const std::int64_t slot = (static_cast<std::int64_t>(seq) * args.num_q_heads + q_head) * partials.splits + split;
  step06::merge_groups<T, HEAD_DIM>(state, shared, [&](int d, float acc, float max, float sum) {
    partials.accs[slot * HEAD_DIM + d] = acc;
    if (d == 0) {
      partials.maxes[slot] = max;
      partials.sums[slot] = sum;
    }
  });
}
// [split]

// [merge]
/// Program (seq, q_head), one thread a channel: combines the splits. Split s summed its acc and
/// sum relative to its own max m_s; scaled by exp(m_s - M) to the overall max M they add up.
/// One pass finds M, a second adds the splits in order. An empty split (sum 0) weighs 0; no
/// tokens at all give a row of zeros.
template <class T, int HEAD_DIM>
__global__ void merge_splits(DecodeArgs<T> args, Partials partials) {
  const int seq = blockIdx.x;
  const int q_head = blockIdx.y;
  const int d = threadIdx.x;
  const std::int64_t first = (static_cast<std::int64_t>(seq) * args.num_q_heads + q_head) * partials.splits;
  float merged_max = -INFINITY;
  for (int s = 0; s < partials.splits; ++s) merged_max = fmaxf(merged_max, partials.maxes[first + s]);
  float sum = 0.0f, acc = 0.0f;
  for (int s = 0; s < partials.splits; ++s) {
    const float split_sum = partials.sums[first + s];
    const float weight = OnlineSoftmax<1>::weight(split_sum, partials.maxes[first + s], merged_max);
    sum += split_sum * weight;
    acc += partials.accs[(first + s) * HEAD_DIM + d] * weight;
  }
  args.out[(static_cast<std::int64_t>(seq) * args.num_q_heads + q_head) * HEAD_DIM + d] =
      from_float<T>(sum == 0.0f ? 0.0f : acc / sum);
}
// [merge]

// ----- host side -----------------------------------------------------------------------------
inline constexpr const char* kName = "step07_split_kv";
/// No split shorter than this: a split's fixed costs (its queries, its merge, its partials) are
/// paid again for each one.
inline constexpr int kMinTokensPerSplit = 256;

// [choose]
/// Splits per (sequence, head) for \p pairs of them: cut the work into one equal share per slot
/// of the device (sm_count x \p resident_per_sm, the programs one SM holds, from the occupancy
/// calculator). The work is every pair's tokens (p.total_context_len when the caller gives it,
/// else every sequence counted at the longest context); a split holds at most one share and at
/// least kMinTokensPerSplit tokens, and the longest context decides the count. So a long
/// sequence among short ones is cut as finely as if it were alone, and a batch that fills the
/// device is not cut. `options.num_splits` or `options.partition_tokens` override it.
inline int choose_splits(const DecodeProblem& p, std::int64_t pairs, int resident_per_sm, const KernelOptions& options,
                         const DeviceLimits& device) {
  if (p.max_context_len == 0) return 1;
  if (options.num_splits > 0) return options.num_splits;
  std::int64_t partition = options.partition_tokens;
  if (partition == 0) {
    const std::int64_t tokens = p.total_context_len > 0 ? p.total_context_len : std::int64_t{p.num_seqs} * p.max_context_len;
    const std::int64_t work = tokens * (pairs / std::max(p.num_seqs, 1));  // tokens x heads a sequence
    const std::int64_t slots = std::max<std::int64_t>(std::int64_t{device.sm_count} * resident_per_sm, 1);
    partition = std::max<std::int64_t>((work + slots - 1) / slots, kMinTokensPerSplit);
  }
  return static_cast<int>((p.max_context_len + partition - 1) / partition);
}
// [choose]

/// Tokens per split for \p splits splits.
inline int partition_of(const DecodeProblem& p, int splits) { return std::max(1, (p.max_context_len + splits - 1) / splits); }

/// "4 splits of 8192 tokens" (the end of a split step's plan description).
inline std::string describe_splits(const DecodeProblem& p, int splits) {
  return cat(splits, splits == 1 ? " split of " : " splits of ", partition_of(p, splits), " tokens");
}

/// The checks of the split options: the splits fit the grid's third axis.
inline void require_split_options(const KernelOptions& options, const char* kernel) {
  PA_REQUIRE(options.num_splits >= 0 && options.num_splits <= 65535, kernel, "options.num_splits",
             "0 (choose) or 1 to 65535 (the grid's z limit)", options.num_splits);
  PA_REQUIRE(options.partition_tokens >= 0, kernel, "options.partition_tokens", ">= 0", options.partition_tokens);
}

/// Whether \p plan's program fits one SM of \p device: its shared memory, and (on the GPU) its
/// registers for its threads, which the occupancy calculator counts.
inline bool fits(const LaunchPlan& plan, const DeviceLimits& device) {
  return plan.shared_bytes <= device.shared_per_block_optin && plan.resident_per_sm >= 1;
}
/// Refuses a plan whose program fits no SM, naming the thread count.
inline void require_fits(const LaunchPlan& plan, const DeviceLimits& device, const char* kernel) {
  PA_REQUIRE(fits(plan, device), kernel, "options.threads_per_block",
             cat("a thread count whose program fits one SM of ", device.name, " (registers and shared memory)"),
             cat(plan.threads, " threads (", plan.shared_bytes, " B shared memory)"));
}

/// Bytes of the partials for \p splits splits of every query head of every sequence.
inline std::size_t partials_bytes(const DecodeProblem& p, int splits) {
  const std::size_t slots = static_cast<std::size_t>(p.num_seqs) * p.num_q_heads * splits;
  return align_up(slots * sizeof(float)) * 2 + align_up(slots * p.head_dim * sizeof(float));
}

/// The partials' spans in a workspace of partials_bytes().
inline Partials partials_in(void* workspace, const DecodeProblem& p, int splits) {
  const std::size_t slots = static_cast<std::size_t>(p.num_seqs) * p.num_q_heads * splits;
  auto* base = static_cast<unsigned char*>(workspace);
  const auto n = static_cast<std::int64_t>(slots);
  return {gspan<float>(reinterpret_cast<float*>(base), n, "split_maxes"),
          gspan<float>(reinterpret_cast<float*>(base + align_up(slots * sizeof(float))), n, "split_sums"),
          gspan<float>(reinterpret_cast<float*>(base + 2 * align_up(slots * sizeof(float))), n * p.head_dim, "split_accs"),
          splits, partition_of(p, splits)};
}

/// A split step's plan once its kernel's shared memory and occupancy are known: the grid
/// (\p heads heads a sequence), the split count, the workspace and the description.
inline LaunchPlan split_plan(const DecodeProblem& p, const KernelOptions& options, const DeviceLimits& device,
                             int heads, std::size_t shared_bytes, int resident_per_sm, const char* kernel) {
  LaunchPlan out = step05::warp_plan(p, options, shared_bytes);
  out.resident_per_sm = resident_per_sm;
  require_fits(out, device, kernel);
  out.splits = choose_splits(p, std::int64_t{p.num_seqs} * heads, resident_per_sm, options, device);
  out.options.num_splits = out.splits;
  out.grid[1] = static_cast<unsigned>(heads);
  out.grid[2] = static_cast<unsigned>(out.splits);
  out.workspace_bytes = partials_bytes(p, out.splits);
  out.description = cat(describe_launch(out), ", ", resident_per_sm, " programs an SM on ", device.name, "; ",
                        describe_splits(p, out.splits));
  return out;
}

inline LaunchPlan plan(const DecodeProblem& p, const KernelOptions& options, const DeviceLimits& device) {
  step05::check_warps(p, options, knob_threads | knob_splits | knob_partition, kName);
  require_split_options(options, kName);
  const int threads = step05::threads_of(options);
  const std::size_t shared = step06::shared_bytes(p, threads);
  int resident = 0;
  dispatch_problem(p, [&](auto storage, auto head_dim) {
    resident = resident_programs_per_sm(split_decode<decltype(storage), decltype(head_dim)::value>, threads, shared, device);
  });
  return split_plan(p, options, device, p.num_q_heads, shared, resident, kName);
}

inline void launch(const DecodeView& view, const LaunchPlan& plan, void* stream) {
  if (!begin_launch(view, plan, kName)) return;
  step05::require_aligned(view, kName);
  const DecodeProblem& p = view.problem;
  const Partials partials = partials_in(view.workspace, p, plan.splits);
  dispatch_problem(p, [&](auto storage, auto head_dim) {
    using T = decltype(storage);
    constexpr int D = decltype(head_dim)::value;
    const DecodeArgs<T> args = make_args<T>(view);
    launch_kernel("step07_split_decode", split_decode<T, D>, dim3(plan.grid[0], plan.grid[1], plan.grid[2]),
                  dim3(plan.threads), plan.shared_bytes, stream, args, partials);
    launch_kernel("step07_merge_splits", merge_splits<T, D>, dim3(p.num_seqs, p.num_q_heads), dim3(D), 0, stream,
                  args, partials);
  });
}

inline KernelEntry entry() { return {7, kName, kBackend, knob_threads | knob_splits | knob_partition, 0, &plan, &launch}; }

}  // namespace pa::PA_KERNELS::step07
