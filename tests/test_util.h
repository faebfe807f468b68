#pragma once
/// \file
/// Small helpers the unit tests share.

#include <cstdint>
#include <exception>
#include <string>

namespace pa::testing {

/// splitmix64: a seeded generator whose sequence is the same on every platform.
struct SplitMix {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [-1, 1).
  float uniform() { return static_cast<float>(static_cast<double>(next() >> 11) * 0x1.0p-52 - 1.0); }
};

/// The message \p action throws, or "" when it returns normally (shows the message on failure).
template <class Action>
std::string error_message(Action action) {
  try {
    action();
  } catch (const std::exception& error) {
    return error.what();
  }
  return "";
}

}  // namespace pa::testing
