// Step 12's benchmarks: the named workloads on the GPU (gqa-batch-fp8 is this step's; the
// others, 16-bit K/V, run as step 11), the emulator on the tour workload, and the emulator's
// predicted traffic (see harness/bench.h).
#include "harness/bench.h"

PA_STEP_BENCHMARK_MAIN(12)
