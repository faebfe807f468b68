// The benchmarks of every kernel step in one program, so a GPU run builds and uploads each
// named workload once, and each point of the shape sweeps once for all the steps (see
// harness/bench.h); beside them, the host cost of a call of the entry point
// (bench_entry_point.h). `--benchmark_filter=/gpu/` selects the GPU ones.
#include "harness/bench.h"
#include "kernels/registry.h"
#include "steps/bench_entry_point.h"

/// Rounds of the named workloads' rows (harness/bench.h): a median of three, so one round run on
/// a warmer or slower moment of the machine decides no comparison of rungs; each round takes
/// about 20 s of GPU time, most of it steps 02 and 03.
constexpr int kNamedRounds = 3;

int main(int argc, char** argv) {
  pa::bench::register_named_rounds(pa::kernel_steps(), kNamedRounds);
  for (int step : pa::kernel_steps()) pa::bench::register_step(step);
  pa::bench::register_entry_point();
  pa::bench::register_shape_sweeps(pa::kernel_steps());
  return pa::bench::main(argc, argv);
}
