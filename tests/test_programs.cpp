// The step programs tell the truth: each outcome has its own exit code (kUsage lists them), every
// flag value is checked, a refused workload is not "ok", a workload too big for the machine is
// refused before any allocation, and a JSON file is written whole or not at all; the JSON records
// the knobs that ran and null for what did not run. The tour fits 100 columns with one legend.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

/// A fresh folder under the system's temporary one, removed with everything in it at the end of scope.
struct ScratchDir {
  explicit ScratchDir(const std::string& name) : path(std::filesystem::temp_directory_path() / name) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() { std::filesystem::remove_all(path); }
  std::filesystem::path operator/(const std::string& file) const { return path / file; }
  std::filesystem::path path;
};

/// A program built beside the tests (\p folder: "steps" or "tests" of the build folder).
std::filesystem::path built_program(const std::string& folder, const std::string& name) {
  return std::filesystem::canonical("/proc/self/exe").parent_path().parent_path() / folder / name;
}

std::string read_all(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

/// What a program run in a shell printed, on stdout and on stderr apart (a sanitizer's notes go
/// to stderr), and its exit code.
struct Finished {
  int code = -1;
  std::string output;  ///< stdout
  std::string errors;  ///< stderr: where the programs say what went wrong
};

/// Runs \p program with \p args (words the shell splits; quote what needs it) after the
/// environment settings \p env ("NAME=value ..."), as a user would.
Finished run_program(const std::filesystem::path& program, const std::string& args, const std::string& env = "") {
  INFO("the program: " << program.string() << " (build every target)");
  REQUIRE(std::filesystem::exists(program));
  char errors_path[] = "/tmp/pagedattn-test-stderr-XXXXXX";
  const int errors_file = mkstemp(errors_path);
  REQUIRE(errors_file >= 0);
  close(errors_file);
  FILE* pipe = popen(pa::cat(env, env.empty() ? "" : " ", '"', program.string(), "\" ", args, " 2>", errors_path).c_str(), "r");
  REQUIRE(pipe != nullptr);
  Finished done;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) done.output.append(buffer, n);
  const int status = pclose(pipe);
  done.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  done.errors = read_all(errors_path);
  std::filesystem::remove(errors_path);
  return done;
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
  // --partition sets what --splits sets another way: both at once is a bad flag, each alone runs.
  REQUIRE(run(10, {"--splits", "2", "--partition", "64"}) == 2);
  REQUIRE(run(10, {"--splits", "0,2", "--partition", "0,64"}) == 2);  // a sweep with a pair of both
  REQUIRE(run(11, {"--quiet", "--partition", "32,64"}) == 0);
}

TEST_CASE("programs: every flag refuses a value that is not a number, negative or too large", "[programs]") {
  for (const char* flag : {"--batch", "--context", "--q-heads", "--kv-heads", "--head-dim", "--page", "--seed", "--runs"})
    for (const char* value : {"x", "-5", "3000000000", "99999999999999999999999", "", "7x"}) {
      INFO(flag << " '" << value << "'");
      REQUIRE(run(3, {flag, value}) == pa::exit_bad_argument);
    }
  for (const char* flag : {"--threads", "--tile", "--splits", "--partition", "--variant"})
    for (const char* value : {"x", "-5", "3000000000", "1,x", ""}) {
      INFO(flag << " '" << value << "'");
      REQUIRE(run(9, {flag, value}) == pa::exit_bad_argument);
    }
  for (const char* value : {"0", "0,1,2,3", "0,x", "-1,0", "3000000000,0"}) {
    INFO("--trace '" << value << "'");
    REQUIRE(run(3, {"--trace", value}) == pa::exit_bad_argument);
  }
  REQUIRE(run(3, {"--workload", "no-such-workload"}) == pa::exit_bad_argument);
  // What the program says: the flag, what it takes and what it got; a flag left without its value.
  const auto step03 = built_program("steps", "step03_naive_decode");
  const Finished overflow = run_program(step03, "--batch 3000000000 --no-gpu");
  INFO(overflow.errors);
  REQUIRE(overflow.code == pa::exit_bad_argument);
  REQUIRE(overflow.errors.find("flags: --batch: expected an integer from 0 to 2147483647, got '3000000000'") !=
          std::string::npos);
  for (const char* flag : {"--json", "--workload", "--dtype", "--layout", "--context", "--trace"}) {
    const Finished missing = run_program(step03, pa::cat("--no-gpu ", flag));
    INFO(missing.errors);
    REQUIRE(missing.code == pa::exit_bad_argument);
    REQUIRE(missing.errors.find(pa::cat("flags: ", flag, ": expected a value after it, got nothing")) != std::string::npos);
  }
}

TEST_CASE("programs: exit codes as CORRECTNESS.md lists them, from the programs themselves", "[programs]") {
  const auto step03 = built_program("steps", "step03_naive_decode");
  const auto step01 = built_program("steps", "step01_paged_cache");
  const auto fuzz = built_program("tests", "pagedattn_fuzz");
  const ScratchDir dir("pagedattn-test-exit-codes");
  struct Case {
    std::filesystem::path program;
    std::string args, env;
    int code;
    std::string says;  // a piece of what it prints
  };
  const Case cases[] = {
      {step03, "--quiet --no-gpu", "", pa::exit_ok, ""},
      {step03, "--quiet --no-gpu", "PAGEDATTN_EMU_SHUFFLE=5", pa::exit_ok, ""},
      {step03, "--quiet --no-gpu", "PAGEDATTN_EMU_SHUFFLE=off", pa::exit_ok, ""},
      {step03, "--quiet --no-gpu", "PAGEDATTN_EMU_SHUFFLE=x", pa::exit_bad_argument,
       "PAGEDATTN_EMU_SHUFFLE: expected a seed (a decimal number from 0 to 2^64-1), \"off\" or nothing, got \"x\""},
      {step03, "--quiet --no-gpu", "PAGEDATTN_EMU_SHUFFLE=-1", pa::exit_bad_argument, "got \"-1\""},
      {step03, "--quiet --no-gpu", "PAGEDATTN_EMU_SHUFFLE=99999999999999999999", pa::exit_bad_argument, "PAGEDATTN_EMU_SHUFFLE"},
      {step03, "--quiet --no-gpu --bogus", "", pa::exit_bad_argument, "flags: flag: expected one of the flags --help lists, got --bogus"},
      {step03, "--quiet --no-gpu --head-dim 100", "", pa::exit_refused, "head_dim"},
      // K and V of a billion tokens, or q and out of two billion heads: refused before any
      // allocation, naming the size.
      {step03, "--quiet --no-gpu --context 1000000000", "", pa::exit_fault,
       "workload 'custom' needs at least 1.02 TB (K and V caches 1.02 TB, q and out 2.05 kB) of host memory"},
      {step03, "--quiet --no-gpu --q-heads 2000000000 --kv-heads 1 --context 1", "", pa::exit_fault,
       "workload 'custom' needs at least 1.02 TB (K and V caches 8.19 kB, q and out 1.02 TB) of host memory"},
      {step03, "--quiet --no-gpu --json /dev/full", "", pa::exit_fault, "cannot write /dev/full: writing failed"},
      {step03, pa::cat("--quiet --no-gpu --json ", dir.path.string()), "", pa::exit_fault,
       "--json: cannot write " + dir.path.string() + ": it is a folder"},
      {step03, "--quiet --no-gpu --q-heads 5 --kv-heads 2", "", pa::exit_bad_argument,
       "--q-heads: expected a multiple of --kv-heads (2: each KV head serves a whole group), got 5"},
      {step03, "--quiet --no-gpu --batch 2 --workload small-batch", "", pa::exit_bad_argument,
       "--workload: expected before the flags that change the workload, got after --batch"},
      {step03, "--no-gpu --workload small-batch --batch 1 --context 16", "", pa::exit_ok,
       "on 'small-batch (changed by --batch --context)'"},
      // Flags whose names share words (--kv-dtype, --dtype), one given twice: each listed once, in order.
      {step03, "--no-gpu --workload small-batch --kv-dtype same --dtype f16 --batch 1 --context 16 --dtype bf16", "",
       pa::exit_ok, "on 'small-batch (changed by --kv-dtype --dtype --batch --context)'"},
      {step01, pa::cat("--quiet --json ", (dir / "no-such-folder" / "x.json").string()), "", pa::exit_fault,
       "step01_paged_cache: --json: cannot write"},
      // 2^20 + 1 tokens of one head at head dim 64: past what the emulator runs, and no GPU asked.
      {step03, "--quiet --no-gpu --batch 1 --context 1048577 --q-heads 1 --kv-heads 1 --head-dim 64 --dtype bf16", "",
       pa::exit_unchecked, "not checked: 1 run that no backend ran"},
      {step03, pa::cat("--quiet --no-gpu --json ", (dir / "no-such-folder" / "x.json").string()), "", pa::exit_fault,
       "cannot write"},
      {fuzz, "--count 2 --quiet", "", pa::exit_ok, ""},
      {fuzz, "--count x", "", pa::exit_bad_argument, "pagedattn_fuzz: --count: expected an integer >= 1, got 'x'"},
      {fuzz, "--count 99999999999999999999", "", pa::exit_bad_argument, "--count: expected an integer >= 1"},
      {fuzz, "--seed -1", "", pa::exit_bad_argument, "--seed: expected an integer >= 0, got '-1'"},
      {fuzz, "--seconds 0", "", pa::exit_bad_argument, "--seconds: expected an integer >= 1, got '0'"},
      {fuzz, "--invalid-every -2", "", pa::exit_bad_argument, "--invalid-every"},
      {fuzz, "--steps 6,x", "", pa::exit_bad_argument, "--steps"},
      {fuzz, "--steps 1", "", pa::exit_bad_argument, "step: expected a step with a kernel"},
      {fuzz, "--config 'step=6 nonsense'", "", pa::exit_bad_argument, "word: expected key=value, got 'nonsense'"},
      {fuzz, "--count", "", pa::exit_bad_argument, "--count: expected a value after it"},
      {fuzz, "--bogus", "", pa::exit_bad_argument, "got --bogus"},
      {fuzz, "--count 1 --quiet", "PAGEDATTN_EMU_SHUFFLE=x", pa::exit_bad_argument, "PAGEDATTN_EMU_SHUFFLE"},
      {fuzz, "--count 1 --quiet --summary /dev/full", "", pa::exit_fault, "cannot write /dev/full"},
      {fuzz, pa::cat("--count 1 --quiet --summary ", (dir / "no-such-folder" / "x.md").string()), "", pa::exit_fault,
       "cannot write"},
  };
  for (const Case& c : cases) {
    if (c.args.find("/dev/full") != std::string::npos && !std::filesystem::exists("/dev/full")) continue;
    const Finished done = run_program(c.program, c.args, c.env);
    INFO(c.env << " " << c.program.filename().string() << " " << c.args << " printed:\n" << done.output << done.errors);
    CHECK(done.code == c.code);
    CHECK((done.output + done.errors).find(c.says) != std::string::npos);
  }
  REQUIRE_FALSE(std::filesystem::exists(dir / "no-such-folder"));
  // A summary is written whole: the file, and no partial one beside it.
  const auto summary = dir / "summary.md";
  REQUIRE(run_program(fuzz, pa::cat("--count 2 --quiet --summary ", summary.string())).code == pa::exit_ok);
  REQUIRE(read_all(summary).find("Failures: none.") != std::string::npos);
  REQUIRE_FALSE(std::filesystem::exists(summary.string() + ".partial"));
}

TEST_CASE("programs: a wrong answer in a shuffled thread order names the seed that repeats it", "[programs]") {
  const std::string failure = "FAIL 3/73728: |d|=2.1e-02 at (seq 6, head 31, dim 17) ref 0.41 got nan";
  {
    const pa::emu::ScopedThreadOrder fixed(pa::emu::ThreadOrder{});
    REQUIRE(pa::with_thread_order(failure) == failure);
  }
  const pa::emu::ScopedThreadOrder shuffled(pa::emu::ThreadOrder{true, 7});
  REQUIRE(pa::with_thread_order(failure) == failure + " [shuffled order, seed 7 (PAGEDATTN_EMU_SHUFFLE=7 repeats it)]");
}

TEST_CASE("programs: 3 for a refused workload, and its JSON row is not ok", "[programs]") {
  const ScratchDir dir("pagedattn-test-programs");
  const auto json = dir / "refused.json";
  REQUIRE(run(3, {"--quiet", "--head-dim", "100", "--json", json.string()}) == 3);
  const std::string text = read_all(json);
  REQUIRE(text.find("\"ok\": false") != std::string::npos);
  REQUIRE(text.find("\"refused\": true") != std::string::npos);
  REQUIRE(run(10, {"--quiet", "--dtype", "f32"}) == 3);  // tensor cores take 16-bit inputs
  REQUIRE(run(10, {"--quiet"}) == 0);                     // and without --dtype it runs bf16
}

TEST_CASE("programs: --seed reaches the adversarial set", "[programs]") {
  const ScratchDir dir("pagedattn-test-seed");
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
}

TEST_CASE("programs: a backend that measured nothing prints -, not zeros", "[programs]") {
  pa::StepReport refused;
  refused.step = 10;
  refused.kernel = "step10_tensor_cores";
  refused.emulator_status = "refused: dtype: expected bf16 or f16, got f32";
  refused.gpu_status = "skipped: no GPU";
  pa::StepReport ran = refused;
  ran.emulator_status = "ok";
  ran.emulator_ran = true;
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

/// Columns of the widest line of \p text (UTF-8: continuation bytes take no column).
std::size_t widest_line(const std::string& text) {
  std::size_t widest = 0, column = 0;
  for (const char c : text) {
    if (c == '\n') {
      widest = std::max(widest, column);
      column = 0;
    } else if ((static_cast<unsigned char>(c) & 0xc0) != 0x80) {
      ++column;
    }
  }
  return std::max(widest, column);
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_CASE("programs: the step table fits 100 columns, with GPU columns only where a GPU ran", "[programs]") {
  pa::StepReport emulated;  // the widest cells each column can hold
  emulated.step = 5;
  emulated.kernel = "step05_warps_and_vectors";
  emulated.emulator_status = "ok";
  emulated.emulator_ran = true;
  emulated.emulator_error = 1.2345e-3;
  emulated.emulator_seconds = 123.4e-3;
  emulated.emulator_bytes = 123'450'000;
  emulated.bytes_must_move = 1'234'500;
  emulated.gpu_status = "skipped: no GPU";
  std::ostringstream without;
  pa::print_step_table({emulated, emulated}, without);
  INFO(without.str());
  REQUIRE(widest_line(without.str()) <= 100);
  REQUIRE(without.str().find("GB/s") == std::string::npos);   // no GPU columns
  REQUIRE(count(without.str(), "skipped: no GPU") == 1);      // the reason once
  REQUIRE(without.str().find("100.00") != std::string::npos); // x min: 123.45 MB over 1.2345 MB

  pa::StepReport timed = emulated;
  timed.gpu_status = "ok";
  timed.gpu_ran = true;
  timed.gpu_error = 1.2345e-3;
  timed.gpu_vs_emulator = 1.2345e-3;
  timed.gpu_seconds = 123.4e-6;
  timed.gpu_gbps = 4321.5;
  timed.roof_gbps = 4400;
  pa::StepReport refused = timed;
  refused.gpu_status = "refused: step04_block_threads: max_context_len: expected at most 56960 tokens: the logits "
                       "(4 bytes a token) must fit in the 232448 bytes of shared memory a block may use on NVIDIA "
                       "H200 (step 06 removes this cap), got 65536";  // a note as long as they come: it wraps
  refused.gpu_ran = false;
  refused.gpu_seconds = 0;
  std::ostringstream with;
  pa::print_step_table({timed, refused}, with);
  INFO(with.str());
  REQUIRE(widest_line(with.str()) <= 100);
  REQUIRE(with.str().find("\n      ") != std::string::npos);  // the note went on over a second line
  REQUIRE(with.str().find("% roof") != std::string::npos);
  REQUIRE(with.str().find("4321.5") != std::string::npos);
}

TEST_CASE("programs: JSON records the knobs that ran and null for what did not run", "[programs]") {
  const ScratchDir dir("pagedattn-test-json");
  const auto split = dir / "split.json", naive = dir / "naive.json", refused = dir / "refused.json";
  // Step 07 chooses its split count: the JSON holds the plan's choice, not the 0 that asked for it.
  REQUIRE(run(7, {"--quiet", "--batch", "1", "--context", "3000", "--json", split.string()}) == 0);
  const std::string text = read_all(split);
  INFO(text);
  REQUIRE(text.find("\"num_splits\": 0,") == std::string::npos);
  REQUIRE(text.find("\"num_splits\": null") == std::string::npos);
  REQUIRE(text.find("\"threads_per_block\": 128") != std::string::npos);
  REQUIRE(text.find("\"knobs_from\": \"emulator\"") != std::string::npos);
  REQUIRE(text.find("\"tile_tokens\": null") != std::string::npos);  // a knob step 07 does not have
  REQUIRE(text.find("\"partition_tokens\": 0,") != std::string::npos);  // a knob step 07 has, left to it
  // The GPU did not run (--no-gpu): its numbers are null, not zeros.
  for (const char* field : {"gpu_max_abs_error", "gpu_vs_emulator", "gpu_median_seconds", "gpu_gbps", "roof_gbps"}) {
    INFO(field);
    REQUIRE(text.find(pa::cat("\"", field, "\": null")) != std::string::npos);
  }
  REQUIRE(text.find("\"emulator_bytes\": null") == std::string::npos);

  REQUIRE(run(3, {"--quiet", "--json", naive.string()}) == 0);  // no knobs at all
  const std::string plain = read_all(naive);
  for (const char* field : {"threads_per_block", "num_splits", "partition_tokens", "tile_tokens", "variant"}) {
    INFO(field);
    REQUIRE(plain.find(pa::cat("\"", field, "\": null")) != std::string::npos);
  }
  // A refused run measured nothing: every knob and every emulator number is null.
  REQUIRE(run(10, {"--quiet", "--dtype", "f32", "--json", refused.string()}) == 3);
  const std::string none = read_all(refused);
  for (const char* field : {"knobs_from", "threads_per_block", "emulator_max_abs_error", "emulator_seconds", "emulator_bytes",
                            "emulator_times_minimum_bytes"}) {
    INFO(field);
    REQUIRE(none.find(pa::cat("\"", field, "\": null")) != std::string::npos);
  }
}

TEST_CASE("programs: --trace writes what the program read, and says when there is no such program", "[programs]") {
  const ScratchDir dir("pagedattn-test-trace");
  const auto json = dir / "trace.json";
  REQUIRE(run(6, {"--quiet", "--trace", "0,1", "--json", json.string()}) == 0);
  const std::string text = read_all(json);
  INFO(text);
  REQUIRE(text.find("\"trace\": {") != std::string::npos);
  REQUIRE(text.find("\"block_table\": [") != std::string::npos);
  REQUIRE(text.find("\"tensor\": \"key_cache\"") != std::string::npos);
  REQUIRE(text.find("\"foreign_pages\": []") != std::string::npos);  // only its own pages
  // A program outside the grid read nothing because it never ran: the report says so.
  pa::emu::clear_trace();
  const pa::Workload workload = pa::make_workload(pa::debug_spec());
  REQUIRE(pa::describe_trace(workload, 99, "(no such program)").find("(no such program)") != std::string::npos);
}

TEST_CASE("programs: the tour fits 100 columns, with one legend and what to read next", "[programs][tour]") {
  // The tour is its own program, built next to the step programs (<build>/steps/pagedattn_tour).
  const Finished tour = run_program(built_program("steps", "pagedattn_tour"), "--no-gpu");
  const std::string& text = tour.output;
  INFO(text << tour.errors);
  REQUIRE(tour.code == 0);
  REQUIRE(widest_line(text) <= 100);
  REQUIRE(count(text, "\nlegend\n") == 1);
  REQUIRE(count(text, "why 0?") == 1);                    // the tour workload is bf16
  REQUIRE(text.find("GB/s") == std::string::npos);        // no GPU ran: no GPU columns
  REQUIRE(count(text, "GPU: skipped: --no-gpu") == 1);    // and the reason once
  REQUIRE(text.find("x min") != std::string::npos);
  REQUIRE(text.find("copy-on-write") != std::string::npos);  // step 01's story
  REQUIRE(text.find("memory wasted: paged ") != std::string::npos);
  REQUIRE(text.find("read next") != std::string::npos);
  REQUIRE(text.find("tour: all steps ok") != std::string::npos);
}

}  // namespace
