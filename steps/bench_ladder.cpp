// The benchmarks of every kernel step in one program, so a GPU run builds and uploads each
// named workload once, and each point of the shape sweeps once for all the steps (see
// harness/bench.h); beside them, the host cost of a call of the entry point
// (bench_entry_point.h). `--benchmark_filter=/gpu/` selects the GPU ones.
#include "harness/bench.h"
#include "kernels/registry.h"
#include "steps/bench_entry_point.h"

/// Rounds of the named workloads' rows (harness/bench.h): a median of three, so no one round decides
/// a comparison of rungs. A round adds about 16 s to a run (lab/perf-log.md v146: 607 rows in 151 s
/// on an H100, against 119 s for one round on an H200), most of it steps 02 and 03.
constexpr int kNamedRounds = 3;

int main(int argc, char** argv) {
  pa::bench::register_named_rounds(pa::kernel_steps(), kNamedRounds);
  for (int step : pa::kernel_steps()) pa::bench::register_step(step);
  pa::bench::register_entry_point();
  pa::bench::register_shape_sweeps(pa::kernel_steps());
  return pa::bench::main(argc, argv);
}
