// Step 09 as a program: the kernel in the emulator and (where a GPU is present) on the GPU,
// both compared with the oracle, side by side. `--help` lists the flags.
#include "harness/harness.h"

int main(int argc, char** argv) { return pa::kernel_step_main(9, argc, argv); }
