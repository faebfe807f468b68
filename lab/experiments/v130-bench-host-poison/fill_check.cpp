// v130: gpu::Buffer::fill_words on the device, byte for byte, and its time against the host
// copy it replaces (a vector of the pattern uploaded from pageable memory), at the sizes of
// step 03's scores on gqa-batch (134 MB) and ragged-skew (537 MB). build.sh builds it.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/cuda/runtime.h"

int main() {
  const std::uint32_t word = 0x7fffffffu;
  unsigned char pattern[4];
  std::memcpy(pattern, &word, sizeof word);
  int failures = 0;
  for (const std::size_t bytes : {std::size_t{4}, std::size_t{5}, std::size_t{6}, std::size_t{7},
                                  std::size_t{4} * 4096 * 256 * 3 + 2, std::size_t{134217728}, std::size_t{536870912}}) {
    pa::gpu::Buffer buffer(bytes, "word fill");
    buffer.fill(0x00);
    pa::gpu::synchronize("zero");
    auto t = std::chrono::steady_clock::now();
    buffer.fill_words(word);
    pa::gpu::synchronize("fill_words");
    const double device_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
    std::vector<unsigned char> back(bytes);
    buffer.download(back.data(), bytes);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < bytes; ++i) bad += back[i] != pattern[i % 4];
    t = std::chrono::steady_clock::now();
    {
      std::vector<unsigned char> host(bytes, 0xff);
      for (std::size_t i = 0; i + 4 <= bytes; i += 4) std::memcpy(host.data() + i, &word, 4);
      buffer.upload(host.data(), bytes);
    }
    const double host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
    std::printf("%10zu bytes: %s (%zu bytes wrong); fill_words %.3f ms, host vector + upload %.3f ms\n", bytes,
                bad ? "WRONG" : "ok", bad, device_ms, host_ms);
    failures += bad != 0;
  }
  return failures ? 1 : 0;
}
