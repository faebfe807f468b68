#pragma once
/// \file
/// The launch configuration of a kernel launched overlapped with the end of the kernel before it
/// (Hopper's programmatic dependent launch), shared by the kernels' launch_kernel_overlapped
/// (kernels/portable/portable.h) and gpu::launch_empty_kernel. CUDA builds only.

#include <cuda_runtime.h>

#include <cstddef>

namespace pa::gpu {

/// `cudaLaunchKernelEx(&launch.config, kernel, args...)` starts the kernel's programs once the
/// kernel before it in the stream has called griddepcontrol.launch_dependents (or ended); they
/// must wait (griddepcontrol.wait) before reading what it wrote.
struct OverlappedLaunch {
  cudaLaunchAttribute attribute[1] = {};
  cudaLaunchConfig_t config = {};

  OverlappedLaunch(dim3 grid, dim3 block, std::size_t shared_bytes, void* stream) {
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = static_cast<cudaStream_t>(stream);
    config.attrs = attribute;
    config.numAttrs = 1;
  }
  OverlappedLaunch(const OverlappedLaunch&) = delete;  // config.attrs points into this object
  OverlappedLaunch& operator=(const OverlappedLaunch&) = delete;
};

}  // namespace pa::gpu
