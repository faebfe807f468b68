// The emulator's model of asynchronous copies (cp.async) and overlapped launches (programmatic
// dependent launch): correct kernels give the right numbers, and the mistakes a GPU hides (a
// missing copy wait, a wait that leaves too many groups in flight, another thread's copy read
// without a barrier, a read of the previous kernel's output before wait_for_previous_kernel())
// are each caught with a message that names the array or tensor, the element, the thread and the
// line.
#include <cmath>
#include <string>
#include <vector>

#include "kernels/portable/portable.h"
#include "tests/catch_compat.h"

namespace pa::PA_KERNELS::emulator_async_tests {

// ----- asynchronous copies ----------------------------------------------------------------------

/// Each thread copies its 4 floats of \p input into its slot of `staged`, waits and writes them
/// to \p output; a thread whose index is \p zero_thread zero-fills its slot instead.
__global__ void stage_own_slot(gspan<const float> input, gspan<float> output, int zero_thread) {
  PA_DYNAMIC_SHARED(float, staged);
  const int tid = threadIdx.x;
  if (tid == zero_thread) zero_async(staged, tid * 4, input);
  else copy_async<4>(staged, tid * 4, input, tid * 4);
  async_commit();
  async_wait<0>();
  store_vec(output, tid * 4, load_shared_vec<float, 4>(staged, tid * 4));
}

/// Each thread copies its 4 floats of \p input into its slot of `staged` with copy_async_or_zero,
/// valid for every thread but \p invalid_thread, whose index is \p invalid_index; waits and
/// writes the slot to \p output.
__global__ void stage_or_zero(gspan<const float> input, gspan<float> output, int invalid_thread,
                              std::int64_t invalid_index) {
  PA_DYNAMIC_SHARED(float, staged);
  const int tid = threadIdx.x;
  const bool valid = tid != invalid_thread;
  copy_async_or_zero<4>(shared_slot(staged, tid * 4), input, valid ? tid * 4 : invalid_index, valid);
  async_commit();
  async_wait<0>();
  store_vec(output, tid * 4, load_shared_vec<float, 4>(staged, tid * 4));
}
constexpr int kStageOrZeroCopy = __LINE__ - 5;  // the copy_async_or_zero above

/// Each thread streams \p tiles tiles of 4 floats through a ring of kStages slots of its own, the
/// copies kStages - 1 tiles ahead: wait for the tile, add it up, then issue the copy of the tile
/// kStages - 1 further on into the slot just used. At the wait the thread has committed the
/// groups of tiles 0 .. tile + kStages - 2, so leaving kStages - 2 in flight (PENDING = 1) lands
/// this tile's group; PENDING = 2 leaves it in flight (BUG).
template <int PENDING>
__global__ void ring_sum(gspan<const float> input, gspan<float> output, int tiles) {
  constexpr int kStages = 3;
  PA_DYNAMIC_SHARED(float, ring);
  const int tid = threadIdx.x;
  const int threads = blockDim.x;
  auto slot = [&](int tile) { return (tid * kStages + tile % kStages) * 4; };
  auto issue = [&](int tile) {
    if (tile < tiles) copy_async<4>(ring, slot(tile), input, (tile * threads + tid) * 4);
    async_commit();  // an empty group past the last tile keeps the count of groups simple
  };
  for (int tile = 0; tile < kStages - 1; ++tile) issue(tile);
  float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int tile = 0; tile < tiles; ++tile) {
    async_wait<PENDING>();
    const Vec<float, 4> values = load_shared_vec<float, 4>(ring, slot(tile));
    for (int e = 0; e < 4; ++e) sum[e] += values.v[e];
    issue(tile + kStages - 1);
  }
  async_wait<0>();
  for (int e = 0; e < 4; ++e) output[tid * 4 + e] = sum[e];
}
constexpr int kRingSumRead = __LINE__ - 7;  // the load_shared_vec above

/// BUG: thread \p forgetful does not wait for its copy before it reads it back.
__global__ void forgotten_wait(gspan<const float> input, gspan<float> output, int forgetful) {
  PA_DYNAMIC_SHARED(float, staged);
  const int tid = threadIdx.x;
  copy_async<4>(staged, tid * 4, input, tid * 4);
  async_commit();
  if (tid != forgetful) async_wait<0>();
  store_vec(output, tid * 4, load_shared_vec<float, 4>(staged, tid * 4));
}
constexpr int kForgottenWaitCopy = __LINE__ - 5;
constexpr int kForgottenWaitRead = __LINE__ - 3;

/// BUG: the copy is read before its group is even committed.
__global__ void uncommitted_copy(gspan<const float> input, gspan<float> output) {
  PA_DYNAMIC_SHARED(float, staged);
  const int tid = threadIdx.x;
  copy_async<4>(staged, tid * 4, input, tid * 4);
  output[tid] = staged[tid * 4 + 1];
  async_commit();
  async_wait<0>();
}
constexpr int kUncommittedRead = __LINE__ - 4;

/// Each thread copies its slot, waits, and reads its left neighbour's slot (thread 0 its own):
/// with kBarrier a __syncthreads orders the neighbour's copy before the read; without it the read
/// races with the neighbour's copy (BUG).
template <bool kBarrier>
__global__ void read_neighbour_copy(gspan<const float> input, gspan<float> output) {
  PA_DYNAMIC_SHARED(float, staged);
  const int tid = threadIdx.x;
  copy_async<4>(staged, tid * 4, input, tid * 4);
  async_commit();
  async_wait<0>();
  if (kBarrier) __syncthreads();
  const int from = tid == 0 ? 0 : tid - 1;
  store_vec(output, tid * 4, load_shared_vec<float, 4>(staged, from * 4));
}
constexpr int kNeighbourCopy = __LINE__ - 7, kNeighbourRead = __LINE__ - 2;

/// BUG: a barrier does not land copies: the threads read their right neighbour's slot after a
/// __syncthreads, but each thread waits for its own copy only after that.
__global__ void barrier_before_wait(gspan<const float> input, gspan<float> output) {
  PA_DYNAMIC_SHARED(float, staged);
  const int tid = threadIdx.x;
  copy_async<4>(staged, tid * 4, input, tid * 4);
  async_commit();
  __syncthreads();
  const int from = (tid + 1) % blockDim.x;
  store_vec(output, tid * 4, load_shared_vec<float, 4>(staged, from * 4));
  async_wait<0>();
}
constexpr int kBarrierBeforeWaitRead = __LINE__ - 3;

/// One thread writes floats [0, 8) of `staged` itself, then copies 4 floats of \p input over
/// floats [4, 8), reads floats [0, 4) while the copy is in flight (they are untouched), waits and
/// reads [4, 8). \p mistake plants one before the wait: 1 reads float 4; 2 writes float 5 (the
/// copy would overwrite it); 3 starts a second copy into [4, 8).
__global__ void copy_next_to_plain_writes(gspan<const float> input, gspan<float> output, int mistake) {
  PA_SHARED(float, staged, 8);
  for (int i = 0; i < 8; ++i) staged[i] = -1.0f - static_cast<float>(i);
  copy_async<4>(staged, 4, input, 0);
  async_commit();
  for (int i = 0; i < 4; ++i) output[i] = staged[i];
  if (mistake == 1) output[4] = staged[4];
  if (mistake == 2) staged[5] = 0.0f;
  if (mistake == 3) copy_async<4>(staged, 4, input, 4);
  async_wait<0>();
  for (int i = 4; i < 8; ++i) output[i] = staged[i];
}
constexpr int kPlainWritesRead = __LINE__ - 6;  // the three planted lines above, in order
constexpr int kPlainWritesWrite = __LINE__ - 6;
constexpr int kPlainWritesSecondCopy = __LINE__ - 6;

/// Thread 0 copies its slot and exits without waiting (legal while nothing reads it); with
/// \p read_it thread 1 then reads that slot (BUG: the copy may land any time).
__global__ void exit_with_copy_in_flight(gspan<const float> input, gspan<float> output, int read_it) {
  PA_DYNAMIC_SHARED(float, staged);
  const int tid = threadIdx.x;
  if (tid == 0) {
    copy_async<4>(staged, 0, input, 0);
    async_commit();
    return;
  }
  staged[tid * 4] = 1.0f;
  output[tid] = read_it ? staged[0] : staged[tid * 4];
}

// ----- overlapped launches ------------------------------------------------------------------------

/// Writes rows blockIdx.x + \p first_row of \p partials (4 floats a row): row r holds 10 r + e.
__global__ void write_partials(gspan<float> partials, int first_row) {
  const int row = static_cast<int>(blockIdx.x) + first_row;
  const int e = threadIdx.x;
  partials[row * 4 + e] = static_cast<float>(10 * row + e);
}

/// Sums each row of \p partials into \p sums. kWait: calls wait_for_previous_kernel() first, as a
/// kernel launched overlapped with write_partials must; without it (BUG when overlapped) the
/// read of a row write_partials wrote is reported.
template <bool kWait>
__global__ void sum_partials(gspan<const float> partials, gspan<float> sums) {
  if (kWait) wait_for_previous_kernel();
  const int row = blockIdx.x;
  float sum = 0.0f;
  for (int e = 0; e < 4; ++e) sum += partials[row * 4 + e];
  sums[row] = sum;
}

/// BUG when launched overlapped with write_partials: clears row 3 of \p partials before waiting.
__global__ void clear_row_early(gspan<float> partials) {
  partials[3 * 4 + threadIdx.x] = 0.0f;
  wait_for_previous_kernel();
}

/// sum_partials that lets the next kernel start early (allow_next_kernel) before its reads.
__global__ void sum_partials_allowing_next(gspan<const float> partials, gspan<float> sums) {
  allow_next_kernel();
  const int row = blockIdx.x;
  float sum = 0.0f;
  for (int e = 0; e < 4; ++e) sum += partials[row * 4 + e];
  sums[row] = sum;
}

/// BUG when launched overlapped with sum_partials_allowing_next: overwrites row 0 of
/// \p partials, which that kernel reads, before waiting (write after read).
__global__ void refill_row_early(gspan<float> partials) {
  partials[threadIdx.x] = 0.0f;
  wait_for_previous_kernel();
}

}  // namespace pa::PA_KERNELS::emulator_async_tests

namespace {
using namespace pa::kernels_emu;
using namespace pa::kernels_emu::emulator_async_tests;

// The messages these tests expect name the thread that faults first, which the thread order
// decides: they run in the fixed order whatever PAGEDATTN_EMU_SHUFFLE says.
const bool kFixedOrder = (pa::emu::set_thread_order({}), true);

/// "tests/test_emulator_async.cpp:<line>": how a fault names a line of this file.
std::string this_file_at(int line) { return "tests/test_emulator_async.cpp:" + std::to_string(line); }

std::vector<float> ramp(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 0.5f * static_cast<float>(i) + 1.0f;
  return v;
}
}  // namespace

TEST_CASE("emulator async copies: the data lands at the wait, zero fills give zeros", "[emulator][async]") {
  const std::vector<float> input = ramp(32 * 4);
  std::vector<float> output(32 * 4, -7.0f);
  pa::emu::reset_counters();
  launch_kernel("stage_own_slot", stage_own_slot, dim3(2), dim3(32), 32 * 4 * sizeof(float), nullptr,
                gspan<const float>(input.data(), 32 * 4, "input"), gspan<float>(output.data(), 32 * 4, "output"), 9);
  for (int t = 0; t < 32; ++t) {
    for (int e = 0; e < 4; ++e) {
      CAPTURE(t, e);
      if (t == 9) CHECK(pa::float_bits(output[t * 4 + e]) == 0u);  // +0.0: zero bytes
      else CHECK(output[t * 4 + e] == input[t * 4 + e]);
    }
  }
  // The global reads happen when a copy is issued; the zero fill reads nothing.
  CHECK(pa::emu::counters().tensors.at("input").accesses == 2 * 31);
  CHECK(pa::emu::counters().tensors.at("input").bytes_read == 2 * 31 * 16);
}

TEST_CASE("emulator async copies: copy_async_or_zero copies, or fills zeros and reads nothing", "[emulator][async]") {
  const std::vector<float> input = ramp(32 * 4);
  std::vector<float> output(32 * 4, -7.0f);
  auto launch = [&](std::int64_t invalid_index) {
    launch_kernel("stage_or_zero", stage_or_zero, dim3(1), dim3(32), 32 * 4 * sizeof(float), nullptr,
                  gspan<const float>(input.data(), 32 * 4, "input"), gspan<float>(output.data(), 32 * 4, "output"), 9,
                  invalid_index);
  };
  pa::emu::reset_counters();
  launch(0);  // thread 9's copy names element 0, which exists, and reads nothing
  for (int t = 0; t < 32; ++t) {
    for (int e = 0; e < 4; ++e) {
      CAPTURE(t, e);
      if (t == 9) CHECK(pa::float_bits(output[t * 4 + e]) == 0u);  // +0.0: zero bytes
      else CHECK(output[t * 4 + e] == input[t * 4 + e]);
    }
  }
  CHECK(pa::emu::counters().tensors.at("input").accesses == 31);
  CHECK(pa::emu::counters().tensors.at("input").bytes_read == 31 * 16);
  SECTION("planted: the copy that reads nothing still names an element outside the span") {
    PA_REQUIRE_THROWS_AS_WITH(launch(32 * 4), pa::KernelError, "out-of-bounds prefetch of input[128] (extent 128)");
    PA_REQUIRE_THROWS_AS_WITH(launch(32 * 4), pa::KernelError, this_file_at(kStageOrZeroCopy));
  }
}

TEST_CASE("emulator async copies: a ring of stages with the right wait adds up every tile", "[emulator][async]") {
  constexpr int kThreads = 8, kTiles = 7;
  const std::vector<float> input = ramp(kTiles * kThreads * 4);
  const std::size_t shared = kThreads * 3 * 4 * sizeof(float);
  auto expected = [&](int t, int e) {
    float sum = 0.0f;
    for (int tile = 0; tile < kTiles; ++tile) sum += input[(tile * kThreads + t) * 4 + e];
    return sum;
  };
  std::vector<float> output(kThreads * 4, -7.0f);
  // Runs the ring with the given kernel (its async_wait count) over the same input and output.
  auto run = [&](auto kernel) {
    launch_kernel("ring_sum", kernel, dim3(1), dim3(kThreads), shared, nullptr,
                  gspan<const float>(input.data(), kTiles * kThreads * 4, "input"),
                  gspan<float>(output.data(), kThreads * 4, "output"), kTiles);
  };
  auto require_sums = [&] {
    for (int t = 0; t < kThreads; ++t)
      for (int e = 0; e < 4; ++e) CHECK(output[t * 4 + e] == expected(t, e));
  };
  SECTION("async_wait<1>: the tile's group is the oldest but one in flight") {
    run(ring_sum<1>);
    require_sums();
  }
  SECTION("async_wait<0> waits for more than needed: still right") {
    run(ring_sum<0>);
    require_sums();
  }
  SECTION("planted: async_wait<2> leaves the tile's own group in flight") {
    auto launch = [&] { run(ring_sum<2>); };
    PA_REQUIRE_THROWS_AS_WITH(launch(), pa::KernelError,
                              "kernel ring_sum, program (0,0,0), thread (0,0,0): read of shared ring[0] while an "
                              "asynchronous copy into it is still in flight (issued by thread (0,0,0) at ");
    PA_REQUIRE_THROWS_AS_WITH(launch(), pa::KernelError,
                              "no async_wait covers it yet: async_wait<1> would complete it, as 1 group was "
                              "committed after its own) at ");
    PA_REQUIRE_THROWS_AS_WITH(launch(), pa::KernelError, this_file_at(kRingSumRead));
  }
}

TEST_CASE("emulator async copies: planted missing waits", "[emulator][async][planted]") {
  const std::vector<float> input = ramp(32 * 4);
  std::vector<float> output(32 * 4, 0.0f);
  const std::size_t shared = 32 * 4 * sizeof(float);
  // One program of 32 threads (kernel(input, output)) over the same input and output.
  auto run = [&](const char* name, auto kernel) {
    launch_kernel(name, kernel, dim3(1), dim3(32), shared, nullptr, gspan<const float>(input.data(), 32 * 4, "input"),
                  gspan<float>(output.data(), 32 * 4, "output"));
  };
  SECTION("a thread reads its copy back without waiting for it") {
    auto launch = [&] {
      launch_kernel("forgotten_wait", forgotten_wait, dim3(3), dim3(32), shared, nullptr,
                    gspan<const float>(input.data(), 32 * 4, "input"), gspan<float>(output.data(), 32 * 4, "output"), 5);
    };
    PA_REQUIRE_THROWS_AS_WITH(launch(), pa::KernelError,
                              "kernel forgotten_wait, program (0,0,0), thread (5,0,0): read of shared staged[20] "
                              "while an asynchronous copy into it is still in flight (issued by thread (5,0,0) at ");
    PA_REQUIRE_THROWS_AS_WITH(launch(), pa::KernelError,
                              this_file_at(kForgottenWaitCopy) + "; no async_wait covers it yet: async_wait<0> would "
                              "complete it, as its group is the newest committed) at " + this_file_at(kForgottenWaitRead));
  }
  SECTION("the read comes before the copy's group is committed (a plain read of shared[i])") {
    PA_REQUIRE_THROWS_AS_WITH(
        run("uncommitted_copy", uncommitted_copy),
        pa::KernelError,
        "thread (0,0,0): read of shared staged[1] while an asynchronous copy into it is still in flight (issued by "
        "thread (0,0,0) at ");
    PA_REQUIRE_THROWS_AS_WITH(
        run("uncommitted_copy", uncommitted_copy),
        pa::KernelError, "its group is not committed (async_commit)) at " + this_file_at(kUncommittedRead));
  }
  SECTION("a barrier does not land another thread's copies") {
    PA_REQUIRE_THROWS_AS_WITH(
        run("barrier_before_wait", barrier_before_wait),
        pa::KernelError,
        "thread (0,0,0): read of shared staged[4] while an asynchronous copy into it is still in flight (issued by "
        "thread (1,0,0) at ");
    PA_REQUIRE_THROWS_AS_WITH(
        run("barrier_before_wait", barrier_before_wait),
        pa::KernelError, this_file_at(kBarrierBeforeWaitRead));
  }
}

TEST_CASE("emulator async copies: another thread's copy needs a barrier after the wait", "[emulator][async]") {
  const std::vector<float> input = ramp(32 * 4);
  std::vector<float> output(32 * 4, 0.0f);
  const std::size_t shared = 32 * 4 * sizeof(float);
  SECTION("with the barrier: each thread gets its neighbour's floats") {
    launch_kernel("read_neighbour_copy", read_neighbour_copy<true>, dim3(1), dim3(32), shared, nullptr,
                  gspan<const float>(input.data(), 32 * 4, "input"), gspan<float>(output.data(), 32 * 4, "output"));
    for (int t = 0; t < 32; ++t)
      for (int e = 0; e < 4; ++e) CHECK(output[t * 4 + e] == input[(t == 0 ? 0 : t - 1) * 4 + e]);
  }
  SECTION("planted: without it, the read races with the neighbour's copy") {
    PA_REQUIRE_THROWS_AS_WITH(
        launch_kernel("read_neighbour_copy", read_neighbour_copy<false>, dim3(1), dim3(32), shared, nullptr,
                      gspan<const float>(input.data(), 32 * 4, "input"), gspan<float>(output.data(), 32 * 4, "output")),
        pa::KernelError,
        "kernel read_neighbour_copy, program (0,0,0), thread (1,0,0): shared-memory race on staged[0]: read here, "
        "written by thread (0,0,0) with no barrier between (missing __syncthreads?) at " + this_file_at(kNeighbourRead) +
            "; thread (0,0,0) wrote it at " + this_file_at(kNeighbourCopy));
  }
}

TEST_CASE("emulator async copies: only the copy's own elements are in flight", "[emulator][async]") {
  const std::vector<float> input = ramp(8);
  std::vector<float> output(8, 0.0f);
  auto launch = [&](int mistake) {
    launch_kernel("copy_next_to_plain_writes", copy_next_to_plain_writes, dim3(1), dim3(1), 0, nullptr,
                  gspan<const float>(input.data(), 8, "input"), gspan<float>(output.data(), 8, "output"), mistake);
  };
  SECTION("the neighbours keep their values; the copied floats arrive at the wait") {
    launch(0);
    for (int i = 0; i < 4; ++i) CHECK(output[i] == -1.0f - static_cast<float>(i));
    for (int i = 4; i < 8; ++i) CHECK(output[i] == input[i - 4]);
    for (float v : output) CHECK_FALSE(std::isnan(v));
  }
  SECTION("planted: a read of a copied float before the wait") {
    PA_REQUIRE_THROWS_AS_WITH(launch(1), pa::KernelError,
                              "read of shared staged[4] while an asynchronous copy into it is still in flight");
    PA_REQUIRE_THROWS_AS_WITH(launch(1), pa::KernelError, this_file_at(kPlainWritesRead));
  }
  SECTION("planted: a write the copy would overwrite") {
    PA_REQUIRE_THROWS_AS_WITH(launch(2), pa::KernelError,
                              "write to shared staged[5] while an asynchronous copy into it is still in flight (the "
                              "copy would overwrite it; issued by thread (0,0,0) at ");
    PA_REQUIRE_THROWS_AS_WITH(launch(2), pa::KernelError, this_file_at(kPlainWritesWrite));
  }
  SECTION("planted: a second copy into the same floats before the first has landed") {
    PA_REQUIRE_THROWS_AS_WITH(launch(3), pa::KernelError,
                              "asynchronous copy into shared staged[4] while an earlier asynchronous copy into it is "
                              "still in flight");
    PA_REQUIRE_THROWS_AS_WITH(launch(3), pa::KernelError, this_file_at(kPlainWritesSecondCopy));
  }
}

TEST_CASE("emulator async copies: a thread may exit with copies in flight, nobody may read them", "[emulator][async]") {
  const std::vector<float> input = ramp(32 * 4);
  std::vector<float> output(32, 0.0f);
  const std::size_t shared = 32 * 4 * sizeof(float);
  launch_kernel("exit_with_copy_in_flight", exit_with_copy_in_flight, dim3(1), dim3(32), shared, nullptr,
                gspan<const float>(input.data(), 32 * 4, "input"), gspan<float>(output.data(), 32, "output"), 0);
  CHECK(output[31] == 1.0f);
  PA_REQUIRE_THROWS_AS_WITH(
      launch_kernel("exit_with_copy_in_flight", exit_with_copy_in_flight, dim3(1), dim3(32), shared, nullptr,
                    gspan<const float>(input.data(), 32 * 4, "input"), gspan<float>(output.data(), 32, "output"), 1),
      pa::KernelError,
      "thread (1,0,0): read of shared staged[0] while an asynchronous copy into it is still in flight (issued by "
      "thread (0,0,0), which exited before an async_wait covered it)");
}

TEST_CASE("emulator overlapped launches: reading the previous kernel's output needs the wait", "[emulator][overlapped]") {
  // Rows 0 and 1 come from the host; write_partials writes rows 2 and 3.
  std::vector<float> partials = {1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0};
  std::vector<float> sums(4, 0.0f);
  auto write = [&] {
    launch_kernel("write_partials", write_partials, dim3(2), dim3(4), 0, nullptr,
                  gspan<float>(partials.data(), 16, "partials"), 2);
  };
  const std::vector<float> expected = {10.0f, 26.0f, 86.0f, 126.0f};  // 1+2+3+4, 5+..+8, 20+..+23, 30+..+33
  SECTION("overlapped, with wait_for_previous_kernel() first: right") {
    write();
    launch_kernel_overlapped("sum_partials", sum_partials<true>, dim3(4), dim3(1), 0, nullptr,
                             gspan<const float>(partials.data(), 16, "partials"), gspan<float>(sums.data(), 4, "sums"));
    CHECK(sums == expected);
  }
  SECTION("launched plainly, the kernel needs no wait") {
    write();
    launch_kernel("sum_partials", sum_partials<false>, dim3(4), dim3(1), 0, nullptr,
                  gspan<const float>(partials.data(), 16, "partials"), gspan<float>(sums.data(), 4, "sums"));
    CHECK(sums == expected);
  }
  SECTION("only the launch just before counts") {
    write();
    std::vector<float> other(8, 0.0f);
    launch_kernel("write_partials", write_partials, dim3(2), dim3(4), 0, nullptr, gspan<float>(other.data(), 8, "other"), 0);
    launch_kernel_overlapped("sum_partials", sum_partials<false>, dim3(4), dim3(1), 0, nullptr,
                             gspan<const float>(partials.data(), 16, "partials"), gspan<float>(sums.data(), 4, "sums"));
    CHECK(sums == expected);
  }
  SECTION("planted: overlapped, no wait: the first read of a row the previous kernel wrote") {
    write();
    // Programs 0 and 1 read host rows and pass; program 2 reads row 2.
    PA_REQUIRE_THROWS_AS_WITH(
        launch_kernel_overlapped("sum_partials", sum_partials<false>, dim3(4), dim3(1), 0, nullptr,
                                 gspan<const float>(partials.data(), 16, "partials"), gspan<float>(sums.data(), 4, "sums")),
        pa::KernelError,
        "kernel sum_partials, program (2,0,0), thread (0,0,0): read of partials[8] before wait_for_previous_kernel(): "
        "write_partials wrote it and may still be running (launched overlapped)");
  }
  // A kernel that writes partials before its wait, launched overlapped: the fault it raises.
  auto early_writer = [&](const char* name, void (*kernel)(gspan<float>)) -> std::string {
    try {
      launch_kernel_overlapped(name, kernel, dim3(1), dim3(4), 0, nullptr, gspan<float>(partials.data(), 16, "partials"));
    } catch (const pa::KernelError& fault) {
      return fault.what();
    }
    return "";
  };
  SECTION("planted: overlapped, a write before the wait to what the previous kernel wrote") {
    write();
    CHECK(early_writer("clear_row_early", clear_row_early).starts_with(
        "kernel clear_row_early, program (0,0,0), thread (0,0,0): write to partials[12] before "
        "wait_for_previous_kernel(): write_partials wrote it"));
  }
  SECTION("planted: overlapped, a write before the wait to what the previous kernel read after allowing it") {
    write();
    launch_kernel("sum_partials", sum_partials_allowing_next, dim3(4), dim3(1), 0, nullptr,
                  gspan<const float>(partials.data(), 16, "partials"), gspan<float>(sums.data(), 4, "sums"));
    CHECK(early_writer("refill_row_early", refill_row_early).starts_with(
        "kernel refill_row_early, program (0,0,0), thread (0,0,0): write to partials[0] before "
        "wait_for_previous_kernel(): sum_partials read it and may still be running (launched overlapped)"));
  }
  SECTION("a previous kernel that never allowed the next one early: its reads are over when the next starts") {
    write();
    launch_kernel("sum_partials", sum_partials<false>, dim3(4), dim3(1), 0, nullptr,
                  gspan<const float>(partials.data(), 16, "partials"), gspan<float>(sums.data(), 4, "sums"));
    launch_kernel_overlapped("refill_row_early", refill_row_early, dim3(1), dim3(4), 0, nullptr,
                             gspan<float>(partials.data(), 16, "partials"));
    CHECK(partials[0] == 0.0f);
  }
}
