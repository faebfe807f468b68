#pragma once
/// \file
/// Step 07, split-KV: the context of one (sequence, head) is split across programs, and a
/// second kernel merges their partial results with log-sum-exp.
///
/// What changed since step 06: a batch with few (sequence, head) pairs and long contexts
/// (`long-single`: 32 programs for 132 SMs) leaves most of the GPU idle. Here the grid has a
/// third axis, the split: program (head, seq, split) runs step 06's online_attend over its
/// slice of the context and writes its unnormalised result (max, sum, acc[head_dim]) to the
/// workspace; merge_splits, launched overlapped with the split kernel's end, then combines the
/// splits of each (seq, head) in a fixed order, so the same input gives the same bits. The
/// query head is the grid's first axis (step 06 has the sequence first), so the programs of the
/// query heads that share a KV head are next to each other in launch order and run at the same
/// time: the L2 then serves most of their repeated reads of each K and V row. The split
/// count comes from the device (the occupancy calculator's programs an SM): one wave of at most
/// kWaveWarps warps an SM when the sequences are equally long (kWaveShape, two programs of 256
/// threads at tile 2 an SM, when there are fewer (sequence, head) pairs than SMs), else enough
/// programs for kRounds rounds of what every SM holds at once; no split shorter than 256 tokens.
/// Splits past a short sequence's end are empty: they write sum 0, which weighs nothing, and
/// context 0 gives a row of zeros, never NaN.
///
///     build/cpu/steps/step07_split_kv --help

#include "kernels/06_online_softmax.cuh"

namespace pa::PA_KERNELS::step07 {

using step05::Slices;
using step06::merge_floats;
using step06::online_attend;

/// Where the partial results live in the workspace: sums and maxes
/// `[num_seqs][num_q_heads][splits]`, accs `[num_seqs][num_q_heads][splits][head_dim]`.
struct Partials {
  gspan<float> maxes;
  gspan<float> sums;
  gspan<float> accs;
  int splits;
  int partition;  ///< tokens per split
};

// [prologue]
/// Asks the L2 for the block-table lines of split \p split's tokens (all \p partition of them,
/// as if the split were full) before the program has read its context length. A program's first
/// loads form a chain: the context length gives the split's range, the range the entries of its
/// pages in the block table, the entries the K and V addresses; after the L2 flush each link is
/// a DRAM round trip. With the table lines on their way while the context length is read, the
/// second link hits the L2 (run v42: 1 µs of step 07's 50 on long-single). A line holds 32
/// entries; a thread asks for one line at a time.
template <class T>
__device__ __forceinline__ void prefetch_split_table(const DecodeArgs<T>& args, int seq, int split, int partition) {
  const std::int64_t row = static_cast<std::int64_t>(seq) * args.max_blocks_per_seq;
  const std::int64_t first = std::int64_t{split} * partition / args.block_size;
  const std::int64_t last = std::min<std::int64_t>(args.max_blocks_per_seq,
                                                   (std::int64_t{split + 1} * partition + args.block_size - 1) / args.block_size);
  const std::int64_t step = std::int64_t{blockDim.x} * 32;
  for (std::int64_t entry = ((row + first) & ~std::int64_t{31}) + threadIdx.x * 32; entry < row + last; entry += step)
    prefetch_l2(args.block_tables, entry);  // from the start of the line that holds the first entry
}
// [prologue]

// [split]
/// Program (q_head, seq, split): step 06's pass over tokens [split*partition, ...), written
/// unnormalised to the partials.
template <class T, int HEAD_DIM, int TOKENS>
__global__ void split_decode(DecodeArgs<T> args, Partials partials) {
  PA_DYNAMIC_SHARED(float, shared);
  allow_next_kernel();  // the merge may take the SMs this grid leaves free; it waits for our partials
  const int q_head = blockIdx.x;  // the query heads of one KV head are next to each other in launch order
  const int seq = blockIdx.y;
  const int split = blockIdx.z;
  prefetch_split_table(args, seq, split, partials.partition);  // before the context length: see above
  const int context_len = args.context_lens[seq];
  const int begin = std::min(split * partials.partition, context_len);  // empty past the end
  const int end = std::min(begin + partials.partition, context_len);
  const std::int64_t slot = (static_cast<std::int64_t>(seq) * args.num_q_heads + q_head) * partials.splits + split;
  online_attend<T, HEAD_DIM, 1, TOKENS>(args, seq, q_head, q_head / args.group_size(), begin, end, shared,
                                [&](int, int d, float acc, float max, float sum) {
                                  partials.accs[slot * HEAD_DIM + d] = acc;
                                  if (d == 0) {
                                    partials.maxes[slot] = max;
                                    partials.sums[slot] = sum;
                                  }
                                });
}
// [split]

// [merge]
/// The most splits merge_splits merges with one thread a channel and one round of loads.
inline constexpr int kMergeDirectSplits = 8;

/// Program (q_head, seq), kMergeThreads threads: combines the splits. Each split's acc was
/// summed relative to its own max m_s (base 2); scaled by 2^(m_s - M) to the overall max M, the sums
/// and accs add up, in split order: the same input gives the same bits. With at most
/// kMergeDirectSplits splits, one thread a channel loads every split's max, sum and acc at once
/// and merges them: one round of loads, where the general path takes two and a block
/// reduction (run v42). With more, the threads form `slices` copies of the head_dim channels;
/// slice i takes splits i, i + slices, ... (so a long context's 128 splits cost each thread 32
/// loads, not 128), then slice 0 adds the slices up in a fixed order.
template <class T, int HEAD_DIM>
__global__ void merge_splits(DecodeArgs<T> args, Partials partials) {
  PA_SHARED(float, scratch, 32);
  PA_SHARED(float, slice_accs, 512);  // [slices][HEAD_DIM]
  PA_SHARED(float, slice_sums, 32);   // [slices]
  const int q_head = blockIdx.x;
  const int seq = blockIdx.y;
  const std::int64_t first = (static_cast<std::int64_t>(seq) * args.num_q_heads + q_head) * partials.splits;
  const std::int64_t out_row = (static_cast<std::int64_t>(seq) * args.num_q_heads + q_head) * HEAD_DIM;
  // Split s weighs 2^(m_s - M); an empty split (sum 0) weighs 0. No tokens at all: a row of zeros.
  auto weight = [](float split_sum, float split_max, float merged_max) {
    return split_sum == 0.0f ? 0.0f : exp2f(split_max - merged_max);
  };
  auto write = [&](int d, float sum, float acc) { args.out[out_row + d] = from_float<T>(sum == 0.0f ? 0.0f : acc / sum); };
  wait_for_previous_kernel();  // launched overlapped with the split kernel: its partials are complete from here
  if (partials.splits <= kMergeDirectSplits) {
    if (threadIdx.x < HEAD_DIM) {
      const int d = threadIdx.x;
      float maxes[kMergeDirectSplits], sums[kMergeDirectSplits], accs[kMergeDirectSplits];
      PA_UNROLL
      for (int s = 0; s < kMergeDirectSplits; ++s) {  // every load issued before any is used
        if (s < partials.splits) {
          maxes[s] = partials.maxes[first + s];
          sums[s] = partials.sums[first + s];
          accs[s] = partials.accs[(first + s) * HEAD_DIM + d];
        }
      }
      float merged_max = -INFINITY;
      PA_UNROLL
      for (int s = 0; s < kMergeDirectSplits; ++s)
        if (s < partials.splits) merged_max = fmaxf(merged_max, maxes[s]);
      float sum = 0.0f, acc = 0.0f;
      PA_UNROLL
      for (int s = 0; s < kMergeDirectSplits; ++s) {
        if (s < partials.splits) {
          const float w = weight(sums[s], maxes[s], merged_max);
          sum += sums[s] * w;
          acc += accs[s] * w;
        }
      }
      write(d, sum, acc);
    }
    return;
  }
  float local_max = -INFINITY;
  for (int s = threadIdx.x; s < partials.splits; s += blockDim.x) local_max = fmaxf(local_max, partials.maxes[first + s]);
  const float merged_max = step05::block_reduce_warps<true>(local_max, scratch);

  const int slices = blockDim.x / HEAD_DIM;
  const int slice = threadIdx.x / HEAD_DIM;
  const int d = threadIdx.x % HEAD_DIM;
  if (slice < slices) {
    float sum = 0.0f, acc = 0.0f;
    PA_UNROLL_BY(4)  // four splits' loads in flight, not one after another
    for (int s = slice; s < partials.splits; s += slices) {
      const float split_sum = partials.sums[first + s];
      const float w = weight(split_sum, partials.maxes[first + s], merged_max);
      sum += split_sum * w;
      acc += partials.accs[(first + s) * HEAD_DIM + d] * w;
    }
    slice_accs[slice * HEAD_DIM + d] = acc;
    if (d == 0) slice_sums[slice] = sum;
  }
  __syncthreads();
  if (slice == 0) {
    float sum = 0.0f, acc = 0.0f;
    for (int i = 0; i < slices; ++i) {
      sum += slice_sums[i];
      acc += slice_accs[i * HEAD_DIM + d];
    }
    write(d, sum, acc);
  }
}
/// Threads of a merge program: at least two slices of the largest head dim (256).
inline constexpr int kMergeThreads = 512;
// [merge]

// ----- host side -----------------------------------------------------------------------------
inline constexpr const char* kName = "step07_split_kv";
inline constexpr int kDefaultThreads = 128;
inline constexpr int kMinTokensPerSplit = 256;
/// Rounds of resident programs the split count aims for when the programs differ in length
/// (or their lengths are unknown): many short programs let the SMs that finish early take more,
/// so a long sequence does not run alone at the end (see the page for the measurement).
inline constexpr int kRounds = 8;
/// The most warps an SM the one-wave split count fills: the split sweeps on the H200 (runs v14
/// and v20) found both split kernels fastest near 16 warps (4 programs of 128 threads) an SM
/// whatever more the SM could hold, and each program more pays its fixed costs again.
inline constexpr int kWaveWarps = 16;
/// The program of the one-wave plan (wants_wave_program): its threads and its tile (tokens a
/// thread group takes per iteration). kWaveWarps * 32 / threads of them fill an SM's wave.
struct WaveShape {
  int threads;
  int tile;
};
/// Step 07's: two programs of 256 threads an SM, each thread group taking two tokens an
/// iteration (run v51 measured the shapes; the page has the table).
inline constexpr WaveShape kWaveShape{kWaveWarps * 32 / 2, 2};
/// The fewest tokens of one sequence on one SM (sm_count / pairs of them share it) for
/// make_plan to choose the wave program: at 16 warps an SM, 32 tokens for each of 64 thread
/// groups of one token at bf16 and head dim 128 (the H200 runs measured 2048 and 8192).
inline constexpr int kWaveMinTokens = 2048;

inline int threads_of(const KernelOptions& options) {
  return options.threads_per_block > 0 ? options.threads_per_block : kDefaultThreads;
}

/// Whether the caller says every sequence has the same length (p.total_context_len, a hint).
inline bool lengths_equal(const DecodeProblem& p) { return p.total_context_len == std::int64_t{p.num_seqs} * p.max_context_len; }

// [threads]
/// Whether the wave program (a step's WaveShape) is wanted: the caller leaves threads, tile,
/// splits and partition at 0 (choose), the lengths are known to be equal, there are fewer
/// (sequence, head) \p pairs than SMs, and each SM's share of a sequence (sm_count / pairs of
/// them share one) is at least kWaveMinTokens tokens. Then the one-wave split count fills
/// every SM's kWaveWarps warps with the wave's programs. Several equal programs of 128
/// threads on one SM do not finish together: the SM's warp schedulers favour the warps of the
/// programs that started first, and the last program runs on alone (the page has the
/// measurement); the wave programs are larger and fewer. make_plan takes the wave program only
/// if it fits an SM; otherwise, and in every other case, the asked options (kDefaultThreads).
inline bool wants_wave_program(const DecodeProblem& p, std::int64_t pairs, const KernelOptions& options,
                               const DeviceLimits& device) {
  const bool choose = options.threads_per_block == 0 && options.tile_tokens == 0 && options.num_splits == 0 &&
                      options.partition_tokens == 0;
  return choose && lengths_equal(p) && pairs > 0 && pairs < device.sm_count &&
         p.max_context_len >= std::int64_t{kWaveMinTokens} * (device.sm_count / pairs);
}
// [threads]

/// What a split kernel runs for one problem, worked out once per call (make_plan): the options
/// with the thread count and the tile filled in, the program's dynamic shared memory, the
/// programs one SM holds at once (CUDA's occupancy calculator on the GPU; 0 when none fits) and
/// the split count.
struct SplitPlan {
  KernelOptions options;  ///< as asked, or with the wave program's threads and tile
  std::int64_t shared_bytes = 0;
  int resident_per_sm = 0;  ///< 0: the program fits no SM (check and launch refuse the plan)
  int splits = 1;
};

/// Whether a program of \p shared_bytes, \p resident_per_sm of them an SM, fits \p device.
inline bool program_fits(std::int64_t shared_bytes, int resident_per_sm, const DeviceLimits& device) {
  return shared_bytes <= static_cast<std::int64_t>(device.shared_per_block_optin) && resident_per_sm >= 1;
}

/// Refuses a plan whose program does not fit one SM of \p device: too much shared memory, or,
/// on the GPU, too many registers for its threads.
inline void require_fits(const SplitPlan& plan, const DeviceLimits& device, const char* name) {
  step06::require_shared(plan.shared_bytes, plan.options, device, name);
  PA_REQUIRE(program_fits(plan.shared_bytes, plan.resident_per_sm, device), name, "options.threads_per_block",
             "a thread count whose program fits one SM (registers and shared memory, at this tile)",
             threads_of(plan.options));
}

// [choose]
/// Splits per (sequence, head) for \p programs (sequence, head) pairs. The slots: what every
/// SM holds at once (\p resident_per_sm, from the occupancy calculator: registers, threads and
/// shared memory). When every sequence has the same length (p.total_context_len says so) and the
/// pairs do not fill the slots, one wave: as many equal splits as the slots hold, counting at
/// most kWaveWarps warps an SM, so they all run at once. Otherwise enough programs for kRounds rounds of the slots, so the SMs that
/// finish early balance the long sequences. No split under kMinTokensPerSplit tokens;
/// `options.num_splits` or `options.partition_tokens` override it.
inline int choose_splits(const DecodeProblem& p, std::int64_t programs, int resident_per_sm,
                         const KernelOptions& options, const DeviceLimits& device) {
  if (p.max_context_len == 0) return 1;
  if (options.num_splits > 0) return options.num_splits;
  if (options.partition_tokens > 0) return static_cast<int>((p.max_context_len + options.partition_tokens - 1) / options.partition_tokens);
  programs = std::max<std::int64_t>(programs, 1);
  const std::int64_t slots = std::int64_t{device.sm_count} * resident_per_sm;
  const int wave_programs = std::max(1, kWaveWarps * 32 / threads_of(options));  // programs an SM
  const std::int64_t wave = std::int64_t{device.sm_count} * std::min(resident_per_sm, wave_programs);
  const bool uniform = lengths_equal(p);
  const std::int64_t wanted = uniform && programs < slots ? wave / programs  // 0 (then 1) past the wave
                                                          : (kRounds * slots + programs - 1) / programs;
  const std::int64_t most = (p.max_context_len + kMinTokensPerSplit - 1) / kMinTokensPerSplit;
  return static_cast<int>(std::clamp<std::int64_t>(wanted, 1, std::max<std::int64_t>(most, 1)));
}
// [choose]

/// Tokens per split for \p splits splits.
inline int partition_of(const DecodeProblem& p, int splits) { return std::max(1, (p.max_context_len + splits - 1) / splits); }

/// The checks of the split kernels (step 08 shares them under its own name).
inline void check_split_kernel(const DecodeProblem& problem, const KernelOptions& options, const char* kernel) {
  validate(problem, kernel);
  require_head_dim(problem.head_dim, {PA_HEAD_DIMS}, kernel);
  step05::require_vector_layout(problem, kernel);
  const int threads = threads_of(options);
  PA_REQUIRE(threads >= 32 && threads <= 1024 && threads % 32 == 0, kernel, "options.threads_per_block",
             "a multiple of 32 in [32, 1024] (whole warps)", threads);
  PA_REQUIRE(problem.num_seqs <= 65535, kernel, "num_seqs", "at most 65535 (the grid's y limit: sequences are its second axis)",
             problem.num_seqs);
  PA_REQUIRE(options.num_splits >= 0 && options.num_splits <= 65535, kernel, "options.num_splits",
             "0 (choose) or 1 to 65535 (the grid's z limit)", options.num_splits);
  PA_REQUIRE(options.partition_tokens >= 0, kernel, "options.partition_tokens", ">= 0", options.partition_tokens);
  step06::require_tile(options, kernel);
}

/// Bytes of the partials for \p splits splits of \p heads heads per sequence.
inline std::size_t partials_bytes(const DecodeProblem& p, int splits) {
  const std::size_t slots = static_cast<std::size_t>(p.num_seqs) * p.num_q_heads * splits;
  return align_up(slots * sizeof(float)) * 2 + align_up(slots * p.head_dim * sizeof(float));
}

/// The partials' spans in a workspace of partials_bytes().
inline Partials partials_in(void* workspace, const DecodeProblem& p, int splits) {
  const std::size_t slots = static_cast<std::size_t>(p.num_seqs) * p.num_q_heads * splits;
  auto* base = static_cast<unsigned char*>(workspace);
  auto* maxes = reinterpret_cast<float*>(base);
  auto* sums = reinterpret_cast<float*>(base + align_up(slots * sizeof(float)));
  auto* accs = reinterpret_cast<float*>(base + 2 * align_up(slots * sizeof(float)));
  const auto n = static_cast<std::int64_t>(slots);
  return {gspan<float>(maxes, n, "split_maxes"), gspan<float>(sums, n, "split_sums"),
          gspan<float>(accs, n * p.head_dim, "split_accs"), splits, partition_of(p, splits)};
}

/// Runs `f(kernel, T{}, head_dim, shared_bytes)` with the split_decode instantiation this
/// problem uses (storage type, head dim, tile of \p options) and its dynamic shared memory.
template <class F>
void with_kernel(const DecodeProblem& p, const KernelOptions& options, F&& f) {
  const int threads = threads_of(options);
  step06::dispatch_attend(p, options, [&](auto storage, auto head_dim, auto tile) {
    using T = decltype(storage);
    constexpr int D = decltype(head_dim)::value;
    constexpr int N = decltype(tile)::value;
    f(split_decode<T, D, N>, storage, head_dim, step06::attend_floats<T, D, 1, N>(threads) * std::int64_t{sizeof(float)});
  });
}

// [plan]
/// The plan of a split kernel for \p p and the \p asked options: the step's \p wave program
/// where wants_wave_program says so and it fits, else the asked options; the program's shared
/// memory and occupancy on \p device (asked once, not per check); then choose_splits.
/// \p pairs: the (sequence, head) pairs of the grid's first two axes; \p with: the step's
/// with_kernel.
template <class With>
SplitPlan plan_split(const DecodeProblem& p, std::int64_t pairs, const KernelOptions& asked, const DeviceLimits& device,
                     WaveShape wave_shape, With&& with) {
  auto measure = [&](const KernelOptions& options) {
    SplitPlan plan;
    plan.options = options;
    with(p, options, [&](auto kernel, auto, auto, std::int64_t shared) {
      plan.shared_bytes = shared;
      // Past the opt-in limit the program cannot launch, and CUDA would refuse the question.
      plan.resident_per_sm = shared <= static_cast<std::int64_t>(device.shared_per_block_optin)
                                 ? resident_programs_per_sm(kernel, threads_of(options), static_cast<std::size_t>(shared), device)
                                 : 0;
    });
    return plan;
  };
  SplitPlan plan;
  bool planned = false;
  if (wants_wave_program(p, pairs, asked, device)) {
    KernelOptions wave = asked;
    wave.threads_per_block = wave_shape.threads;
    wave.tile_tokens = wave_shape.tile;
    plan = measure(wave);
    planned = program_fits(plan.shared_bytes, plan.resident_per_sm, device);
  }
  if (!planned) plan = measure(asked);
  plan.splits = choose_splits(p, pairs, plan.resident_per_sm, plan.options, device);
  return plan;
}
// [plan]

/// A split kernel's launch on \p device, from its plan: grid, threads, tile, shared memory,
/// programs an SM, splits. \p heads_axis: the heads of the grid's first axis.
inline std::string describe_plan(const DecodeProblem& p, const SplitPlan& plan, const DeviceLimits& device, int heads_axis) {
  return cat("grid ", heads_axis, " x ", p.num_seqs, " x ", plan.splits, " programs of ", threads_of(plan.options),
             " threads at tile ", step06::tile_of(plan.options), ", ", plan.shared_bytes, " B shared memory, ",
             plan.resident_per_sm, " programs an SM on ", device.name,
             "; ", plan.splits, plan.splits == 1 ? " split of " : " splits of ", partition_of(p, plan.splits), " tokens");
}

// [host]
/// The host side of a split kernel, the same for steps 07 and 08: what differs is named here
/// (the kernels' names, the heads of the grid's first axis, the step's with_kernel). Each call
/// works the plan out once (make_plan), and check, the workspace size, the launch and
/// describe read it.
template <class With>
struct SplitHost {
  const char* name;          ///< the step, in errors
  const char* split_kernel;  ///< the split kernel, in launch errors
  const char* merge_kernel;  ///< the merge kernel, in launch errors
  bool kv_heads_first;       ///< the grid's first axis: KV heads (step 08) or query heads (step 07)
  WaveShape wave;            ///< the step's wave program (plan_split)
  With with;                 ///< calls with_kernel(problem, options, f) of the step

  int heads_axis(const DecodeProblem& p) const { return kv_heads_first ? p.num_kv_heads : p.num_q_heads; }

  SplitPlan make_plan(const DecodeProblem& p, const KernelOptions& options, const DeviceLimits& device) const {
    return plan_split(p, std::int64_t{p.num_seqs} * heads_axis(p), options, device, wave, with);
  }

  void check(const DecodeProblem& p, const KernelOptions& options, const DeviceLimits& device) const {
    check_split_kernel(p, options, name);
    require_fits(make_plan(p, options, device), device, name);
  }

  std::size_t workspace_bytes(const DecodeProblem& p, const KernelOptions& options, const DeviceLimits& device) const {
    return partials_bytes(p, make_plan(p, options, device).splits);
  }

  void launch(const DecodeView& view, const KernelOptions& asked, const DeviceLimits& device, void* stream) const {
    const DecodeProblem& p = view.problem;
    check_split_kernel(p, asked, name);
    const SplitPlan plan = make_plan(p, asked, device);  // once: check, workspace size and launch share it
    require_fits(plan, device, name);
    validate_view(view, partials_bytes(p, plan.splits), name);
    if (p.num_seqs == 0) return;
    step05::require_aligned(view, name);
    const Partials partials = partials_in(view.workspace, p, plan.splits);
    with(p, plan.options, [&](auto kernel, auto storage, auto head_dim, std::int64_t shared) {
      using T = decltype(storage);
      constexpr int D = decltype(head_dim)::value;
      const DecodeArgs<T> args = make_args<T>(view);
      launch_kernel(split_kernel, kernel, dim3(heads_axis(p), p.num_seqs, plan.splits), dim3(threads_of(plan.options)),
                    static_cast<std::size_t>(shared), stream, args, partials);
      launch_kernel_overlapped(merge_kernel, merge_splits<T, D>, dim3(p.num_q_heads, p.num_seqs), dim3(kMergeThreads), 0,
                               stream, args, partials);
    });
  }

  std::string describe(const DecodeProblem& p, const KernelOptions& options, const DeviceLimits& device) const {
    return describe_plan(p, make_plan(p, options, device), device, heads_axis(p));
  }
};
// [host]

/// This step's with_kernel as a callable object (a SplitHost holds one).
struct WithKernel {
  template <class F>
  void operator()(const DecodeProblem& p, const KernelOptions& options, F&& f) const {
    step07::with_kernel(p, options, f);
  }
};

/// Step 07's host side: split_decode over (query head, sequence) pairs.
inline constexpr SplitHost<WithKernel> kHost{kName, "step07_split_decode", "step07_merge_splits", false, kWaveShape, {}};

inline SplitPlan make_plan(const DecodeProblem& p, const KernelOptions& options, const DeviceLimits& device) {
  return kHost.make_plan(p, options, device);
}

/// The registry entry of split-kernel step \p step: HOST's check, workspace size, launch and
/// describe.
template <const auto& HOST>
KernelEntry split_entry(int step) {
  return {step,
          HOST.name,
          kBackend,
          [](const DecodeProblem& p, const KernelOptions& o, const DeviceLimits& d) { HOST.check(p, o, d); },
          [](const DecodeProblem& p, const KernelOptions& o, const DeviceLimits& d) { return HOST.workspace_bytes(p, o, d); },
          [](const DecodeView& v, const KernelOptions& o, const DeviceLimits& d, void* stream) { HOST.launch(v, o, d, stream); },
          [](const DecodeProblem& p, const KernelOptions& o, const DeviceLimits& d) { return HOST.describe(p, o, d); },
          true};
}

inline KernelEntry entry() { return split_entry<kHost>(7); }

}  // namespace pa::PA_KERNELS::step07
