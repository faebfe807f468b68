#include "common/dtype.h"

#include "common/error.h"

namespace pa {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
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

}  // namespace pa
