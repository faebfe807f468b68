// The copy floor of step 07's long-single read pattern (4 readers a region, groups of 8 lanes
// streaming 16-token pages; run v46): rd<S, CP> copies through shared memory (cp.async) or loads
// into registers, by stream pattern, threads and programs an SM, scattered or contiguous pages;
// cp_read<S, MODE> varies what is read back from shared memory, or takes V through registers.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 v46-copy-floor.cu
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)

__device__ __forceinline__ void cp16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
template <int S, bool CP>
__global__ void rd(const char* __restrict__ data, int tokens, unsigned mult, unsigned* sink, int pattern) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int region = (blockIdx.x / 4) * gridDim.z + blockIdx.z;
  const int groups = blockDim.x / 8, group = threadIdx.x / 8, rank = threadIdx.x % 8;
  const int run = tokens / groups;
  // pattern 0: group g streams [g*run, (g+1)*run); 1: a warp's 4 groups take adjacent tokens of
  // the warp's stream; 2: the program's groups take adjacent tokens (a tile is `groups` tokens)
  const int warp = group / 4, wg = group % 4;
  const int first_token = region * tokens + (pattern == 0 ? group * run : pattern == 1 ? warp * run * 4 + wg : group);
  const int stride = pattern == 0 ? 1 : pattern == 1 ? 4 : groups;
  auto addr = [&](int t) {
    const int tok = first_token + t * stride;
    const unsigned page = (static_cast<unsigned>(tok / 16) * mult) % 16384u;
    return data + size_t(page) * 8192 + (tok % 16) * 512 + rank * 16;
  };
  unsigned fold = 0;
  if constexpr (CP) {
    const unsigned mine = static_cast<unsigned>(__cvta_generic_to_shared(smem)) + (threadIdx.x / 8) * 512 * S + (threadIdx.x % 8) * 16;
    auto issue = [&](int t, int st) {
      if (t < run) {
        const char* q = addr(t);
#pragma unroll
        for (int j = 0; j < 4; ++j) cp16(mine + st * 512 + j * 128, q + j * 128);
      }
      asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
#pragma unroll
    for (int t = 0; t < S - 1; ++t) issue(t, t);
    for (int t = 0; t < run; ++t) {
      issue(t + S - 1, (t + S - 1) % S);
      asm volatile("cp.async.wait_group %0;\n" ::"n"(S - 1) : "memory");
      unsigned a, b, c, d;
      asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(mine + (t % S) * 512));
      fold ^= a ^ d;
    }
  } else {  // S tokens' 4 vectors loaded at once into registers
    for (int t0 = 0; t0 < run; t0 += S) {
      uint4 r[S][4];
#pragma unroll
      for (int u = 0; u < S; ++u) {
        const char* q = addr(min(t0 + u, run - 1));
#pragma unroll
        for (int j = 0; j < 4; ++j) r[u][j] = __ldcg(reinterpret_cast<const uint4*>(q + j * 128));
      }
#pragma unroll
      for (int u = 0; u < S; ++u)
#pragma unroll
        for (int j = 0; j < 4; ++j) fold ^= r[u][j].x ^ r[u][j].w;
    }
  }
  if (fold == 0x9e3779b9u) *sink = fold;
}

__device__ __forceinline__ unsigned lds_fold(unsigned at) {
  unsigned a, b, c, d;
  asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(at));
  return a ^ b ^ c ^ d;
}
template <int S, int MODE>
__global__ void cp_read(const char* __restrict__ data, int tokens, unsigned* sink) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int region = (blockIdx.x / 4) * gridDim.z + blockIdx.z;
  const int groups = blockDim.x / 8, group = threadIdx.x / 8, rank = threadIdx.x % 8;
  const int run = tokens / groups;
  const int first_token = region * tokens + group * run;
  auto addr = [&](int t) {
    const int tok = first_token + t;
    const unsigned page = (static_cast<unsigned>(tok / 16) * 7919u) % 16384u;
    return data + size_t(page) * 8192 + (tok % 16) * 512 + rank * 16;
  };
  const unsigned mine = static_cast<unsigned>(__cvta_generic_to_shared(smem)) + (threadIdx.x / 8) * 512 * S + (threadIdx.x % 8) * 16;
  unsigned fold = 0;
  uint4 ring[S][2];
  auto issue = [&](int t, int st) {
    if (t < run) {
      const char* q = addr(t);
      cp16(mine + st * 512 + 0, q);
      cp16(mine + st * 512 + 128, q + 128);
      if (MODE == 3) {
        ring[st][0] = __ldcg(reinterpret_cast<const uint4*>(q + 256));
        ring[st][1] = __ldcg(reinterpret_cast<const uint4*>(q + 384));
      } else {
        cp16(mine + st * 512 + 256, q + 256);
        cp16(mine + st * 512 + 384, q + 384);
      }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
#pragma unroll
  for (int t = 0; t < S - 1; ++t) issue(t, t);
  for (int t0 = 0; t0 < run; t0 += S) {
#pragma unroll
    for (int st = 0; st < S; ++st) {
      const int t = t0 + st;
      issue(t + S - 1, (st + S - 1) % S);
      asm volatile("cp.async.wait_group %0;\n" ::"n"(S - 1) : "memory");
      if (t < run) {
        const unsigned at = mine + st * 512;
        if (MODE != 2) fold ^= lds_fold(at) ^ lds_fold(at + 128);
        if (MODE == 0) fold ^= lds_fold(at + 256) ^ lds_fold(at + 384);
        if (MODE == 3) fold ^= ring[st][0].x ^ ring[st][0].w ^ ring[st][1].y ^ ring[st][1].z;
      }
    }
  }
  if (fold == 0x9e3779b9u) *sink = fold;
}

__global__ void flush_read(const uint4* d, size_t n, unsigned* sink) {
  unsigned f = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) { uint4 v = __ldcg(d + i); f ^= v.x ^ v.w; }
  if (f == 0x9e3779b9u) *sink = f;
}

// Median of 21 timed launches of \p launch (one warm-up), the L2 flushed before each.
template <class Launch>
double time_it(Launch launch, unsigned* sink, const uint4* fl, size_t fln) {
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int i = 0; i < 22; ++i) {
    flush_read<<<132 * 4, 512>>>(fl, fln, sink);
    CK(cudaEventRecord(a));
    launch();
    CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b)); CK(cudaGetLastError());
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); if (i) t.push_back(ms * 1e3);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Pattern sweep: rd<S, CP> on splits x threads programs (4 readers a region).
template <int S, bool CP>
double time_rd(const char* data, unsigned* sink, const uint4* fl, size_t fln, int threads, int splits, unsigned mult, int pattern) {
  const int smem = CP ? threads * 64 * S : 0;
  CK(cudaFuncSetAttribute(rd<S, CP>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  return time_it([&] { rd<S, CP><<<dim3(32, 1, splits), threads, smem>>>(data, 32768 / splits, mult, sink, pattern); }, sink, fl, fln);
}

// Read-back sweep: cp_read<S, MODE>, 512 threads, 4 splits.
template <int S, int MODE>
double time_mode(const char* data, unsigned* sink, const uint4* fl, size_t fln) {
  const int threads = 512, smem = threads * 64 * S;
  CK(cudaFuncSetAttribute(cp_read<S, MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  return time_it([&] { cp_read<S, MODE><<<dim3(32, 1, 4), threads, smem>>>(data, 8192, sink); }, sink, fl, fln);
}

int main() {
  char* data; unsigned* sink; uint4* fl;
  const size_t bytes = size_t{32} * 8192 * 512, fln = (size_t{120} << 20) / 16;
  CK(cudaMalloc(&data, bytes)); CK(cudaMalloc(&sink, 4)); CK(cudaMalloc(&fl, fln * 16));
  CK(cudaMemset(data, 0x5a, bytes)); CK(cudaMemset(fl, 0x11, fln * 16));
  std::printf("step 07 long-single data path, 512 threads, us (median of 21)\n");
  std::printf("mode                                   S=3     S=4     S=6\n");
  const char* modes[] = {"0 K,V cp.async, both read back", "1 K,V cp.async, K read back", "2 K,V cp.async, none read back", "3 K cp.async + V ld.cg ring"};
  for (int rep = 0; rep < 2; ++rep) {
    std::printf("%-36s %7.2f %7.2f %7.2f\n", modes[0], time_mode<3, 0>(data, sink, fl, fln), time_mode<4, 0>(data, sink, fl, fln), time_mode<6, 0>(data, sink, fl, fln));
    std::printf("%-36s %7.2f %7.2f %7.2f\n", modes[1], time_mode<3, 1>(data, sink, fl, fln), time_mode<4, 1>(data, sink, fl, fln), time_mode<6, 1>(data, sink, fl, fln));
    std::printf("%-36s %7.2f %7.2f %7.2f\n", modes[2], time_mode<3, 2>(data, sink, fl, fln), time_mode<4, 2>(data, sink, fl, fln), time_mode<6, 2>(data, sink, fl, fln));
    std::printf("%-36s %7.2f %7.2f %7.2f\n", modes[3], time_mode<3, 3>(data, sink, fl, fln), time_mode<4, 3>(data, sink, fl, fln), time_mode<6, 3>(data, sink, fl, fln));
    std::fflush(stdout);
  }
  std::printf("4 readers a region, 134 MB, cp.async, scattered pages; us, median of 21\n");
  std::printf("%-40s %7s %7s %8s %8s %8s\n", "pattern", "threads", "splits", "S=3", "S=4", "S=6");
  const char* names[] = {"0 group streams (online_attend)", "1 warp's groups on adjacent tokens", "2 program's groups on adjacent tokens"};
  for (int rep = 0; rep < 2; ++rep)
  for (int pattern : {0, 1, 2})
    for (int threads : {512, 256}) {
      const int splits = 2048 / threads;
      std::printf("%-40s %7d %7d %8.2f %8.2f %8.2f\n", names[pattern], threads, splits,
                  time_rd<3, true>(data, sink, fl, fln, threads, splits, 7919u, pattern),
                  time_rd<4, true>(data, sink, fl, fln, threads, splits, 7919u, pattern),
                  time_rd<6, true>(data, sink, fl, fln, threads, splits, 7919u, pattern));
      std::fflush(stdout);
    }
  return 0;
}
