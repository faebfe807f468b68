// Storage types: the host conversions must round exactly like the GPU's `__float2half_rn` and
// `__float2bfloat16_rn` (round to nearest, ties to even), or host-built data and GPU results
// stop comparing bit for bit. Eigen::half and Eigen::bfloat16 serve as an independent second
// implementation.

#include <Eigen/Core>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "common/dtype.h"
#include "common/error.h"
#include "tests/catch_compat.h"
#include "tests/test_util.h"

namespace {

using pa::testing::SplitMix;

std::uint16_t eigen_half_bits(float value) {
  return Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(value));
}
std::uint16_t eigen_bf16_bits(float value) {
  return Eigen::numext::bit_cast<std::uint16_t>(Eigen::bfloat16(value));
}
float eigen_half_to_float(std::uint16_t bits) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
}

bool is_f16_nan(std::uint16_t bits) { return (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0; }
bool is_bf16_nan(std::uint16_t bits) { return (bits & 0x7f80u) == 0x7f80u && (bits & 0x7fu) != 0; }

std::uint16_t f16_bits(float value) { return pa::float_to_f16(value).bits; }
std::uint16_t bf16_bits(float value) { return pa::float_to_bf16(value).bits; }
float from_f16(std::uint16_t bits) { return pa::f16_to_float(pa::f16_t{bits}); }
float from_bf16(std::uint16_t bits) { return pa::bf16_to_float(pa::bf16_t{bits}); }

}  // namespace

TEST_CASE("dtype: sizes, names and parsing") {
  CHECK(pa::dtype_size(pa::DType::f32) == 4);
  CHECK(pa::dtype_size(pa::DType::f16) == 2);
  CHECK(pa::dtype_size(pa::DType::bf16) == 2);
  CHECK(pa::dtype_name(pa::DType::f32) == "f32");
  CHECK(pa::dtype_name(pa::DType::f16) == "f16");
  CHECK(pa::dtype_name(pa::DType::bf16) == "bf16");
  for (const char* text : {"f32", "fp32", "float"}) CHECK(pa::parse_dtype(text) == pa::DType::f32);
  for (const char* text : {"f16", "fp16", "half"}) CHECK(pa::parse_dtype(text) == pa::DType::f16);
  CHECK(pa::parse_dtype("bf16") == pa::DType::bf16);

  SECTION("an unknown name names the argument, the choices and the value") {
    PA_REQUIRE_THROWS_AS_WITH(pa::parse_dtype("f64"), pa::ArgumentError, "--dtype");
    PA_REQUIRE_THROWS_AS_WITH(pa::parse_dtype("f64", "--kv-dtype"), pa::ArgumentError, "--kv-dtype");
    PA_REQUIRE_THROWS_AS_WITH(pa::parse_dtype("f64"), pa::ArgumentError, "'f64'");
    PA_REQUIRE_THROWS_AS_WITH(pa::parse_dtype("F16"), pa::ArgumentError, "one of f32, f16, bf16");
    PA_REQUIRE_THROWS_AS_WITH(pa::parse_dtype(""), pa::Error, "parse_dtype");
  }
}

TEST_CASE("dtype: f16 -> float is exact for all 65536 bit patterns and round-trips") {
  int conversion_mismatches = 0;
  int round_trip_mismatches = 0;
  std::uint32_t first_bad = 0x10000;
  for (std::uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const auto half_bits = static_cast<std::uint16_t>(bits);
    const float mine = from_f16(half_bits);
    const float eigen = eigen_half_to_float(half_bits);
    if (is_f16_nan(half_bits)) {
      // NaN stays NaN both ways (payloads need not survive).
      if (!std::isnan(mine) || !is_f16_nan(f16_bits(mine))) {
        ++round_trip_mismatches;
        if (first_bad > 0xffff) first_bad = bits;
      }
      continue;
    }
    if (pa::float_bits(mine) != pa::float_bits(eigen)) {
      ++conversion_mismatches;
      if (first_bad > 0xffff) first_bad = bits;
    }
    if (f16_bits(mine) != half_bits) {
      ++round_trip_mismatches;
      if (first_bad > 0xffff) first_bad = bits;
    }
  }
  INFO("first bad f16 pattern 0x" << std::hex << first_bad);
  CHECK(conversion_mismatches == 0);
  CHECK(round_trip_mismatches == 0);
}

TEST_CASE("dtype: f16 known values, subnormals, overflow and NaN") {
  CHECK(f16_bits(0.0f) == 0x0000);
  CHECK(f16_bits(-0.0f) == 0x8000);
  CHECK(f16_bits(1.0f) == 0x3c00);
  CHECK(f16_bits(-2.0f) == 0xc000);
  CHECK(f16_bits(65504.0f) == 0x7bff);             // largest finite half
  CHECK(from_f16(0x7bff) == 65504.0f);
  CHECK(f16_bits(std::ldexp(1.0f, -14)) == 0x0400);  // smallest normal
  CHECK(f16_bits(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
  CHECK(from_f16(0x0001) == std::ldexp(1.0f, -24));
  CHECK(from_f16(0x03ff) == std::ldexp(1023.0f, -24));  // largest subnormal
  CHECK(f16_bits(-std::ldexp(3.0f, -24)) == 0x8003);

  SECTION("ties round to even") {
    CHECK(f16_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);      // halfway 1 .. 1+2^-10: to 1
    CHECK(f16_bits(1.0f + std::ldexp(3.0f, -11)) == 0x3c02);      // halfway 1+2^-10 .. 1+2^-9: up
    CHECK(f16_bits(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3c01);  // above half
    CHECK(f16_bits(std::ldexp(1.0f, -25)) == 0x0000);             // half the smallest subnormal: to 0
    CHECK(f16_bits(std::ldexp(3.0f, -25)) == 0x0002);             // 1.5 subnormal steps: to 2
    CHECK(f16_bits(std::ldexp(5.0f, -25)) == 0x0002);             // 2.5 steps: to 2
    CHECK(f16_bits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == 0x0001);  // just above half
    CHECK(f16_bits(std::ldexp(2047.0f, -25)) == 0x0400);          // largest subnormal + half: to normal
  }
  SECTION("overflow goes to infinity at the rounding boundary") {
    CHECK(f16_bits(65519.99f) == 0x7bff);
    CHECK(f16_bits(65520.0f) == 0x7c00);  // the tie between 65504 and 65536 rounds to even = inf
    CHECK(f16_bits(1e6f) == 0x7c00);
    CHECK(f16_bits(-1e6f) == 0xfc00);
    CHECK(f16_bits(std::numeric_limits<float>::infinity()) == 0x7c00);
    CHECK(f16_bits(-std::numeric_limits<float>::infinity()) == 0xfc00);
    CHECK(std::isinf(from_f16(0x7c00)));
  }
  SECTION("NaN stays NaN, including signalling NaNs whose payload is in the low bits") {
    CHECK(is_f16_nan(f16_bits(std::numeric_limits<float>::quiet_NaN())));
    CHECK(is_f16_nan(f16_bits(pa::float_from_bits(0x7f800001u))));  // would truncate to inf
    CHECK(is_f16_nan(f16_bits(pa::float_from_bits(0xff800001u))));
    CHECK(std::isnan(from_f16(0x7e00)));
    CHECK(std::isnan(from_f16(0x7c01)));
  }
}

TEST_CASE("dtype: every tie between neighbouring f16 and bf16 values rounds to the even one") {
  // The midpoint of two neighbouring 16-bit values is exact in float (24 significant bits
  // against 11 or 8), so every tie of both formats can be tried.
  int f16_bad = 0;
  int bf16_bad = 0;
  std::uint32_t first_f16 = 0;
  std::uint32_t first_bf16 = 0;
  for (std::uint32_t bits = 0; bits < 0xffffu; ++bits) {
    const auto low = static_cast<std::uint16_t>(bits);
    const auto high = static_cast<std::uint16_t>(bits + 1);
    const std::uint16_t even = (low & 1u) == 0 ? low : high;
    // f16: neighbours within one sign, both finite, or the top finite value and infinity.
    if ((low & 0x7fffu) < 0x7c00u && (low & 0x8000u) == (high & 0x8000u)) {
      const float middle = (from_f16(low) + from_f16(high)) / 2.0f;
      if (f16_bits(middle) != even || eigen_half_bits(middle) != even) {
        if (f16_bad++ == 0) first_f16 = bits;
      }
    }
    if ((low & 0x7fffu) < 0x7f80u && (low & 0x8000u) == (high & 0x8000u)) {
      const float middle = (from_bf16(low) + from_bf16(high)) / 2.0f;
      if (!std::isfinite(middle)) continue;  // the last tie (max bf16 .. inf) is not a float
      if (bf16_bits(middle) != even || eigen_bf16_bits(middle) != even) {
        if (bf16_bad++ == 0) first_bf16 = bits;
      }
    }
  }
  INFO("first bad f16 tie below 0x" << std::hex << first_f16 << ", first bad bf16 tie below 0x" << first_bf16);
  CHECK(f16_bad == 0);
  CHECK(bf16_bad == 0);
}

TEST_CASE("dtype: bf16 known values, ties, subnormals, overflow and NaN") {
  CHECK(bf16_bits(1.0f) == 0x3f80);
  CHECK(bf16_bits(-0.0f) == 0x8000);
  CHECK(from_bf16(0x3f80) == 1.0f);
  CHECK(bf16_bits(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);   // tie: to even (1)
  CHECK(bf16_bits(1.0f + std::ldexp(3.0f, -8)) == 0x3f82);   // tie: to even (up)
  CHECK(bf16_bits(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3f81);
  CHECK(bf16_bits(pa::float_from_bits(0x00000001u)) == 0x0000);  // float subnormal below half a step
  CHECK(bf16_bits(pa::float_from_bits(0x00008000u)) == 0x0000);  // tie: to even (0)
  CHECK(bf16_bits(pa::float_from_bits(0x00018000u)) == 0x0002);  // tie: to even (2)
  CHECK(bf16_bits(pa::float_from_bits(0x00010000u)) == 0x0001);  // a bf16 subnormal, exact
  CHECK(bf16_bits(std::numeric_limits<float>::max()) == 0x7f80);  // above max bf16 + half: inf
  CHECK(bf16_bits(pa::float_from_bits(0x7f7f7fffu)) == 0x7f7f);   // below half: max bf16
  CHECK(bf16_bits(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(is_bf16_nan(bf16_bits(std::numeric_limits<float>::quiet_NaN())));
  CHECK(is_bf16_nan(bf16_bits(pa::float_from_bits(0x7f800001u))));  // truncation would give inf
  CHECK(is_bf16_nan(bf16_bits(pa::float_from_bits(0xffffffffu))));
  CHECK(std::isnan(from_bf16(0x7fc0)));
}

TEST_CASE("dtype: float -> f16 and bf16 agree with Eigen on millions of seeded random floats") {
  const std::uint64_t seed = 20240611;
  INFO("seed " << seed);
  SplitMix random{seed};
  const int count = 1 << 22;  // about four million, half of them in the f16 range
  int f16_bad = 0;
  int bf16_bad = 0;
  std::uint32_t first_f16 = 0;
  std::uint32_t first_bf16 = 0;
  for (int i = 0; i < count; ++i) {
    std::uint32_t bits = static_cast<std::uint32_t>(random.next() >> 32);
    if (i % 2 == 1) {
      // Exponent in [2^-27, 2^17): subnormal halves, normal halves and overflow, densely.
      const std::uint32_t exponent = 100u + static_cast<std::uint32_t>(random.next() % 44u);
      bits = (bits & 0x807fffffu) | (exponent << 23);
    }
    const float value = pa::float_from_bits(bits);
    const std::uint16_t mine_half = f16_bits(value);
    const std::uint16_t eigen_half = eigen_half_bits(value);
    const bool half_ok = std::isnan(value) ? is_f16_nan(mine_half) && is_f16_nan(eigen_half) : mine_half == eigen_half;
    if (!half_ok && f16_bad++ == 0) first_f16 = bits;
    const std::uint16_t mine_bf16 = bf16_bits(value);
    const std::uint16_t eigen_bf16 = eigen_bf16_bits(value);
    const bool bf16_ok = std::isnan(value) ? is_bf16_nan(mine_bf16) && is_bf16_nan(eigen_bf16) : mine_bf16 == eigen_bf16;
    if (!bf16_ok && bf16_bad++ == 0) first_bf16 = bits;
    // A non-NaN value read back is the nearest representable value: never further than half a step.
    if (!std::isnan(value) && std::isfinite(from_bf16(mine_bf16))) {
      const float back = from_bf16(mine_bf16);
      if (std::abs(static_cast<double>(back) - value) > std::abs(static_cast<double>(value)) * std::ldexp(1.0, -8) &&
          std::abs(value) >= std::numeric_limits<float>::min() && bf16_bad++ == 0)
        first_bf16 = bits;
    }
  }
  INFO("first disagreeing float bits: f16 0x" << std::hex << first_f16 << ", bf16 0x" << first_bf16);
  CHECK(f16_bad == 0);
  CHECK(bf16_bad == 0);
}

TEST_CASE("dtype: load, store and round_to go through the same conversions") {
  float f32[2] = {0, 0};
  pa::f16_t f16[2] = {};
  pa::bf16_t bf16[2] = {};
  const float value = 0.1f;
  pa::store_from_float(f32, pa::DType::f32, 1, value);
  pa::store_from_float(f16, pa::DType::f16, 1, value);
  pa::store_from_float(bf16, pa::DType::bf16, 1, value);
  CHECK(f32[1] == value);
  CHECK(f16[1].bits == f16_bits(value));
  CHECK(bf16[1].bits == bf16_bits(value));
  CHECK(f16[0].bits == 0);  // only element 1 was written
  CHECK(pa::load_as_float(f32, pa::DType::f32, 1) == value);
  CHECK(pa::load_as_float(f16, pa::DType::f16, 1) == pa::round_to(pa::DType::f16, value));
  CHECK(pa::load_as_float(bf16, pa::DType::bf16, 1) == pa::round_to(pa::DType::bf16, value));
  CHECK(pa::round_to(pa::DType::f32, value) == value);
  CHECK(pa::round_to(pa::DType::f16, value) == from_f16(f16_bits(value)));
  CHECK(pa::round_to(pa::DType::bf16, value) == from_bf16(bf16_bits(value)));
  CHECK(pa::round_to(pa::DType::f16, 0.1f) != 0.1f);  // 0.1 is not a half
  CHECK(std::isnan(pa::round_to(pa::DType::f16, std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isinf(pa::round_to(pa::DType::f16, 1e5f)));
}

// ----- fp8 e4m3 --------------------------------------------------------------------------------

namespace {
/// e4m3 decoded from its definition, independently of pa::e4m3_to_float: sign, 4 exponent bits
/// (bias 7), 3 mantissa bits; exponent 0 holds subnormals m * 2^-9; S.1111.111 is NaN.
double e4m3_by_definition(int bits) {
  const int sign = bits >> 7, exponent = (bits >> 3) & 15, mantissa = bits & 7;
  if (exponent == 15 && mantissa == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 10);
  return sign ? -magnitude : magnitude;
}
}  // namespace

TEST_CASE("dtype: e4m3 -> float is exact for all 256 bit patterns and round-trips") {
  REQUIRE(pa::dtype_size(pa::DType::e4m3) == 1);
  REQUIRE(pa::dtype_name(pa::DType::e4m3) == "e4m3");
  int nans = 0;
  for (int bits = 0; bits < 256; ++bits) {
    CAPTURE(bits);
    const float value = pa::e4m3_to_float(pa::e4m3_t{static_cast<std::uint8_t>(bits)});
    const double expected = e4m3_by_definition(bits);
    if (std::isnan(expected)) {
      REQUIRE(std::isnan(value));
      REQUIRE(pa::float_to_e4m3(value).bits == 0x7f);
      ++nans;
      continue;
    }
    REQUIRE(static_cast<double>(value) == expected);
    REQUIRE(std::signbit(value) == (bits >= 128));
    REQUIRE(pa::float_to_e4m3(value).bits == bits);  // -0 stays -0
  }
  REQUIRE(nans == 2);  // 0x7f and 0xff; no infinities
  REQUIRE(pa::e4m3_to_float({0x7e}) == 448.0f);
  REQUIRE(pa::e4m3_to_float({0x01}) == std::ldexp(1.0f, -9));  // the smallest subnormal
  REQUIRE(pa::e4m3_to_float({0x08}) == std::ldexp(1.0f, -6));  // the smallest normal
}

TEST_CASE("dtype: float -> e4m3 rounds to nearest even between every pair of neighbours, and saturates") {
  for (int bits = 0; bits < 0x7e; ++bits) {  // positive finite neighbours (bits, bits + 1)
    CAPTURE(bits);
    const float low = pa::e4m3_to_float({static_cast<std::uint8_t>(bits)});
    const float high = pa::e4m3_to_float({static_cast<std::uint8_t>(bits + 1)});
    const float middle = (low + high) / 2;  // exact in float
    const int even = bits % 2 == 0 ? bits : bits + 1;
    REQUIRE(pa::float_to_e4m3(middle).bits == even);
    REQUIRE(pa::float_to_e4m3(-middle).bits == (even | 0x80));
    REQUIRE(pa::float_to_e4m3(std::nextafter(middle, 0.0f)).bits == bits);
    REQUIRE(pa::float_to_e4m3(std::nextafter(middle, 1000.0f)).bits == bits + 1);
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float big : {448.0f, 463.99f, 464.0f, 1e6f, 3e38f, inf}) {
    CAPTURE(big);
    REQUIRE(pa::float_to_e4m3(big).bits == 0x7e);   // +448: saturated, never NaN
    REQUIRE(pa::float_to_e4m3(-big).bits == 0xfe);  // -448
  }
  REQUIRE(pa::float_to_e4m3(std::numeric_limits<float>::quiet_NaN()).bits == 0x7f);
  REQUIRE(pa::float_to_e4m3(std::ldexp(1.0f, -10)).bits == 0x00);  // half the smallest subnormal: a tie, to 0
  REQUIRE(pa::float_to_e4m3(std::nextafter(std::ldexp(1.0f, -10), 1.0f)).bits == 0x01);
  REQUIRE(pa::float_to_e4m3(-1e-30f).bits == 0x80);
  REQUIRE(pa::float_to_e4m3(1.0f).bits == 0x38);
  REQUIRE(pa::round_to(pa::DType::e4m3, 0.3f) == pa::e4m3_to_float(pa::float_to_e4m3(0.3f)));
}
