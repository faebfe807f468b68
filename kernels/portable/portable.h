#pragma once
/// \file
/// The small vocabulary every kernel is written in, so one source runs on the GPU and in the
/// emulator.
///
/// Kernels are plain CUDA C++: `__global__`, `threadIdx`, `blockIdx`, `__syncthreads()`,
/// `__shfl_xor_sync(...)`. Under nvcc those are the real built-ins. In a host build this
/// header defines them on top of the emulator (common/emu), which runs the same code on the CPU
/// with checks. Three things differ from bare CUDA, each for a reason:
///  - global tensors are `gspan<T>` (a pointer under nvcc; a named, bounds-checked span in the
///    emulator, which also counts bytes);
///  - shared arrays are declared with `PA_SHARED(T, name, count)` and
///    `PA_DYNAMIC_SHARED(T, name)` (a `__shared__` array under nvcc; a race-checked array shared
///    by the program's fibers in the emulator);
///  - vector loads use `load_vec<N>(span, index)` (one 16-byte load under nvcc; a checked,
///    alignment-verified load in the emulator).
///
/// In the emulator every access also carries the source location of the kernel line that makes
/// it, so a fault names `path:line`: `span[i]` and `shared[i]` take it through their index type,
/// and the functions below through a last, defaulted parameter (PA_CALLER_WHERE) that a kernel
/// never passes. Under nvcc that parameter does not exist.
///
/// `PA_UNROLL` stands for `#pragma unroll` and `PA_UNROLL_BY(n)` for `#pragma unroll n` (nvcc's;
/// g++ would warn on them).
///
/// Each target compiles the kernels into its own namespace, `pa::PA_KERNELS`
/// (`pa::kernels_cuda` or `pa::kernels_emu`), so both builds of one kernel live in one program.

#include <cstdint>
#include <cstring>

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "common/dtype.h"
#include "common/error.h"
#include "common/kernel_api.h"

#if defined(__CUDACC__)
// ============================================================================================
// nvcc: the real thing
// ============================================================================================
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "common/cuda/overlapped_launch.h"

#define PA_KERNELS kernels_cuda
#define PA_UNROLL _Pragma("unroll")
#define PA_UNROLL_BY(n) _Pragma(PA_STRINGIFY(unroll n))
#define PA_STRINGIFY(x) #x
// 16-byte aligned, as the dynamic array is: the emulator checks a vector or ldmatrix access's
// alignment from an array's start (emu::require_shared_alignment), which holds on the GPU only
// where the array starts on a 16-byte boundary (a plain `__shared__ float` array need not).
#define PA_SHARED(T, name, count) __shared__ __align__(16) T name[count]
#define PA_DYNAMIC_SHARED(T, name)                                      \
  extern __shared__ __align__(16) unsigned char pa_dynamic_shared_[]; \
  T* name = reinterpret_cast<T*>(pa_dynamic_shared_)

namespace pa::cuda_vocab {
/// How a paged tensor is addressed (emu::Paging; only the emulator uses it).
struct Paging {
  const char* table = nullptr;
  std::int64_t page_elems = 0;
};
/// A global tensor on the GPU: just the pointer (name, size and paging are for the emulator).
template <class T>
struct GlobalSpan {
  T* ptr = nullptr;
  GlobalSpan() = default;
  __host__ __device__ GlobalSpan(T* data, std::int64_t, const char*, Paging = {}) : ptr(data) {}
  __device__ __forceinline__ T& operator[](std::int64_t index) const { return ptr[index]; }
};
}  // namespace pa::cuda_vocab

namespace pa::PA_KERNELS {
template <class T>
using gspan = cuda_vocab::GlobalSpan<T>;
using Paging = cuda_vocab::Paging;
using bf16 = __nv_bfloat16;
using f16 = __half;
using e4m3 = ::pa::e4m3_t;  // storage only: kernels convert it with e4m3x2_to_f16x2
using dim3 = ::dim3;
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(f16 x) { return __half2float(x); }
template <class T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, bf16>) return __float2bfloat16_rn(x);
  else if constexpr (std::is_same_v<T, f16>) return __float2half_rn(x);
  else return x;
}
}  // namespace pa::PA_KERNELS

#else
// ============================================================================================
// host build: the emulator stands in for the GPU
// ============================================================================================
#include <cmath>
#include <source_location>

#include "common/emu/emu.h"

#define PA_KERNELS kernels_emu
#define PA_UNROLL
#define PA_UNROLL_BY(n)
#define __global__ inline
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __maxnreg__(...)
#define PA_SHARED(T, name, count) auto name = ::pa::emu::shared_array<T>(#name, (count))
#define PA_DYNAMIC_SHARED(T, name) auto name = ::pa::emu::dynamic_shared_array<T>(#name)
#define threadIdx (::pa::emu::thread_idx())
#define blockIdx (::pa::emu::block_idx())
#define blockDim (::pa::emu::block_dim())
#define gridDim (::pa::emu::grid_dim())

constexpr int warpSize = 32;

inline void __syncthreads(std::source_location where = std::source_location::current()) {
  ::pa::emu::syncthreads(where);
}
inline void __syncwarp(unsigned mask = 0xffffffffu,
                       std::source_location where = std::source_location::current()) {
  ::pa::emu::syncwarp(mask, where);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32,
                  std::source_location where = std::source_location::current()) {
  return ::pa::emu::shuffle(::pa::emu::Collective::shfl_xor, mask, value, lane_mask, width, where);
}
template <class T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = 32,
                   std::source_location where = std::source_location::current()) {
  return ::pa::emu::shuffle(::pa::emu::Collective::shfl_down, mask, value, static_cast<int>(delta),
                            width, where);
}
template <class T>
T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = 32,
                 std::source_location where = std::source_location::current()) {
  return ::pa::emu::shuffle(::pa::emu::Collective::shfl_up, mask, value, static_cast<int>(delta),
                            width, where);
}
template <class T>
T __shfl_sync(unsigned mask, T value, int src_lane, int width = 32,
              std::source_location where = std::source_location::current()) {
  return ::pa::emu::shuffle(::pa::emu::Collective::shfl_idx, mask, value, src_lane, width, where);
}
inline unsigned __ballot_sync(unsigned mask, int predicate,
                              std::source_location where = std::source_location::current()) {
  return static_cast<unsigned>(::pa::emu::warp_exchange(::pa::emu::Collective::ballot, mask,
                                                        predicate != 0, 0, 32, where));
}
inline float __int_as_float(int bits) { return ::pa::float_from_bits(static_cast<std::uint32_t>(bits)); }

namespace pa::PA_KERNELS {
template <class T>
using gspan = emu::GlobalSpan<T>;
using Paging = emu::Paging;
using bf16 = ::pa::bf16_t;
using f16 = ::pa::f16_t;
using e4m3 = ::pa::e4m3_t;  // storage only: kernels convert it with e4m3x2_to_f16x2
using dim3 = emu::dim3;
inline float to_float(float x) { return x; }
inline float to_float(bf16 x) { return bf16_to_float(x); }
inline float to_float(f16 x) { return f16_to_float(x); }
template <class T>
T from_float(float x) {
  if constexpr (std::is_same_v<T, bf16>) return float_to_bf16(x);
  else if constexpr (std::is_same_v<T, f16>) return float_to_f16(x);
  else return x;
}
}  // namespace pa::PA_KERNELS
#endif

// ============================================================================================
// common to both targets
// ============================================================================================

// The caller's source location, as the last parameter of a vocabulary function (emulator only).
#if defined(__CUDACC__)
#define PA_CALLER_WHERE
#define PA_FIRST_CALLER_WHERE
#define PA_PASS_WHERE
#else
#define PA_CALLER_WHERE , std::source_location where = std::source_location::current()
#define PA_FIRST_CALLER_WHERE std::source_location where = std::source_location::current()
#define PA_PASS_WHERE , where
#endif

namespace pa::PA_KERNELS {

/// N elements loaded or stored as one access of N*sizeof(T) bytes (16 bytes for the vector
/// loads of the later steps: 8 bf16 or 4 floats).
template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

/// Converts a vector of T to floats. A bf16 is the top half of a float, so on the GPU each
/// 32-bit word of two bf16 becomes two floats with one shift and one mask; converting element by
/// element costs three instructions a pair (extract, then shift). The emulator converts element
/// by element: the same bits.
template <class T, int N>
__device__ __forceinline__ void vec_to_floats(const Vec<T, N>& in, float* out) {
#if defined(__CUDACC__)
  if constexpr (std::is_same_v<T, bf16>) {
    unsigned words[N / 2];
    memcpy(words, in.v, sizeof(words));
    PA_UNROLL
    for (int i = 0; i < N / 2; ++i) {
      out[2 * i] = __uint_as_float(words[i] << 16);
      out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    }
  } else
#endif
  {
    PA_UNROLL
    for (int e = 0; e < N; ++e) out[e] = to_float(in.v[e]);
  }
}

/// Makes \p x opaque to the compiler at this point, so it stays in a register as computed
/// instead of being recomputed from its inputs where it is used. nvcc otherwise may keep a
/// loaded bf16 query packed (half the registers) and redo its conversion and scaling in every
/// iteration of a loop that uses it. No-op in the emulator.
__device__ __forceinline__ void keep_in_register(float& x) {
#if defined(__CUDACC__)
  asm volatile("" : "+f"(x));
#else
  (void)x;
#endif
}

/// 2^x for softmax weights: on the GPU one `ex2.approx.ftz` (about 2 ulp; a result below 2^-126
/// flushes to zero). exp2f adds a range check and two multiplies to keep subnormal results,
/// which cannot change a softmax: the running sum holds the max's own weight, 1. The emulator
/// computes std::exp2 and flushes subnormal results the same way.
__device__ __forceinline__ float fast_exp2(float x) {
#if defined(__CUDACC__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  const float y = std::exp2(x);
  return std::fpclassify(y) == FP_SUBNORMAL ? 0.0f : y;
#endif
}

/// Loads elements [index, index+N) of \p span with one vector access; the address must be
/// aligned to N*sizeof(T) (the emulator checks, the GPU faults).
template <int N, class T>
__device__ __forceinline__ Vec<std::remove_const_t<T>, N> load_vec(const gspan<T>& span, std::int64_t index PA_CALLER_WHERE) {
  using V = Vec<std::remove_const_t<T>, N>;
#if defined(__CUDACC__)
  return *reinterpret_cast<const V*>(span.ptr + index);
#else
  V out;
  span.load_vector(index, N, out.v, where);
  return out;
#endif
}

/// Asks the L2 for the 128-byte line that holds element \p index of \p span, without waiting
/// and without a register: a later load of it hits the L2 instead of DRAM. Under nvcc
/// `prefetch.global.L2`; the emulator has no cache, so it only checks that the index is inside
/// the span (a prefetch past the end is a fault there, though the GPU would not fault) and
/// counts no bytes.
template <class T>
__device__ __forceinline__ void prefetch_l2(const gspan<T>& span, std::int64_t index PA_CALLER_WHERE) {
#if defined(__CUDACC__)
  asm volatile("prefetch.global.L2 [%0];" ::"l"(span.ptr + index));
#else
  span.prefetch(index, where);
#endif
}

/// Stores a vector to elements [index, index+N) of \p span with one access.
template <int N, class T>
__device__ __forceinline__ void store_vec(const gspan<T>& span, std::int64_t index, const Vec<T, N>& value PA_CALLER_WHERE) {
#if defined(__CUDACC__)
  *reinterpret_cast<Vec<T, N>*>(span.ptr + index) = value;
#else
  span.store_vector(index, N, value.v, where);
#endif
}

/// Adds \p value to element \p index of \p span as one atomic operation and returns what it held
/// before: `atomicAdd` under nvcc (relaxed, device scope), so of the programs that add at once
/// each sees a different value. The emulator runs one program at a time and one of its threads
/// at a time: there a checked load and store do the same (and count their bytes).
template <class T>
__device__ __forceinline__ T atomic_add(const gspan<T>& span, std::int64_t index, T value PA_CALLER_WHERE) {
#if defined(__CUDACC__)
  return atomicAdd(span.ptr + index, value);
#else
  const T before = span.load(index, where);
  span.store(index, before + value, where);
  return before;
#endif
}

// ----- shared-memory slots ------------------------------------------------------------------
// A loop that addresses the same shared-memory slots every iteration can name them once:
// shared_slot(shared, at) is floats [at, at+4) of \p shared, `slot + floats` a slot further on.
// Under nvcc a slot is its 32-bit shared-window address, computed once (keep_in_register
// stops nvcc from recomputing the window's base from the block's cluster rank at every use),
// so a constant distance between slots becomes an immediate offset in the instruction. In the
// emulator it is the array and the float index, and every access is checked as before.

#if defined(__CUDACC__)
template <class Shared>
struct SharedSlot {
  unsigned address;  ///< byte address in the shared window
  __device__ __forceinline__ SharedSlot operator+(int floats) const { return {address + static_cast<unsigned>(floats) * 4u}; }
};
template <class Shared>
__device__ __forceinline__ SharedSlot<Shared> shared_slot(Shared shared, int at) {
  return {static_cast<unsigned>(__cvta_generic_to_shared(shared + at))};
}
template <class Shared>
__device__ __forceinline__ void keep_in_register(SharedSlot<Shared>& slot) {
  asm volatile("" : "+r"(slot.address));
}
#else
template <class Shared>
struct SharedSlot {
  Shared array;
  int at;
  SharedSlot operator+(int floats) const { return {array, at + floats}; }
};
template <class Shared>
SharedSlot<Shared> shared_slot(Shared shared, int at) {
  return {shared, at};
}
template <class Shared>
void keep_in_register(SharedSlot<Shared>&) {}
#endif

// ----- asynchronous copies into shared memory ---------------------------------------------
// A thread hands the memory system 16-byte copies from global to shared memory and goes on; the
// bytes travel without passing through its registers, so it can have many in flight (a
// register prefetch holds a register per 4 bytes until the data is used). Copies are grouped:
// async_commit() closes a group, async_wait<n>() returns once at most n of this thread's groups
// are still in flight. A thread may read what it copied itself after that wait; other threads
// need a barrier as well. Shared memory is addressed in floats (the emulator tracks one element
// type per array), 16 bytes = 4 floats, 16-byte aligned.
//
// Under nvcc these are `cp.async.cg` (sm_80 and later), `cp.async.commit_group` and
// `cp.async.wait_group`. The emulator models them (emu::async_copy): the global read is checked
// and counted like load_vec when the copy is issued; the destination holds poison and is in
// flight until the async_wait that covers the copy's group, where the data lands and the race
// detector sees the write as this thread's; touching it in between is a fault that names the
// line.

/// Starts copying elements [index, index+N) of \p src (16 bytes) to the slot \p dst.
template <int N, class T, class Shared>
__device__ __forceinline__ void copy_async(SharedSlot<Shared> dst, const gspan<T>& src, std::int64_t index PA_CALLER_WHERE) {
  static_assert(N * sizeof(T) == 16, "asynchronous copies move 16 bytes");
#if defined(__CUDACC__)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst.address), "l"(src.ptr + index) : "memory");
#else
  std::remove_const_t<T> values[N];
  src.load_vector(index, N, values, where);
  emu::async_copy(dst.array.array(), dst.array.offset() + dst.at, values, 16, where);
#endif
}

/// Starts filling the slot \p dst with zero bytes (a copy that reads nothing).
template <class T, class Shared>
__device__ __forceinline__ void zero_async(SharedSlot<Shared> dst, const gspan<T>& any PA_CALLER_WHERE) {
#if defined(__CUDACC__)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, 0;\n" ::"r"(dst.address), "l"(any.ptr) : "memory");
#else
  (void)any;
  emu::async_copy(dst.array.array(), dst.array.offset() + dst.at, nullptr, 16, where);
#endif
}

/// copy_async of elements [index, index+N) of \p src when \p valid, else zero_async: one
/// instruction either way on the GPU (a copy whose source is ignored fills the slot with zeros),
/// so a loop whose last tile may end past the range issues one copy a slot, not a copy
/// and a zero fill each behind a branch. \p index must lie in \p src even when not \p valid:
/// the GPU forms that address and reads nothing there (the emulator checks it, as a prefetch).
template <int N, class T, class Shared>
__device__ __forceinline__ void copy_async_or_zero(SharedSlot<Shared> dst, const gspan<T>& src, std::int64_t index,
                                                   bool valid PA_CALLER_WHERE) {
  static_assert(N * sizeof(T) == 16, "asynchronous copies move 16 bytes");
#if defined(__CUDACC__)
  // cp.async's ignore-src operand: when set, no bytes are read and the 16 are zeros.
  asm volatile(
      "{\n .reg .pred ignore;\n setp.eq.u32 ignore, %2, 0;\n cp.async.cg.shared.global [%0], [%1], 16, ignore;\n}\n" ::"r"(
          dst.address),
      "l"(src.ptr + index), "r"(static_cast<unsigned>(valid))
      : "memory");
#else
  if (valid) {
    copy_async<N>(dst, src, index, where);
  } else {
    src.prefetch(index, where);
    zero_async(dst, src, where);
  }
#endif
}

// ----- global cursors ------------------------------------------------------------------------
// A loop that walks a tensor a fixed stride at a time can keep where it is instead of an index:
// global_cursor(span, index) names element \p index of \p span, `cursor + elements` one further
// on. Under nvcc a cursor is the element's address, so advancing it by a 32-bit stride is one
// wide multiply-add, where `span.ptr + index` costs a 64-bit shift and add at every use. In the
// emulator it is the span and the index, and every access through it is checked as before.

#if defined(__CUDACC__)
template <class T>
struct GlobalCursor {
  T* ptr;
  __device__ __forceinline__ GlobalCursor operator+(int elements) const { return {ptr + elements}; }
};
template <class T>
__device__ __forceinline__ GlobalCursor<T> global_cursor(const gspan<T>& span, std::int64_t index) {
  return {span.ptr + index};
}
#else
template <class T>
struct GlobalCursor {
  gspan<T> span;
  std::int64_t index;
  GlobalCursor operator+(int elements) const { return {span, index + elements}; }
};
template <class T>
GlobalCursor<T> global_cursor(const gspan<T>& span, std::int64_t index) {
  return {span, index};
}
#endif

/// copy_async of the 16 bytes at \p src.
template <int N, class T, class Shared>
__device__ __forceinline__ void copy_async(SharedSlot<Shared> dst, const GlobalCursor<T>& src PA_CALLER_WHERE) {
#if defined(__CUDACC__)
  copy_async<N>(dst, gspan<T>(src.ptr, 0, nullptr), 0);  // on the GPU a span is its pointer
#else
  copy_async<N>(dst, src.span, src.index, where);
#endif
}

/// copy_async_or_zero of the 16 bytes at \p src.
template <int N, class T, class Shared>
__device__ __forceinline__ void copy_async_or_zero(SharedSlot<Shared> dst, const GlobalCursor<T>& src,
                                                   bool valid PA_CALLER_WHERE) {
#if defined(__CUDACC__)
  copy_async_or_zero<N>(dst, gspan<T>(src.ptr, 0, nullptr), 0, valid);
#else
  copy_async_or_zero<N>(dst, src.span, src.index, valid, where);
#endif
}

/// copy_async to floats [at, at+4) of \p dst.
template <int N, class T, class Shared>
__device__ __forceinline__ void copy_async(Shared dst, int at, const gspan<T>& src, std::int64_t index PA_CALLER_WHERE) {
  copy_async<N>(shared_slot(dst, at), src, index PA_PASS_WHERE);
}

/// zero_async of floats [at, at+4) of \p dst.
template <class T, class Shared>
__device__ __forceinline__ void zero_async(Shared dst, int at, const gspan<T>& any PA_CALLER_WHERE) {
  zero_async(shared_slot(dst, at), any PA_PASS_WHERE);
}

/// Closes this thread's current group of asynchronous copies (an empty group counts too).
__device__ __forceinline__ void async_commit() {
#if defined(__CUDACC__)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
  emu::async_commit();
#endif
}

/// Waits until at most PENDING of this thread's committed groups are still in flight: every
/// committed group but the PENDING most recent ones has landed (copies not yet committed are
/// not waited for).
template <int PENDING>
__device__ __forceinline__ void async_wait(PA_FIRST_CALLER_WHERE) {
#if defined(__CUDACC__)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
#else
  emu::async_wait(PENDING, where);
#endif
}

/// Reads the slot \p src as N elements of T (one 16-byte shared load).
template <class T, int N, class Shared>
__device__ __forceinline__ Vec<T, N> load_shared_vec(SharedSlot<Shared> src PA_CALLER_WHERE) {
  static_assert(N * sizeof(T) == 16, "16-byte shared loads");
  Vec<T, N> out;
#if defined(__CUDACC__)
  unsigned words[4];
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(words[0]), "=r"(words[1]), "=r"(words[2]), "=r"(words[3])
               : "r"(src.address));
  memcpy(out.v, words, 16);
#else
  using Element = typename decltype(src.array)::value_type;
  Element words[16 / sizeof(Element)];
  src.array.load(src.at, static_cast<int>(16 / sizeof(Element)), words, where);
  std::memcpy(out.v, words, 16);
#endif
  return out;
}

/// load_shared_vec of floats [at, at+4) of \p src.
template <class T, int N, class Shared>
__device__ __forceinline__ Vec<T, N> load_shared_vec(Shared src, int at PA_CALLER_WHERE) {
  return load_shared_vec<T, N>(shared_slot(src, at) PA_PASS_WHERE);
}

// ----- tensor cores ------------------------------------------------------------------------
// A warp multiplies small matrices in one instruction: mma m16n8k16 computes D = A·B + C for a
// 16x16 A and a 16x8 B of 16-bit floats (bf16 or f16) with 32-bit accumulators C and D. No lane
// holds a whole matrix: each holds a fixed piece of each, its *fragment*, in registers; a
// 32-bit register holds two 16-bit elements, the lower index in the low half. The functions in
// mma_layout say which lane holds which element (the PTX ISA's figures for m16n8k16 and
// ldmatrix, as code). Under nvcc `mma` and `ldmatrix` are the instructions; the emulator
// gathers the 32 lanes' fragments into whole matrices by the same functions, multiplies, and
// hands each lane its piece, so a kernel that puts an element in the wrong place gets wrong
// numbers in both. Both are warp-wide: every lane of the warp must call them together.

/// Which lane holds which element of an m16n8k16 fragment, and of an ldmatrix result. `g` is a
/// lane's group of four (lane / 4, 0-7), `t` its place in the group (lane % 4, 0-3).
namespace mma_layout {
/// A (16 x 16, row-major): register r (0-3) holds elements (a_row, a_col) and (a_row, a_col + 1).
__host__ __device__ constexpr int a_row(int lane, int r) { return lane / 4 + 8 * (r % 2); }
__host__ __device__ constexpr int a_col(int lane, int r) { return 2 * (lane % 4) + 8 * (r / 2); }
/// B (16 x 8, k x n, "col": each column's k elements are contiguous): register r (0-1) holds
/// elements (b_row, b_col) and (b_row + 1, b_col).
__host__ __device__ constexpr int b_row(int lane, int r) { return 2 * (lane % 4) + 8 * r; }
__host__ __device__ constexpr int b_col(int lane) { return lane / 4; }
/// C and D (16 x 8 floats): element e (0-3) is (c_row, c_col).
__host__ __device__ constexpr int c_row(int lane, int e) { return lane / 4 + 8 * (e / 2); }
__host__ __device__ constexpr int c_col(int lane, int e) { return 2 * (lane % 4) + e % 2; }
/// ldmatrix .x4: lanes 8j .. 8j+7 give the addresses of rows 0-7 of matrix j (8 x 8 16-bit
/// elements, a row is 16 contiguous bytes); register j of each lane receives elements
/// (ld_row, ld_col) and (ld_row, ld_col + 1) of matrix j, or with .trans (ld_col, ld_row) and
/// (ld_col + 1, ld_row): the transpose.
__host__ __device__ constexpr int ld_row(int lane) { return lane / 4; }
__host__ __device__ constexpr int ld_col(int lane) { return 2 * (lane % 4); }
}  // namespace mma_layout

/// Two floats as one register of two 16-bit T (bf16 or f16), rounded to nearest; \p lo in the
/// low half.
template <class T>
__device__ __forceinline__ unsigned pack_pair(float lo, float hi) {
#if defined(__CUDACC__)
  unsigned out;
  if constexpr (std::is_same_v<T, bf16>) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
    memcpy(&out, &pair, 4);
  } else {
    const __half2 pair = __floats2half2_rn(lo, hi);
    memcpy(&out, &pair, 4);
  }
  return out;
#else
  return unsigned{from_float<T>(lo).bits} | unsigned{from_float<T>(hi).bits} << 16;
#endif
}

/// The two T of one register as floats (exact).
template <class T>
__device__ __forceinline__ void unpack_pair(unsigned pair, float& lo, float& hi) {
  T halves[2];
  memcpy(halves, &pair, 4);
  lo = to_float(halves[0]);
  hi = to_float(halves[1]);
}

/// Elements [index, index + 2) of \p span as one register (a 4-byte load; index even).
template <class T>
__device__ __forceinline__ unsigned load_pair(const gspan<T>& span, std::int64_t index PA_CALLER_WHERE) {
  const auto pair = load_vec<2>(span, index PA_PASS_WHERE);
  unsigned out;
  memcpy(&out, pair.v, 4);
  return out;
}

// ----- fp8 -----------------------------------------------------------------------------------
// An e4m3 value (common/dtype.h: bias 7, no infinities, 0x7f/0xff NaN, largest 448, subnormals
// m * 2^-9) has 4 significant bits and exponents 2^-9 .. 2^8, so every one is exact in f16
// (11 significant bits, normal from 2^-14): a kernel turns fp8 K/V into f16 fragments for the
// tensor cores without rounding anything.

/// The two e4m3 of one half of \p pair (the low 16 bits for HALF 0, the high for HALF 1; the
/// lower element in the lower byte) as two f16 in one register, the lower in the low half:
/// exact. Under nvcc one `cvt.rn.f16x2.e4m3x2` (sm_89 and later), which reads either half of a
/// register as it is (`F2FP ... R.H1`), so the high half costs no shift; the emulator converts
/// through float (e4m3_to_float, float_to_f16), which is exact both ways; a NaN (0x7f, 0xff)
/// becomes a quiet f16 NaN in both.
template <int HALF = 0>
__device__ __forceinline__ unsigned e4m3x2_to_f16x2(unsigned pair) {
  static_assert(HALF == 0 || HALF == 1, "a register has two 16-bit halves");
#if defined(__CUDACC__)
  unsigned out;
  if constexpr (HALF == 0)
    asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.rn.f16x2.e4m3x2 %0, lo;\n}" : "=r"(out) : "r"(pair));
  else
    asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.rn.f16x2.e4m3x2 %0, hi;\n}" : "=r"(out) : "r"(pair));
  return out;
#else
  const auto half = [](unsigned byte) {
    return unsigned{float_to_f16(e4m3_to_float(e4m3_t{static_cast<std::uint8_t>(byte)})).bits};
  };
  const unsigned bits = pair >> (16 * HALF);
  return half(bits & 0xffu) | half((bits >> 8) & 0xffu) << 16;
#endif
}

/// Byte i of the result is byte `(selector >> 4i) & 7` of the eight bytes \p lo (bytes 0-3) and
/// \p hi (bytes 4-7): CUDA's `__byte_perm` (one `prmt`), without its sign-replicate mode.
__device__ __forceinline__ unsigned byte_perm(unsigned lo, unsigned hi, unsigned selector) {
#if defined(__CUDACC__)
  return __byte_perm(lo, hi, selector);
#else
  const std::uint64_t bytes = std::uint64_t{lo} | std::uint64_t{hi} << 32;
  unsigned out = 0;
  for (int i = 0; i < 4; ++i) out |= static_cast<unsigned>((bytes >> (8 * ((selector >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
  return out;
#endif
}

#if !defined(__CUDACC__)
namespace emu_matrix {
/// One lane's operands of an mma, as the emulator's warp_combine sees them.
struct MmaOperands {
  unsigned a[4];
  unsigned b[2];
  float c[4];
  float d[4];
};
/// D = A·B + C for the whole warp: the fragments gathered into matrices by mma_layout, the
/// products summed in double (exact for 16-bit inputs) and rounded once to float. The GPU's
/// tensor cores sum in their own order with at least fp32 precision; the two agree to the
/// last bits, well inside every tolerance of the tests.
template <class T>
void mma_combine(void* const* lanes) {
  using namespace mma_layout;
  float a[16][16], b[16][8], c[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const auto& in = *static_cast<const MmaOperands*>(lanes[lane]);
    for (int r = 0; r < 4; ++r) unpack_pair<T>(in.a[r], a[a_row(lane, r)][a_col(lane, r)], a[a_row(lane, r)][a_col(lane, r) + 1]);
    for (int r = 0; r < 2; ++r) unpack_pair<T>(in.b[r], b[b_row(lane, r)][b_col(lane)], b[b_row(lane, r) + 1][b_col(lane)]);
    for (int e = 0; e < 4; ++e) c[c_row(lane, e)][c_col(lane, e)] = in.c[e];
  }
  for (int lane = 0; lane < 32; ++lane) {
    auto& out = *static_cast<MmaOperands*>(lanes[lane]);
    for (int e = 0; e < 4; ++e) {
      double sum = c[c_row(lane, e)][c_col(lane, e)];
      for (int k = 0; k < 16; ++k) sum += double{a[c_row(lane, e)][k]} * b[k][c_col(lane, e)];
      out.d[e] = static_cast<float>(sum);
    }
  }
}
/// One lane's part of an ldmatrix .x4: the 16-byte row it read, and its four result registers.
struct LdmatrixOperands {
  std::uint16_t row[8];
  unsigned out[4];
};
/// Hands each lane its elements of the four 8 x 8 matrices whose rows the lanes read.
template <bool TRANS>
void ldmatrix_combine(void* const* lanes) {
  using namespace mma_layout;
  auto element = [&](int matrix, int row, int col) {  // matrix j's rows came from lanes 8j .. 8j+7
    return unsigned{static_cast<const LdmatrixOperands*>(lanes[8 * matrix + row])->row[col]};
  };
  for (int lane = 0; lane < 32; ++lane) {
    auto& out = *static_cast<LdmatrixOperands*>(lanes[lane]);
    for (int j = 0; j < 4; ++j) {
      const int row = ld_row(lane), col = ld_col(lane);
      out.out[j] = TRANS ? element(j, col, row) | element(j, col + 1, row) << 16
                         : element(j, row, col) | element(j, row, col + 1) << 16;
    }
  }
}
}  // namespace emu_matrix
#endif

/// D += A·B for one m16n8k16 tile of the warp: \p a and \p b are this lane's fragments of 16-bit
/// T (bf16 or f16), \p d its four fp32 accumulators (see mma_layout).
template <class T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]
                                                 PA_CALLER_WHERE) {
  static_assert(std::is_same_v<T, bf16> || std::is_same_v<T, f16>, "tensor cores take 16-bit inputs here");
#if defined(__CUDACC__)
  if constexpr (std::is_same_v<T, bf16>)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  emu_matrix::MmaOperands operands;
  std::memcpy(operands.a, a, sizeof operands.a);
  std::memcpy(operands.b, b, sizeof operands.b);
  std::memcpy(operands.c, d, sizeof operands.c);
  emu::warp_combine("mma_m16n8k16", &emu_matrix::mma_combine<T>, &operands, where);
  std::memcpy(d, operands.d, sizeof operands.d);
#endif
}

/// ldmatrix .x4 (TRANS: .x4.trans): this lane gives the address of one row of 16 bytes, \p row
/// (lane 8j + i: row i of matrix j), and receives register j of each of the four matrices (see
/// mma_layout). Reads shared memory written by other lanes: order it after their writes (a
/// barrier, or async_wait and then a barrier for copies).
template <bool TRANS, class Shared>
__device__ __forceinline__ void ldmatrix_x4(unsigned (&out)[4], SharedSlot<Shared> row PA_CALLER_WHERE) {
#if defined(__CUDACC__)
  if constexpr (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(out[0]), "=r"(out[1]), "=r"(out[2]), "=r"(out[3])
                 : "r"(row.address));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(out[0]), "=r"(out[1]), "=r"(out[2]), "=r"(out[3])
                 : "r"(row.address));
#else
  using Element = typename decltype(row.array)::value_type;
  static_assert(16 % sizeof(Element) == 0, "shared memory addressed in elements of at most 16 bytes");
  Element words[16 / sizeof(Element)];
  row.array.load(row.at, static_cast<int>(16 / sizeof(Element)), words, where);  // this lane's row, checked
  emu_matrix::LdmatrixOperands operands;
  std::memcpy(operands.row, words, 16);
  emu::warp_combine(TRANS ? "ldmatrix_x4 (.trans)" : "ldmatrix_x4", &emu_matrix::ldmatrix_combine<TRANS>, &operands,
                    where);
  std::memcpy(out, operands.out, sizeof operands.out);
#endif
}

// ----- overlapped launches ----------------------------------------------------------------
// A kernel launched with launch_kernel_overlapped() may start while the kernel before it in the
// stream is still running (Hopper's programmatic dependent launch): its programs are placed on
// the SMs as soon as every program of the one before has called allow_next_kernel() or ended,
// and wait in wait_for_previous_kernel() until that kernel has finished and its writes are
// visible. What is saved is the gap between two dependent kernels: the second one's launch and
// placement. The emulator runs launches one after another and models the hazard instead: it
// records the global bytes each launch writes, and a thread of an overlapped launch that reads
// or writes one of the previous launch's before its wait_for_previous_kernel() is a fault; once
// a launch has called allow_next_kernel() it records its reads too, and the next launch's writes
// of them before the wait are faults as well (before that call the next launch cannot start).

/// Lets the next kernel, if launched overlapped, start placing its programs (sm_90 and later).
__device__ __forceinline__ void allow_next_kernel() {
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
#else
  emu::allow_next_kernel();
#endif
}

/// Waits until the kernel before this one has finished and its writes are visible; call it
/// before reading anything that kernel wrote (a no-op when not launched overlapped).
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
#else
  emu::wait_for_previous_kernel();
#endif
}

#if defined(__CUDACC__)
/// This compilation's backend.
inline constexpr Backend kBackend = Backend::cuda;
#else
inline constexpr Backend kBackend = Backend::emulator;
#endif

/// launch_kernel and launch_kernel_overlapped, below.
template <class... Params, class... Args>
void launch_kernel_as(bool overlapped, const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
                      std::size_t shared_bytes, void* stream, const Args&... args) {
#if defined(__CUDACC__)
  if (shared_bytes > 48 * 1024) {
    const cudaError_t status = cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    static_cast<int>(shared_bytes));
    if (status != cudaSuccess)
      throw CudaError(cat(name, ": cannot raise dynamic shared memory to ", shared_bytes,
                          " bytes: ", cudaGetErrorString(status)));
  }
  cudaError_t launched = cudaSuccess;
  if (overlapped) {
    const gpu::OverlappedLaunch launch(grid, block, shared_bytes, stream);
    launched = cudaLaunchKernelEx(&launch.config, kernel, static_cast<Params>(args)...);
  } else {
    kernel<<<grid, block, shared_bytes, static_cast<cudaStream_t>(stream)>>>(args...);
  }
  const cudaError_t last = cudaGetLastError();  // clears the error state either way
  const cudaError_t status = launched != cudaSuccess ? launched : last;
  if (status != cudaSuccess)
    throw CudaError(cat("launch of ", name, " (grid ", grid.x, 'x', grid.y, 'x', grid.z, ", block ",
                        block.x, ", ", shared_bytes, " B shared) failed: ", cudaGetErrorString(status)));
#else
  (void)stream;
  emu::launch({grid, block, shared_bytes, name, overlapped}, [&] { kernel(args...); });
#endif
}

/// Launches \p kernel on a grid of programs: `kernel<<<grid, block, shared_bytes, stream>>>`
/// under nvcc (raising the dynamic shared-memory limit first when a program needs more than
/// 48 KiB; a failed launch throws CudaError naming \p name), `emu::launch` in the emulator.
template <class... Params, class... Args>
void launch_kernel(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
                   std::size_t shared_bytes, void* stream, const Args&... args) {
  launch_kernel_as(false, name, kernel, grid, block, shared_bytes, stream, args...);
}

/// launch_kernel, overlapped with the end of the kernel before it in \p stream (see
/// allow_next_kernel): \p kernel must call wait_for_previous_kernel() before it reads what
/// that kernel wrote.
template <class... Params, class... Args>
void launch_kernel_overlapped(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
                              std::size_t shared_bytes, void* stream, const Args&... args) {
  launch_kernel_as(true, name, kernel, grid, block, shared_bytes, stream, args...);
}

/// Programs of \p kernel one multiprocessor holds at once with \p threads threads and
/// \p shared_bytes of dynamic shared memory: CUDA's occupancy calculator under nvcc (registers
/// included); in the emulator, which allocates no registers, the bound from threads and
/// shared memory alone. 0 when one program does not fit (a launch would fail).
template <class... Params>
int resident_programs_per_sm(void (*kernel)(Params...), int threads, std::size_t shared_bytes,
                             const DeviceLimits& device) {
#if defined(__CUDACC__)
  (void)device;
  // Past 48 KiB a kernel must opt in (launch_kernel does it at launch); until it has, CUDA
  // counts it as not fitting, which would change the answer between the first call and later ones.
  if (shared_bytes > 48 * 1024) {
    const cudaError_t raised = cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    static_cast<int>(shared_bytes));
    if (raised != cudaSuccess)
      throw CudaError(cat("cannot raise dynamic shared memory to ", shared_bytes, " bytes: ", cudaGetErrorString(raised)));
  }
  int blocks = 0;
  const cudaError_t status = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, reinterpret_cast<const void*>(kernel), threads, shared_bytes);
  if (status != cudaSuccess)
    throw CudaError(cat("cudaOccupancyMaxActiveBlocksPerMultiprocessor: ", cudaGetErrorString(status)));
  return blocks;
#else
  (void)kernel;
  std::size_t blocks = std::min<std::size_t>(device.max_blocks_per_sm, device.max_threads_per_sm / threads);
  if (shared_bytes > 0) blocks = std::min(blocks, device.shared_per_sm / shared_bytes);
  return static_cast<int>(blocks);
#endif
}

/// Calls `f(T{})` with the kernel-side storage type of \p dtype (float, f16 or bf16).
template <class F>
void dispatch_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: f(float{}); return;
    case DType::f16: f(f16{}); return;
    case DType::bf16: f(bf16{}); return;
    case DType::e4m3: return;  // a K/V storage type only: validate() refuses it as dtype
  }
}

}  // namespace pa::PA_KERNELS
