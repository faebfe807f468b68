#include "common/dtype.h"

#include "common/error.h"

namespace pa {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::e4m3: return "e4m3";
  }
  return "?";
}

DType parse_dtype(std::string_view text, std::string_view argument) {
  if (text == "f32" || text == "fp32" || text == "float") return DType::f32;
  if (text == "f16" || text == "fp16" || text == "half") return DType::f16;
  if (text == "bf16") return DType::bf16;
  throw_argument("parse_dtype", argument, "one of f32, f16, bf16", cat('\'', text, '\''));
}

f16_t float_to_f16(float value) {
  const std::uint32_t bits = float_bits(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return {static_cast<std::uint16_t>(sign | 0x7e00u)};  // NaN
  if (magnitude >= 0x477ff000u) return {static_cast<std::uint16_t>(sign | 0x7c00u)}; // rounds to inf
  if (magnitude >= 0x38800000u) {
    // Normal half: rebias the exponent (127 -> 15), keep 10 mantissa bits, round to nearest even.
    const std::uint32_t rebased = magnitude - (112u << 23);
    const std::uint32_t round = 0xfffu + ((rebased >> 13) & 1u);
    return {static_cast<std::uint16_t>(sign | ((rebased + round) >> 13))};
  }
  if (magnitude < 0x33000000u) return {sign};  // below half the smallest subnormal: +-0
  // Subnormal half: value = mantissa * 2^-24. Shift the full 24-bit significand into place.
  const std::uint32_t exponent = magnitude >> 23;
  const std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126u - exponent;  // 14..24
  std::uint32_t half_mantissa = significand >> shift;
  const std::uint32_t remainder = significand & ((1u << shift) - 1u);
  const std::uint32_t halfway = 1u << (shift - 1u);
  if (remainder > halfway || (remainder == halfway && (half_mantissa & 1u))) ++half_mantissa;
  return {static_cast<std::uint16_t>(sign | half_mantissa)};
}

float f16_to_float(f16_t value) {
  const std::uint32_t sign = std::uint32_t{value.bits & 0x8000u} << 16;
  const std::uint32_t exponent = (value.bits >> 10) & 0x1fu;
  std::uint32_t mantissa = value.bits & 0x3ffu;
  if (exponent == 0x1fu) return float_from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return float_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return float_from_bits(sign);
  // Subnormal: normalise.
  std::uint32_t e = 113u;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return float_from_bits(sign | (e << 23) | ((mantissa & 0x3ffu) << 13));
}

e4m3_t float_to_e4m3(float value) {
  const std::uint32_t bits = float_bits(value);
  const auto sign = static_cast<std::uint8_t>((bits >> 24) & 0x80u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return {0x7f};  // NaN (CUDA gives 0x7f whatever the sign)
  // 464 = 448 + half an ulp (ulp 32 at 2^8): from there on a value would round to 480, which
  // e4m3 does not have; saturate. 464 itself is a tie between 448 (mantissa 110) and 480
  // (odd would be 111 = NaN); to nearest even it goes to 448, which is what saturating gives.
  if (magnitude >= 0x43e80000u) return {static_cast<std::uint8_t>(sign | 0x7eu)};
  if (magnitude >= 0x3c800000u) {
    // Normal e4m3 (|x| >= 2^-6): rebias the exponent (127 -> 7), keep 3 mantissa bits, round
    // to nearest even. A carry out of the mantissa bumps the exponent, as it should.
    const std::uint32_t rebased = magnitude - (120u << 23);
    const std::uint32_t round = 0x7ffffu + ((rebased >> 20) & 1u);
    return {static_cast<std::uint8_t>(sign | ((rebased + round) >> 20))};
  }
  if (magnitude <= 0x3a800000u) return {sign};  // |x| <= 2^-10, half the smallest subnormal: +-0 (a tie goes to even, 0)
  // Subnormal e4m3: value = m * 2^-9, m in 1..7 (a carry to 8 is the smallest normal, 0x08).
  const std::uint32_t exponent = magnitude >> 23;                        // 117..120
  const std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;  // 24 bits
  const std::uint32_t shift = 141u - exponent;                           // 21..24
  std::uint32_t m = significand >> shift;
  const std::uint32_t remainder = significand & ((1u << shift) - 1u);
  const std::uint32_t halfway = 1u << (shift - 1u);
  if (remainder > halfway || (remainder == halfway && (m & 1u))) ++m;
  return {static_cast<std::uint8_t>(sign | m)};
}

float e4m3_to_float(e4m3_t value) {
  const std::uint32_t sign = std::uint32_t{value.bits & 0x80u} << 24;
  const std::uint32_t exponent = (value.bits >> 3) & 0xfu;
  const std::uint32_t mantissa = value.bits & 0x7u;
  if (exponent == 0xfu && mantissa == 0x7u) return float_from_bits(sign | 0x7fc00000u);  // NaN
  if (exponent != 0) return float_from_bits(sign | ((exponent + 120u) << 23) | (mantissa << 20));
  // Subnormal (or zero): m * 2^-9, exact in float.
  return float_from_bits(sign) + (sign ? -1.0f : 1.0f) * static_cast<float>(mantissa) * 0x1p-9f;
}

}  // namespace pa
