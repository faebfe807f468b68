// Tolerance and bitwise comparisons with a located report.
//
// Every check here is written so that NaN cannot slip through: a comparison "fails unless it
// passes", never "passes unless |d| > tol" (NaN > tol is false, which is how checkers go blind).

#include "common/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "common/dtype.h"
#include "common/error.h"

namespace pa {
namespace {

/// printf-style formatting of one number (the report's fixed formats). A NaN prints `nan`
/// whatever its sign bit: the sign a NaN picks up depends on how the compiler ordered the
/// arithmetic (the release build printed `-nan` where the ASan build printed `nan`), and the
/// reports are compared as text (ctest `exercises.reports`).
std::string format(const char* spec, double value) {
  if (std::isnan(value)) return "nan";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, spec, value);
  return buffer;
}

/// "(seq 6, head 31, dim 17)" for flat index \p index of a [num_seqs][num_q_heads][head_dim] tensor.
std::string location(const DecodeProblem& problem, std::int64_t index) {
  const std::int64_t dim = index % problem.head_dim;
  const std::int64_t head = (index / problem.head_dim) % problem.num_q_heads;
  const std::int64_t seq = index / (std::int64_t{problem.head_dim} * problem.num_q_heads);
  return cat("(seq ", seq, ", head ", head, ", dim ", dim, ")");
}

/// True when \p got may stand for \p ref although one of them is not finite: both NaN, or
/// both infinite with the same sign.
bool same_non_finite(double ref, double got) {
  if (std::isnan(ref) || std::isnan(got)) return std::isnan(ref) && std::isnan(got);
  return std::isinf(ref) && std::isinf(got) && std::signbit(ref) == std::signbit(got);
}

/// The raw bits of element \p index of a buffer of \p dtype (zero-extended).
std::uint32_t raw_bits(const void* data, DType dtype, std::size_t index) {
  if (dtype == DType::f32) {
    std::uint32_t bits;
    std::memcpy(&bits, static_cast<const std::byte*>(data) + index * 4, 4);
    return bits;
  }
  if (dtype == DType::e4m3) return std::to_integer<std::uint32_t>(static_cast<const std::byte*>(data)[index]);
  std::uint16_t bits;
  std::memcpy(&bits, static_cast<const std::byte*>(data) + index * 2, 2);
  return bits;
}

/// Checks the problem's shape and the output pointer shared by every comparison.
void check_output(const DecodeProblem& problem, const void* got, const char* got_name,
                  std::string_view function) {
  PA_REQUIRE(problem.num_seqs >= 0 && problem.num_q_heads > 0 && problem.head_dim > 0, function, "problem",
             "num_seqs >= 0, num_q_heads > 0, head_dim > 0",
             cat("num_seqs=", problem.num_seqs, " num_q_heads=", problem.num_q_heads, " head_dim=", problem.head_dim));
  PA_REQUIRE(got || problem.query_elems() == 0, function, got_name, "a non-null pointer", "nullptr");
}

}  // namespace

Tolerance Tolerance::for_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32: return {1e-5, 1e-5};
    case DType::f16: return {1e-3, 1e-3};
    case DType::bf16: return {1e-3, 1.6e-2};
    // Never an output type (fp8 is for K/V; a kernel reading fp8 K/V is held to its output's
    // tolerance, docs/design/CORRECTNESS.md): one e4m3 rounding, for reports of the
    // quantisation error itself. Half an ulp is 2^-4 of the value; the atol covers subnormals.
    case DType::e4m3: return {1.0 / 512, 0.0625};
  }
  return {};
}

std::string CompareResult::summary() const {
  if (!ok) return first_failure;
  return cat("ok (max |d| ", format("%.1e", max_abs_error), ", max rel ", format("%.1e", max_rel_error), ")");
}

CompareResult compare_to_reference(const DecodeProblem& problem, std::span<const double> reference,
                                   const void* got, Tolerance tolerance) {
  constexpr std::string_view function = "compare_to_reference";
  check_output(problem, got, "got", function);
  const std::int64_t total = problem.query_elems();
  PA_REQUIRE(reference.size() == static_cast<std::size_t>(total), function, "reference.size()",
             cat("num_seqs * num_q_heads * head_dim = ", total), reference.size());

  CompareResult result;
  result.total = total;
  for (std::int64_t i = 0; i < total; ++i) {
    const auto index = static_cast<std::size_t>(i);
    // The best the output type can hold: what a perfect kernel would write.
    const double ref = round_to(problem.dtype, static_cast<float>(reference[index]));
    const double value = load_as_float(got, problem.dtype, index);
    const double diff = std::abs(value - ref);
    bool pass = false;
    if (std::isfinite(ref) && std::isfinite(value)) {
      pass = diff <= tolerance.atol + tolerance.rtol * std::abs(ref);
      result.max_abs_error = std::max(result.max_abs_error, diff);
      result.max_rel_error = std::max(result.max_rel_error, diff / std::max(std::abs(ref), 1e-30));
    } else {
      pass = same_non_finite(ref, value);
    }
    if (pass) continue;
    if (result.mismatches == 0)
      result.first_failure = cat("|d|=", format("%.1e", diff), " at ", location(problem, i), " ref ",
                                 format("%.7g", ref), " got ", format("%.7g", value));
    ++result.mismatches;
  }
  result.ok = result.mismatches == 0;
  if (!result.ok)
    result.first_failure = cat("FAIL ", result.mismatches, "/", total, ": ", result.first_failure);
  return result;
}

CompareResult compare_bitwise(const DecodeProblem& problem, const void* expected, const void* got) {
  constexpr std::string_view function = "compare_bitwise";
  check_output(problem, expected, "expected", function);
  check_output(problem, got, "got", function);
  const std::int64_t total = problem.query_elems();
  const int hex_digits = problem.dtype == DType::f32 ? 8 : 4;

  CompareResult result;
  result.total = total;
  for (std::int64_t i = 0; i < total; ++i) {
    const auto index = static_cast<std::size_t>(i);
    const std::uint32_t want = raw_bits(expected, problem.dtype, index);
    const std::uint32_t have = raw_bits(got, problem.dtype, index);
    const double want_value = load_as_float(expected, problem.dtype, index);
    const double have_value = load_as_float(got, problem.dtype, index);
    if (std::isfinite(want_value) && std::isfinite(have_value)) {
      const double diff = std::abs(have_value - want_value);
      result.max_abs_error = std::max(result.max_abs_error, diff);
      result.max_rel_error = std::max(result.max_rel_error, diff / std::max(std::abs(want_value), 1e-30));
    }
    if (want == have) continue;
    if (result.mismatches == 0) {
      char want_hex[16];
      char have_hex[16];
      std::snprintf(want_hex, sizeof want_hex, "0x%0*x", hex_digits, static_cast<unsigned>(want));
      std::snprintf(have_hex, sizeof have_hex, "0x%0*x", hex_digits, static_cast<unsigned>(have));
      result.first_failure = cat("bits differ at ", location(problem, i), " expected ", format("%.9g", want_value),
                                 " [", want_hex, "] got ", format("%.9g", have_value), " [", have_hex, "]");
    }
    ++result.mismatches;
  }
  result.ok = result.mismatches == 0;
  if (!result.ok)
    result.first_failure = cat("FAIL ", result.mismatches, "/", total, ": ", result.first_failure);
  return result;
}

double max_abs_error(const DecodeProblem& problem, std::span<const double> reference, const void* got) {
  constexpr std::string_view function = "max_abs_error";
  check_output(problem, got, "got", function);
  const std::int64_t total = problem.query_elems();
  PA_REQUIRE(reference.size() == static_cast<std::size_t>(total), function, "reference.size()",
             cat("num_seqs * num_q_heads * head_dim = ", total), reference.size());
  double largest = 0.0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    const double value = load_as_float(got, problem.dtype, i);
    if (std::isfinite(reference[i]) && std::isfinite(value))
      largest = std::max(largest, std::abs(value - reference[i]));
  }
  return largest;
}

double max_abs_error(std::span<const double> reference, std::span<const float> got) {
  PA_REQUIRE(got.size() == reference.size(), "max_abs_error", "got.size()",
             cat("reference.size() = ", reference.size()), got.size());
  double largest = 0.0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    const double value = got[i];
    if (std::isfinite(reference[i]) && std::isfinite(value))
      largest = std::max(largest, std::abs(value - reference[i]));
  }
  return largest;
}

}  // namespace pa
