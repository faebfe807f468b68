#pragma once
/// \file
/// The pretend GPU: runs CUDA-style kernels on the CPU, unchanged, and checks what a GPU hides.
///
/// A launch runs the programs (thread blocks) of its grid one after another. The threads of one
/// program are cooperative fibers (Boost.Context): each runs until it reaches a barrier or a
/// warp collective, then the next runs. On top of plain execution the emulator:
///  - checks every global access against the tensor's extent (GlobalSpan), and every global
///    vector access for its alignment;
///  - checks shared memory for barrier races: an element written by one thread and touched by
///    another in the same barrier epoch, unless a `__syncwarp` whose mask names both lanes came
///    between (shuffles, ballots and matrix instructions order no memory, as on a GPU), is
///    reported, as is a read of shared memory nothing has written in this program;
///  - models asynchronous copies into shared memory (cp.async): a copy's destination holds poison
///    and is marked in flight from the copy until the async_wait that completes it, and any
///    access to it in between is reported, naming the line of the access;
///  - models overlapped launches (programmatic dependent launch): a thread of a kernel launched
///    overlapped that touches global bytes the previous launch wrote, or writes bytes it read
///    after its allow_next_kernel(), before calling wait_for_previous_kernel() is reported;
///  - reports divergent barriers (threads waiting at different `__syncthreads`, or some exited
///    while others wait) and warp collectives with a wrong mask; a lane the mask names that has
///    exited takes no part (CUDA asks it of the lanes that have not), but a shuffle reading it
///    is reported;
///  - runs programs and threads in a fixed order, or in a seeded shuffled one (ThreadOrder), so
///    that a result that depends on the order differs between runs;
///  - counts bytes read and written per tensor, and traces what one chosen program read.
/// Every error is a pa::KernelError naming the kernel, program, thread, tensor, index and the
/// source line of the access (`path:line`); an out-of-bounds index into a paged tensor also says
/// which block-table entry its page came from, where the thread read it itself.
///
/// Kernels never include this header: they use kernels/portable/portable.h, which maps the
/// CUDA names onto these functions in a host build.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <source_location>
#include <string>
#include <type_traits>
#include <vector>

#include "common/error.h"

namespace pa::emu {

/// CUDA's dim3.
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3() = default;
  constexpr dim3(unsigned x_, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
  constexpr std::size_t volume() const { return std::size_t{x} * y * z; }
};

/// Grid, block, dynamic shared memory and the kernel's name for messages.
struct LaunchShape {
  dim3 grid;
  dim3 block;
  std::size_t dynamic_shared_bytes = 0;
  const char* kernel_name = "kernel";
  /// Launched overlapped with the launch before it (programmatic dependent launch): a thread
  /// must call wait_for_previous_kernel() before it reads or writes global bytes that launch wrote.
  bool overlapped = false;
};

/// Runs \p thread_body once per thread of every program of the grid. Throws KernelError on the
/// first fault; the launch stops there.
void launch(const LaunchShape& shape, const std::function<void()>& thread_body);

/// Limits the emulator enforces at launch (an H200's by default).
struct Limits {
  unsigned max_threads_per_block = 1024;
  std::size_t max_static_shared = 48 * 1024;
  std::size_t max_dynamic_shared = 227 * 1024;
};
Limits& limits();

// ----- thread order ---------------------------------------------------------------------------
/// The order the emulator runs a launch in. A GPU runs a grid's programs, and a program's warps,
/// in no order a kernel may rely on; the emulator runs them one at a time.
///  - fixed: programs in grid order; in each program, threads in index order, each until it
///    reaches the next barrier or warp collective (a "round"), then the next thread.
///  - shuffled: the programs of each launch in a permuted order, and the threads of each round
///    in a permuted order, a new permutation every round; each drawn from a generator seeded by
///    \p seed, the kernel's name and the program's index, so one seed gives the same orders in
///    every run, whatever ran before.
/// A correct kernel gives the same bits in every order. A result that depends on which thread
/// got somewhere first (a float sum in arrival order, a global value read before another thread
/// of the program wrote it) differs between seeds. The race detector sees the same accesses in
/// either order. A fault in a shuffled launch names the seed.
struct ThreadOrder {
  bool shuffled = false;
  std::uint64_t seed = 0;
};
/// The order of the launches that follow on this host thread. Until set it is what the
/// environment says: `PAGEDATTN_EMU_SHUFFLE=<seed>` (a decimal number) is shuffled with that seed;
/// unset, empty or "off" is fixed; anything else is a pa::Error at the first launch.
ThreadOrder thread_order();
void set_thread_order(ThreadOrder order);
/// "fixed order", or "shuffled order, seed S (PAGEDATTN_EMU_SHUFFLE=S repeats it)".
std::string describe(const ThreadOrder& order);
/// Sets the thread order while it lives, then restores the one before.
class ScopedThreadOrder {
 public:
  explicit ScopedThreadOrder(ThreadOrder order) : saved_(thread_order()) { set_thread_order(order); }
  ~ScopedThreadOrder() { set_thread_order(saved_); }
  ScopedThreadOrder(const ScopedThreadOrder&) = delete;
  ScopedThreadOrder& operator=(const ScopedThreadOrder&) = delete;

 private:
  ThreadOrder saved_;
};

// ----- the built-in variables and barriers ----------------------------------------------------
const dim3& thread_idx();
const dim3& block_idx();
const dim3& block_dim();
const dim3& grid_dim();
/// `__syncthreads()`.
void syncthreads(std::source_location where = std::source_location::current());
/// `__syncwarp(mask)`.
void syncwarp(unsigned mask, std::source_location where = std::source_location::current());
/// `griddepcontrol.wait`: from here on this thread may touch what the previous launch wrote.
/// Only a launch marked overlapped needs it; elsewhere it does nothing.
void wait_for_previous_kernel();
/// `griddepcontrol.launch_dependents`: an overlapped launch after this one may start while this
/// one still runs, so from here on the launch's global reads are recorded too, and a write of
/// one of them by the next launch before its wait is a fault. Without it, the next launch starts
/// when this one has ended and only this one's writes matter.
void allow_next_kernel();

/// Which warp collective a thread waits at.
enum class Collective : std::uint8_t { syncwarp, shfl_xor, shfl_down, shfl_up, shfl_idx, ballot, combine };

/// The core of every warp collective: posts this lane's 8-byte payload and returns the payload
/// of the lane it reads (for ballot, the bits of every voting lane).
std::uint64_t warp_exchange(Collective kind, unsigned mask, std::uint64_t payload, int param,
                            int width, std::source_location where);

template <class T>
T shuffle(Collective kind, unsigned mask, T value, int param, int width, std::source_location where) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8,
                "warp shuffles move values of at most 8 bytes");
  std::uint64_t payload = 0;
  std::memcpy(&payload, &value, sizeof(T));
  const std::uint64_t result = warp_exchange(kind, mask, payload, param, width, where);
  T out;
  std::memcpy(&out, &result, sizeof(T));
  return out;
}

/// A warp-wide operation over every lane's operands at once: called with the 32 lanes' operand
/// pointers in lane order, it reads each lane's inputs and writes each lane's results.
using WarpCombine = void (*)(void* const* lanes);

/// A warp-wide matrix instruction (mma, ldmatrix): each of the 32 lanes posts a pointer to its
/// operands; once every lane of the warp has arrived at the same instruction, \p combine runs
/// once over all 32 and every lane goes on with its results. Like `mma.sync.aligned`, it needs
/// the whole warp; a lane that calls another instruction, or the same one on another line, or
/// has exited, is a fault naming \p name and \p where. Like every warp collective but
/// `__syncwarp`, it orders no shared-memory accesses between the lanes.
void warp_combine(const char* name, WarpCombine combine, void* operands,
                  std::source_location where = std::source_location::current());

// ----- global memory --------------------------------------------------------------------------
/// Index of a named tensor in the traffic counters (registered on first use of the name).
int tensor_id(const char* name);

/// How a paged tensor (a KV cache) is addressed: element i lies in page i / page_elems, and the
/// page numbers are entries of the tensor named \p table (the block table). With it, an
/// out-of-bounds index into the tensor is reported with the page it falls in and the
/// block-table entry that gave that page, when the faulting thread read it.
struct Paging {
  const char* table = nullptr;
  std::int64_t page_elems = 0;
};

/// What a global span tells the emulator about its tensor.
struct TensorInfo {
  int tensor = -1;           ///< tensor_id of its name
  std::int64_t extent = 0;   ///< elements
  int table = -1;            ///< tensor_id of its block table (paged tensors), else -1
  std::int64_t page_elems = 0;
};
/// The TensorInfo of \p name with \p extent elements, paged as \p paging says (which also
/// marks the block table, so that the reads of it are remembered for the messages).
TensorInfo tensor_info(const char* name, std::int64_t extent, Paging paging);

/// Bounds check, byte counting and tracing of one global access at \p where of \p count
/// elements of \p elem_size bytes at \p index; \p align_bytes > 1 also checks the address's
/// alignment. In an overlapped launch, also checks that a thread which has not called
/// wait_for_previous_kernel() touches none of the bytes the previous launch wrote; every write
/// is recorded for the launch after this one.
void global_access(const TensorInfo& tensor, const void* base, std::int64_t index, std::int64_t count,
                   std::size_t elem_size, bool write, std::size_t align_bytes, std::source_location where);
/// Checks a prefetch at \p where of element \p index: out of bounds is a fault, as for an
/// access; no bytes are counted (the emulator has no cache to fill).
void global_prefetch(const TensorInfo& tensor, std::int64_t index, std::source_location where);

/// An index into a global span together with the place in the kernel that uses it, as
/// SharedIndex is for shared arrays: `span[i]` converts `i`, and the defaulted location is the
/// line of `span[i]`.
struct GlobalIndex {
  std::int64_t index;
  std::source_location where;
  GlobalIndex(std::int64_t index_, std::source_location where_ = std::source_location::current())
      : index(index_), where(where_) {}
};

template <class T>
class GlobalSpan;

/// What `span[i]` returns for a writable global tensor: a read converts, a write assigns.
template <class T>
class GlobalRef {
 public:
  GlobalRef(const GlobalSpan<T>& span, GlobalIndex at) : span_(span), at_(at) {}
  operator T() const { return span_.load(at_.index, at_.where); }
  GlobalRef& operator=(const T& value) {
    span_.store(at_.index, value, at_.where);
    return *this;
  }
  GlobalRef& operator=(const GlobalRef& other) { return *this = static_cast<T>(other); }

 private:
  const GlobalSpan<T>& span_;
  GlobalIndex at_;
};

/// A named, bounds-checked view of a global tensor of \p T (const T for inputs). Each access
/// takes the caller's source location (defaulted) for the messages.
template <class T>
class GlobalSpan {
 public:
  using value_type = std::remove_const_t<T>;
  GlobalSpan() = default;
  GlobalSpan(T* data, std::int64_t size, const char* name, Paging paging = {})
      : data_(data), name_(name), info_(tensor_info(name, size, paging)) {}

  decltype(auto) operator[](GlobalIndex at) const {
    if constexpr (std::is_const_v<T>) {
      return load(at.index, at.where);
    } else {
      return GlobalRef<T>(*this, at);
    }
  }
  value_type load(std::int64_t index, std::source_location where = std::source_location::current()) const {
    global_access(info_, data_, index, 1, sizeof(T), false, 1, where);
    return data_[index];
  }
  void store(std::int64_t index, const value_type& value,
             std::source_location where = std::source_location::current()) const {
    static_assert(!std::is_const_v<T>, "cannot write through a span of const elements");
    global_access(info_, data_, index, 1, sizeof(T), true, 1, where);
    data_[index] = value;
  }
  /// Reads \p count consecutive elements into \p out as one access of count*sizeof(T) bytes,
  /// which must be aligned to that size (as a GPU vector load requires).
  void load_vector(std::int64_t index, int count, value_type* out,
                   std::source_location where = std::source_location::current()) const {
    global_access(info_, data_, index, count, sizeof(T), false, sizeof(T) * count, where);
    std::memcpy(out, data_ + index, sizeof(T) * count);
  }
  void store_vector(std::int64_t index, int count, const value_type* in,
                    std::source_location where = std::source_location::current()) const {
    global_access(info_, data_, index, count, sizeof(T), true, sizeof(T) * count, where);
    std::memcpy(const_cast<value_type*>(data_ + index), in, sizeof(T) * count);
  }
  /// A prefetch of element \p index: checked, not counted (see global_prefetch).
  void prefetch(std::int64_t index, std::source_location where = std::source_location::current()) const {
    global_prefetch(info_, index, where);
  }
  std::int64_t size() const { return info_.extent; }
  const char* name() const { return name_; }
  T* data() const { return data_; }

 private:
  T* data_ = nullptr;
  const char* name_ = "";
  TensorInfo info_;
};

// ----- shared memory --------------------------------------------------------------------------
/// Race-detection state of one shared element.
struct SharedCell {
  std::int32_t writer = -1;  ///< thread that last wrote it (-1: never written)
  std::uint32_t write_epoch = 0;
  std::uint32_t write_warp_epoch = 0;
  std::int32_t reader = -1;  ///< a thread that read it in reader_epoch (-2: several)
  std::uint32_t reader_epoch = 0;
  std::uint32_t reader_warp_epoch = 0;
  std::uint32_t reader_warps = 0;  ///< bit per warp that read it in reader_epoch
  std::int32_t copy_issuer = -1;   ///< thread whose asynchronous copy into it is in flight (-1: none)
  std::source_location write_where;  ///< the line of the last write (for messages)
};

/// One shared array of a program: bytes plus one SharedCell per element.
struct SharedArray {
  std::string name;
  std::size_t elem_size = 0;
  std::vector<unsigned char> bytes;
  std::vector<SharedCell> cells;
};

/// Checks and records one access to element \p index of \p array by the code at \p where.
void shared_access(SharedArray& array, std::int64_t index, bool write, std::source_location where);

/// Faults unless element \p index of \p array starts a naturally aligned access of \p bytes
/// (a vector load, an ldmatrix row): on a GPU a misaligned shared address is an error. Checked
/// from the array's start, which PA_SHARED and PA_DYNAMIC_SHARED align to 16 bytes on the GPU.
void require_shared_alignment(const SharedArray& array, std::int64_t index, int bytes, std::source_location where);

/// An index into a shared array together with the place in the kernel that uses it: `shared[i]`
/// converts `i` implicitly, and the defaulted location is then the line of `shared[i]`, so a
/// fault can name it (an operator[] cannot take a defaulted second parameter).
struct SharedIndex {
  std::int64_t index;
  std::source_location where;
  SharedIndex(std::int64_t index_, std::source_location where_ = std::source_location::current())
      : index(index_), where(where_) {}
};

template <class T>
class SharedSpan;

/// What `shared[i]` returns: reads and writes go through the race detector.
template <class T>
class SharedRef {
 public:
  SharedRef(SharedArray* array, std::int64_t index, std::source_location where)
      : array_(array), index_(index), where_(where) {}
  operator T() const {
    shared_access(*array_, index_, false, where_);
    T value;
    std::memcpy(&value, array_->bytes.data() + index_ * sizeof(T), sizeof(T));
    return value;
  }
  SharedRef& operator=(const T& value) {
    shared_access(*array_, index_, true, where_);
    std::memcpy(array_->bytes.data() + index_ * sizeof(T), &value, sizeof(T));
    return *this;
  }
  SharedRef& operator=(const SharedRef& other) { return *this = static_cast<T>(other); }
  SharedRef& operator+=(const T& value) { return *this = static_cast<T>(*this) + value; }
  SharedRef& operator*=(const T& value) { return *this = static_cast<T>(*this) * value; }

 private:
  SharedArray* array_;
  std::int64_t index_;
  std::source_location where_;
};

/// A view of a program's shared array (static or dynamic). `span + n` views from element n on.
template <class T>
class SharedSpan {
 public:
  using value_type = T;
  SharedSpan(SharedArray* array, std::int64_t offset) : array_(array), offset_(offset) {}
  SharedRef<T> operator[](SharedIndex at) const { return SharedRef<T>(array_, offset_ + at.index, at.where); }
  SharedSpan operator+(std::int64_t count) const { return SharedSpan(array_, offset_ + count); }
  /// Reads elements [index, index + count) of this view into \p out, each checked as a read at
  /// \p where, and the whole as one naturally aligned access (a vector load of shared memory).
  void load(std::int64_t index, int count, T* out, std::source_location where) const {
    require_shared_alignment(*array_, offset_ + index, count * static_cast<int>(sizeof(T)), where);
    for (int i = 0; i < count; ++i) {
      shared_access(*array_, offset_ + index + i, false, where);
      std::memcpy(out + i, array_->bytes.data() + (offset_ + index + i) * sizeof(T), sizeof(T));
    }
  }
  SharedArray& array() const { return *array_; }
  /// The element of the array this view starts at.
  std::int64_t offset() const { return offset_; }

 private:
  SharedArray* array_;
  std::int64_t offset_;
};

// ----- asynchronous copies into shared memory (cp.async) ----------------------------------------
// Each thread keeps the copies it has issued. A copy joins the thread's open group;
// async_commit() closes that group (an empty group counts too); async_wait(n) completes every
// committed group but the n most recent (cp.async.wait_group n). From its issue to its
// completion a copy's destination elements hold poison (0xff bytes, NaN as floats) and are in
// flight: a read or a write of one, by any thread, is a fault, as is a second copy into it. At
// completion the data lands and the race detector records the write as the issuing thread's,
// made then: the issuer may read it at once, other threads after a barrier. Copies a thread
// leaves in flight when it exits are dropped: their elements stay poison and in flight.

/// Issues an asynchronous copy of \p bytes bytes into elements [index, index + bytes /
/// elem_size) of \p array at \p where: the bytes at \p data (read from global memory now,
/// when the caller's bounds check and byte count happen), or zeros when \p data is null.
void async_copy(SharedArray& array, std::int64_t index, const void* data, std::size_t bytes,
                std::source_location where);
/// `cp.async.commit_group`: closes the calling thread's open group of copies.
void async_commit();
/// `cp.async.wait_group pending`: completes the calling thread's committed groups but the
/// \p pending most recent ones (\p where: the wait, for messages).
void async_wait(int pending, std::source_location where);

/// The program's static shared array declared at \p where (allocated by the first thread that
/// reaches the declaration; every thread gets the same one).
SharedArray& static_shared(const char* name, std::size_t elem_size, std::size_t count,
                           std::source_location where);
/// The program's dynamic shared memory viewed as elements of \p elem_size bytes, declared at
/// \p where.
SharedArray& dynamic_shared(const char* name, std::size_t elem_size, std::source_location where);

template <class T>
SharedSpan<T> shared_array(const char* name, std::size_t count,
                           std::source_location where = std::source_location::current()) {
  static_assert(std::is_trivially_copyable_v<T>, "shared memory holds plain values");
  return SharedSpan<T>(&static_shared(name, sizeof(T), count, where), 0);
}
template <class T>
SharedSpan<T> dynamic_shared_array(const char* name, std::source_location where = std::source_location::current()) {
  return SharedSpan<T>(&dynamic_shared(name, sizeof(T), where), 0);
}

// ----- traffic counters and traces ------------------------------------------------------------
/// Bytes one tensor moved.
struct TensorTraffic {
  std::uint64_t bytes_read = 0;
  std::uint64_t bytes_written = 0;
  std::uint64_t accesses = 0;
};

/// What the launches since the last reset_counters() moved, by tensor name.
struct Counters {
  std::map<std::string, TensorTraffic> tensors;
  std::uint64_t launches = 0;
  std::uint64_t programs = 0;
  std::uint64_t threads = 0;
  std::uint64_t barriers = 0;          ///< __syncthreads completed (per program)
  std::uint64_t warp_collectives = 0;  ///< warp collectives completed (per warp): shuffles, ballots, __syncwarp, mma, ldmatrix
  std::uint64_t total_read() const;
  std::uint64_t total_written() const;
};
void reset_counters();
Counters counters();

/// One global access of the traced program.
struct TraceEntry {
  std::string kernel;
  std::string tensor;
  std::int64_t index = 0;  ///< first element
  std::int64_t count = 0;  ///< elements
  bool write = false;
  unsigned thread = 0;     ///< linear thread id in the program
};
/// Records every global access of program (x, y, z) (all launches until cleared).
void trace_program(unsigned x, unsigned y = 0, unsigned z = 0);
void clear_trace();
const std::vector<TraceEntry>& trace();

}  // namespace pa::emu
