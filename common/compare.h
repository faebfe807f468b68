#pragma once
/// \file
/// Compares a kernel's output with the oracle (tolerance per storage type) or with another
/// output (bit for bit), and says where the first mismatch is.
///
/// A failure reads `FAIL 3/73728: |d|=2.1e-02 at (seq 6, head 31, dim 17) ref 0.41 got 0.431`:
/// mismatches / elements compared, then the first mismatch in memory order (|d| is that
/// element's; ref and got print with `%.7g`, and a NaN reads `nan` whatever its sign bit).
/// NaN and Inf in the output fail unless the reference has the same value there (a NaN in a
/// valid K/V must reach exactly that sequence's rows).

#include <cstdint>
#include <span>
#include <string>

#include "common/problem.h"

namespace pa {

/// |got - ref| <= atol + rtol * |ref|, ref rounded to the output type first.
struct Tolerance {
  double atol = 1e-5;
  double rtol = 1e-5;
  /// docs/design/CORRECTNESS.md: f32 1e-5/1e-5, f16 1e-3/1e-3, bf16 1e-3/1.6e-2.
  static Tolerance for_dtype(DType dtype);
};

/// Outcome of one comparison.
struct CompareResult {
  bool ok = true;
  std::int64_t total = 0;       ///< elements compared
  std::int64_t mismatches = 0;  ///< elements out of tolerance (or not bit-identical)
  double max_abs_error = 0.0;   ///< over finite elements
  double max_rel_error = 0.0;   ///< |d| / max(|ref|, 1e-30), over finite elements
  std::string first_failure;    ///< "FAIL 3/73728: |d|=... at (seq, head, dim) ref ... got ..."; empty if ok
  /// "ok (max |d| 3.1e-06, max rel 1.2e-05)" or first_failure.
  std::string summary() const;
};

/// Output \p got (problem.dtype, [num_seqs][num_q_heads][head_dim]) against the oracle.
CompareResult compare_to_reference(const DecodeProblem& problem, std::span<const double> reference,
                                   const void* got, Tolerance tolerance);

/// Two outputs of the same problem, bit for bit (the NaN-poison and determinism checks).
CompareResult compare_bitwise(const DecodeProblem& problem, const void* expected, const void* got);

/// Largest |got - reference| over elements where both are finite (for the 3x-the-plain-loop rule).
double max_abs_error(const DecodeProblem& problem, std::span<const double> reference, const void* got);

/// Same for float values already decoded (the plain loop's output).
double max_abs_error(std::span<const double> reference, std::span<const float> got);

}  // namespace pa
