// The copy floor of step 07's long-single bytes with Hopper's bulk copies (run v50): does a
// program that fetches whole pages with cp.async.bulk (the TMA engine, one thread issuing, an
// mbarrier counting the bytes) take in the four query heads' repeated reads faster than the
// per-lane cp.async of v46 (40-41 us, against 34 us for the same bytes read once)?
//
// The cache as the library stores it (HND): a page holds 16 tokens of 8 KV heads, a head's 16
// rows of 256 B contiguous (4 KB of K, 4 KB of V in the other pool). One sequence of 32768
// tokens = 2048 pages, scattered over the pool by a permutation, as a block table scatters them.
// A region is a (KV head, split); `readers` programs adjacent in launch order read each region
// (4: step 07, the four query heads of a KV head; 1: step 08, each region read once).
// Build: nvcc -O3 -std=c++17 -arch=sm_90 v50-bulk-copy-floor.cu
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)

constexpr int kThreads = 512, kKvHeads = 8, kPageBytes = 4096, kTokens = 32768, kPages = kTokens / 16;

// 0: the library's HND pages (a page holds all 8 KV heads); 1: a pool a KV head (a head's pages
// apart from the others'), to see whether the eight heads' programs meeting in the same pages matter.
__device__ int g_head_major = 0;
__device__ __forceinline__ size_t chunk(int page, int kvh) {
  return g_head_major ? size_t(kvh) * kPages + page : size_t(page) * kKvHeads + kvh;
}
__device__ __forceinline__ unsigned sa(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ unsigned lds_fold(unsigned at) {
  unsigned a, b, c, d;
  asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(at));
  return a ^ b ^ c ^ d;
}

// Bulk copies: S stages of P pages (P x 8 KB a stage); thread 0 issues a stage's 2P copies of
// 4 KB onto the stage's mbarrier; every thread waits on it, reads its share back, and the
// program's barrier at the end of a tile frees the slot of the stage issued next.
template <int S, int P>
__global__ void __launch_bounds__(kThreads) bulk(const char* __restrict__ K, const char* __restrict__ V,
                                                 const int* __restrict__ table, int splits, int readers, int stagger, unsigned* sink) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) unsigned long long full[S];
  const int region = blockIdx.x / readers, kvh = region % kKvHeads, split = region / kKvHeads;
  const int pages = kPages / splits, tiles = pages / P;
  __shared__ int tab[kPages / 4];  // the region's block-table slice, read once: the loop's look-ups stay on chip
  for (int i = threadIdx.x; i < pages; i += kThreads) tab[i] = table[split * pages + i];
  constexpr unsigned kStage = P * 2 * kPageBytes;
  const unsigned base = sa(smem);
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(sa(&full[s])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const int shift = (blockIdx.x % readers) * stagger;  // reader r starts at tile r * stagger (ahead of reader 0), wrapping
  auto issue = [&](int t) {
    const int st = t % S, tt = (t + shift) % tiles;
    const unsigned bar = sa(&full[st]);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(kStage) : "memory");
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const size_t off = chunk(tab[tt * P + p], kvh) * kPageBytes;
      const unsigned dst = base + st * kStage + p * 2 * kPageBytes;
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                   ::"r"(dst), "l"(K + off), "r"(kPageBytes), "r"(bar) : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                   ::"r"(dst + kPageBytes), "l"(V + off), "r"(kPageBytes), "r"(bar) : "memory");
    }
  };
  if (threadIdx.x == 0)
    for (int t = 0; t < S - 1 && t < tiles; ++t) issue(t);
  unsigned fold = 0;
  for (int t = 0; t < tiles; ++t) {
    if (threadIdx.x == 0 && t + S - 1 < tiles) issue(t + S - 1);
    const unsigned bar = sa(&full[t % S]), parity = (t / S) & 1;
    asm volatile("{\n .reg .pred done;\n WAIT%=:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n @!done bra WAIT%=;\n}\n"
                 ::"r"(bar), "r"(parity) : "memory");
    const unsigned at = base + (t % S) * kStage;
#pragma unroll
    for (unsigned v = threadIdx.x * 16; v < kStage; v += kThreads * 16) fold ^= lds_fold(at + v);
    __syncthreads();
  }
  if (fold == 0x9e3779b9u) *sink = fold;
}

// Per-lane copies as the kernels do them (v46's pattern 2 in this layout): the program's 64
// groups of 8 lanes take 64 adjacent tokens a tile (4 pages); a lane copies 16 B from each half
// of the token's K row and of its V row (a group's 8 lanes cover 128 contiguous bytes an
// instruction) with cp.async.cg into its own slots (a warp's 32 lanes on adjacent 16 B: no bank conflicts), S
// stages, and reads them back.
// STREAMS: each group streams its own run of tokens/64 adjacent tokens instead (v46's pattern 0,
// as the kernels' online_attend does).
// LIB_SLOTS: a thread's slots laid out as online_attend's ([thread / 8][stage][vector][thread % 8],
// 512 B a stage for 8 threads) instead of a warp's 32 lanes side by side.
template <int S, bool STREAMS, bool LIB_SLOTS = false>
__global__ void __launch_bounds__(kThreads) lanes(const char* __restrict__ K, const char* __restrict__ V,
                                                  const int* __restrict__ table, int splits, int readers, unsigned* sink) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int region = blockIdx.x / readers, kvh = region % kKvHeads, split = region / kKvHeads;
  const int tokens = kTokens / splits, tiles = tokens / 64;
  __shared__ int tab[kPages / 4];  // as in bulk
  for (int i = threadIdx.x; i < tokens / 16; i += kThreads) tab[i] = table[split * (tokens / 16) + i];
  __syncthreads();
  const int group = threadIdx.x / 8, rank = threadIdx.x % 8;
  // vector j of stage st at mine + st * kStep + j * kVecStep
  const unsigned mine = LIB_SLOTS ? sa(smem) + (threadIdx.x / 8) * S * 512 + (threadIdx.x % 8) * 16 : sa(smem) + threadIdx.x * 16;
  constexpr unsigned kStep = LIB_SLOTS ? 512 : 4 * kThreads * 16, kVecStep = LIB_SLOTS ? 128 : kThreads * 16;
  auto issue = [&](int t) {
    if (t < tiles) {
      const int tok = STREAMS ? group * tiles + t : t * 64 + group;
      const size_t off = (chunk(tab[tok / 16], kvh) * 16 + tok % 16) * 256 + rank * 16;
      const unsigned dst = mine + (t % S) * kStep;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(K + off) : "memory");
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst + kVecStep), "l"(K + off + 128) : "memory");
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst + 2 * kVecStep), "l"(V + off) : "memory");
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst + 3 * kVecStep), "l"(V + off + 128) : "memory");
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
  for (int t = 0; t < S - 1; ++t) issue(t);
  unsigned fold = 0;
  for (int t = 0; t < tiles; ++t) {
    issue(t + S - 1);
    asm volatile("cp.async.wait_group %0;\n" ::"n"(S - 1) : "memory");
    const unsigned at = mine + (t % S) * kStep;
    fold ^= lds_fold(at) ^ lds_fold(at + kVecStep) ^ lds_fold(at + 2 * kVecStep) ^ lds_fold(at + 3 * kVecStep);
  }
  if (fold == 0x9e3779b9u) *sink = fold;
}

__global__ void flush_read(const uint4* d, size_t n, unsigned* sink) {
  unsigned f = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) { uint4 v = __ldcg(d + i); f ^= v.x ^ v.w; }
  if (f == 0x9e3779b9u) *sink = f;
}

struct Bufs { const char *K, *V; const int* table; unsigned* sink; const uint4* fl; size_t fln; };

// Median of 21 timed launches (one warm-up), the L2 flushed by a 120 MB read before each.
template <class Launch>
double time_it(const Bufs& b, Launch launch) {
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  std::vector<double> t;
  for (int i = 0; i < 22; ++i) {
    flush_read<<<132 * 4, 512>>>(b.fl, b.fln, b.sink);
    CK(cudaEventRecord(e0));
    launch();
    CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1)); CK(cudaGetLastError());
    float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (i) t.push_back(ms * 1e3);
  }
  CK(cudaEventDestroy(e0)); CK(cudaEventDestroy(e1));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// readers 4: 8 KV heads x 4 splits, 128 programs (step 07); readers 1: 8 x 16 splits (step 08).
template <int S, int P>
double time_bulk(const Bufs& b, int readers, int stagger = 0) {
  const int splits = readers == 4 ? 4 : 16, smem = S * P * 2 * kPageBytes;
  if (smem > 227 * 1024) return 0;
  CK(cudaFuncSetAttribute(bulk<S, P>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  return time_it(b, [&] { bulk<S, P><<<kKvHeads * splits * readers, kThreads, smem>>>(b.K, b.V, b.table, splits, readers, stagger, b.sink); });
}
template <int S, bool STREAMS = false, bool LIB_SLOTS = false>
double time_lanes(const Bufs& b, int readers) {
  const int splits = readers == 4 ? 4 : 16, smem = S * kThreads * 64;
  CK(cudaFuncSetAttribute(lanes<S, STREAMS, LIB_SLOTS>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  return time_it(b, [&] { lanes<S, STREAMS, LIB_SLOTS><<<kKvHeads * splits * readers, kThreads, smem>>>(b.K, b.V, b.table, splits, readers, b.sink); });
}

int main() {
  const size_t pool = size_t(kPages) * kKvHeads * kPageBytes, fln = (size_t{120} << 20) / 16;
  char *K, *V; int* table; unsigned* sink; uint4* fl;
  CK(cudaMalloc(&K, pool)); CK(cudaMalloc(&V, pool)); CK(cudaMalloc(&table, kPages * sizeof(int)));
  CK(cudaMalloc(&sink, 4)); CK(cudaMalloc(&fl, fln * 16));
  CK(cudaMemset(K, 0x5a, pool)); CK(cudaMemset(V, 0x3c, pool)); CK(cudaMemset(fl, 0x11, fln * 16));
  std::vector<int> pages(kPages);
  for (int i = 0; i < kPages; ++i) pages[i] = int((unsigned(i) * 7919u) % unsigned(kPages));  // 7919 is prime: a permutation
  CK(cudaMemcpy(table, pages.data(), pages.size() * sizeof(int), cudaMemcpyHostToDevice));
  const Bufs b{K, V, table, sink, fl, fln};
  for (int head_major : {0, 1}) {
  CK(cudaMemcpyToSymbol(g_head_major, &head_major, sizeof(int)));
  std::printf("\n### %s\n", head_major ? "a pool a KV head (not the library's layout)" : "HND pages, as the library stores them");
  std::printf("long-single's 134 MB (32768 tokens, 8 KV heads, bf16, head dim 128, pages of 16 scattered); 512 threads,\n");
  std::printf("one program an SM; us, median of 21, L2 flushed before each\n");
  std::printf("%-44s %7s %8s %8s %8s %8s %8s\n", "copies", "readers", "S=2", "S=3", "S=4", "S=5", "S=6");
  for (int rep = 0; rep < 1; ++rep)
    for (int readers : {4, 1}) {
      std::printf("%-44s %7d %8.2f %8.2f %8.2f %8.2f %8.2f\n", "cp.async 16 B a lane, 64 tokens a tile", readers,
                  time_lanes<2>(b, readers), time_lanes<3>(b, readers), time_lanes<4>(b, readers), time_lanes<5>(b, readers),
                  time_lanes<6>(b, readers));
      std::printf("%-44s %7d %8.2f %8.2f %8.2f %8.2f %8.2f\n", "cp.async 16 B a lane, group streams", readers,
                  time_lanes<2, true>(b, readers), time_lanes<3, true>(b, readers), time_lanes<4, true>(b, readers),
                  time_lanes<5, true>(b, readers), time_lanes<6, true>(b, readers));
      std::printf("%-44s %7d %8.2f %8.2f %8.2f %8.2f %8.2f\n", "cp.async, group streams, online_attend's slots", readers,
                  time_lanes<2, true, true>(b, readers), time_lanes<3, true, true>(b, readers), time_lanes<4, true, true>(b, readers),
                  time_lanes<5, true, true>(b, readers), time_lanes<6, true, true>(b, readers));
      std::printf("%-44s %7d %8.2f %8.2f %8.2f %8.2f %8.2f\n", "bulk 4 KB, 2 pages a stage (16 KB)", readers,
                  time_bulk<2, 2>(b, readers), time_bulk<3, 2>(b, readers), time_bulk<4, 2>(b, readers), time_bulk<5, 2>(b, readers),
                  time_bulk<6, 2>(b, readers));
      std::printf("%-44s %7d %8.2f %8.2f %8.2f %8.2f %8.2f\n", "bulk 4 KB, 4 pages a stage (32 KB)", readers,
                  time_bulk<2, 4>(b, readers), time_bulk<3, 4>(b, readers), time_bulk<4, 4>(b, readers), time_bulk<5, 4>(b, readers),
                  time_bulk<6, 4>(b, readers));
      std::printf("%-44s %7d %8.2f %8.2f %8.2f %8.2f %8.2f\n", "bulk 4 KB, 1 page a stage (8 KB)", readers,
                  time_bulk<2, 1>(b, readers), time_bulk<4, 1>(b, readers), time_bulk<6, 1>(b, readers), time_bulk<8, 1>(b, readers),
                  time_bulk<12, 1>(b, readers));
      std::fflush(stdout);
    }
  std::printf("(the 1-page row's columns are S = 2, 4, 6, 8, 12)\n");
  std::printf("bulk, 4 pages a stage, 4 readers, reader r starting r x stagger tiles (of 32 KB) later\n");
  for (int stagger : {0, 1, 2, 4, 8, 16, 32})
    std::printf("stagger %2d: S=3 %8.2f  S=4 %8.2f  S=6 %8.2f\n", stagger, time_bulk<3, 4>(b, 4, stagger),
                time_bulk<4, 4>(b, 4, stagger), time_bulk<6, 4>(b, 4, stagger));
  }
  return 0;
}
