#pragma once
/// \file
/// Lets one test source build against Catch2 v2 (Debian 12) and v3 (Ubuntu 24.04).
///
/// PA_SKIP(reason): v3 has SKIP(), which makes the test report "skipped" (exit code 4).
/// v2 has none: the test's first output is a warning carrying the marker PA_SKIPPED, which
/// ctest's SKIP_REGULAR_EXPRESSION turns into "Skipped". Call it before any assertion.

#if defined(PA_CATCH_V3)
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
using Catch::Approx;
#define PA_SKIP(reason) SKIP("PA_SKIPPED: " << reason)
#else
#include <catch2/catch.hpp>
#define PA_SKIP(reason)                  \
  do {                                   \
    WARN("PA_SKIPPED: " << reason);      \
    return;                              \
  } while (0)
#endif

#include <string>

/// Requires that \p expr throws \p Type and that its message contains \p text (both checked:
/// docs/design/CORRECTNESS.md asks every negative case for the error type and the argument's name).
#define PA_REQUIRE_THROWS_AS_WITH(expr, Type, text)                               \
  do {                                                                            \
    bool pa_threw_ = false;                                                       \
    try {                                                                         \
      expr;                                                                       \
    } catch (const Type& pa_error_) {                                             \
      pa_threw_ = true;                                                           \
      INFO("message: " << pa_error_.what());                                      \
      CHECK(std::string(pa_error_.what()).find(text) != std::string::npos);       \
    }                                                                             \
    INFO("expected " #expr " to throw " #Type);                                   \
    REQUIRE(pa_threw_);                                                           \
  } while (0)
