#pragma once
/// \file
/// The benchmarks every kernel step shares (Google Benchmark). A step's bench.cpp is one line,
/// `PA_STEP_BENCHMARK_MAIN(NN)`; `bench_ladder` registers every step in one program.
///
/// Registered for the steps together (register_named_rounds):
///  - `stepNN_name/gpu/<workload>` for each named workload of docs/design/BENCHMARKS.md, when a GPU is
///    present: median device time of 20 launches (5 where one launch takes over 10 ms; CUDA
///    events, L2 flushed before each, two warm-ups), counters GB/s (decimal), % of the roof
///    measured at start-up, % of datasheet,
///    and the knobs the plan ran with (`threads_per_block`, `num_splits`, `tile_tokens`,
///    `variant`: the step's own knobs only); the output is checked against the oracle on sampled
///    sequences after the timed runs.
///    Checked mode (DecodeView::checked) is off in these timings: they time the kernel alone.
///  - `bare_read/gpu/<workload>/once` and `.../per-query-head`: the bare reads of each named
///    workload (see register_named_rounds).
///
/// Registered per step (register_step):
///  - `stepNN_name/gpu/<workload>/checked`: the same with checked mode on (its check kernel ahead
///    of each launch): the mode's cost is its time minus the row's.
///  - `stepNN_name/gpu/gqa-batch-nhd`: gqa-batch with token-major pages (`[page][slot][head][dim]`
///    instead of `[page][head][slot][dim]`), the layout comparison of step 05's page.
///  - `stepNN_name/gpu/sweep-<context>`: the same for a context-length sweep (16 sequences of
///    gqa-batch's head layout, contexts 512 to 32768).
///  - `stepNN_name/gpu/<workload>/variant-V`: a step with ablations (options.variant) runs each
///    on the named workloads.
///  - `stepNN_name/gpu/group-<g>`, `stepNN_name/gpu/head-dim-<d>` and `stepNN_name/gpu/single-<n>`
///    (register_shape_sweeps).
///  - `stepNN_name/emulator/tour`: the emulator on the tour workload (CPU time), with its byte
///    count, the bytes a decode step must move, and the knobs its plan ran with.
///  - `stepNN_name/traffic/<workload>`: the emulator's byte count on a miniature of each named
///    workload (same heads, dim, page; two sequences of at most 256 tokens), scaled to the
///    full workload's tokens: the step's predicted bytes, whose time at the roof is its floor.

#include <memory>
#include <string>
#include <vector>

#include "harness/harness.h"

namespace pa::bench {

/// Registers the named workloads' rows of \p steps (`stepNN_name/gpu/<workload>`) and their bare
/// reads, when a GPU is present, in \p rounds rounds: each round takes the workloads in turn, and
/// for each its bare reads, then every step's row, the steps in order in the first round, the
/// third, .. and backwards in the others. So the rungs compared on a workload take turns on one
/// machine, none always right after the same one, instead of each running its rows minutes after
/// the rung before's (step 10 against step 09 on mha-batch: 0.5% behind run rung after rung,
/// level in ten interleaved repetitions, lab/perf-log.md v110). A row's name repeats once a round in the JSON; scripts/results takes
/// the median entry. The rounds are stamped in the context as `named_rounds`.
///
/// The bare reads, `bare_read/gpu/<workload>/once` and `.../per-query-head`: the workload's bytes
/// read by a kernel that does nothing else, in the access pattern of a kernel that reads each KV
/// head's bytes once (step 08 on) or once per query head of its group (steps 03-07); the fastest
/// of a few chunk sizes and thread counts, counters as for the steps.
void register_named_rounds(const std::vector<int>& steps, int rounds);

/// Registers the benchmarks of kernel step \p step other than register_named_rounds' rows.
void register_step(int step);

/// Registers the shape sweeps of docs/design/BENCHMARKS.md for each of \p steps from step 08 on
/// (the steps that read each KV head's K and V once for its query-head group), when a GPU is
/// present; timed and checked like the named workloads. The first two keep gqa-batch's sequences
/// (64 of 8192 tokens, 8 KV heads, bf16, page 16) and change one thing of it, the third its
/// batch and length:
///  - `stepNN_name/gpu/group-<g>`: 8·g query heads, g = 1, 2, 3, 5, 6, 7, 8, 12, 16, 32;
///  - `stepNN_name/gpu/head-dim-<d>`: head dim d, d = 64, 80, 96, 112, 256;
///  - `stepNN_name/gpu/single-<n>`: one sequence of n tokens, 1k to 1M, on gqa-batch's heads.
/// g = 4 and d = 128 are gqa-batch, which register_named_rounds times already. Each point is
/// registered for every step in turn, so it is built once and freed when the next is built:
/// one point (4 MB to 4.3 GB of K/V) is held at a time, next to the named workloads.
void register_shape_sweeps(const std::vector<int>& steps);

/// A workload, built once per process and kept on the host and the device.
struct Cached {
  Workload host;
  std::unique_ptr<DeviceWorkload> device;
  OracleRows oracle;  // on sampled sequences, computed once for every step
};
/// The workload \p name, built on first use: what every GPU row of the process times (the step
/// rows, the bare reads, bench_ladder's entry-point rows). The named workloads and the context
/// sweep stay for the whole process (every step uses them: about 14 GB on the host and as much on
/// the device). A shape sweep's point (up to 4.3 GB of K/V) is used only by its own
/// few rows, which register_shape_sweeps registers next to each other: it is dropped when the
/// next point is built, so at most one is held at a time.
Cached& cached(const std::string& name);

/// Runs the registered benchmarks: measures the roof first when a GPU is present and stamps
/// the JSON context with the hardware, the roof and the git revision.
int main(int argc, char** argv);

}  // namespace pa::bench

/// The whole of a kernel step's bench.cpp.
#define PA_STEP_BENCHMARK_MAIN(step)              \
  int main(int argc, char** argv) {               \
    pa::bench::register_named_rounds({step}, 1);  \
    pa::bench::register_step(step);               \
    pa::bench::register_shape_sweeps({step});     \
    return pa::bench::main(argc, argv);           \
  }
