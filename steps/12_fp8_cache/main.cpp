// Step 12 as a program: the kernel in the emulator and (where a GPU is present) on the GPU, both
// compared with the oracle, side by side. `--help` lists the flags; K and V are fp8 e4m3 unless
// `--kv-dtype same` asks for step 11's problem, which this step runs unchanged.
#include "harness/harness.h"

int main(int argc, char** argv) { return pa::kernel_step_main(12, argc, argv); }
