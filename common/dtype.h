#pragma once
/// \file
/// Storage types of q, the K/V caches and the output, and their exact conversions on the host.
///
/// Kernels always compute in fp32; the storage type only decides how many bytes move. The
/// host conversions here round to nearest even, exactly like `__float2half_rn` and
/// `__float2bfloat16_rn` on the GPU, so host-built data and GPU results compare bit for bit.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace pa {

/// Storage type of a tensor. Math is fp32 in every kernel. e4m3 (fp8) is a storage type of the
/// K/V caches only (DecodeProblem::fp8_kv, step 12): q and out are f32, f16 or bf16.
enum class DType : std::uint8_t { f32, f16, bf16, e4m3 };

/// Bytes per element of \p dtype.
constexpr std::size_t dtype_size(DType dtype) {
  return dtype == DType::f32 ? 4 : dtype == DType::e4m3 ? 1 : 2;
}

/// "f32", "f16", "bf16" or "e4m3".
std::string_view dtype_name(DType dtype);

/// Parses "f32"/"fp32"/"float", "f16"/"fp16"/"half", "bf16"; throws pa::Error naming \p argument.
/// (e4m3 is not a type of q and out, so it is not parsed here: see DecodeProblem::fp8_kv.)
DType parse_dtype(std::string_view text, std::string_view argument = "--dtype");

/// IEEE binary16 stored as its bits (layout-compatible with CUDA's `__half`).
struct f16_t {
  std::uint16_t bits;
};
/// bfloat16 stored as its bits (layout-compatible with CUDA's `__nv_bfloat16`).
struct bf16_t {
  std::uint16_t bits;
};
/// fp8 e4m3 (OCP FP8 "E4M3FN", CUDA's `__nv_fp8_e4m3`) stored as its bits: sign, 4 exponent
/// bits (bias 7), 3 mantissa bits. No infinities; S.1111.111 (0x7f, 0xff) is NaN, so the largest
/// finite magnitude is 1.75 * 2^8 = 448; exponent field 0 holds subnormals m * 2^-9.
struct e4m3_t {
  std::uint8_t bits;
};
static_assert(sizeof(f16_t) == 2 && sizeof(bf16_t) == 2, "16-bit storage types must be 2 bytes");
static_assert(sizeof(e4m3_t) == 1, "fp8 storage is 1 byte");

inline std::uint32_t float_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}
inline float float_from_bits(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

/// float -> bfloat16, round to nearest even; NaN stays a (quiet) NaN.
inline bf16_t float_to_bf16(float value) {
  const std::uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return {static_cast<std::uint16_t>((bits >> 16) | 0x40u)};
  const std::uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return {static_cast<std::uint16_t>((bits + rounding_bias) >> 16)};
}
inline float bf16_to_float(bf16_t value) { return float_from_bits(std::uint32_t{value.bits} << 16); }

/// float -> binary16, round to nearest even, with subnormals, overflow to infinity, NaN kept.
f16_t float_to_f16(float value);
/// binary16 -> float (exact).
float f16_to_float(f16_t value);

/// The largest finite e4m3 magnitude.
inline constexpr float kE4m3Max = 448.0f;

/// float -> e4m3, round to nearest even, saturating: a magnitude that rounds past 448
/// (infinity included) becomes +-448 (CUDA's `__nv_cvt_float_to_fp8(x, __NV_SATFINITE,
/// __NV_E4M3)`); NaN becomes 0x7f; below half the smallest subnormal (2^-10) gives +-0.
e4m3_t float_to_e4m3(float value);
/// e4m3 -> float (exact; 0x7f and 0xff are NaN).
float e4m3_to_float(e4m3_t value);

/// Reads element \p index of a buffer of \p dtype as float.
inline float load_as_float(const void* data, DType dtype, std::size_t index) {
  switch (dtype) {
    case DType::f32: return static_cast<const float*>(data)[index];
    case DType::f16: return f16_to_float(static_cast<const f16_t*>(data)[index]);
    case DType::bf16: return bf16_to_float(static_cast<const bf16_t*>(data)[index]);
    case DType::e4m3: return e4m3_to_float(static_cast<const e4m3_t*>(data)[index]);
  }
  return 0.0f;
}

/// Writes \p value, rounded to \p dtype, to element \p index.
inline void store_from_float(void* data, DType dtype, std::size_t index, float value) {
  switch (dtype) {
    case DType::f32: static_cast<float*>(data)[index] = value; break;
    case DType::f16: static_cast<f16_t*>(data)[index] = float_to_f16(value); break;
    case DType::bf16: static_cast<bf16_t*>(data)[index] = float_to_bf16(value); break;
    case DType::e4m3: static_cast<e4m3_t*>(data)[index] = float_to_e4m3(value); break;
  }
}

/// Rounds \p value to the nearest value representable in \p dtype (returned as float).
inline float round_to(DType dtype, float value) {
  switch (dtype) {
    case DType::f32: return value;
    case DType::f16: return f16_to_float(float_to_f16(value));
    case DType::bf16: return bf16_to_float(float_to_bf16(value));
    case DType::e4m3: return e4m3_to_float(float_to_e4m3(value));
  }
  return value;
}

}  // namespace pa
