// Step 12 as a program: the kernel in the emulator and (where a GPU is present) on the GPU, both
// compared with the oracle, side by side. `--help` lists the flags; `--fp8` runs the workload
// with fp8 e4m3 K/V (without it the problem is step 11's, which this step runs unchanged).
#include "harness/harness.h"

int main(int argc, char** argv) { return pa::kernel_step_main(12, argc, argv); }
