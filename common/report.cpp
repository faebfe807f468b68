#include "common/report.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "common/cuda/runtime.h"
#include "common/error.h"

#include "pagedattn_version.h"  // generated at every build by cmake/write_version.cmake

namespace pa {

void Table::print(std::ostream& out) const {
  std::vector<std::size_t> width(columns_.size(), 0);
  auto measure = [&](const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < cells.size() && i < width.size(); ++i) width[i] = std::max(width[i], cells[i].size());
  };
  measure(columns_);
  for (const auto& row : rows_) measure(row);
  auto line = [&](const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < width.size(); ++i) {
      const std::string cell = i < cells.size() ? cells[i] : "";
      out << cell;
      if (i + 1 < width.size()) out << std::string(width[i] - cell.size() + 2, ' ');
    }
    out << '\n';
  };
  line(columns_);
  std::size_t total = 0;
  for (std::size_t w : width) total += w + 2;
  out << std::string(total > 2 ? total - 2 : 0, '-') << '\n';
  for (const auto& row : rows_) line(row);
}

Json& Json::set(const std::string& key, Json value) {
  if (kind_ != Kind::object) throw Error("Json::set on a value that is not an object");
  for (auto& [k, v] : members_)
    if (k == key) {
      v = std::move(value);
      return *this;
    }
  members_.emplace_back(key, std::move(value));
  return *this;
}

Json& Json::push(Json value) {
  if (kind_ != Kind::array) throw Error("Json::push on a value that is not an array");
  elements_.push_back(std::move(value));
  return *this;
}

namespace {
void write_string(std::ostream& out, const std::string& text) {
  out << '"';
  for (const char c : text) {
    switch (c) {
      case '"': out << "\\\""; break;
      case '\\': out << "\\\\"; break;
      case '\n': out << "\\n"; break;
      case '\t': out << "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
          out << buffer;
        } else {
          out << c;
        }
    }
  }
  out << '"';
}
}  // namespace

void Json::write(std::ostream& out, int indent) const {
  const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
  const std::string close(static_cast<std::size_t>(indent), ' ');
  switch (kind_) {
    case Kind::null: out << "null"; break;
    case Kind::boolean: out << (boolean_ ? "true" : "false"); break;
    case Kind::number:
      if (!std::isfinite(number_)) {
        out << "null";  // JSON has no NaN or infinity
      } else {
        std::ostringstream text;
        text << std::setprecision(10) << number_;
        out << text.str();
      }
      break;
    case Kind::string: write_string(out, string_); break;
    case Kind::object:
      out << "{";
      for (std::size_t i = 0; i < members_.size(); ++i) {
        out << (i ? ",\n" : "\n") << pad;
        write_string(out, members_[i].first);
        out << ": ";
        members_[i].second.write(out, indent + 2);
      }
      out << (members_.empty() ? "}" : "\n" + close + "}");
      break;
    case Kind::array:
      out << "[";
      for (std::size_t i = 0; i < elements_.size(); ++i) {
        out << (i ? ",\n" : "\n") << pad;
        elements_[i].write(out, indent + 2);
      }
      out << (elements_.empty() ? "]" : "\n" + close + "]");
      break;
  }
}

std::string Json::dump() const {
  std::ostringstream out;
  write(out);
  return out.str();
}

namespace {
std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  return "unknown";
}
}  // namespace

Stamp Stamp::collect(bool with_gpu) {
  Stamp s;
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &utc);
  s.date = date;
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) == 0) s.host = host.data();
  s.cpu = cat(cpu_model(), " x", sysconf(_SC_NPROCESSORS_ONLN));
#if defined(__clang__)
  s.compiler = cat("clang++ ", __clang_major__, '.', __clang_minor__, '.', __clang_patchlevel__);
#elif defined(__GNUC__)
  s.compiler = cat("g++ ", __GNUC__, '.', __GNUC_MINOR__, '.', __GNUC_PATCHLEVEL__);
#endif
  s.cuda_compiler = PAGEDATTN_CUDA_COMPILER;
  s.build_type = PAGEDATTN_BUILD_TYPE;
  s.flags = PAGEDATTN_BUILD_FLAGS;
  s.git_revision = PAGEDATTN_GIT_REVISION;
  if (with_gpu) {
    const gpu::DeviceInfo& d = gpu::device_info();
    s.gpu = d.name;
    s.gpu_details = cat("sm_", d.compute_capability_major, d.compute_capability_minor, ", ", d.limits.sm_count,
                        " SMs, SM clock ", d.sm_clock_mhz, " MHz, memory clock ", d.memory_clock_mhz, " MHz x ",
                        d.memory_bus_bits, " bit (datasheet ", format_fixed(d.limits.datasheet_gbps, 0),
                        " GB/s), L2 ", d.limits.l2_bytes / (1024 * 1024), " MiB, driver ", d.driver_version / 1000, '.',
                        (d.driver_version % 1000) / 10, ", runtime ", d.runtime_version / 1000, '.',
                        (d.runtime_version % 1000) / 10);
  }
  return s;
}

Json Stamp::to_json() const {
  Json j = Json::object();
  j.set("date", date).set("host", host).set("cpu", cpu).set("compiler", compiler);
  j.set("cuda_compiler", cuda_compiler).set("build_type", build_type).set("flags", flags);
  j.set("git_revision", git_revision).set("gpu", gpu).set("gpu_details", gpu_details);
  return j;
}

std::string Stamp::line() const {
  std::string out = gpu.empty() ? cat("CPU ", cpu) : cat(gpu, " (", gpu_details, ")");
  return cat(out, " | ", compiler, cuda_compiler.empty() ? "" : cat(", nvcc ", cuda_compiler), " | rev ",
             git_revision);
}

std::string format_seconds(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  const char* unit = "s";
  double value = seconds;
  if (seconds < 1e-3) {
    value = seconds * 1e6;
    unit = "us";
  } else if (seconds < 1.0) {
    value = seconds * 1e3;
    unit = "ms";
  }
  const int digits = value >= 100 ? 0 : value >= 10 ? 1 : 2;
  return cat(format_fixed(value, digits), ' ', unit);
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int unit = 0;
  while (bytes >= 1000.0 && unit < 4) {
    bytes /= 1000.0;
    ++unit;
  }
  return cat(format_fixed(bytes, unit == 0 ? 0 : 2), ' ', units[unit]);
}

std::string format_sci(double value) {
  if (std::isnan(value)) return "nan";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2e", value);
  return buffer;
}

std::string format_fixed(double value, int digits) {
  if (!std::isfinite(value)) return "-";
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

void write_file_whole(const std::string& path, const std::function<void(std::ostream&)>& write) {
  std::error_code ignored;
  if (std::filesystem::exists(path, ignored) && !std::filesystem::is_regular_file(path, ignored)) {
    std::ofstream file(path);
    if (file) {
      write(file);
      file.flush();
    }
    if (!file) throw Error(cat("cannot write ", path, ": writing failed"));
    return;
  }
  const std::string temporary = path + ".partial";
  {
    std::ofstream file(temporary);
    if (!file) throw Error(cat("cannot write ", path, " (opening ", temporary, " failed: ", std::strerror(errno), ")"));
    write(file);
    file.flush();
    if (!file) {
      file.close();
      std::remove(temporary.c_str());
      throw Error(cat("cannot write ", path, ": writing failed (disk full?); nothing was written"));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw Error(cat("cannot write ", path, ": renaming ", temporary, " failed"));
  }
}

void require_writable(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) throw Error(cat("cannot write ", path, ": it is a folder"));
  if (std::filesystem::exists(path, ignored) && !std::filesystem::is_regular_file(path, ignored)) {
    if (!std::ofstream(path, std::ios::app)) throw Error(cat("cannot write ", path, ": ", std::strerror(errno)));
    return;  // a device or a pipe: written directly
  }
  const std::string temporary = path + ".partial";
  const bool existed = std::filesystem::exists(temporary, ignored);
  {
    std::ofstream file(temporary, std::ios::app);
    if (!file) throw Error(cat("cannot write ", path, " (opening ", temporary, " failed: ", std::strerror(errno), ")"));
  }
  if (!existed) std::remove(temporary.c_str());
}

}  // namespace pa
