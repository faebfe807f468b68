#pragma once
/// \file
/// What a reader sees: one side-by-side table, JSON results, and the stamp that says which
/// machine and revision produced them.

#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace pa {

/// A plain text table: a header row and rows of cells, columns sized to fit.
class Table {
 public:
  explicit Table(std::vector<std::string> columns) : columns_(std::move(columns)) {}
  void add_row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  void print(std::ostream& out) const;
  const std::vector<std::string>& columns() const { return columns_; }
  const std::vector<std::vector<std::string>>& rows() const { return rows_; }

 private:
  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;
};

/// A small JSON writer: enough for results files, no dependency.
class Json {
 public:
  Json() = default;
  static Json object() { Json j; j.kind_ = Kind::object; return j; }
  static Json array() { Json j; j.kind_ = Kind::array; return j; }
  Json(double value) : kind_(Kind::number), number_(value) {}
  Json(int value) : Json(static_cast<double>(value)) {}
  Json(std::int64_t value) : Json(static_cast<double>(value)) {}
  Json(std::uint64_t value) : Json(static_cast<double>(value)) {}
  Json(bool value) : kind_(Kind::boolean), boolean_(value) {}
  Json(std::string value) : kind_(Kind::string), string_(std::move(value)) {}
  Json(const char* value) : Json(std::string(value)) {}
  /// Sets a member (objects only); returns *this for chaining.
  Json& set(const std::string& key, Json value);
  /// Appends an element (arrays only).
  Json& push(Json value);
  void write(std::ostream& out, int indent = 0) const;
  std::string dump() const;

 private:
  enum class Kind { null, number, boolean, string, object, array };
  Kind kind_ = Kind::null;
  double number_ = 0;
  bool boolean_ = false;
  std::string string_;
  std::vector<std::pair<std::string, Json>> members_;
  std::vector<Json> elements_;
};

/// Where numbers came from: host, CPU, compiler, git revision, date, and the GPU if one ran.
struct Stamp {
  std::string date;          ///< UTC, ISO 8601
  std::string host;
  std::string cpu;
  std::string compiler;      ///< e.g. "g++ 12.2.0"
  std::string cuda_compiler; ///< nvcc version the kernels were built with ("" without CUDA)
  std::string build_type;
  std::string flags;         ///< CUDA architectures and notable flags
  std::string git_revision;  ///< "abc1234" plus "-dirty" when the tree had changes
  std::string gpu;           ///< device name ("" when no GPU ran)
  std::string gpu_details;   ///< SMs, clocks, driver and runtime versions
  /// Collects the stamp; \p with_gpu adds the device (only call with a GPU present).
  static Stamp collect(bool with_gpu);
  Json to_json() const;
  /// One line: "NVIDIA H200 (132 SMs, driver 13.0) | g++ 12.2.0 | rev abc1234".
  std::string line() const;
};

/// Formats seconds with a unit that keeps 3 significant digits ("12.3 ms", "4.56 us").
std::string format_seconds(double seconds);
/// Formats bytes ("1.23 GB", decimal).
std::string format_bytes(double bytes);
/// Formats a value in scientific notation with 2 decimals ("3.10e-06").
std::string format_sci(double value);
/// Formats a value with \p digits decimals.
std::string format_fixed(double value, int digits);

/// Writes \p path whole or not at all: \p write fills a temporary file beside it, which
/// replaces \p path only once every byte is written (a full disk leaves the old file, and says
/// so). A path that exists and is not a regular file (a device, a pipe) is written directly, and
/// a failed write is still an error. Throws Error naming the path.
void write_file_whole(const std::string& path, const std::function<void(std::ostream&)>& write);

/// Throws Error, saying why (a folder, no such folder, no permission), when write_file_whole
/// could not write \p path: the programs ask before a run, so a bad path costs no run.
/// Creates nothing (a test file it opens is removed).
void require_writable(const std::string& path);

}  // namespace pa
