// The GPU runtime of a CUDA build: device discovery, memory, events and the bandwidth roof.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "common/cuda/runtime.h"
#include "common/error.h"

#ifndef PAGEDATTN_CUDA_ARCHITECTURES
#define PAGEDATTN_CUDA_ARCHITECTURES "?"
#endif

namespace pa::gpu {
namespace {

void check(cudaError_t status, std::string_view what) {
  if (status != cudaSuccess)
    throw CudaError(cat(what, ": ", cudaGetErrorName(status), " (", cudaGetErrorString(status), ")"));
}

// [roof]
/// The roof: every thread streams 16-byte loads over the buffer, four independent loads in
/// flight per iteration, and folds them into one word so the loads cannot be optimised away.
__global__ void stream_read(const uint4* __restrict__ data, std::size_t count, unsigned* sink) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  unsigned fold = 0;
  for (; i + 3 * stride < count; i += 4 * stride) {
    const uint4 a = data[i];
    const uint4 b = data[i + stride];
    const uint4 c = data[i + 2 * stride];
    const uint4 d = data[i + 3 * stride];
    fold ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < count; i += stride) {
    const uint4 a = data[i];
    fold ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (fold == 0x9e3779b9u) *sink = fold;  // practically never true; keeps the loads alive
}
// [roof]

// [bare_read]
/// A bare read: program b reads chunk b / readers (chunk_vecs 16-byte vectors), so `readers`
/// programs adjacent in launch order read each chunk, and nothing else happens. This is the
/// access pattern of a split kernel without its arithmetic: readers = 1 for one that reads a KV
/// head's split once (step 08), the group size for one that reads it once per query head (step
/// 07, whose grid puts a group's query heads next to each other). The loads bypass L1
/// (`ld.global.cg`), as the kernels' asynchronous copies do.
__global__ void bare_read(const uint4* __restrict__ data, int chunk_vecs, int readers, unsigned* sink) {
  const uint4* chunk = data + static_cast<std::size_t>(blockIdx.x / readers) * chunk_vecs;
  unsigned fold = 0;
  int i = static_cast<int>(threadIdx.x);
  const int stride = static_cast<int>(blockDim.x);
  for (; i + 3 * stride < chunk_vecs; i += 4 * stride) {
    const uint4 a = __ldcg(chunk + i);
    const uint4 b = __ldcg(chunk + i + stride);
    const uint4 c = __ldcg(chunk + i + 2 * stride);
    const uint4 d = __ldcg(chunk + i + 3 * stride);
    fold ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < chunk_vecs; i += stride) {
    const uint4 a = __ldcg(chunk + i);
    fold ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (fold == 0x9e3779b9u) *sink = fold;  // practically never true; keeps the loads alive
}
// [bare_read]

__global__ void probe() {}

std::string compute_reason() {
  int count = 0;  // cudaGetDeviceCount leaves it unset when there is no driver
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess)  // no driver at all reads as "driver version is insufficient"
    return cat("no usable CUDA device: cudaGetDeviceCount failed (", cudaGetErrorString(status),
               "): no GPU driver here, or one older than this CUDA runtime");
  if (count == 0) return "no CUDA device (cudaGetDeviceCount found 0)";
  cudaFuncAttributes attributes{};
  const cudaError_t image = cudaFuncGetAttributes(&attributes, probe);
  if (image != cudaSuccess) {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    return cat("no kernel image for ", prop.name, " (sm_", prop.major, prop.minor,
               "): this build targets CUDA architectures ", PAGEDATTN_CUDA_ARCHITECTURES, " (",
               cudaGetErrorString(image), ")");
  }
  return "";
}

}  // namespace

const std::string& unavailable_reason() {
  static const std::string reason = compute_reason();
  return reason;
}

const DeviceInfo& device_info() {
  static const DeviceInfo info = [] {
    if (!available()) throw CudaError(unavailable_reason());
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    DeviceInfo out;
    out.name = prop.name;
    out.compute_capability_major = prop.major;
    out.compute_capability_minor = prop.minor;
    cudaDriverGetVersion(&out.driver_version);
    cudaRuntimeGetVersion(&out.runtime_version);
    int value = 0;
    // CUDA 13 dropped cudaDeviceProp::memoryClockRate and clockRate: read the attributes.
    if (cudaDeviceGetAttribute(&value, cudaDevAttrClockRate, device) == cudaSuccess) out.sm_clock_mhz = value / 1000.0;
    if (cudaDeviceGetAttribute(&value, cudaDevAttrMemoryClockRate, device) == cudaSuccess)
      out.memory_clock_mhz = value / 1000.0;
    if (cudaDeviceGetAttribute(&value, cudaDevAttrGlobalMemoryBusWidth, device) == cudaSuccess)
      out.memory_bus_bits = value;
    cudaGetLastError();  // an unreadable attribute is not an error worth keeping
    out.total_memory = prop.totalGlobalMem;
    DeviceLimits& l = out.limits;
    l.name = prop.name;
    l.sm_count = prop.multiProcessorCount;
    l.max_threads_per_block = prop.maxThreadsPerBlock;
    l.max_blocks_per_sm = prop.maxBlocksPerMultiProcessor;
    l.max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
    l.shared_per_block = prop.sharedMemPerBlock;
    l.shared_per_block_optin = prop.sharedMemPerBlockOptin;
    l.shared_per_sm = prop.sharedMemPerMultiprocessor;
    l.l2_bytes = static_cast<std::size_t>(prop.l2CacheSize);
    // HBM is double data rate: bytes/s = 2 * clock * bus width / 8.
    l.datasheet_gbps = 2.0 * out.memory_clock_mhz * 1e6 * out.memory_bus_bits / 8.0 / 1e9;
    return out;
  }();
  return info;
}

Buffer::Buffer(std::size_t bytes, std::string_view what) : bytes_(bytes), what_(what) {
  if (bytes == 0) return;
  const cudaError_t status = cudaMalloc(&data_, bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();
    std::size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    data_ = nullptr;
    throw CudaError(cat("cudaMalloc of ", bytes, " bytes for ", what, " failed: ", cudaGetErrorString(status),
                        " (", free_bytes, " of ", total_bytes, " bytes free)"));
  }
}
Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)), what_(std::move(other.what_)) {}
Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    what_ = std::move(other.what_);
  }
  return *this;
}
Buffer::~Buffer() {
  if (data_) cudaFree(data_);
}
void Buffer::upload(const void* host, std::size_t bytes, std::size_t offset) {
  if (offset > bytes_ || bytes > bytes_ - offset)
    throw CudaError(cat("upload of ", bytes, " bytes at byte ", offset, " into ", what_, " of ", bytes_, " bytes"));
  if (bytes)
    check(cudaMemcpy(static_cast<unsigned char*>(data_) + offset, host, bytes, cudaMemcpyHostToDevice),
          cat("upload to ", what_));
}
void Buffer::download(void* host, std::size_t bytes) const {
  if (bytes > bytes_) throw CudaError(cat("download of ", bytes, " bytes from ", what_, " of ", bytes_, " bytes"));
  if (bytes) check(cudaMemcpy(host, data_, bytes, cudaMemcpyDeviceToHost), cat("download from ", what_));
}
void Buffer::fill(unsigned char byte) {
  if (bytes_) check(cudaMemset(data_, byte, bytes_), cat("fill of ", what_));
}

Event::Event() {
  cudaEvent_t event = nullptr;
  check(cudaEventCreate(&event), "cudaEventCreate");
  event_ = event;
}
Event::~Event() {
  if (event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}
void Event::record(void* stream) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream)), "cudaEventRecord");
}
float Event::elapsed_ms(const Event& start, const Event& end) {
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(end.event_)), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.event_), static_cast<cudaEvent_t>(end.event_)),
        "cudaEventElapsedTime");
  return ms;
}

void synchronize(std::string_view what) {
  check(cudaDeviceSynchronize(), cat("after ", what));
  check(cudaGetLastError(), cat("after ", what));
}

namespace {
/// The checked mode's kernel (find_table_fault): program `seq` reads context_lens[seq] and,
/// when it is in range, the entries of its row that hold the context, as validate_tables does.
/// A bad value is recorded by its place in validate_tables's order,
/// key = seq * (max_blocks_per_seq + 1) + (0 for the length, entry + 1 for an entry), as
/// ~key with atomicMax into found[0], so the largest ~key left is the first fault and 0 means
/// none (one memset of 0 prepares both words). found[1] gets the sum of the good lengths, for
/// the total_context_len check.
__global__ void check_tables(const std::int32_t* block_tables, const std::int32_t* context_lens,
                             int max_blocks_per_seq, int block_size, int max_context_len, std::int64_t num_blocks,
                             unsigned long long* found) {
  const int seq = static_cast<int>(blockIdx.x);
  const std::int32_t len = context_lens[seq];
  const unsigned long long row_key =
      static_cast<unsigned long long>(seq) * (static_cast<unsigned long long>(max_blocks_per_seq) + 1);
  if (len < 0 || len > max_context_len) {
    if (threadIdx.x == 0) atomicMax(&found[0], ~row_key);
    return;
  }
  if (threadIdx.x == 0) atomicAdd(&found[1], static_cast<unsigned long long>(len));
  const std::int64_t used = (std::int64_t{len} + block_size - 1) / block_size;  // <= max_blocks_per_seq
  const std::int32_t* row = block_tables + static_cast<std::int64_t>(seq) * max_blocks_per_seq;
  for (std::int64_t entry = threadIdx.x; entry < used; entry += blockDim.x) {
    const std::int32_t page = row[entry];
    if (page < 0 || page >= num_blocks) {
      atomicMax(&found[0], ~(row_key + 1 + static_cast<unsigned long long>(entry)));
      return;  // a later entry of this thread cannot come first
    }
  }
}

/// One int32 of device memory, read back (the value behind a fault: the error path only).
std::int32_t read_int(const std::int32_t* device_value) {
  std::int32_t value = 0;
  check(cudaMemcpy(&value, device_value, sizeof value, cudaMemcpyDeviceToHost), "checked mode: reading a bad value");
  return value;
}
}  // namespace

// Why a kernel and not a host copy of the tables: either way the answer must be on the host
// before the decode launch (a bad page must be refused, not read), so both wait for the
// stream. A host copy moves the lengths and then the tables over PCIe on every call, two round
// trips and a transfer that grows with the batch (64 sequences of 8192 tokens in pages of 16:
// 128 KB), and then loops over them on the CPU; the kernel reads them at device bandwidth and
// sends back 16 bytes, so its cost is one tiny launch and one round trip whatever the batch
// (the benchmarks' `/checked` rows measure it). The buffers are kept for the process (one device per process, as
// everywhere in pagedattn); a mutex keeps two host threads from sharing them at once.
TableFault find_table_fault(const DecodeView& view, void* stream) {
  const DecodeProblem& p = view.problem;
  if (p.num_seqs == 0) return {};
  struct Found {
    Buffer device{2 * sizeof(unsigned long long), "checked mode result"};
    unsigned long long* host = nullptr;  // pinned: the copy back goes without staging
    Found() { check(cudaMallocHost(&host, 2 * sizeof(unsigned long long)), "cudaMallocHost for the checked mode"); }
    ~Found() { cudaFreeHost(host); }
  };
  static Found found;
  static std::mutex in_use;
  const std::lock_guard<std::mutex> lock(in_use);
  const auto s = static_cast<cudaStream_t>(stream);
  auto* words = static_cast<unsigned long long*>(found.device.data());
  check(cudaMemsetAsync(words, 0, 2 * sizeof(unsigned long long), s), "checked mode: cudaMemsetAsync");
  check_tables<<<static_cast<unsigned>(p.num_seqs), 128, 0, s>>>(view.block_tables, view.context_lens,
                                                                p.max_blocks_per_seq, p.block_size,
                                                                p.max_context_len, p.num_blocks, words);
  check(cudaGetLastError(), "launch of the checked mode's check_tables");
  check(cudaMemcpyAsync(found.host, words, 2 * sizeof(unsigned long long), cudaMemcpyDeviceToHost, s),
        "checked mode: cudaMemcpyAsync");
  check(cudaStreamSynchronize(s), "checked mode: after check_tables");
  const unsigned long long first = found.host[0];
  const auto total = static_cast<std::int64_t>(found.host[1]);
  if (first == 0) {
    if (p.total_context_len != 0 && p.total_context_len != total) return {TableFault::Kind::total, 0, 0, total, 0};
    return {};
  }
  const unsigned long long key = ~first;
  const unsigned long long row = static_cast<unsigned long long>(p.max_blocks_per_seq) + 1;
  const int seq = static_cast<int>(key / row);
  const std::int32_t len = read_int(view.context_lens + seq);
  if (key % row == 0) return {TableFault::Kind::context_len, seq, 0, len, len};
  const auto entry = static_cast<std::int64_t>(key % row) - 1;
  const std::int32_t page = read_int(view.block_tables + static_cast<std::int64_t>(seq) * p.max_blocks_per_seq + entry);
  return {TableFault::Kind::block_table, seq, entry, page, len};
}

void flush_l2() {
  // Read, not write: a memset leaves the L2 full of dirty lines, and the timed kernel then pays
  // for writing them back to DRAM as its reads evict them (measured on the H200: a bare read of
  // 134 MB took 41.7 us after a memset flush, 32.7 us after this one; docs/results/README.md).
  static const Buffer clean = [] {
    Buffer buffer(2 * std::max<std::size_t>(device_info().limits.l2_bytes, 1 << 20), "L2 flush buffer");
    buffer.fill(0x11);
    return buffer;
  }();
  static const Buffer sink(sizeof(unsigned), "L2 flush sink");
  stream_read<<<device_info().limits.sm_count * 4, 512>>>(static_cast<const uint4*>(clean.data()),
                                                          clean.size() / sizeof(uint4),
                                                          static_cast<unsigned*>(sink.data()));
  check(cudaGetLastError(), "launch of the L2 flush read");
}

namespace {
/// The median time of \p runs calls of \p launch (CUDA events) after one warm-up call, with the
/// L2 flushed outside the timed region before each when \p flush.
template <class Launch>
double median_ms(Launch&& launch, int runs, bool flush, const char* what) {
  launch();
  synchronize(cat(what, " warm-up"));
  std::vector<float> times;
  Event start, stop;
  for (int i = 0; i < runs; ++i) {
    if (flush) flush_l2();
    start.record();
    launch();
    stop.record();
    times.push_back(Event::elapsed_ms(start, stop));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}
}  // namespace

double measure_roof_gbps(std::size_t bytes, int runs) {
  const DeviceInfo& info = device_info();
  Buffer data(bytes, "roof buffer");
  Buffer sink(sizeof(unsigned), "roof sink");
  data.fill(0x5a);
  const std::size_t count = bytes / sizeof(uint4);
  const int threads = 512;
  const int blocks = info.limits.sm_count * (info.limits.max_threads_per_sm / threads);
  auto run = [&] {
    stream_read<<<blocks, threads>>>(static_cast<const uint4*>(data.data()), count, static_cast<unsigned*>(sink.data()));
    check(cudaGetLastError(), "launch of stream_read");
  };
  const double ms = median_ms(run, runs, false, "stream_read");
  return static_cast<double>(count * sizeof(uint4)) / (ms * 1e-3) / 1e9;
}

double time_bare_read_ms(std::size_t bytes, std::size_t chunk_bytes, int readers, int threads, int runs) {
  PA_REQUIRE(chunk_bytes > 0 && chunk_bytes % sizeof(uint4) == 0 && chunk_bytes / sizeof(uint4) <= INT32_MAX,
             "time_bare_read_ms", "chunk_bytes", "a positive multiple of 16 bytes, under 2^31 vectors", chunk_bytes);
  PA_REQUIRE(readers >= 1, "time_bare_read_ms", "readers", ">= 1", readers);
  PA_REQUIRE(threads >= 32 && threads <= 1024 && threads % 32 == 0, "time_bare_read_ms", "threads",
             "a multiple of 32 in [32, 1024]", threads);
  PA_REQUIRE(runs >= 1, "time_bare_read_ms", "runs", ">= 1", runs);
  const std::size_t chunks = (bytes + chunk_bytes - 1) / chunk_bytes;
  PA_REQUIRE(chunks * static_cast<std::size_t>(readers) <= INT32_MAX, "time_bare_read_ms", "bytes / chunk_bytes * readers",
             "under 2^31 programs", chunks * static_cast<std::size_t>(readers));
  Buffer data(chunks * chunk_bytes, "bare-read buffer");
  Buffer sink(sizeof(unsigned), "bare-read sink");
  data.fill(0x5a);
  const int chunk_vecs = static_cast<int>(chunk_bytes / sizeof(uint4));
  const auto blocks = static_cast<unsigned>(chunks * static_cast<std::size_t>(readers));
  auto run = [&] {
    bare_read<<<blocks, threads>>>(static_cast<const uint4*>(data.data()), chunk_vecs, readers,
                                   static_cast<unsigned*>(sink.data()));
    check(cudaGetLastError(), "launch of bare_read");
  };
  return median_ms(run, runs, true, "bare_read");  // L2 flushed, as before the kernels' timed launches
}

}  // namespace pa::gpu
