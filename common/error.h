#pragma once
/// \file
/// The project's exceptions. Every message names the function, the argument, what was
/// expected and what was found, so a failure can be fixed without a debugger.

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace pa {

/// Base of every error pagedattn throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A caller passed a value outside what a function accepts.
class ArgumentError : public Error {
 public:
  using Error::Error;
};

/// The block allocator refused a request (out of pages, double free, bad page id).
class AllocatorError : public Error {
 public:
  using Error::Error;
};

/// The emulator caught a kernel doing something a GPU would not forgive.
class KernelError : public Error {
 public:
  using Error::Error;
};

/// Host memory could not be had for a size asked for (a workload's caches); the message names
/// the size.
class MemoryError : public Error {
 public:
  using Error::Error;
};

/// A CUDA call failed (no device, out of memory, launch error).
class CudaError : public Error {
 public:
  using Error::Error;
};

/// Formats any streamable values into one string.
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

/// Throws ArgumentError "function: argument: expected E, got A".
[[noreturn]] inline void throw_argument(std::string_view function, std::string_view argument,
                                        std::string_view expected, std::string_view actual) {
  throw ArgumentError(cat(function, ": ", argument, ": expected ", expected, ", got ", actual));
}

/// Checks \p condition; on failure throws ArgumentError naming the argument.
#define PA_REQUIRE(condition, function, argument, expected, actual)            \
  do {                                                                         \
    if (!(condition)) ::pa::throw_argument((function), (argument), (expected), \
                                           ::pa::cat(actual));                 \
  } while (0)

}  // namespace pa
