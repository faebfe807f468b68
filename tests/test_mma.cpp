// The tensor-core vocabulary (mma_m16n8k16, ldmatrix_x4) in the emulator: the fragment layouts
// are the PTX ISA's, the emulator's mma computes A·B + C from them, ldmatrix hands each lane the
// elements the hardware gives it, the shared-memory rows it reads are race-checked, a lane
// missing from a matrix instruction is a fault naming it, and a kernel that reads its K
// fragments transposed gets numbers the oracle rejects.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "harness/harness.h"
#include "kernels/10_tensor_cores.cuh"
#include "kernels/registry.h"
#include "reference/oracle.h"
#include "tests/catch_compat.h"

namespace pa::PA_KERNELS::mma_tests {

using namespace mma_layout;

/// One m16n8k16 by one warp: A (16 x 16, row-major), B (16 x 8, b[k * 8 + n]) and C (16 x 8
/// floats) are read into this lane's fragments by mma_layout; D goes back the same way.
template <class T>
__global__ void one_mma(gspan<const T> a, gspan<const T> b, gspan<const float> c, gspan<float> d) {
  const int lane = threadIdx.x;
  unsigned fa[4], fb[2];
  float acc[4];
  for (int r = 0; r < 4; ++r) fa[r] = load_pair(a, a_row(lane, r) * 16 + a_col(lane, r));
  for (int r = 0; r < 2; ++r) {
    const T pair[2] = {b[b_row(lane, r) * 8 + b_col(lane)], b[(b_row(lane, r) + 1) * 8 + b_col(lane)]};
    std::memcpy(&fb[r], pair, 4);
  }
  for (int e = 0; e < 4; ++e) acc[e] = c[c_row(lane, e) * 8 + c_col(lane, e)];
  mma_m16n8k16<T>(acc, fa, fb);
  for (int e = 0; e < 4; ++e) d[c_row(lane, e) * 8 + c_col(lane, e)] = acc[e];
}

/// Lane l writes row `(l + SHIFT) % 32` of four 8 x 8 matrices of 16-bit values (row i of
/// matrix j is lane 8j + i's), then the warp reads them back with ldmatrix_x4: lane l gives the
/// address of row l. With SHIFT 0 each lane reads the row it wrote; otherwise a __syncwarp
/// must order the other lane's write (BARRIER), or the read races with it.
template <bool TRANS, int SHIFT, bool BARRIER>
__global__ void load_matrices(gspan<const unsigned> rows, gspan<unsigned> out) {
  PA_SHARED(float, staged, 32 * 4);
  const int lane = threadIdx.x;
  const int row = (lane + SHIFT) % 32;
  for (int w = 0; w < 4; ++w) staged[row * 4 + w] = __int_as_float(static_cast<int>(rows[row * 4 + w]));
  if (BARRIER) __syncwarp();
  unsigned got[4];
  ldmatrix_x4<TRANS>(got, shared_slot(staged, lane * 4));
  for (int j = 0; j < 4; ++j) out[lane * 4 + j] = got[j];
}
constexpr int kLoadMatricesLine = __LINE__ - 3;  // the ldmatrix_x4 above

/// BUG: lane \p missing leaves before the mma the other lanes wait at.
__global__ void mma_without_a_lane(gspan<float> d, int missing) {
  const int lane = threadIdx.x;
  if (lane == missing) return;
  unsigned fa[4] = {}, fb[2] = {};
  float acc[4] = {};
  mma_m16n8k16<bf16>(acc, fa, fb);
  d[lane] = acc[0];
}
constexpr int kMissingLaneLine = __LINE__ - 3;

/// BUG: the two halves of the warp reach an mma each, on two different lines: PTX's .aligned
/// asks every lane to execute the same instruction.
__global__ void mma_in_two_places(gspan<float> d) {
  const int lane = threadIdx.x;
  unsigned fa[4] = {}, fb[2] = {};
  float acc[4] = {};
  if (lane < 16) {
    mma_m16n8k16<bf16>(acc, fa, fb);
  } else {
    mma_m16n8k16<bf16>(acc, fa, fb);
  }
  d[lane] = acc[0];
}
constexpr int kSecondMmaLine = __LINE__ - 4;

}  // namespace pa::PA_KERNELS::mma_tests

namespace {

using namespace pa;
namespace k = pa::kernels_emu;
namespace layout = pa::kernels_emu::mma_layout;

TEST_CASE("mma_layout is the PTX ISA's fragment layout for m16n8k16 and ldmatrix", "[mma]") {
  // Written out from the PTX ISA's figures ("Matrix fragments for mma.m16n8k16 with floating
  // point type"): groupID = lane >> 2, threadID_in_group = lane % 4; A's a0..a7 in four
  // registers, rows groupID (+8), columns 2 * threadID_in_group (+1) (+8).
  struct AExpect {
    int lane, reg, row, col;
  };
  for (const AExpect& x : {AExpect{0, 0, 0, 0}, AExpect{0, 1, 8, 0}, AExpect{0, 2, 0, 8}, AExpect{0, 3, 8, 8},
                           AExpect{5, 0, 1, 2}, AExpect{5, 3, 9, 10}, AExpect{31, 0, 7, 6}, AExpect{31, 3, 15, 14}}) {
    INFO("A: lane " << x.lane << ", register " << x.reg);
    REQUIRE(layout::a_row(x.lane, x.reg) == x.row);
    REQUIRE(layout::a_col(x.lane, x.reg) == x.col);
  }
  // B: b0, b1 at rows (k) 2 * threadID_in_group (+1), b2, b3 at +8; column (n) groupID.
  REQUIRE(layout::b_row(0, 0) == 0);
  REQUIRE(layout::b_row(6, 0) == 4);
  REQUIRE(layout::b_row(6, 1) == 12);
  REQUIRE(layout::b_col(6) == 1);
  REQUIRE(layout::b_col(31) == 7);
  // C/D: c0, c1 at row groupID, columns 2 * threadID_in_group (+1); c2, c3 at row groupID + 8.
  REQUIRE((layout::c_row(9, 0) == 2 && layout::c_col(9, 0) == 2));
  REQUIRE((layout::c_row(9, 1) == 2 && layout::c_col(9, 1) == 3));
  REQUIRE((layout::c_row(9, 2) == 10 && layout::c_col(9, 2) == 2));
  REQUIRE((layout::c_row(30, 3) == 15 && layout::c_col(30, 3) == 5));
  // ldmatrix: "each thread receives two elements": row lane / 4, columns 2 * (lane % 4) (+1).
  REQUIRE((layout::ld_row(13) == 3 && layout::ld_col(13) == 2));
}

template <class T>
void check_one_mma(std::uint64_t seed) {
  std::vector<T> a(16 * 16), b(16 * 8);
  std::vector<float> c(16 * 8), d(16 * 8, -1.0f);
  std::uint64_t state = seed;
  auto next = [&] {  // small values with few bits: every product and sum is exact in float
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<int>(state >> 59) - 16) / 8.0f;
  };
  for (T& x : a) x = k::from_float<T>(next());
  for (T& x : b) x = k::from_float<T>(next());
  for (float& x : c) x = next();
  k::launch_kernel("one_mma", k::mma_tests::one_mma<T>, k::dim3(1), k::dim3(32), 0, nullptr,
                   k::gspan<const T>(a.data(), 256, "a"), k::gspan<const T>(b.data(), 128, "b"),
                   k::gspan<const float>(c.data(), 128, "c"), k::gspan<float>(d.data(), 128, "d"));
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double expected = c[i * 8 + j];
      for (int kk = 0; kk < 16; ++kk) expected += double{k::to_float(a[i * 16 + kk])} * k::to_float(b[kk * 8 + j]);
      INFO("D[" << i << "][" << j << "], seed " << seed);
      REQUIRE(d[i * 8 + j] == static_cast<float>(expected));
    }
}

TEST_CASE("the emulator's mma_m16n8k16 computes A·B + C from every lane's fragments", "[mma]") {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    check_one_mma<k::bf16>(seed);
    check_one_mma<k::f16>(seed);
  }
}

/// Runs load_matrices and returns the 32 x 4 registers.
template <bool TRANS, int SHIFT, bool BARRIER>
std::vector<unsigned> load_matrices() {
  std::vector<unsigned> rows(32 * 4), out(32 * 4, 0);
  for (int lane = 0; lane < 32; ++lane)  // row i of matrix j holds 64 j + 8 i + col, as 16-bit halves
    for (int w = 0; w < 4; ++w) {
      const unsigned base = 64u * (lane / 8) + 8u * (lane % 8) + 2u * w;
      rows[lane * 4 + w] = base | (base + 1) << 16;
    }
  k::launch_kernel("load_matrices", k::mma_tests::load_matrices<TRANS, SHIFT, BARRIER>, k::dim3(1), k::dim3(32), 0, nullptr,
                   k::gspan<const unsigned>(rows.data(), 128, "rows"), k::gspan<unsigned>(out.data(), 128, "out"));
  return out;
}

TEST_CASE("ldmatrix_x4 hands each lane its elements of the four matrices, .trans transposed", "[mma]") {
  const std::vector<unsigned> plain = load_matrices<false, 0, false>();
  const std::vector<unsigned> transposed = load_matrices<true, 0, false>();
  for (int lane = 0; lane < 32; ++lane)
    for (int j = 0; j < 4; ++j) {
      const int g = lane >> 2, t = lane & 3;  // the PTX ISA's names
      const unsigned plain_lo = 64u * j + 8u * g + 2u * t;    // row g, columns 2t and 2t + 1
      const unsigned trans_lo = 64u * j + 8u * (2 * t) + g;   // rows 2t and 2t + 1, column g
      INFO("lane " << lane << ", matrix " << j);
      REQUIRE(plain[lane * 4 + j] == (plain_lo | (plain_lo + 1) << 16));
      REQUIRE(transposed[lane * 4 + j] == (trans_lo | (trans_lo + 8) << 16));
    }
}

TEST_CASE("ldmatrix_x4 reads of rows other lanes wrote need a __syncwarp, and a matrix instruction the whole warp",
          "[mma]") {
  // Ordered by the __syncwarp: the rows, written by other lanes, read as if each lane wrote its own.
  REQUIRE(load_matrices<false, 1, true>() == load_matrices<false, 0, false>());
  const std::string where = "test_mma.cpp:" + std::to_string(k::mma_tests::kLoadMatricesLine);
  PA_REQUIRE_THROWS_AS_WITH((load_matrices<false, 1, false>()), KernelError, "staged");
  PA_REQUIRE_THROWS_AS_WITH((load_matrices<false, 1, false>()), KernelError, where);

  std::vector<float> d(32);
  auto run = [&] {
    k::launch_kernel("mma_without_a_lane", k::mma_tests::mma_without_a_lane, k::dim3(1), k::dim3(32), 0, nullptr,
                     k::gspan<float>(d.data(), 32, "d"), 3);
  };
  PA_REQUIRE_THROWS_AS_WITH(run(), KernelError, "mma_m16n8k16");
  PA_REQUIRE_THROWS_AS_WITH(run(), KernelError, "lane 3, which has exited");
  PA_REQUIRE_THROWS_AS_WITH(run(), KernelError, "test_mma.cpp:" + std::to_string(k::mma_tests::kMissingLaneLine));

  auto two_places = [&] {
    k::launch_kernel("mma_in_two_places", k::mma_tests::mma_in_two_places, k::dim3(1), k::dim3(32), 0, nullptr,
                     k::gspan<float>(d.data(), 32, "d"));
  };
  PA_REQUIRE_THROWS_AS_WITH(two_places(), KernelError, "but lane 16 calls mma_m16n8k16 at");
  PA_REQUIRE_THROWS_AS_WITH(two_places(), KernelError, "test_mma.cpp:" + std::to_string(k::mma_tests::kSecondMmaLine));
}

TEST_CASE("step10: K fragments read transposed give numbers the oracle rejects", "[mma][step10]") {
  for (DType dtype : {DType::bf16, DType::f16}) {
    WorkloadSpec spec = debug_spec();
    spec.dtype = dtype;
    spec.num_q_heads = 16;
    spec.num_kv_heads = 2;
    spec.context_lens = {40, 17};
    const Workload workload = make_workload(spec);
    const OracleRows oracle = oracle_rows(workload);
    KernelEntry planted = kernel(10, Backend::emulator);
    planted.launch = [](const DecodeView& view, const LaunchPlan& plan, void* stream) {
      k::step10::launch_as(view, plan, stream, true);
    };
    const KernelEntry& step10 = kernel(10, Backend::emulator);
    const CompareResult right = check_against_oracle(workload, oracle, run_emulator(step10, workload, {}).out, true);
    const CompareResult wrong = check_against_oracle(workload, oracle, run_emulator(planted, workload, {}).out, true);
    INFO(dtype_name(dtype) << ": right " << right.summary() << "; transposed " << wrong.summary());
    REQUIRE(right.ok);
    REQUIRE_FALSE(wrong.ok);
  }
}

}  // namespace

namespace {

/// Whether the 8 rows an ldmatrix reads (tokens first .. first + 7 of a tile, unit u of each, in
/// rows of \p units units) fall in 8 different 16-byte places of their lines, so in different
/// banks, with unit f stored at place_of(f).
template <class PlaceOf>
bool rows_in_eight_banks(int units, int first, int u, PlaceOf place_of) {
  unsigned places = 0;
  for (int token = first; token < first + 8; ++token) places |= 1u << (place_of(token * units + u) % 8);
  return places == 0xffu;
}

/// The two properties step10::swizzle promises at head dim D: a unit stays in its 128-byte line,
/// and the 8 rows an ldmatrix reads (tokens 8i .. 8i+7 of a tile, one unit of each) fall in 8
/// different 16-byte places of their lines, so in different banks.
template <int D>
void check_swizzle() {
  constexpr int units = k::step10::row_units(D);
  constexpr int tile_units = 32 * units;  // the largest tile a test plans
  std::vector<int> seen(tile_units, 0);
  for (int f = 0; f < tile_units; ++f) {
    const int to = k::step10::swizzle<D>(f);
    INFO("head dim " << D << ", unit " << f << " goes to " << to);
    REQUIRE(to / 8 == f / 8);
    ++seen[static_cast<std::size_t>(to)];
  }
  for (int place = 0; place < tile_units; ++place) {
    INFO("head dim " << D << ": place " << place << " holds " << seen[static_cast<std::size_t>(place)] << " units");
    REQUIRE(seen[static_cast<std::size_t>(place)] == 1);
  }
  for (int first = 0; first < 32; first += 8)
    for (int u = 0; u < units; ++u) {
      INFO("head dim " << D << ", tokens " << first << "-" << first + 7 << ", unit " << u);
      REQUIRE(rows_in_eight_banks(units, first, u, [](int f) { return k::step10::swizzle<D>(f); }));
    }
}

TEST_CASE("step10: swizzle keeps units in their lines and an ldmatrix's 8 rows in 8 banks", "[mma][step10]") {
  check_swizzle<64>();
  check_swizzle<80>();
  check_swizzle<96>();
  check_swizzle<112>();
  check_swizzle<128>();
  check_swizzle<256>();
}

/// The same check fails for rows laid out with no swizzle at head dims 80, 96 and 112 (the
/// conflicts the swizzle is there to remove): a row of 10, 12 or 14 units puts two of 8
/// consecutive rows in the same place.
TEST_CASE("step10: without the swizzle, rows of 10, 12 and 14 units share banks", "[mma][step10]") {
  for (int head_dim : {80, 96, 112}) {
    const int units = k::step10::row_units(head_dim);
    INFO("head dim " << head_dim << ", " << units << " units a row, tokens 0-7, unit 0");
    REQUIRE_FALSE(rows_in_eight_banks(units, 0, 0, [](int f) { return f; }));
  }
}

}  // namespace
