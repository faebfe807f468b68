// The pretend GPU's own tests: correct kernels run and give the right answer; planted bugs
// (a missing barrier, a read past a tensor, a barrier some threads skip, a shuffle under a
// wrong mask, a misaligned vector load, a page looked up one block-table entry too far) are each
// caught with a message that names the place (file:line); a result that depends on the order of
// the threads differs between shuffled orders.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "common/workload.h"
#include "kernels/decode_common.cuh"
#include "kernels/portable/portable.h"
#include "tests/catch_compat.h"

namespace pa::PA_KERNELS::emulator_tests {

// ----- correct kernels ------------------------------------------------------------------------

/// Block-wide sum through shared memory, tree-shaped, a barrier at every level.
__global__ void block_sum(gspan<const float> input, gspan<float> output) {
  PA_SHARED(float, partial, 256);
  const int tid = threadIdx.x;
  partial[tid] = input[blockIdx.x * blockDim.x + tid];
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (tid < stride) partial[tid] = partial[tid] + partial[tid + stride];
    __syncthreads();
  }
  if (tid == 0) output[blockIdx.x] = partial[0];
}

/// Warp-wide sum with xor shuffles (every lane ends with the total).
__global__ void warp_sum(gspan<const float> input, gspan<float> output) {
  const int tid = threadIdx.x;
  float value = input[tid];
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  output[tid] = value;
}

/// shfl_down, shfl_up, shfl (idx) and ballot in one warp.
__global__ void warp_moves(gspan<int> out) {
  const int lane = threadIdx.x;
  out[lane * 4 + 0] = __shfl_down_sync(0xffffffffu, lane, 3);
  out[lane * 4 + 1] = __shfl_up_sync(0xffffffffu, lane, 5);
  out[lane * 4 + 2] = __shfl_sync(0xffffffffu, lane * 10, 7);
  out[lane * 4 + 3] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 3 == 0));
}

/// Lanes of one warp exchange through shared memory, ordered by __syncwarp (no block barrier).
__global__ void syncwarp_exchange(gspan<float> out) {
  PA_SHARED(float, slots, 64);
  const int tid = threadIdx.x;
  slots[tid] = static_cast<float>(tid);
  __syncwarp();
  out[tid] = slots[(tid % 32 + 1) % 32 + (tid / 32) * 32];
}

/// Locals live across barriers (each thread has its own stack).
__global__ void locals_across_barriers(gspan<int> out) {
  PA_SHARED(int, scratch, 128);
  int mine[4];
  for (int i = 0; i < 4; ++i) mine[i] = static_cast<int>(threadIdx.x) * 10 + i;
  for (int round = 0; round < 4; ++round) {
    scratch[threadIdx.x] = mine[round];
    __syncthreads();
    mine[round] = scratch[(threadIdx.x + 1) % blockDim.x];
    __syncthreads();
  }
  out[threadIdx.x] = mine[0] + mine[1] + mine[2] + mine[3];
}

/// Dynamic shared memory sized at launch.
__global__ void reverse_dynamic(gspan<const float> input, gspan<float> output) {
  PA_DYNAMIC_SHARED(float, staged);
  const int tid = threadIdx.x;
  staged[tid] = input[tid];
  __syncthreads();
  output[tid] = staged[blockDim.x - 1 - tid];
}

/// Vector loads of 8 bf16 (16 bytes).
__global__ void vector_copy(gspan<const bf16> input, gspan<bf16> output, int offset) {
  const int tid = threadIdx.x;
  const Vec<bf16, 8> v = load_vec<8>(input, offset + tid * 8);
  store_vec<8>(output, tid * 8, v);
}



/// Each thread stages two 16-byte bf16 vectors through dynamic shared memory with asynchronous
/// copies (the second one zero-filled when \p zero_second), waits for its own copies and writes
/// them back; `neighbour` reads the next thread's slots instead, which needs a barrier.
template <bool kNeighbour>
__global__ void staged_copy(gspan<const bf16> input, gspan<bf16> output, int zero_second) {
  PA_DYNAMIC_SHARED(float, slots);
  const int tid = threadIdx.x;
  copy_async<8>(slots, (2 * tid) * 4, input, tid * 16);
  if (zero_second) zero_async(slots, (2 * tid + 1) * 4, input);
  else copy_async<8>(slots, (2 * tid + 1) * 4, input, tid * 16 + 8);
  async_commit();
  async_wait<0>();
  const int from = kNeighbour ? (tid + 1) % blockDim.x : tid;
  store_vec(output, tid * 16, load_shared_vec<bf16, 8>(slots, (2 * from) * 4));
  store_vec(output, tid * 16 + 8, load_shared_vec<bf16, 8>(slots, (2 * from + 1) * 4));
}
// ----- planted bugs ---------------------------------------------------------------------------

/// BUG: every thread writes its slot and reads its neighbour's with no barrier between.
__global__ void missing_barrier(gspan<const float> input, gspan<float> output) {
  PA_SHARED(float, values, 64);
  const int tid = threadIdx.x;
  values[tid] = input[tid];
  // __syncthreads();   <- missing
  output[tid] = values[tid == 0 ? 0 : tid - 1];
}
constexpr int kMissingBarrierWrite = __LINE__ - 4, kMissingBarrierRead = __LINE__ - 2;

/// BUG: the reduction reads partial sums of other threads with no barrier before it.
__global__ void missing_barrier_reduction(gspan<const float> input, gspan<float> output) {
  PA_SHARED(float, partial, 64);
  const int tid = threadIdx.x;
  partial[tid] = input[tid];
  // __syncthreads();   <- missing
  if (tid == 0) {
    float sum = 0;
    for (int i = 0; i < 64; ++i) sum += partial[i];
    output[0] = sum;
  }
}

/// BUG: a write after other threads read the same element, with no barrier between.
__global__ void write_after_read(gspan<float> output) {
  PA_SHARED(float, value, 1);
  if (threadIdx.x == 0) value[0] = 1.0f;
  __syncthreads();
  output[threadIdx.x] = value[0];
  if (threadIdx.x == 40) value[0] = 2.0f;  // thread 0..39 read it in this epoch
}

/// BUG: off by one: reads one element past the end of the input.
__global__ void read_past_end(gspan<const float> input, gspan<float> output) {
  const int tid = threadIdx.x;
  output[tid] = input[tid + 1];
}
constexpr int kReadPastEnd = __LINE__ - 2;

/// BUG: off by one: the last thread writes one element past the end of the output.
__global__ void write_past_end(gspan<float> output) {
  const int tid = threadIdx.x;
  output[tid + 1] = 1.0f;
}
constexpr int kWritePastEnd = __LINE__ - 2;

/// BUG: a barrier inside a branch that half of the threads skip.
__global__ void barrier_in_branch(gspan<float> output) {
  const int tid = threadIdx.x;
  if (tid < 32) __syncthreads();
  output[tid] = 1.0f;
}
constexpr int kBarrierInBranch = __LINE__ - 3;

/// BUG: two different barriers on the two sides of a branch.
__global__ void barrier_per_side(gspan<float> output) {
  const int tid = threadIdx.x;
  if (tid < 32) {
    output[tid] = 1.0f;
    __syncthreads();
  } else {
    output[tid] = 2.0f;
    __syncthreads();
  }
}

/// BUG: the whole warp shuffles, but the mask names only lanes 0-15.
__global__ void shuffle_mask_too_small(gspan<float> output) {
  const int lane = threadIdx.x;
  output[lane] = __shfl_xor_sync(0x0000ffffu, static_cast<float>(lane), 1);
}

/// BUG: lanes 0-15 shuffle among themselves but read lanes 16-31 (xor 16).
__global__ void shuffle_reads_outside_mask(gspan<float> output) {
  const int lane = threadIdx.x;
  if (lane < 16) output[lane] = __shfl_xor_sync(0x0000ffffu, static_cast<float>(lane), 16);
}

/// Not a bug: the mask names all 32 lanes and lanes 16-31 exit without the shuffle; CUDA asks
/// only the lanes named that have not exited to call it, and lanes 0-15 read among themselves.
__global__ void shuffle_lanes_exited(gspan<float> output) {
  const int lane = threadIdx.x;
  if (lane < 16) output[lane] = __shfl_xor_sync(0xffffffffu, static_cast<float>(lane), 1);
}

/// BUG: as above, but lanes 0-15 read lanes 16-31 (xor 16), which have exited.
__global__ void shuffle_lanes_missing(gspan<float> output) {
  const int lane = threadIdx.x;
  if (lane < 16) output[lane] = __shfl_xor_sync(0xffffffffu, static_cast<float>(lane), 16);
}
constexpr int kShuffleLanesMissing = __LINE__ - 2;

/// Shuffles within segments of 16 lanes (width 16): xor may read an earlier segment, not a
/// later one; a lane operand of 33 is 1 (its low 5 bits, as PTX takes them).
__global__ void shuffle_widths(gspan<int> out) {
  const int lane = threadIdx.x;
  out[lane * 3 + 0] = __shfl_xor_sync(0xffffffffu, lane, 16, 16);
  out[lane * 3 + 1] = __shfl_down_sync(0xffffffffu, lane, 33);
  out[lane * 3 + 2] = __shfl_xor_sync(0xffffffffu, lane, 1, 8);
}

/// BUG: lane 0 writes a slot, the warp shuffles, lane 1 reads the slot: a shuffle orders no
/// memory (the CUDA guide: shuffles "do not imply a memory barrier"); __syncwarp would.
__global__ void shuffle_as_fence(gspan<float> out) {
  PA_SHARED(float, slot, 1);
  const int lane = threadIdx.x;
  if (lane == 0) slot[0] = 1.0f;
  const float any = __shfl_xor_sync(0xffffffffu, static_cast<float>(lane), 1);
  if (lane == 1) out[0] = slot[0] + any;
}
constexpr int kShuffleAsFenceRead = __LINE__ - 2;

/// Lane 5 writes a slot; lanes 5 and 6 call __syncwarp(0x60); lane \p reader reads the slot.
/// Lane 6 may (the __syncwarp orders it); lane 7, not named in it, may not.
__global__ void partial_syncwarp(gspan<float> out, int reader) {
  PA_SHARED(float, slot, 1);
  const int lane = threadIdx.x;
  if (lane == 5) slot[0] = 5.0f;
  if (lane == 5 || lane == 6) __syncwarp(0x60u);
  if (lane == reader) out[0] = slot[0];
}

/// BUG: a 16-byte vector load at an element offset that is not a multiple of 8 bf16.
__global__ void misaligned_vector(gspan<const bf16> input, gspan<bf16> output) {
  const Vec<bf16, 8> v = load_vec<8>(input, 3);
  store_vec<8>(output, 0, v);
}
constexpr int kMisalignedVector = __LINE__ - 3;

/// BUG: a 16-byte shared load (ld.shared.v4) from float 1 of an array: not a multiple of 16 bytes.
__global__ void misaligned_shared_vector(gspan<float> output) {
  PA_SHARED(float, staged, 8);
  staged[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  const Vec<float, 4> v = load_shared_vec<float, 4>(staged, 1);
  output[0] = v.v[0];
}
constexpr int kMisalignedSharedVector = __LINE__ - 3;

/// BUG: two threads write the same shared element with no barrier between.
__global__ void write_after_write(gspan<float> output) {
  PA_SHARED(float, value, 1);
  value[0] = static_cast<float>(threadIdx.x);
  __syncthreads();
  output[threadIdx.x] = value[0];
}

/// BUG: a shared index one past the array's end.
__global__ void shared_past_end(gspan<float> output) {
  PA_SHARED(float, slots, 4);
  slots[threadIdx.x] = 1.0f;
  output[threadIdx.x] = 0.0f;
}

/// BUG: a kernel that reads shared memory nothing wrote.
__global__ void uninitialised_shared(gspan<float> output) {
  PA_SHARED(float, never_written, 32);
  output[threadIdx.x] = never_written[threadIdx.x];
}
constexpr int kUninitialisedRead = __LINE__ - 2;

// ----- paged reads ----------------------------------------------------------------------------

/// Channel 0 of every token's key, through the block table as every rung reads it
/// (DecodeArgs::token_offset): one program per sequence, one thread per token.
template <class T>
__global__ void keys_through_table(DecodeArgs<T> args, gspan<float> out) {
  const int seq = blockIdx.x, token = threadIdx.x;
  if (token >= args.context_lens[seq]) return;
  out[seq * blockDim.x + token] = to_float(args.key_cache[args.token_offset(seq, 0, token)]);
}
constexpr int kKeysThroughTable = __LINE__ - 2;

/// BUG: looks token t's page up one block-table entry too far (the entry of token t + page size).
template <class T>
__global__ void keys_off_by_one_page(DecodeArgs<T> args, gspan<float> out) {
  const int seq = blockIdx.x, token = threadIdx.x;
  if (token >= args.context_lens[seq]) return;
  const std::int32_t page = args.block_tables[seq * args.max_blocks_per_seq + token / args.block_size + 1];
  out[seq * blockDim.x + token] = to_float(args.key_cache[args.kv_offset(page, 0, token % args.block_size)]);
}
constexpr int kOffByOneTableRead = __LINE__ - 3, kOffByOneKeyRead = __LINE__ - 2;

/// BUG: reads a whole pool further on than the token's page: the page number is no table entry.
template <class T>
__global__ void keys_a_pool_too_far(DecodeArgs<T> args, gspan<float> out, std::int64_t pool_elems) {
  const int seq = blockIdx.x, token = threadIdx.x;
  if (token >= args.context_lens[seq]) return;
  out[seq * blockDim.x + token] = to_float(args.key_cache[args.token_offset(seq, 0, token) + pool_elems]);
}

// ----- thread order ---------------------------------------------------------------------------

/// BUG: every thread adds its value to total[0] with a plain read and write, no atomic. A GPU
/// loses updates; the emulator runs each thread's update whole, so the sum is taken in the order
/// the threads ran and its rounding depends on that order.
__global__ void sum_in_arrival_order(gspan<const float> values, gspan<float> total) {
  total[0] = total[0] + values[blockIdx.x * blockDim.x + threadIdx.x];
}

/// BUG: thread 0 writes a global value that the other threads of its program read, with no
/// barrier between. In the fixed order thread 0 runs first and every thread reads its value.
__global__ void global_missing_barrier(gspan<float> flag, gspan<float> out) {
  if (threadIdx.x == 0) flag[blockIdx.x] = 1.0f;
  // __syncthreads();   <- missing
  out[blockIdx.x * blockDim.x + threadIdx.x] = flag[blockIdx.x];
}

}  // namespace pa::PA_KERNELS::emulator_tests

namespace {
using namespace pa::kernels_emu;
using namespace pa::kernels_emu::emulator_tests;
using pa::cat;

std::vector<float> iota_floats(std::size_t n, float start = 1.0f) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// The messages these tests expect name the thread that faults first, which the thread order
// decides: they run in the fixed order whatever PAGEDATTN_EMU_SHUFFLE says. The thread-order
// tests below choose their orders.
const bool kFixedOrder = (pa::emu::set_thread_order({}), true);

/// "tests/test_emulator.cpp:<line>": how a fault names a line of this file.
std::string this_file_at(int line) { return "tests/test_emulator.cpp:" + std::to_string(line); }

/// Launches and returns the KernelError's message (empty if none was thrown).
template <class Launch>
std::string fault_of(Launch launch) {
  try {
    launch();
  } catch (const pa::KernelError& error) {
    return error.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("emulator: block reduction through shared memory with barriers", "[emulator]") {
  const auto input = iota_floats(4 * 256);
  std::vector<float> output(4, -1.0f);
  pa::emu::reset_counters();
  launch_kernel("block_sum", block_sum, dim3(4), dim3(256), 0, nullptr,
                gspan<const float>(input.data(), 1024, "input"), gspan<float>(output.data(), 4, "output"));
  for (int b = 0; b < 4; ++b) {
    const double expected = 256.0 * (256 * b + 1) + 256.0 * 255 / 2;
    CHECK(output[b] == Approx(expected));
  }
  const pa::emu::Counters c = pa::emu::counters();
  REQUIRE(c.tensors.at("input").bytes_read >= 1024 * sizeof(float));
  CHECK(c.tensors.at("output").bytes_written >= 4 * sizeof(float));
}

TEST_CASE("emulator: warp shuffles", "[emulator]") {
  SECTION("xor reduction leaves the sum in every lane") {
    const auto input = iota_floats(32);
    std::vector<float> output(32, 0);
    launch_kernel("warp_sum", warp_sum, dim3(1), dim3(32), 0, nullptr,
                  gspan<const float>(input.data(), 32, "input"), gspan<float>(output.data(), 32, "output"));
    for (float v : output) CHECK(v == 528.0f);
  }
  SECTION("down, up, idx and ballot follow CUDA's rules at the warp's edges") {
    std::vector<int> out(32 * 4, -1);
    launch_kernel("warp_moves", warp_moves, dim3(1), dim3(32), 0, nullptr, gspan<int>(out.data(), 128, "out"));
    unsigned ballot = 0;
    for (int lane = 0; lane < 32; lane += 3) ballot |= 1u << lane;
    for (int lane = 0; lane < 32; ++lane) {
      CAPTURE(lane);
      CHECK(out[lane * 4 + 0] == (lane + 3 < 32 ? lane + 3 : lane));  // past the end: own value
      CHECK(out[lane * 4 + 1] == (lane >= 5 ? lane - 5 : lane));
      CHECK(out[lane * 4 + 2] == 70);
      CHECK(static_cast<unsigned>(out[lane * 4 + 3]) == ballot);
    }
  }
}

TEST_CASE("emulator: __syncwarp orders shared memory within a warp", "[emulator]") {
  std::vector<float> out(64, -1);
  launch_kernel("syncwarp_exchange", syncwarp_exchange, dim3(1), dim3(64), 0, nullptr, gspan<float>(out.data(), 64, "out"));
  for (int tid = 0; tid < 64; ++tid) CHECK(out[tid] == static_cast<float>((tid % 32 + 1) % 32 + (tid / 32) * 32));
}

TEST_CASE("emulator: locals live across barriers, dynamic shared memory, vector loads", "[emulator]") {
  SECTION("locals") {
    std::vector<int> out(128, 0);
    launch_kernel("locals", locals_across_barriers, dim3(2), dim3(128), 0, nullptr, gspan<int>(out.data(), 128, "out"));
    for (int tid = 0; tid < 128; ++tid) CHECK(out[tid] == ((tid + 1) % 128) * 40 + 6);
  }
  SECTION("dynamic shared") {
    const auto input = iota_floats(96);
    std::vector<float> output(96, 0);
    launch_kernel("reverse_dynamic", reverse_dynamic, dim3(1), dim3(96), 96 * sizeof(float), nullptr,
                  gspan<const float>(input.data(), 96, "input"), gspan<float>(output.data(), 96, "output"));
    for (int i = 0; i < 96; ++i) CHECK(output[i] == input[95 - i]);
  }
  SECTION("aligned 16-byte vector loads") {
    alignas(16) bf16 input[64 + 8];
    alignas(16) bf16 output[64];
    for (int i = 0; i < 72; ++i) input[i] = pa::float_to_bf16(static_cast<float>(i));
    pa::emu::reset_counters();
    launch_kernel("vector_copy", vector_copy, dim3(1), dim3(8), 0, nullptr, gspan<const bf16>(input, 72, "input"),
                  gspan<bf16>(output, 64, "output"), 8);
    for (int i = 0; i < 64; ++i) CHECK(output[i].bits == input[i + 8].bits);
    CHECK(pa::emu::counters().tensors.at("input").accesses == 8);  // one access per vector
  }
}

TEST_CASE("emulator: asynchronous copies into shared memory", "[emulator]") {
  alignas(16) bf16 input[32 * 16];
  alignas(16) bf16 output[32 * 16];
  for (int i = 0; i < 32 * 16; ++i) input[i] = pa::float_to_bf16(static_cast<float>(i % 251));
  const std::size_t shared = 32 * 2 * 16;
  SECTION("a thread reads back what it copied, after its own wait; counted like vector loads") {
    pa::emu::reset_counters();
    launch_kernel("staged_copy", staged_copy<false>, dim3(1), dim3(32), shared, nullptr,
                  gspan<const bf16>(input, 32 * 16, "input"), gspan<bf16>(output, 32 * 16, "output"), 0);
    for (int i = 0; i < 32 * 16; ++i) CHECK(output[i].bits == input[i].bits);
    CHECK(pa::emu::counters().tensors.at("input").bytes_read == 32 * 16 * sizeof(bf16));
    CHECK(pa::emu::counters().tensors.at("input").accesses == 64);
  }
  SECTION("a zero-filling copy reads nothing and leaves zeros") {
    pa::emu::reset_counters();
    launch_kernel("staged_copy", staged_copy<false>, dim3(1), dim3(32), shared, nullptr,
                  gspan<const bf16>(input, 32 * 16, "input"), gspan<bf16>(output, 32 * 16, "output"), 1);
    for (int t = 0; t < 32; ++t)
      for (int i = 0; i < 8; ++i) {
        CHECK(output[t * 16 + i].bits == input[t * 16 + i].bits);
        CHECK(output[t * 16 + 8 + i].bits == 0);
      }
    CHECK(pa::emu::counters().tensors.at("input").accesses == 32);
  }
  SECTION("planted: reading another thread's copy with no barrier is a race") {
    const std::string message = fault_of([&] {
      launch_kernel("staged_copy_neighbour", staged_copy<true>, dim3(1), dim3(32), shared, nullptr,
                    gspan<const bf16>(input, 32 * 16, "input"), gspan<bf16>(output, 32 * 16, "output"), 0);
    });
    INFO(message);
    // Thread 0 runs first and finds thread 1's slots not yet written: the barrier is missing.
    CHECK(contains(message, "read of shared slots[8] before any thread of this program wrote it"));
    CHECK(contains(message, "__syncthreads"));
    CHECK(contains(message, "staged_copy_neighbour, program (0,0,0), thread (0,0,0)"));
  }
}

TEST_CASE("emulator catches a missing barrier", "[emulator][planted]") {
  const auto input = iota_floats(64);
  std::vector<float> output(64, 0);
  SECTION("neighbour read in the same epoch: a race naming the array, element and writer") {
    const std::string message = fault_of([&] {
      launch_kernel("missing_barrier", missing_barrier, dim3(3), dim3(64), 0, nullptr,
                    gspan<const float>(input.data(), 64, "input"), gspan<float>(output.data(), 64, "output"));
    });
    INFO(message);
    CHECK(contains(message, "shared-memory race on values[0]"));
    CHECK(contains(message, "written by thread (0,0,0)"));
    CHECK(contains(message, "kernel missing_barrier, program (0,0,0), thread (1,0,0)"));
    // The line of the read, then the line of the other thread's write.
    CHECK(contains(message, "(missing __syncthreads?) at " + this_file_at(kMissingBarrierRead) +
                                "; thread (0,0,0) wrote it at " + this_file_at(kMissingBarrierWrite)));
  }
  SECTION("a reduction reading partial sums nobody has written yet") {
    const std::string message = fault_of([&] {
      launch_kernel("missing_barrier_reduction", missing_barrier_reduction, dim3(1), dim3(64), 0, nullptr,
                    gspan<const float>(input.data(), 64, "input"), gspan<float>(output.data(), 1, "output"));
    });
    INFO(message);
    CHECK(contains(message, "partial[1]"));
    CHECK(contains(message, "__syncthreads"));
  }
  SECTION("a write after other threads' reads in the same epoch") {
    const std::string message = fault_of([&] {
      launch_kernel("write_after_read", write_after_read, dim3(1), dim3(64), 0, nullptr,
                    gspan<float>(output.data(), 64, "output"));
    });
    INFO(message);
    CHECK(contains(message, "shared-memory race on value[0]: written here after thread"));
    CHECK(contains(message, "thread (40,0,0)"));
  }
}

TEST_CASE("emulator catches a read past a tensor", "[emulator][planted]") {
  const auto input = iota_floats(64);
  std::vector<float> output(64, 0);
  const std::string message = fault_of([&] {
    launch_kernel("read_past_end", read_past_end, dim3(2), dim3(64), 0, nullptr,
                  gspan<const float>(input.data(), 64, "input"), gspan<float>(output.data(), 64, "output"));
  });
  INFO(message);
  CHECK(contains(message, "kernel read_past_end, program (0,0,0), thread (63,0,0)"));
  CHECK(contains(message, "out-of-bounds read of input[64] (extent 64) at " + this_file_at(kReadPastEnd)));
  const std::string write = fault_of([&] {
    launch_kernel("write_past_end", write_past_end, dim3(1), dim3(64), 0, nullptr, gspan<float>(output.data(), 64, "output"));
  });
  INFO(write);
  CHECK(contains(write, "thread (63,0,0): out-of-bounds write to output[64] (extent 64) at " + this_file_at(kWritePastEnd)));
}

TEST_CASE("emulator catches a barrier some threads skip", "[emulator][planted]") {
  std::vector<float> output(64, 0);
  SECTION("half the block exits without reaching it") {
    const std::string message = fault_of([&] {
      launch_kernel("barrier_in_branch", barrier_in_branch, dim3(1), dim3(64), 0, nullptr,
                    gspan<float>(output.data(), 64, "output"));
    });
    INFO(message);
    CHECK(contains(message, "divergent barrier: threads 32-63 exited without reaching __syncthreads at " +
                                this_file_at(kBarrierInBranch)));
    CHECK(contains(message, "where threads 0-31 wait"));
  }
  SECTION("the two halves wait at different barriers") {
    const std::string message = fault_of([&] {
      launch_kernel("barrier_per_side", barrier_per_side, dim3(1), dim3(64), 0, nullptr,
                    gspan<float>(output.data(), 64, "output"));
    });
    INFO(message);
    CHECK(contains(message, "divergent barrier: threads 0-31 wait at __syncthreads at"));
    CHECK(contains(message, "but threads 32-63 wait at"));
  }
}

TEST_CASE("emulator catches shuffles under a wrong mask", "[emulator][planted]") {
  std::vector<float> output(32, 0);
  SECTION("a lane calls with a mask that leaves it out") {
    const std::string message = fault_of([&] {
      launch_kernel("shuffle_mask_too_small", shuffle_mask_too_small, dim3(1), dim3(32), 0, nullptr,
                    gspan<float>(output.data(), 32, "output"));
    });
    INFO(message);
    CHECK(contains(message, "__shfl_xor_sync at"));
    CHECK(contains(message, "mask 0x0000ffff, which does not include the calling lane 16"));
  }
  SECTION("a lane reads a lane outside the mask") {
    const std::string message = fault_of([&] {
      launch_kernel("shuffle_reads_outside_mask", shuffle_reads_outside_mask, dim3(1), dim3(32), 0, nullptr,
                    gspan<float>(output.data(), 32, "output"));
    });
    INFO(message);
    CHECK(contains(message, "lane 0 reads lane 16, which is not in the mask"));
  }
  SECTION("the mask names lanes that exited: they take no part, and reading one faults") {
    REQUIRE(fault_of([&] {
              launch_kernel("shuffle_lanes_exited", shuffle_lanes_exited, dim3(1), dim3(32), 0, nullptr,
                            gspan<float>(output.data(), 32, "output"));
            }) == "");
    for (int lane = 0; lane < 16; ++lane) CHECK(output[static_cast<std::size_t>(lane)] == static_cast<float>(lane ^ 1));
    const std::string message = fault_of([&] {
      launch_kernel("shuffle_lanes_missing", shuffle_lanes_missing, dim3(1), dim3(32), 0, nullptr,
                    gspan<float>(output.data(), 32, "output"));
    });
    INFO(message);
    CHECK(contains(message, "__shfl_xor_sync at " + this_file_at(kShuffleLanesMissing) +
                                " with mask 0xffffffff: lane 0 reads lane 16, which has exited"));
  }
  SECTION("a shuffle is not a fence: lanes that meet only at a shuffle race on shared memory") {
    const std::string message = fault_of([&] {
      launch_kernel("shuffle_as_fence", shuffle_as_fence, dim3(1), dim3(32), 0, nullptr,
                    gspan<float>(output.data(), 32, "output"));
    });
    INFO(message);
    CHECK(contains(message, "shared-memory race on slot[0]: read here, written by thread (0,0,0)"));
    CHECK(contains(message, this_file_at(kShuffleAsFenceRead)));
  }
  SECTION("a __syncwarp orders the lanes it names, and no others") {
    REQUIRE(fault_of([&] {
              launch_kernel("partial_syncwarp", partial_syncwarp, dim3(1), dim3(32), 0, nullptr,
                            gspan<float>(output.data(), 32, "output"), 6);
            }) == "");
    CHECK(output[0] == 5.0f);
    const std::string message = fault_of([&] {
      launch_kernel("partial_syncwarp", partial_syncwarp, dim3(1), dim3(32), 0, nullptr,
                    gspan<float>(output.data(), 32, "output"), 7);
    });
    INFO(message);
    CHECK(contains(message, "shared-memory race on slot[0]: read here, written by thread (5,0,0)"));
  }
}

TEST_CASE("warp shuffles within segments (width) read as a GPU does, and take a lane operand's low 5 bits",
          "[emulator]") {
  std::vector<int> out(96, -1);
  launch_kernel("shuffle_widths", shuffle_widths, dim3(1), dim3(32), 0, nullptr, gspan<int>(out.data(), 96, "out"));
  for (int lane = 0; lane < 32; ++lane) {
    INFO("lane " << lane);
    CHECK(out[static_cast<std::size_t>(lane * 3 + 0)] == (lane >= 16 ? lane - 16 : lane));  // xor 16 in segments of 16
    CHECK(out[static_cast<std::size_t>(lane * 3 + 1)] == (lane < 31 ? lane + 1 : lane));    // down 33 is down 1
    CHECK(out[static_cast<std::size_t>(lane * 3 + 2)] == (lane ^ 1));                        // xor 1 in segments of 8
  }
}

TEST_CASE("emulator catches misaligned vectors and uninitialised shared reads", "[emulator][planted]") {
  alignas(16) bf16 input[16] = {};
  alignas(16) bf16 output[8] = {};
  std::string message = fault_of([&] {
    launch_kernel("misaligned_vector", misaligned_vector, dim3(1), dim3(1), 0, nullptr,
                  gspan<const bf16>(input, 16, "input"), gspan<bf16>(output, 8, "output"));
  });
  INFO(message);
  CHECK(contains(message, "misaligned 16-byte vector read of input[3]"));
  CHECK(contains(message, this_file_at(kMisalignedVector)));
  std::vector<float> staged_out(8, 0);
  message = fault_of([&] {
    launch_kernel("misaligned_shared_vector", misaligned_shared_vector, dim3(1), dim3(8), 0, nullptr,
                  gspan<float>(staged_out.data(), 8, "output"));
  });
  INFO(message);
  CHECK(contains(message, "misaligned 16-byte shared read of staged[1]: byte 4 of the array is not a multiple of 16"));
  CHECK(contains(message, this_file_at(kMisalignedSharedVector)));
  message = fault_of([&] {
    launch_kernel("write_after_write", write_after_write, dim3(1), dim3(2), 0, nullptr, gspan<float>(staged_out.data(), 8, "output"));
  });
  CHECK(contains(message, "shared-memory race on value[0]: written here and by thread (0,0,0) with no barrier between"));
  message = fault_of([&] {
    launch_kernel("shared_past_end", shared_past_end, dim3(1), dim3(5), 0, nullptr, gspan<float>(staged_out.data(), 8, "output"));
  });
  CHECK(contains(message, "out-of-bounds shared write to slots[4] (extent 4)"));
  std::vector<float> out(32, 0);
  message = fault_of([&] {
    launch_kernel("uninitialised_shared", uninitialised_shared, dim3(1), dim3(32), 0, nullptr,
                  gspan<float>(out.data(), 32, "out"));
  });
  CHECK(contains(message, "read of shared never_written[0] before any thread of this program wrote it"));
  CHECK(contains(message, this_file_at(kUninitialisedRead)));
}

TEST_CASE("emulator rejects launches a GPU would reject, and recovers after a fault", "[emulator]") {
  std::vector<float> output(64, 0);
  CHECK(contains(fault_of([&] {
          launch_kernel("too_big", barrier_in_branch, dim3(1), dim3(2048), 0, nullptr, gspan<float>(output.data(), 64, "output"));
        }),
        "has 2048 threads; expected 1 to 1024"));
  CHECK(contains(fault_of([&] {
          launch_kernel("empty", barrier_in_branch, dim3(0), dim3(32), 0, nullptr, gspan<float>(output.data(), 64, "output"));
        }),
        "has no programs"));
  CHECK(contains(fault_of([&] {
          launch_kernel("greedy", reverse_dynamic, dim3(1), dim3(32), 300 * 1024, nullptr,
                        gspan<const float>(output.data(), 64, "input"), gspan<float>(output.data(), 64, "output"));
        }),
        "dynamic shared memory"));
  // After all those faults a correct kernel still runs.
  const auto input = iota_floats(32);
  std::vector<float> sums(32, 0);
  launch_kernel("warp_sum", warp_sum, dim3(1), dim3(32), 0, nullptr, gspan<const float>(input.data(), 32, "input"),
                gspan<float>(sums.data(), 32, "output"));
  CHECK(sums[5] == 528.0f);
}

TEST_CASE("emulator traces what one program read", "[emulator]") {
  const auto input = iota_floats(4 * 256);
  std::vector<float> output(4, 0);
  pa::emu::trace_program(2);
  launch_kernel("block_sum", block_sum, dim3(4), dim3(256), 0, nullptr,
                gspan<const float>(input.data(), 1024, "input"), gspan<float>(output.data(), 4, "output"));
  const auto trace = pa::emu::trace();
  pa::emu::clear_trace();
  REQUIRE(trace.size() == 257);  // 256 reads and one write, all by program 2
  std::int64_t lo = 1 << 30, hi = -1;
  for (const auto& e : trace)
    if (!e.write) {
      lo = std::min(lo, e.index);
      hi = std::max(hi, e.index);
    }
  CHECK(lo == 512);
  CHECK(hi == 767);
}

TEST_CASE("emulator: an out-of-bounds page names the block-table entry it came from", "[emulator][planted]") {
  pa::WorkloadSpec spec = pa::debug_spec();  // f32, pages of 16 tokens
  spec.context_lens = {37, 1, 16, 100};
  pa::Workload w = pa::make_workload(spec);
  const pa::DecodeProblem& p = w.problem;
  const std::int64_t row = p.max_blocks_per_seq;
  constexpr int kThreads = 128;
  std::vector<float> out(static_cast<std::size_t>(p.num_seqs) * kThreads, 0.0f);
  auto launch = [&](const char* name, auto kernel, auto... extra) {
    launch_kernel(name, kernel, dim3(p.num_seqs), dim3(kThreads), 0, nullptr, make_args<float>(w.host_view()),
                  gspan<float>(out.data(), static_cast<std::int64_t>(out.size()), "out"), extra...);
  };
  const std::string table_read_at = "kernels/decode_common.cuh:";  // DecodeArgs::token_offset
  SECTION("the lookups of every rung read each token's key") {
    launch("keys_through_table", keys_through_table<float>);
    for (int seq = 0; seq < p.num_seqs; ++seq)
      for (int token = 0; token < w.context_lens[seq]; ++token) {
        const std::int64_t at = p.layout.offset(w.block_tables[seq * row + token / p.block_size], 0, token % p.block_size, 0);
        float key;
        std::memcpy(&key, w.key_cache.data() + at * sizeof(float), sizeof(float));
        CHECK(pa::float_bits(out[seq * kThreads + token]) == pa::float_bits(key));
      }
  }
  SECTION("planted: entry -1, page 4294967295 to the kernels' unsigned page arithmetic") {
    w.block_tables[3 * row + 2] = -1;  // sequence 3's third page (tokens 32-47)
    const std::string message = fault_of([&] { launch("keys_through_table", keys_through_table<float>); });
    INFO(message);
    CHECK(contains(message, "kernel keys_through_table, program (3,0,0), thread (32,0,0): out-of-bounds read of key_cache["));
    CHECK(contains(message, "at " + this_file_at(kKeysThroughTable) + "; element "));
    CHECK(contains(message, cat(" is in page 4294967295 of a pool of ", p.num_blocks, " pages of ", p.layout.block_stride,
                                " elements; this thread read that page number from block_tables[", 3 * row + 2,
                                "] = -1 at ", table_read_at)));
  }
  SECTION("planted: a lookup one entry too far reads a poisoned entry past the row's pages") {
    const std::string message = fault_of([&] { launch("keys_off_by_one_page", keys_off_by_one_page<float>); });
    INFO(message);
    // Sequence 0 holds 37 tokens in 3 pages: token 32 looks up entry 3, poison (INT32_MAX).
    CHECK(contains(message, "program (0,0,0), thread (32,0,0): out-of-bounds read of key_cache["));
    CHECK(contains(message, "at " + this_file_at(kOffByOneKeyRead) + "; element "));
    CHECK(contains(message, "is in page 2147483647 of a pool of"));
    CHECK(contains(message, "this thread read that page number from block_tables[3] = 2147483647 at " +
                                this_file_at(kOffByOneTableRead)));
  }
  SECTION("planted: a page number that is no entry the thread read") {
    const std::string message =
        fault_of([&] { launch("keys_a_pool_too_far", keys_a_pool_too_far<float>, p.cache_elems()); });
    INFO(message);
    const std::int32_t page = w.block_tables[0];
    CHECK(contains(message, cat("program (0,0,0), thread (0,0,0): out-of-bounds read of key_cache[",
                                page * p.layout.block_stride + p.cache_elems(), "]")));
    CHECK(contains(message, cat("is in page ", page + p.num_blocks, " of a pool of ", p.num_blocks, " pages")));
    CHECK(contains(message, cat("no block_tables entry this thread read recently holds that page (its last read: "
                                "block_tables[0] = ", page, " at ", table_read_at)));
  }
}

// ----- thread order ---------------------------------------------------------------------------

namespace {
/// 256 floats of magnitudes 2^-20 to 2^20, both signs: their float sum rounds differently in
/// different orders.
std::vector<float> spread_values() {
  std::vector<float> values(256);
  for (int i = 0; i < 256; ++i)
    values[static_cast<std::size_t>(i)] =
        std::ldexp(1.0f + static_cast<float>(i * 37 % 101) / 101.0f, i * 13 % 41 - 20) * (i % 3 == 0 ? -1.0f : 1.0f);
  return values;
}

/// The bits of sum_in_arrival_order's total over \p programs programs of 256 / programs
/// threads, run in \p order.
std::uint32_t arrival_sum_bits(pa::emu::ThreadOrder order, unsigned programs) {
  const pa::emu::ScopedThreadOrder scope(order);
  const std::vector<float> values = spread_values();
  float total = 0.0f;
  launch_kernel("sum_in_arrival_order", sum_in_arrival_order, dim3(programs), dim3(256 / programs), 0, nullptr,
                gspan<const float>(values.data(), 256, "values"), gspan<float>(&total, 1, "total"));
  return pa::float_bits(total);
}

pa::emu::ThreadOrder shuffled(std::uint64_t seed) { return {true, seed}; }
}  // namespace

TEST_CASE("emulator thread order: a sum in arrival order differs between shuffled orders", "[emulator][order][planted]") {
  SECTION("threads of one program") {
    const std::uint32_t fixed = arrival_sum_bits({}, 1);
    CHECK(arrival_sum_bits({}, 1) == fixed);  // the fixed order cannot show it
    const std::uint32_t seed1 = arrival_sum_bits(shuffled(1), 1);
    const std::uint32_t seed2 = arrival_sum_bits(shuffled(2), 1);
    CHECK(seed1 != seed2);
    CHECK((seed1 != fixed || seed2 != fixed));
    arrival_sum_bits(shuffled(3), 4);                  // other launches in between
    CHECK(arrival_sum_bits(shuffled(1), 1) == seed1);  // change nothing: a seed is one order
  }
  SECTION("programs of one grid, one thread each") {
    const std::uint32_t fixed = arrival_sum_bits({}, 256);
    CHECK(arrival_sum_bits({}, 256) == fixed);
    CHECK(arrival_sum_bits(shuffled(1), 256) != arrival_sum_bits(shuffled(2), 256));
  }
}

TEST_CASE("emulator thread order: a missing barrier before a global read shows only when shuffled", "[emulator][order][planted]") {
  constexpr int kPrograms = 2, kThreads = 64;
  // How many threads read the flag before thread 0 of their program set it, in \p order.
  auto early_reads = [&](pa::emu::ThreadOrder order) {
    const pa::emu::ScopedThreadOrder scope(order);
    std::vector<float> flag(kPrograms, 0.0f), out(kPrograms * kThreads, -1.0f);
    launch_kernel("global_missing_barrier", global_missing_barrier, dim3(kPrograms), dim3(kThreads), 0, nullptr,
                  gspan<float>(flag.data(), kPrograms, "flag"), gspan<float>(out.data(), kPrograms * kThreads, "out"));
    return std::count(out.begin(), out.end(), 0.0f);
  };
  CHECK(early_reads({}) == 0);
  CHECK(early_reads(shuffled(1)) > 0);
  CHECK(early_reads(shuffled(2)) > 0);
}

TEST_CASE("emulator thread order: correct kernels give the same bits in every order", "[emulator][order]") {
  const auto input = iota_floats(4 * 256);
  std::vector<float> sums(4), warp(32), exchanged(64);
  std::vector<int> locals(128);
  auto run_all = [&] {
    launch_kernel("block_sum", block_sum, dim3(4), dim3(256), 0, nullptr, gspan<const float>(input.data(), 1024, "input"),
                  gspan<float>(sums.data(), 4, "output"));
    launch_kernel("warp_sum", warp_sum, dim3(1), dim3(32), 0, nullptr, gspan<const float>(input.data(), 32, "input"),
                  gspan<float>(warp.data(), 32, "output"));
    launch_kernel("syncwarp_exchange", syncwarp_exchange, dim3(1), dim3(64), 0, nullptr,
                  gspan<float>(exchanged.data(), 64, "out"));
    launch_kernel("locals", locals_across_barriers, dim3(2), dim3(128), 0, nullptr, gspan<int>(locals.data(), 128, "out"));
  };
  run_all();
  const auto fixed = std::make_tuple(sums, warp, exchanged, locals);
  for (std::uint64_t seed : {1u, 2u, 3u, 4u}) {
    const pa::emu::ScopedThreadOrder scope(shuffled(seed));
    run_all();
    CAPTURE(seed);
    CHECK((std::make_tuple(sums, warp, exchanged, locals) == fixed));
  }
}

TEST_CASE("emulator thread order: every planted race and divergence is caught in shuffled orders too, naming the seed", "[emulator][order][planted]") {
  const auto input = iota_floats(64);
  std::vector<float> output(64, 0);
  const gspan<const float> in(input.data(), 64, "input");
  const gspan<float> out(output.data(), 64, "output");
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    const pa::emu::ScopedThreadOrder scope(shuffled(seed));
    CAPTURE(seed);
    const std::string seed_note = cat("[shuffled order, seed ", seed, " (PAGEDATTN_EMU_SHUFFLE=", seed, " repeats it)]");
    // Whichever neighbour runs first, the read is reported at its line: as a race, or as a read
    // of an element no thread has written yet.
    std::string message = fault_of([&] { launch_kernel("missing_barrier", missing_barrier, dim3(3), dim3(64), 0, nullptr, in, out); });
    CHECK(contains(message, "values["));
    CHECK(contains(message, this_file_at(kMissingBarrierRead)));
    CHECK(contains(message, seed_note));
    message = fault_of([&] { launch_kernel("reduction", missing_barrier_reduction, dim3(1), dim3(64), 0, nullptr, in, out); });
    CHECK(contains(message, "partial["));
    message = fault_of([&] { launch_kernel("write_after_read", write_after_read, dim3(1), dim3(64), 0, nullptr, out); });
    CHECK(contains(message, "shared-memory race on value[0]"));
    message = fault_of([&] { launch_kernel("barrier_in_branch", barrier_in_branch, dim3(1), dim3(64), 0, nullptr, out); });
    CHECK(contains(message, "exited without reaching __syncthreads at " + this_file_at(kBarrierInBranch)));
    message = fault_of([&] { launch_kernel("lanes_missing", shuffle_lanes_missing, dim3(1), dim3(32), 0, nullptr, out); });
    CHECK(contains(message, "__shfl_xor_sync at " + this_file_at(kShuffleLanesMissing)));
    message = fault_of([&] { launch_kernel("read_past_end", read_past_end, dim3(2), dim3(64), 0, nullptr, in, out); });
    CHECK(contains(message, "thread (63,0,0): out-of-bounds read of input[64] (extent 64) at " + this_file_at(kReadPastEnd)));
    CHECK(contains(message, seed_note));
  }
}

TEST_CASE("emulator thread order: set, scoped and described", "[emulator][order]") {
  CHECK_FALSE(pa::emu::thread_order().shuffled);  // this file runs in the fixed order
  {
    const pa::emu::ScopedThreadOrder scope(shuffled(42));
    CHECK(pa::emu::thread_order().shuffled);
    CHECK(pa::emu::thread_order().seed == 42);
    CHECK(pa::emu::describe(pa::emu::thread_order()) == "shuffled order, seed 42 (PAGEDATTN_EMU_SHUFFLE=42 repeats it)");
  }
  CHECK_FALSE(pa::emu::thread_order().shuffled);
  CHECK(pa::emu::describe(pa::emu::thread_order()) == "fixed order");
  // In the fixed order a fault needs no note to be repeated.
  std::vector<float> output(64, 0);
  CHECK_FALSE(contains(fault_of([&] {
                         launch_kernel("barrier_in_branch", barrier_in_branch, dim3(1), dim3(64), 0, nullptr,
                                       gspan<float>(output.data(), 64, "output"));
                       }),
                       "shuffled"));
}

TEST_CASE("portable: fast_exp2 flushes subnormal results as the GPU's ex2.approx.ftz does", "[emulator]") {
  CHECK(fast_exp2(0.0f) == 1.0f);
  CHECK(fast_exp2(-1.0f) == 0.5f);
  CHECK(fast_exp2(3.0f) == 8.0f);
  CHECK(fast_exp2(-126.0f) == std::ldexp(1.0f, -126));  // the smallest normal float stays
  CHECK(fast_exp2(-127.0f) == 0.0f);                    // subnormal: flushed
  CHECK(fast_exp2(-INFINITY) == 0.0f);
  CHECK(std::isnan(fast_exp2(NAN)));
}

TEST_CASE("portable: vec_to_floats converts every element exactly", "[emulator]") {
  Vec<bf16, 8> raw;
  const float values[8] = {1.0f, -2.5f, 3.0e-3f, 65280.0f, -0.0f, INFINITY, 1.0e-40f, 7.0f};
  for (int e = 0; e < 8; ++e) raw.v[e] = pa::float_to_bf16(values[e]);
  float out[8];
  vec_to_floats(raw, out);
  for (int e = 0; e < 8; ++e) {
    INFO("element " << e);
    CHECK(pa::float_bits(out[e]) == std::uint32_t{raw.v[e].bits} << 16);  // a bf16 is a float's high half
  }
}
