// What the standalone CUDA programs of lab experiments share (v134's overhead.cu, v135's
// few_read.cu): a check that names the failing call and exits with 4, and the streaming read
// they flush the L2 with and time reads by. Lab only, not the project.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                             \
  do {                                                                                       \
    cudaError_t e = (x);                                                                     \
    if (e != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(4);                                                                          \
    }                                                                                        \
  } while (0)

/// Reads \p count 16-byte units, folding them so the loads stay; BYPASS_L1: `ld.global.cg`, as
/// the kernels' copies read (the timed read), else plain loads (the flush, as the harness's).
/// Separate instantiations are separate kernels, so a carveout set on one leaves the other.
template <bool BYPASS_L1>
__global__ void stream_read(const uint4* __restrict__ data, size_t count, unsigned* sink) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  unsigned fold = 0;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += stride) {
    const uint4 a = BYPASS_L1 ? __ldcg(data + i) : data[i];
    fold ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (fold == 0x9e3779b9u) *sink = fold;
}
