#pragma once
/// \file
/// The GPU as host code sees it: is there one, what is it, device memory, events, and the
/// bandwidth roof. No CUDA types leak out of this header, so host code builds the same with or
/// without the CUDA toolkit (runtime_none.cpp answers "built without CUDA").

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/kernel_api.h"

namespace pa::gpu {

/// Empty when a CUDA device can run this build's kernels; otherwise why not ("pagedattn was
/// built without CUDA", "no CUDA device: ...", "no kernel image for ..."). Asked once.
const std::string& unavailable_reason();
/// Whether the GPU path can run here.
inline bool available() { return unavailable_reason().empty(); }

/// What the device is; every benchmark stamps its results with this.
struct DeviceInfo {
  std::string name;
  int ordinal = 0;          ///< the CUDA device index (cuda:N)
  /// Whether the device's kernels may read pageable host memory (HMM or ATS:
  /// cudaDevAttrPageableMemoryAccess), which require_device_pointers then lets through.
  bool pageable_memory_access = false;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int driver_version = 0;   ///< e.g. 13000 for CUDA 13.0
  int runtime_version = 0;
  double sm_clock_mhz = 0;  ///< as reported (0 if not readable)
  double memory_clock_mhz = 0;
  int memory_bus_bits = 0;
  std::size_t total_memory = 0;
  DeviceLimits limits;      ///< includes SM count, shared memory, L2 and datasheet bandwidth
};
/// This process's device: the one current at the first call (one device a process: the limits a
/// plan reads, the checked mode's fault record and a plan's tables are that device's). Throws
/// CudaError when unavailable() (with the reason).
const DeviceInfo& device_info();

/// Refuses a current CUDA device other than this process's (device_info): ArgumentError naming
/// \p function and both devices. A plan made or a kernel launched on another device would read
/// this device's limits and memory. One cudaGetDevice (no call into the driver).
void require_process_device(std::string_view function);

/// Refuses a pointer of \p view that this process's device (device_info) cannot read or write:
/// ArgumentError naming \p function and the argument (query, key_cache, value_cache,
/// block_tables, context_lens, out, workspace). Device memory of this device, managed memory and
/// pinned host memory the device sees at the same address pass (the kernels take each pointer
/// as it is); pageable host memory passes only where the device reads it
/// (DeviceInfo::pageable_memory_access); memory of another device does not.
/// Null pointers are skipped (validate_view's to refuse). One cudaPointerGetAttributes a
/// pointer; CudaError if one fails.
void require_device_pointers(const DecodeView& view, std::string_view function);

/// Device memory, freed on destruction; allocation failures throw CudaError naming \p what.
class Buffer {
 public:
  Buffer() = default;
  Buffer(std::size_t bytes, std::string_view what);
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();
  void* data() const { return data_; }
  std::size_t size() const { return bytes_; }
  /// Copies \p bytes from host memory to the buffer's byte \p offset on (synchronous).
  void upload(const void* host, std::size_t bytes, std::size_t offset = 0);
  /// Copies \p bytes to host memory (synchronous; waits for earlier work), then raises a table
  /// fault a checked launch recorded (raise_table_fault).
  void download(void* host, std::size_t bytes) const;
  /// Sets every byte (0xff makes NaN of every float type, -1 of ints: the poison).
  void fill(unsigned char byte);
  /// Sets every whole 4-byte word to \p word and the bytes after the last one to its first
  /// bytes (its pattern, continued), on the device, ordered on the default stream as fill's
  /// memset is: no host copy of the buffer, whose upload from pageable memory ran at about
  /// 1 GB/s on the GPU machines (lab v130).
  void fill_words(std::uint32_t word);

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  std::string what_;
};

/// A CUDA event, for timing on the device's clock.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(void* stream = nullptr);
  /// Milliseconds between two recorded events (waits for \p end, then raises a table fault a
  /// checked launch recorded: raise_table_fault).
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  void* event_ = nullptr;
};

/// The message of the device fault that lost this process's CUDA context, or empty while the
/// context is usable (docs/design/CATALOGUE.md R5). After an illegal address, a trap, an
/// illegal instruction and the like (CUDA's "sticky" errors), every later CUDA call fails with
/// the same error until the process ends: the first such error is recorded here, and from then
/// on every call of this runtime and every launch of a kernel entry (kernels/registry.cpp) is
/// refused, naming it, instead of reporting the old fault as its own.
std::string context_lost();

/// Throws the refusal of context_lost (CudaError naming \p what and the fault) where the
/// context is lost; returns otherwise.
void require_context(std::string_view what);

/// Waits for the device; a kernel fault surfaces here as CudaError naming \p what, and a table
/// fault a checked launch recorded as its ArgumentError (raise_table_fault).
void synchronize(std::string_view what);

/// Bytes of device scratch the checked mode needs for \p num_seqs sequences
/// (check_tables_async): an 8-byte count of the check's programs that finished, then the checked
/// copy of the context lengths and each sequence's fault, 4 bytes each, rounded up to 256 bytes
/// so that what follows it in a workspace keeps cudaMalloc's alignment; none for an empty batch.
constexpr std::size_t table_check_bytes(int num_seqs) {
  if (num_seqs <= 0) return 0;
  return (8 + std::size_t{8} * static_cast<std::size_t>(num_seqs) + 255) / 256 * 256;
}

/// Allocates, once for the process, the mapped host memory check_tables_async records a fault
/// in, so that no launch allocates: a launch being captured in a CUDA graph may not. The CUDA
/// entries' plans call it; later calls do nothing. Throws CudaError if the allocation fails.
void prepare_table_check();

/// The checked mode of a launch on the GPU (DecodeView::checked), without a wait: enqueues on
/// \p stream (a cudaStream_t) one small kernel that checks \p view's context lengths and the
/// used entries of its block tables (device memory) as validate_tables does, and returns the
/// checked copy of the lengths it writes into \p scratch (table_check_bytes(num_seqs) bytes of
/// device memory, 8-byte aligned, holding anything: no launch on another stream may use it
/// meanwhile): a sequence's length where it and every used entry of its row are valid, 0 where
/// one is not. A decode kernel launched after it on that stream and reading the copy computes
/// nothing for a faulty sequence (a row of zeros) and reads none of its pages. The kernel's last
/// program to finish records the first fault in validate_tables's order (where there is none, a
/// total_context_len that is not the lengths' sum) for the host with \p function, a string of
/// static storage (the kernel entry's name), unless a fault is pending already;
/// raise_table_fault throws it. Throws CudaError if the launch fails.
const std::int32_t* check_tables_async(const DecodeView& view, void* scratch, const char* function, void* stream);

/// Throws the ArgumentError of the table fault a checked launch recorded, with the message the
/// emulator gives at the launch (throw_table_fault), and clears the record; returns when none is
/// pending. synchronize, Buffer::download and Event::elapsed_ms call it after their wait, and
/// every checked launch at its start, so a fault is raised at the first of them after its check
/// finished. Reads host memory only: it neither waits nor calls CUDA.
void raise_table_fault();

/// Sets \p bytes of device memory at \p device_ptr to zero, in order on \p stream (a
/// cudaStream_t; nullptr the default stream): `cudaMemsetAsync`, which a CUDA graph may capture.
/// Throws CudaError if it cannot be issued.
void zero_async(void* device_ptr, std::size_t bytes, void* stream);

/// Evicts the L2 cache by reading a buffer twice its size that nothing writes, so the lines it
/// leaves are clean (outside any timed region; runtime.cu says why not a memset).
void flush_l2();

/// The bandwidth roof: a plain streaming-read kernel over \p bytes, median of \p runs, in GB/s
/// (decimal). docs/design/BENCHMARKS.md: report every figure against this, measured in the
/// same run.
double measure_roof_gbps(std::size_t bytes = std::size_t{4} << 30, int runs = 20);

/// The SM clock now, in MHz, measured: one thread counts its SM's cycles (clock64) while the
/// GPU's global timer advances 200 µs. DeviceInfo::sm_clock_mhz is the clock the device reports
/// as its maximum; the clock it runs at moves with temperature and power, so the benchmarks
/// read this right after each row's timed launches. It is the clock of a kernel without
/// tensor-core work: one that issues `mma` runs below it while it does (ncu's cycle count put
/// step 10 at 1.76-1.82 GHz where nvidia-smi read 1980 MHz: lab/perf-log.md, v153). Throws CudaError
/// if the probe cannot run.
double measure_sm_clock_mhz();

/// A bare read of \p bytes (rounded up to whole chunks): programs of \p threads threads, each
/// reading one chunk of \p chunk_bytes, each chunk read by \p readers programs adjacent in
/// launch order, and no arithmetic: how fast a kernel with that access pattern could be. Median
/// of \p runs in milliseconds, the L2 flushed before each, as the kernels are timed.
double time_bare_read_ms(std::size_t bytes, std::size_t chunk_bytes, int readers, int threads, int runs = 20);

/// Launches a kernel that does nothing (one program of 32 threads, no arguments) on \p stream,
/// with programmatic dependent launch (cudaLaunchKernelEx) when \p overlapped, as the rungs
/// launch their merge: what a launch costs the host with no work in it, the floor under
/// bench_ladder's entry-point rows (steps/bench_entry_point.h). Throws CudaError if it fails.
void launch_empty_kernel(bool overlapped, void* stream);

}  // namespace pa::gpu
