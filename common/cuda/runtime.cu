// The GPU runtime of a CUDA build: device discovery, memory, events and the bandwidth roof.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "common/cuda/overlapped_launch.h"
#include "common/cuda/runtime.h"
#include "common/error.h"

#ifndef PAGEDATTN_CUDA_ARCHITECTURES
#define PAGEDATTN_CUDA_ARCHITECTURES "?"
#endif

namespace pa::gpu {
namespace {

std::mutex lost_mutex;
std::string lost_to;  // the fault that lost the context (context_lost), first seen; guarded by lost_mutex

/// Whether \p status leaves the context unable to run anything more: CUDA's sticky errors, whose
/// documentation says the process must be terminated and relaunched.
bool loses_context(cudaError_t status) {
  switch (status) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}

/// The refusal of a call \p what after \p fault lost the context.
std::string refusal(std::string_view what, const std::string& fault) {
  return cat(what, ": refused: this process's CUDA context was lost to an earlier device fault (", fault,
             "); nothing more runs on the GPU until the process is restarted");
}

/// Throws the CudaError of a failed CUDA call: \p what and the error's name and text, recording
/// it where it loses the context (context_lost), or the refusal naming the earlier fault where the
/// context was lost already.
[[noreturn]] void raise_error(cudaError_t error, std::string_view what) {
  const std::string message = cat(what, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
  if (!loses_context(error)) throw CudaError(message);
  std::string fault;
  {
    const std::lock_guard<std::mutex> lock(lost_mutex);
    if (lost_to.empty()) lost_to = message;
    else fault = lost_to;
  }
  if (!fault.empty()) throw CudaError(refusal(what, fault));  // the old fault, seen again
  throw CudaError(cat(message, "; this process's CUDA context is lost: nothing more runs on the GPU until the process "
                               "is restarted"));
}

void check(cudaError_t status, std::string_view what) {
  if (status != cudaSuccess) raise_error(status, what);
}

/// Buffer::fill_words: \p word in each of \p count words (cudaMemset sets bytes only).
__global__ void fill_u32(std::uint32_t* words, std::size_t count, std::uint32_t word) {
  for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += std::size_t{gridDim.x} * blockDim.x)
    words[i] = word;
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

/// One thread counts its SM's cycles while the global timer advances \p span_ns: out[0] the
/// cycles, out[1] the nanoseconds (measure_sm_clock_mhz).
__global__ void clock_probe(unsigned long long* out, unsigned long long span_ns) {
  unsigned long long start = 0, now = 0;
  const long long first = clock64();
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < span_ns);
  const long long last = clock64();
  out[0] = static_cast<unsigned long long>(last - first);
  out[1] = now - start;
}

/// Does nothing: compute_reason asks whether the device has an image of it, and
/// launch_empty_kernel launches it.
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

std::string context_lost() {
  const std::lock_guard<std::mutex> lock(lost_mutex);
  return lost_to;
}

void require_context(std::string_view what) {
  const std::string fault = context_lost();
  if (!fault.empty()) throw CudaError(refusal(what, fault));
}

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
    out.ordinal = device;
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
    if (cudaDeviceGetAttribute(&value, cudaDevAttrPageableMemoryAccess, device) == cudaSuccess)
      out.pageable_memory_access = value != 0;
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

void require_process_device(std::string_view function) {
  const int process = device_info().ordinal;
  int current = 0;
  check(cudaGetDevice(&current), "cudaGetDevice");
  PA_REQUIRE(current == process, function, "the current CUDA device",
             cat("cuda:", process, " (this process's device, current at its first plan: one device a process)"),
             cat("cuda:", current));
}

namespace {
/// Why this process's device (\p info) cannot read or write at \p pointer, \p name's; empty
/// where it can.
std::string unreachable(const void* pointer, const char* name, const DeviceInfo& info) {
  cudaPointerAttributes attributes{};
  check(cudaPointerGetAttributes(&attributes, pointer), cat("cudaPointerGetAttributes of ", name));
  switch (attributes.type) {
    case cudaMemoryTypeUnregistered:
      if (info.pageable_memory_access) return "";
      return cat(pointer, ", pageable host memory (not from cudaMalloc, cudaMallocManaged or cudaHostAlloc), which ",
                 info.name, " cannot read");
    case cudaMemoryTypeHost:  // the kernels take the pointer as it is: it must be the device's view too
      if (attributes.devicePointer == pointer) return "";
      return cat(pointer, ", pinned host memory the device sees at another address (",
                 attributes.devicePointer, ": cudaHostGetDevicePointer)");
    case cudaMemoryTypeDevice:
      if (attributes.device == info.ordinal) return "";
      return cat(pointer, ", memory of cuda:", attributes.device);
    case cudaMemoryTypeManaged: return "";
  }
  return "";
}
}  // namespace

void require_device_pointers(const DecodeView& view, std::string_view function) {
  const DeviceInfo& info = device_info();
  const struct {
    const void* pointer;
    const char* name;
  } pointers[] = {{view.query, "query"},
                  {view.key_cache, "key_cache"},
                  {view.value_cache, "value_cache"},
                  {view.block_tables, "block_tables"},
                  {view.context_lens, "context_lens"},
                  {view.out, "out"},
                  {view.workspace, "workspace"}};
  for (const auto& [pointer, name] : pointers) {
    if (!pointer) continue;
    const std::string why = unreachable(pointer, name, info);
    PA_REQUIRE(why.empty(), function, name,
               cat("memory cuda:", info.ordinal,
                   " reads and writes (its device memory, managed memory, or pinned host memory at the same address)"),
               why);
  }
}

Buffer::Buffer(std::size_t bytes, std::string_view what) : bytes_(bytes), what_(what) {
  if (bytes == 0) return;
  require_context(cat("cudaMalloc of ", bytes, " bytes for ", what));
  const cudaError_t status = cudaMalloc(&data_, bytes);
  if (status != cudaSuccess && loses_context(status)) {
    data_ = nullptr;
    raise_error(status, cat("cudaMalloc of ", bytes, " bytes for ", what));
  }
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
  raise_table_fault();
}
void Buffer::fill(unsigned char byte) {
  if (bytes_) check(cudaMemset(data_, byte, bytes_), cat("fill of ", what_));
}
void Buffer::fill_words(std::uint32_t word) {
  const std::size_t words = bytes_ / sizeof word;
  if (words > 0) {
    const auto blocks = static_cast<unsigned>(std::min<std::size_t>((words + 255) / 256, std::size_t{4096}));
    fill_u32<<<blocks, 256>>>(static_cast<std::uint32_t*>(data_), words, word);
    check(cudaGetLastError(), cat("launch of the word fill of ", what_));
  }
  if (const std::size_t tail = bytes_ - words * sizeof word; tail > 0)  // the pattern's first bytes
    upload(&word, tail, words * sizeof word);
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
  raise_table_fault();
  float ms = 0;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.event_), static_cast<cudaEvent_t>(end.event_)),
        "cudaEventElapsedTime");
  return ms;
}

void synchronize(std::string_view what) {
  require_context(cat("after ", what));
  check(cudaDeviceSynchronize(), cat("after ", what));
  check(cudaGetLastError(), cat("after ", what));
  raise_table_fault();
}

// ----- checked mode --------------------------------------------------------------------------
//
// What it must be: before the decode kernel on the launch's stream, never a wait for the host,
// and capturable in a CUDA graph. When the host read the check's answer before launching (a
// copy back and a cudaStreamSynchronize), checked mode cost 18-28 us a call on the H200, +47% on
// small-batch (docs/results/nvidia-h200-20261202-7d22494521.json, the `/checked` rows). So the
// answer stays on the device, where the decode kernel needs it: a checked copy of the lengths,
// 0 for a faulty sequence; and a fault goes to mapped host memory, which the host reads when it
// waits anyway. With a second kernel to report the fault it still cost 4-11 us a call (+13-17%
// on small-batch and long-single), most of it that kernel's launch; so it is one kernel.
//
// What it reads: 4 bytes a sequence and 4 a used page. On the named workloads that is 128 KiB
// for gqa-batch (64 rows of 512 pages; the kernel then reads 2.1 GB of K and V), 24 KiB for
// ragged-skew, 8 KiB for long-single and small-batch. One program per sequence, 512 threads each
// with 4 loads in flight (the loop unrolled by 4, no branch between its loads): a row of up to
// 2048 pages (long-single's 32768 tokens in pages of 16) takes one round trip to memory, and the
// rows are checked on different SMs. One program for the whole batch would take gqa-batch's
// 32768 entries from one SM, 16 round trips.
//
// Which fault: the first in validate_tables's order, so every backend names the same one. That
// needs every sequence's answer: each program leaves its own in scratch (fault_at), and the
// last program to finish reads them all (4 bytes a sequence) and writes the record. Which one
// is last, a count of the programs that finished, is in the scratch too, so two launches with
// workspaces of their own (two streams) never share it. A workspace holds anything before its
// first launch (the harness fills it with words of 0x7fffffff), so the count cannot rely on
// starting at 0: it is tagged with the call (finished_last).
namespace {

/// What the host raises (raise_table_fault), in mapped pinned host memory (cudaHostAllocMapped):
/// the last program of a check writes it only when it finds a fault and none is pending; the
/// host reads it without a copy. One for the process (one device per process, as everywhere in
/// pagedattn).
struct FaultRecord {
  DecodeProblem problem;  ///< the launch's problem, for the message's ranges
  TableFault fault;
  const char* function;   ///< the kernel entry's name (static storage)
  std::uint32_t pending;  ///< device: 1 once the fields above are written; host: 0 once raised
  std::uint32_t raised;   ///< host: the faults raised so far
};

/// Faults claimed so far. A check claims fault number `raised` by a compare-and-swap from
/// `raised` to `raised + 1`: while a fault is pending the claims are one ahead and the swap
/// fails, and of two checks on two streams only one writes the record.
__device__ std::uint32_t fault_claims = 0;

/// One check: the launch's tensors, the scratch, and where a fault goes.
struct TableCheck {
  DecodeProblem problem;
  const std::int32_t* block_tables;  ///< [num_seqs][max_blocks_per_seq]
  const std::int32_t* context_lens;  ///< [num_seqs]
  unsigned long long* finished;      ///< the programs that finished, tagged with the call (finished_last)
  std::int32_t* checked_lens;        ///< [num_seqs]: the length, or 0 for a faulty sequence
  std::int32_t* fault_at;            ///< [num_seqs]: -1 none, 0 the length, 1 + e entry e of the row
  std::uint32_t call;                ///< this call's tag (call_tag): never 0 or a fill
  const char* function;
  FaultRecord* record;               ///< the device's address of the mapped record
};

constexpr int kCheckThreads = 512;

/// Whether the calling program (one thread of it) is the last of the check to finish. The word
/// holds the call's tag in its high half and the programs finished in its low half, and 0
/// between checks: the last sets it back. The first program to finish opens the count with a
/// compare-and-swap to (tag, 1), from 0 or, in a fresh or poisoned workspace, from what it found
/// there, in a second swap; the others find the tag there and add 1. Every program is counted
/// once, at the swap or the add that succeeds, so the one that counts num_seqs comes after every
/// other's answer. Three atomics at most (the last one more, to free the word), and no program
/// spins on another: a compare-and-swap loop in every program would take one round trip per
/// program in turn when they finish together, 64 for gqa-batch.
/// Safe across streams: two checks share the word only when they share a workspace, and launches
/// on one workspace are ordered (one stream), as for every other byte of it. Safe in a CUDA
/// graph: a replay reuses the captured tag and finds 0. Wrong only when the word holds this
/// call's tag before the check, which no check leaves: the tag is a hash of the call's number
/// (call_tag), so only what else was in that memory matches it, by chance (2^-32); that call
/// then reports a wrong fault or none, and the decode kernel still reads only the checked copy,
/// which every program writes before it counts.
__device__ bool finished_last(unsigned long long* word, std::uint32_t call, int num_seqs) {
  const unsigned long long opened = (static_cast<unsigned long long>(call) << 32) | 1u;
  unsigned long long expected = 0;  // what the check before left
  for (int swap = 0; swap < 2; ++swap) {
    const unsigned long long seen = atomicCAS(word, expected, opened);
    if (seen == expected) {  // this program opened the count: it is the first to finish
      if (num_seqs > 1) return false;
      atomicExch(word, 0ull);
      return true;
    }
    if (seen >> 32 == call) break;  // another program opened it
    expected = seen;                // not a count of this call: replace it
  }
  // Opened by now: by this call's first swap that succeeded, which every program's failed swap
  // after it sees. (Of the second swaps from one value only one succeeds; the others see it.)
  const unsigned long long before = atomicAdd(word, 1ull);
  if ((before & 0xffffffffu) + 1 != static_cast<unsigned long long>(num_seqs)) return false;
  atomicExch(word, 0ull);  // every program has counted: the word is free for the next check
  return true;
}

/// The last program of a check: the first faulty sequence (or, with none, the lengths' sum
/// against total_context_len), as a TableFault in the record, unless a fault is pending there.
/// It reads what the other programs wrote past L1 (__ldcg), where this SM may hold older lines.
__device__ void report_fault(const TableCheck& c) {
  const DecodeProblem& p = c.problem;
  int first = p.num_seqs;  // this thread's first faulty sequence
  unsigned long long total = 0;
  for (int seq = static_cast<int>(threadIdx.x); seq < p.num_seqs; seq += kCheckThreads) {
    if (__ldcg(c.fault_at + seq) >= 0 && seq < first) first = seq;
    total += static_cast<unsigned long long>(__ldcg(c.checked_lens + seq));
  }
  __shared__ int batch_first;
  __shared__ unsigned long long batch_total;
  if (threadIdx.x == 0) {
    batch_first = p.num_seqs;
    batch_total = 0;
  }
  __syncthreads();
  atomicMin(&batch_first, first);
  atomicAdd(&batch_total, total);
  __syncthreads();
  if (threadIdx.x != 0) return;
  TableFault fault;
  if (batch_first < p.num_seqs) {
    const int seq = batch_first;
    const std::int32_t len = c.context_lens[seq];
    const std::int32_t at = __ldcg(c.fault_at + seq);
    if (at == 0) {
      fault = {TableFault::Kind::context_len, seq, 0, len, len};
    } else {
      const std::int64_t entry = at - 1;
      const std::int32_t page = c.block_tables[static_cast<std::int64_t>(seq) * p.max_blocks_per_seq + entry];
      fault = {TableFault::Kind::block_table, seq, entry, page, len};
    }
  } else {
    const auto sum = static_cast<std::int64_t>(batch_total);
    if (p.total_context_len == 0 || p.total_context_len == sum) return;
    fault = {TableFault::Kind::total, 0, 0, sum, 0};
  }
  FaultRecord* record = c.record;
  const std::uint32_t raised = *static_cast<volatile std::uint32_t*>(&record->raised);
  if (atomicCAS(&fault_claims, raised, raised + 1) != raised) return;  // the pending fault comes first
  record->problem = p;
  record->fault = fault;
  record->function = c.function;
  __threadfence_system();  // the fields reach host memory before `pending` does
  *static_cast<volatile std::uint32_t*>(&record->pending) = 1;
}

/// Program `seq`: context_lens[seq] and, when it is in range, the used entries of its row, as
/// validate_tables checks them; writes the checked length and the first bad place. The last
/// program to finish then reports the check's first fault (report_fault).
__global__ void __launch_bounds__(kCheckThreads) check_tables(TableCheck c) {
  const int seq = static_cast<int>(blockIdx.x);
  const DecodeProblem& p = c.problem;
  const std::int32_t len = c.context_lens[seq];
  const bool len_ok = len >= 0 && len <= p.max_context_len;
  // pages_for(len); no entry is read for a bad length
  const int used = len_ok ? static_cast<int>((std::int64_t{len} + p.block_size - 1) / p.block_size) : 0;
  const std::int32_t* row = c.block_tables + static_cast<std::int64_t>(seq) * p.max_blocks_per_seq;
  int first = used;  // this thread's first bad entry; `used` when none
#pragma unroll 4
  for (int entry = static_cast<int>(threadIdx.x); entry < used; entry += kCheckThreads) {
    const std::int32_t page = row[entry];
    if ((page < 0 || page >= p.num_blocks) && entry < first) first = entry;
  }
  __shared__ int row_first;
  __shared__ bool last;
  if (threadIdx.x == 0) row_first = used;
  __syncthreads();
  if (first < used) atomicMin(&row_first, first);
  __syncthreads();
  if (threadIdx.x == 0) {
    c.checked_lens[seq] = len_ok && row_first == used ? len : 0;
    c.fault_at[seq] = !len_ok ? 0 : row_first == used ? -1 : row_first + 1;
    __threadfence();  // this program's answer is visible to the last before it counts as finished
    last = finished_last(c.finished, c.call, p.num_seqs);
    if (last) __threadfence();  // and the last reads the others' answers after their count
  }
  __syncthreads();
  if (last) report_fault(c);
}

/// The record's host address: null until the first checked launch allocates it.
std::atomic<FaultRecord*> host_record{nullptr};

/// The record's device address; the first call allocates it (cudaHostAllocMapped; the process
/// keeps it), normally a plan's (prepare_table_check).
FaultRecord* device_record() {
  static FaultRecord* const device = [] {
    void* host = nullptr;
    check(cudaHostAlloc(&host, sizeof(FaultRecord), cudaHostAllocMapped),
          "cudaHostAlloc of the checked mode's fault record");
    void* mapped = nullptr;
    check(cudaHostGetDevicePointer(&mapped, host, 0), "cudaHostGetDevicePointer of the checked mode's fault record");
    host_record.store(new (host) FaultRecord{}, std::memory_order_release);
    return static_cast<FaultRecord*>(mapped);
  }();
  return device;
}

/// A new call's tag for finished_last: murmur3's finalizer of the call's number (one to one, so
/// no two of 2^32 calls share one), never 0 (the word between checks) nor a word a workspace is
/// commonly filled with: 0xffffffff (bytes of 0xff) and 0x7fffffff (the harness's poison).
std::uint32_t call_tag() {
  static std::atomic<std::uint32_t> calls{0};
  std::uint32_t x = calls.fetch_add(1, std::memory_order_relaxed);
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return x == 0 || x == 0x7fffffffu || x == 0xffffffffu ? 1 : x;
}
}  // namespace

void prepare_table_check() { device_record(); }

const std::int32_t* check_tables_async(const DecodeView& view, void* scratch, const char* function, void* stream) {
  const DecodeProblem& p = view.problem;
  auto* finished = static_cast<unsigned long long*>(scratch);
  auto* checked_lens = reinterpret_cast<std::int32_t*>(finished + 1);
  if (p.num_seqs == 0) return checked_lens;
  const TableCheck c{p, view.block_tables, view.context_lens, finished, checked_lens, checked_lens + p.num_seqs,
                     call_tag(), function, device_record()};
  check_tables<<<static_cast<unsigned>(p.num_seqs), kCheckThreads, 0, static_cast<cudaStream_t>(stream)>>>(c);
  check(cudaGetLastError(), "launch of the checked mode's check_tables");
  return checked_lens;
}

void raise_table_fault() {
  FaultRecord* record = host_record.load(std::memory_order_acquire);
  if (record == nullptr) return;  // no checked launch yet
  static std::mutex raising;
  const std::lock_guard<std::mutex> lock(raising);
  std::atomic_ref<std::uint32_t> pending(record->pending);
  if (pending.load(std::memory_order_acquire) == 0) return;
  const DecodeProblem problem = record->problem;
  const TableFault fault = record->fault;
  const char* function = record->function;
  pending.store(0, std::memory_order_release);
  // After `pending`: a check that reads the new count claims the next fault, and its record is
  // not cleared by this one.
  std::atomic_ref<std::uint32_t>(record->raised).fetch_add(1, std::memory_order_release);
  throw_table_fault(problem, fault, function);
}

void zero_async(void* device_ptr, std::size_t bytes, void* stream) {
  check(cudaMemsetAsync(device_ptr, 0, bytes, static_cast<cudaStream_t>(stream)), "cudaMemsetAsync (zero_async)");
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

double measure_sm_clock_mhz() {
  Buffer out(2 * sizeof(unsigned long long), "clock probe");
  clock_probe<<<1, 1>>>(static_cast<unsigned long long*>(out.data()), 200000);
  check(cudaGetLastError(), "launch of clock_probe");
  unsigned long long counts[2] = {0, 0};
  out.download(counts, sizeof counts);
  return static_cast<double>(counts[0]) * 1e3 / static_cast<double>(counts[1]);  // counts[1] >= the 200 µs span
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

void launch_empty_kernel(bool overlapped, void* stream) {
  cudaError_t launched = cudaSuccess;
  if (overlapped) {
    const OverlappedLaunch launch(dim3(1), dim3(32), 0, stream);
    launched = cudaLaunchKernelEx(&launch.config, probe);
  } else {
    probe<<<1, 32, 0, static_cast<cudaStream_t>(stream)>>>();
  }
  const cudaError_t last = cudaGetLastError();  // as the rungs' launches check theirs
  check(launched != cudaSuccess ? launched : last, overlapped ? "overlapped launch of an empty kernel" : "launch of an empty kernel");
}

}  // namespace pa::gpu
