#pragma once
/// \file
/// Finds a step's kernel for a backend. The list of steps comes from kernels/CMakeLists.txt
/// (pagedattn_add_kernel), so adding a rung there is all it takes to register it.

#include <string>
#include <vector>

#include "common/kernel_api.h"

namespace pa {

/// The kernel of ladder step \p step for \p backend. Throws ArgumentError for a step without a
/// kernel (the message lists those that have one) and Error for the CUDA backend in a build
/// without CUDA.
const KernelEntry& kernel(int step, Backend backend);

/// The steps that have a kernel, in order.
std::vector<int> kernel_steps();

/// Whether this build compiled the CUDA backend (a GPU may still be missing at run time).
bool cuda_built();

}  // namespace pa
