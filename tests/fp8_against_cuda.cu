// The host conversions of fp8 e4m3 (common/dtype.h) against CUDA's own (cuda_fp8.h, host code:
// no GPU needed): every one of the 256 values decoded, and a million floats encoded, among them
// every value, its float neighbours, every midpoint between neighbours, the saturation edge,
// infinities and NaN. Built with CUDA only; exits 1 and names the first mismatches.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "common/dtype.h"

int main() {
  int mismatches = 0;
  long encodes = 0;
  for (int b = 0; b < 256; ++b) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(b), __NV_E4M3);
    const float cuda = __half2float(__half(h));
    const float ours = pa::e4m3_to_float(pa::e4m3_t{static_cast<std::uint8_t>(b)});
    if (!(cuda == ours || (std::isnan(cuda) && std::isnan(ours))) && mismatches++ < 10)
      std::printf("decode 0x%02x: cuda %g, pa %g\n", b, cuda, ours);
  }
  auto encode = [&](float x) {
    ++encodes;
    const unsigned cuda = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    const unsigned ours = pa::float_to_e4m3(x).bits;
    if (cuda != ours && mismatches++ < 20) std::printf("encode %a (%g): cuda 0x%02x, pa 0x%02x\n", x, x, cuda, ours);
  };
  for (std::uint32_t bits = 0; bits < 0xff800000u; bits += 0x1001u) {  // floats of every exponent, both signs
    float x;
    std::memcpy(&x, &bits, 4);
    encode(x);
  }
  for (int b = 0; b < 256; ++b) {
    const float value = pa::e4m3_to_float(pa::e4m3_t{static_cast<std::uint8_t>(b)});
    if (std::isnan(value)) continue;
    std::uint32_t bits;
    std::memcpy(&bits, &value, 4);
    for (int d = -3; d <= 3; ++d) {
      const std::uint32_t near = bits + static_cast<std::uint32_t>(d);
      float x;
      std::memcpy(&x, &near, 4);
      encode(x);
    }
    if ((b & 0x7f) < 0x7e) {
      const float next = pa::e4m3_to_float(pa::e4m3_t{static_cast<std::uint8_t>(b + 1)});
      encode((value + next) / 2);
    }
  }
  for (float x : {INFINITY, -INFINITY, NAN, 448.0f, 463.99f, 464.0f, -464.0f, 1e30f, 0x1p-10f, -0x1p-10f}) encode(x);
  std::printf("%d decodes and %ld encodes against cuda_fp8.h: %d mismatches\n", 256, encodes, mismatches);
  return mismatches == 0 ? 0 : 1;
}
