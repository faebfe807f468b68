// Step 11's benchmarks: the named workloads on the GPU, the emulator on the tour workload, and
// the emulator's predicted traffic (see harness/bench.h).
#include "harness/bench.h"

PA_STEP_BENCHMARK_MAIN(11)
