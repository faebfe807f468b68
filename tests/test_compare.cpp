// The checker itself: a checker with a blind spot passes broken kernels, so every way a
// comparison can lie (NaN, Inf, signed zero, tolerance edges, wrong location) is tried here.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/problem.h"
#include "tests/catch_compat.h"
#include "tests/test_util.h"

namespace {

using pa::testing::error_message;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// An output-shaped problem: 2 sequences x 3 heads x 4 channels = 24 elements.
pa::DecodeProblem output_problem(pa::DType dtype) {
  return pa::make_problem(/*num_seqs=*/2, /*num_q_heads=*/3, /*num_kv_heads=*/1, /*head_dim=*/4,
                          /*block_size=*/4, /*max_blocks_per_seq=*/1, /*max_context_len=*/4,
                          /*num_blocks=*/2, dtype);
}

/// Flat index of (seq, head, dim) in the 2 x 3 x 4 output.
std::size_t at(int seq, int head, int dim) { return static_cast<std::size_t>((seq * 3 + head) * 4 + dim); }

/// A reference with distinct, dtype-exact values (k/8 - 1.5 is exact in every storage type).
std::vector<double> make_reference() {
  std::vector<double> reference(24);
  for (std::size_t i = 0; i < reference.size(); ++i) reference[i] = static_cast<double>(i) / 8.0 - 1.5;
  return reference;
}

/// Stores \p values in \p dtype.
std::vector<std::byte> stored(pa::DType dtype, const std::vector<double>& values) {
  std::vector<std::byte> bytes(values.size() * pa::dtype_size(dtype));
  for (std::size_t i = 0; i < values.size(); ++i)
    pa::store_from_float(bytes.data(), dtype, i, static_cast<float>(values[i]));
  return bytes;
}

pa::CompareResult check(pa::DType dtype, const std::vector<double>& reference, const std::vector<double>& got) {
  const std::vector<std::byte> bytes = stored(dtype, got);
  return pa::compare_to_reference(output_problem(dtype), reference, bytes.data(), pa::Tolerance::for_dtype(dtype));
}

}  // namespace

TEST_CASE("compare: tolerances per dtype are CORRECTNESS.md's") {
  const pa::Tolerance f32 = pa::Tolerance::for_dtype(pa::DType::f32);
  const pa::Tolerance f16 = pa::Tolerance::for_dtype(pa::DType::f16);
  const pa::Tolerance bf16 = pa::Tolerance::for_dtype(pa::DType::bf16);
  CHECK(f32.atol == 1e-5);
  CHECK(f32.rtol == 1e-5);
  CHECK(f16.atol == 1e-3);
  CHECK(f16.rtol == 1e-3);
  CHECK(bf16.atol == 1e-3);
  CHECK(bf16.rtol == 1.6e-2);
}

TEST_CASE("compare: identical output passes and the summary says so") {
  for (pa::DType dtype : {pa::DType::f32, pa::DType::f16, pa::DType::bf16}) {
    CAPTURE(pa::dtype_name(dtype));
    const std::vector<double> reference = make_reference();
    const pa::CompareResult result = check(dtype, reference, reference);
    CHECK(result.ok);
    CHECK(result.total == 24);
    CHECK(result.mismatches == 0);
    CHECK(result.first_failure.empty());
    CHECK(result.max_abs_error == 0.0);
    CHECK(result.summary() == "ok (max |d| 0.0e+00, max rel 0.0e+00)");
  }
}

TEST_CASE("compare: the reference is rounded to the output type before comparing") {
  // 0.1 is not an f16: a kernel that writes the nearest f16 has made no error, even though
  // |f16(0.1) - 0.1| = 2.4e-5 is above f32's tolerance; the check must not charge it.
  std::vector<double> reference(24, 0.1);
  const pa::CompareResult result = check(pa::DType::f16, reference, reference);
  CHECK(result.ok);
  CHECK(result.max_abs_error == 0.0);
  pa::Tolerance strict{0.0, 0.0};
  const std::vector<std::byte> bytes = stored(pa::DType::f16, reference);
  CHECK(pa::compare_to_reference(output_problem(pa::DType::f16), reference, bytes.data(), strict).ok);
}

TEST_CASE("compare: a mismatch is located at its (seq, head, dim) and reported in the fixed format") {
  const std::vector<double> reference = make_reference();
  std::vector<double> got = reference;
  got[at(1, 2, 3)] += 0.5;  // the last element: seq 1, head 2, dim 3, ref 1.375
  got[at(1, 0, 1)] += 0.25;  // the first mismatch in memory order: seq 1, head 0, dim 1, ref 0.125
  const pa::CompareResult result = check(pa::DType::f32, reference, got);
  CHECK(!result.ok);
  CHECK(result.mismatches == 2);
  CHECK(result.total == 24);
  CHECK(result.first_failure == "FAIL 2/24: |d|=2.5e-01 at (seq 1, head 0, dim 1) ref 0.125 got 0.375");
  CHECK(result.summary() == result.first_failure);
  CHECK(result.max_abs_error == 0.5);
  CHECK(result.max_rel_error == 2.0);  // 0.25 / 0.125, larger than 0.5 / 1.375
}

TEST_CASE("compare: NaN and Inf in the output fail unless the reference holds the same") {
  const std::vector<double> reference = make_reference();
  for (pa::DType dtype : {pa::DType::f32, pa::DType::f16, pa::DType::bf16}) {
    CAPTURE(pa::dtype_name(dtype));
    SECTION("NaN where the reference is finite fails, and prints as nan") {
      std::vector<double> got = reference;
      got[at(0, 1, 2)] = kNaN;  // ref = 6/8 - 1.5 = -0.75
      const pa::CompareResult result = check(dtype, reference, got);
      CHECK(!result.ok);
      CHECK(result.mismatches == 1);
      CHECK(result.first_failure == "FAIL 1/24: |d|=nan at (seq 0, head 1, dim 2) ref -0.75 got nan");
    }
    SECTION("a NaN with its sign bit set prints as nan too (its sign depends on the build)") {
      std::vector<double> got = reference;
      got[at(0, 1, 2)] = -kNaN;
      const pa::CompareResult result = check(dtype, reference, got);
      CHECK(result.first_failure == "FAIL 1/24: |d|=nan at (seq 0, head 1, dim 2) ref -0.75 got nan");
    }
    SECTION("NaN where the reference is NaN passes (a NaN in a valid K/V must reach the output)") {
      std::vector<double> with_nan = reference;
      with_nan[at(1, 1, 0)] = kNaN;
      CHECK(check(dtype, with_nan, with_nan).ok);
    }
    SECTION("a finite value where the reference is NaN fails") {
      std::vector<double> with_nan = reference;
      with_nan[at(1, 1, 0)] = kNaN;
      const pa::CompareResult result = check(dtype, with_nan, reference);
      CHECK(!result.ok);
      CHECK(result.first_failure == "FAIL 1/24: |d|=nan at (seq 1, head 1, dim 0) ref nan got 0.5");
    }
    SECTION("infinities: the same sign passes, the other sign or a finite value fails") {
      std::vector<double> with_inf = reference;
      with_inf[at(0, 0, 0)] = kInf;
      CHECK(check(dtype, with_inf, with_inf).ok);
      std::vector<double> negative = with_inf;
      negative[at(0, 0, 0)] = -kInf;
      CHECK(!check(dtype, with_inf, negative).ok);
      CHECK(!check(dtype, with_inf, reference).ok);
      CHECK(!check(dtype, reference, with_inf).ok);
      std::vector<double> nan_there = with_inf;
      nan_there[at(0, 0, 0)] = kNaN;
      CHECK(!check(dtype, with_inf, nan_there).ok);
    }
  }
  SECTION("the maxima ignore non-finite elements") {
    std::vector<double> with_nan = reference;
    with_nan[3] = kNaN;
    std::vector<double> got = with_nan;
    got[5] += 1e-6;
    const pa::CompareResult result = check(pa::DType::f32, with_nan, got);
    CHECK(result.ok);
    CHECK(std::isfinite(result.max_abs_error));
    CHECK(result.max_abs_error > 0.0);
  }
}

TEST_CASE("compare: tolerance boundaries per dtype (|d| <= atol + rtol * |ref|)") {
  SECTION("f32 at ref 1: the bound is 2e-5") {
    std::vector<double> reference(24, 1.0);
    std::vector<double> inside(24, 1.0);
    std::vector<double> outside(24, 1.0);
    inside[7] = 1.0 + 1.9e-5;
    outside[7] = 1.0 + 2.2e-5;
    CHECK(check(pa::DType::f32, reference, inside).ok);
    const pa::CompareResult result = check(pa::DType::f32, reference, outside);
    CHECK(!result.ok);
    CHECK(result.first_failure.find("(seq 0, head 1, dim 3)") != std::string::npos);
  }
  SECTION("f32 at ref 0: only atol (1e-5) is left") {
    std::vector<double> reference(24, 0.0);
    std::vector<double> got(24, 0.0);
    got[0] = 9e-6;
    CHECK(check(pa::DType::f32, reference, got).ok);
    got[0] = 1.1e-5;
    CHECK(!check(pa::DType::f32, reference, got).ok);
    got[0] = -1.1e-5;
    CHECK(!check(pa::DType::f32, reference, got).ok);
  }
  SECTION("f16 at ref 1: the bound is 2e-3; one f16 step there is 9.8e-4 (in), three are out") {
    std::vector<double> reference(24, 1.0);
    std::vector<double> got(24, 1.0);
    got[0] = 1.0 + std::ldexp(1.0, -10);  // one step: 9.8e-4
    got[1] = 1.0 + std::ldexp(2.0, -10);  // two steps: 1.95e-3
    CHECK(check(pa::DType::f16, reference, got).ok);
    got[1] = 1.0 + std::ldexp(3.0, -10);  // three steps: 2.9e-3
    CHECK(!check(pa::DType::f16, reference, got).ok);
  }
  SECTION("bf16 at ref 1: the bound is 1.7e-2; two bf16 steps (1.56e-2) are in, three are out") {
    std::vector<double> reference(24, 1.0);
    std::vector<double> got(24, 1.0);
    got[0] = 1.0 + std::ldexp(2.0, -7);
    CHECK(check(pa::DType::bf16, reference, got).ok);
    got[0] = 1.0 + std::ldexp(3.0, -7);
    CHECK(!check(pa::DType::bf16, reference, got).ok);
    got[0] = 1.0 - std::ldexp(3.0, -8);  // below 1 the steps are half as large: 1.2e-2, in
    CHECK(check(pa::DType::bf16, reference, got).ok);
  }
  SECTION("rtol scales with |ref|: bf16 at ref -64 allows 1.025, not 2") {
    std::vector<double> reference(24, -64.0);
    std::vector<double> got(24, -64.0);
    got[0] = -65.0;  // a bf16 step at 64 is 0.5
    CHECK(check(pa::DType::bf16, reference, got).ok);
    got[0] = -66.0;
    CHECK(!check(pa::DType::bf16, reference, got).ok);
  }
}

TEST_CASE("compare: argument errors name the argument") {
  const pa::DecodeProblem problem = output_problem(pa::DType::f32);
  std::vector<float> got(24, 0.0f);
  std::vector<double> short_reference(23, 0.0);
  PA_REQUIRE_THROWS_AS_WITH(pa::compare_to_reference(problem, short_reference, got.data(), {}), pa::ArgumentError,
                            "reference.size()");
  std::vector<double> reference(24, 0.0);
  PA_REQUIRE_THROWS_AS_WITH(pa::compare_to_reference(problem, reference, nullptr, {}), pa::ArgumentError, "got");
  PA_REQUIRE_THROWS_AS_WITH(pa::compare_bitwise(problem, nullptr, got.data()), pa::ArgumentError, "expected");
  PA_REQUIRE_THROWS_AS_WITH(pa::max_abs_error(problem, short_reference, got.data()), pa::ArgumentError,
                            "reference.size()");
  std::vector<float> short_got(23, 0.0f);
  PA_REQUIRE_THROWS_AS_WITH(pa::max_abs_error(reference, short_got), pa::ArgumentError, "got.size()");
  pa::DecodeProblem empty = problem;
  empty.num_seqs = 0;
  CHECK(error_message([&] { CHECK(pa::compare_bitwise(empty, nullptr, nullptr).ok); }) == "");
  CHECK(pa::compare_to_reference(empty, {}, nullptr, {}).total == 0);
}

TEST_CASE("compare: bitwise comparison locates the first differing element") {
  const std::vector<double> reference = make_reference();
  for (pa::DType dtype : {pa::DType::f32, pa::DType::f16, pa::DType::bf16}) {
    CAPTURE(pa::dtype_name(dtype));
    const std::vector<std::byte> expected = stored(dtype, reference);
    CHECK(pa::compare_bitwise(output_problem(dtype), expected.data(), expected.data()).ok);

    std::vector<double> changed = reference;
    changed[at(0, 2, 1)] = 0.5;    // was 9/8 - 1.5 = -0.375
    changed[at(1, 1, 3)] = 100.0;  // a second difference, later in memory
    const std::vector<std::byte> got = stored(dtype, changed);
    const pa::CompareResult result = pa::compare_bitwise(output_problem(dtype), expected.data(), got.data());
    CHECK(!result.ok);
    CHECK(result.mismatches == 2);
    CHECK(result.total == 24);
    const std::string bits = dtype == pa::DType::f32 ? "expected -0.375 [0xbec00000] got 0.5 [0x3f000000]"
                             : dtype == pa::DType::f16 ? "expected -0.375 [0xb600] got 0.5 [0x3800]"
                                                       : "expected -0.375 [0xbec0] got 0.5 [0x3f00]";
    CHECK(result.first_failure == "FAIL 2/24: bits differ at (seq 0, head 2, dim 1) " + bits);
  }
}

TEST_CASE("compare: bitwise tells -0.0 from 0.0 and NaN payloads apart, tolerance does not") {
  for (pa::DType dtype : {pa::DType::f32, pa::DType::f16, pa::DType::bf16}) {
    CAPTURE(pa::dtype_name(dtype));
    const std::vector<double> zeros(24, 0.0);
    std::vector<double> signed_zero(24, 0.0);
    signed_zero[at(1, 0, 2)] = -0.0;
    const std::vector<std::byte> expected = stored(dtype, zeros);
    const std::vector<std::byte> got = stored(dtype, signed_zero);
    const pa::CompareResult bitwise = pa::compare_bitwise(output_problem(dtype), expected.data(), got.data());
    CHECK(!bitwise.ok);
    CHECK(bitwise.mismatches == 1);
    CHECK(bitwise.first_failure.find("(seq 1, head 0, dim 2) expected 0 [") != std::string::npos);
    CHECK(bitwise.first_failure.find("got -0 [") != std::string::npos);
    CHECK(check(dtype, zeros, signed_zero).ok);  // numerically equal
  }
  SECTION("two NaNs with different bits differ; the same NaN bits do not") {
    std::vector<float> expected(24, 1.0f);
    std::vector<float> got(24, 1.0f);
    expected[4] = pa::float_from_bits(0x7fc00000u);
    got[4] = pa::float_from_bits(0x7fc00001u);
    CHECK(!pa::compare_bitwise(output_problem(pa::DType::f32), expected.data(), got.data()).ok);
    got[4] = expected[4];
    CHECK(pa::compare_bitwise(output_problem(pa::DType::f32), expected.data(), got.data()).ok);
  }
}

TEST_CASE("compare: max_abs_error skips non-finite elements and reads the dtype") {
  const pa::DecodeProblem f16 = output_problem(pa::DType::f16);
  std::vector<double> reference(24, 0.1);
  reference[2] = kNaN;
  std::vector<double> got_values(24, 0.1);
  got_values[5] = kInf;
  got_values[6] = 0.35;
  const std::vector<std::byte> got = stored(pa::DType::f16, got_values);
  // Against the unrounded reference: |f16(0.35) - 0.1|.
  CHECK(pa::max_abs_error(f16, reference, got.data()) == pa::round_to(pa::DType::f16, 0.35f) - 0.1);

  std::vector<float> floats(24, 0.1f);
  floats[7] = std::numeric_limits<float>::quiet_NaN();
  floats[8] = 0.2f;
  CHECK(pa::max_abs_error(reference, floats) == static_cast<double>(0.2f) - 0.1);
}
