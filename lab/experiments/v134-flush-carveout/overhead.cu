// v134: what the timed region of a row costs before any byte is read. Times, as the harness
// does (the L2 flushed by a streaming read, CUDA events around the launches, median of 51), a
// grid of 512 programs that do nothing: one launch; two, the second overlapped (programmatic
// dependent launch, as step 10 launches its split kernel and merge); each with 0 or 32 KB of
// dynamic shared memory a program (step 10's 32 KB), after a flush whose preferred carveout is
// the driver's default or all shared. And a 134 MB read (small-batch's bytes) after each flush.
// Build: nvcc -O3 -std=c++20 -arch=sm_90 overhead.cu -o overhead. Lab only, not the project.
#include <cuda_runtime.h>

#include "../lab_cuda.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void empty_first(unsigned* sink) {
  extern __shared__ unsigned smem[];
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  if (threadIdx.x == 1000) sink[0] = smem[0];
}
__global__ void empty_second(unsigned* sink) {
  extern __shared__ unsigned smem[];
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  if (threadIdx.x == 1000) sink[0] = smem[0];
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  const size_t flush_bytes = 2 * size_t(prop.l2CacheSize);
  const size_t read_bytes = 134490000;
  uint4 *flush, *data;
  unsigned* sink;
  CHECK(cudaMalloc(&flush, flush_bytes));
  CHECK(cudaMalloc(&data, read_bytes));
  CHECK(cudaMalloc(&sink, 64));
  CHECK(cudaMemset(flush, 0x11, flush_bytes));
  CHECK(cudaMemset(data, 0x22, read_bytes));
  const int smem = 32768;
  CHECK(cudaFuncSetAttribute(empty_first, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CHECK(cudaFuncSetAttribute(empty_second, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));

  auto second = [&](int shared) {
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(512);
    config.blockDim = dim3(64);
    config.dynamicSmemBytes = shared;
    config.attrs = &attribute;
    config.numAttrs = 1;
    CHECK(cudaLaunchKernelEx(&config, empty_second, sink));
  };
  auto time = [&](auto&& body) {
    std::vector<float> times;
    for (int i = 0; i < 52; ++i) {
      stream_read<false><<<prop.multiProcessorCount * 4, 512>>>(flush, flush_bytes / 16, sink);
      CHECK(cudaEventRecord(start));
      body();
      CHECK(cudaEventRecord(stop));
      CHECK(cudaEventSynchronize(stop));
      float ms;
      CHECK(cudaEventElapsedTime(&ms, start, stop));
      if (i > 0) times.push_back(ms * 1000);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  };
  for (int carve : {-1, 100, 0}) {
    CHECK(cudaFuncSetAttribute(stream_read<false>, cudaFuncAttributePreferredSharedMemoryCarveout, carve));
    const char* name = carve < 0 ? "default" : carve == 100 ? "all shared" : "all L1";
    for (int round = 0; round < 2; ++round) {
      for (int shared : {0, smem}) {
        const float one = time([&] { empty_first<<<512, 64, shared>>>(sink); });
        const float two = time([&] {
          empty_first<<<512, 64, shared>>>(sink);
          second(shared);
        });
        std::printf("flush carveout %-10s  programs with %5d B shared: one empty launch %6.2f us, two (overlapped) %6.2f us\n",
                    name, shared, one, two);
      }
      const float read = time([&] {
        stream_read<true><<<prop.multiProcessorCount * 4, 512>>>(data, read_bytes / 16, sink);
      });
      std::printf("flush carveout %-10s  a read of 134.49 MB: %6.2f us (%.1f GB/s)\n", name, read, read_bytes / (read * 1e3));
    }
  }
  CHECK(cudaDeviceSynchronize());
  return 0;
}
