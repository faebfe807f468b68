// The benchmarks of every kernel step in one program, so a GPU run builds and uploads each
// named workload once, and each point of the shape sweeps once for all the steps (see
// harness/bench.h); beside them, the host cost of a call of the entry point
// (bench_entry_point.h). `--benchmark_filter=/gpu/` selects the GPU ones.
#include "harness/bench.h"
#include "kernels/registry.h"
#include "steps/bench_entry_point.h"

int main(int argc, char** argv) {
  for (int step : pa::kernel_steps()) pa::bench::register_step(step);
  pa::bench::register_bare_reads();
  pa::bench::register_entry_point();
  pa::bench::register_shape_sweeps(pa::kernel_steps());
  return pa::bench::main(argc, argv);
}
