// The step programs tell the truth: each outcome has its own exit code (kUsage lists them), every
// flag value is checked, a refused workload is not "ok", a workload too big for the machine is
// refused before any allocation, and a JSON file is written whole or not at all.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "harness/harness.h"
#include "tests/catch_compat.h"

namespace {

/// kernel_step_main(step, argv) with \p args after the program name; always --no-gpu.
int run(int step, std::initializer_list<std::string> args) {
  std::vector<std::string> words{"stepNN"};
  words.insert(words.end(), args.begin(), args.end());
  words.push_back("--no-gpu");
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  return pa::kernel_step_main(step, static_cast<int>(words.size()), argv.data());
}

std::string read_all(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST_CASE("programs: 0 when every run matches, 2 for a bad flag or value", "[programs]") {
  REQUIRE(run(3, {"--quiet"}) == 0);
  for (std::initializer_list<std::string> bad :
       {std::initializer_list<std::string>{"--batch", "-1"}, {"--seed", "-1"}, {"--q-heads", "0"}, {"--kv-heads", "-2"},
        {"--head-dim", "0"}, {"--page", "0"}, {"--context", "5,-3"}, {"--runs", "-1"}, {"--splits", "-2"},
        {"--trace", "0,-1"}, {"--threads", "x"}, {"--bogus"}, {"--dtype", "f8"}, {"--layout", "abc"}, {"--batch"}}) {
    INFO(*bad.begin());
    REQUIRE(run(3, bad) == 2);
  }
  // A knob flag is a bad flag on a step without that knob (--help lists only the step's own).
  REQUIRE(run(3, {"--threads", "64"}) == 2);
  REQUIRE(run(10, {"--tile", "2"}) == 2);
  REQUIRE(run(9, {"--quiet", "--tile", "2"}) == 0);
}

TEST_CASE("programs: 3 for a refused workload, and its JSON row is not ok", "[programs]") {
  const auto dir = std::filesystem::temp_directory_path() / "pagedattn-test-programs";
  std::filesystem::create_directories(dir);
  const auto json = dir / "refused.json";
  REQUIRE(run(3, {"--quiet", "--head-dim", "100", "--json", json.string()}) == 3);
  const std::string text = read_all(json);
  REQUIRE(text.find("\"ok\": false") != std::string::npos);
  REQUIRE(text.find("\"refused\": true") != std::string::npos);
  REQUIRE(run(10, {"--quiet", "--dtype", "f32"}) == 3);  // tensor cores take 16-bit inputs
  REQUIRE(run(10, {"--quiet"}) == 0);                     // and without --dtype it runs bf16
  std::filesystem::remove_all(dir);
}

TEST_CASE("programs: 4 for what cannot be done, nothing half-written", "[programs]") {
  // K and V of a billion tokens: refused before any allocation, naming the size.
  REQUIRE(run(3, {"--quiet", "--context", "1000000000"}) == 4);
  // A JSON file in a folder that does not exist: an error, and no stray file.
  const auto missing = std::filesystem::temp_directory_path() / "pagedattn-no-such-folder" / "x.json";
  REQUIRE(run(3, {"--quiet", "--json", missing.string()}) == 4);
  REQUIRE_FALSE(std::filesystem::exists(missing.parent_path()));
  if (std::filesystem::exists("/dev/full")) REQUIRE(run(3, {"--quiet", "--json", "/dev/full"}) == 4);
}

TEST_CASE("programs: --seed reaches the adversarial set", "[programs]") {
  const auto dir = std::filesystem::temp_directory_path() / "pagedattn-test-seed";
  std::filesystem::create_directories(dir);
  const auto a = dir / "a.json", b = dir / "b.json", c = dir / "c.json";
  REQUIRE(run(3, {"--quiet", "--adversarial", "--seed", "11", "--json", a.string()}) == 0);
  REQUIRE(run(3, {"--quiet", "--adversarial", "--seed", "11", "--json", b.string()}) == 0);
  REQUIRE(run(3, {"--quiet", "--adversarial", "--seed", "12", "--json", c.string()}) == 0);
  auto errors = [](const std::string& text) {  // the emulator's errors against the oracle, in order
    std::string out;
    for (std::size_t at = text.find("\"emulator_max_abs_error\""); at != std::string::npos;
         at = text.find("\"emulator_max_abs_error\"", at + 1))
      out += text.substr(at, text.find(',', at) - at) + ";";
    return out;
  };
  REQUIRE(errors(read_all(a)) == errors(read_all(b)));
  REQUIRE(errors(read_all(a)) != errors(read_all(c)));
  std::filesystem::remove_all(dir);
}

TEST_CASE("programs: a backend that measured nothing prints -, not zeros", "[programs]") {
  pa::StepReport refused;
  refused.step = 10;
  refused.kernel = "step10_tensor_cores";
  refused.emulator_status = "refused: dtype: expected bf16 or f16, got f32";
  refused.gpu_status = "skipped: no GPU";
  pa::StepReport ran = refused;
  ran.emulator_status = "ok";
  ran.emulator_seconds = 0.002;
  ran.emulator_bytes = 4096;
  std::ostringstream out;
  pa::print_step_table({refused, ran}, out);
  std::istringstream lines(out.str());
  std::string header, rule, refused_row, ran_row;
  std::getline(lines, header);
  std::getline(lines, rule);
  std::getline(lines, refused_row);
  std::getline(lines, ran_row);
  INFO(out.str());
  REQUIRE(refused_row.find("0.00e+00") == std::string::npos);
  REQUIRE(refused_row.find(" 0 B") == std::string::npos);
  REQUIRE(refused_row.find("refused   -") != std::string::npos);
  REQUIRE(ran_row.find("0.00e+00") != std::string::npos);  // a measured error of zero is shown
  REQUIRE(ran_row.find("4.10 kB") != std::string::npos);
}

}  // namespace
