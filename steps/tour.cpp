// The tour: every step of the ladder in order on one workload, printed side by side.
//
//   scripts/tour            (builds, then runs this)
//   build/current/steps/pagedattn_tour --help
//
// Steps 00 and 01 are CPU programs: they run as they are, and step 01 tells its story in a few
// lines (its --summary). Every kernel step runs in the emulator and, where a GPU is present, on
// the GPU, both checked against the oracle; one table (at most 100 columns), one legend, then
// what to read next.
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>

#include "harness/harness.h"
#include "common/report.h"
#include "kernels/registry.h"

namespace {

/// What a CPU step's program did: exit status 0, seconds, and everything it printed.
struct ProgramRun {
  bool ok = false;
  double seconds = 0;
  std::string output;
};

/// Runs \p program with \p flags and captures what it prints.
ProgramRun run_program(const std::filesystem::path& program, const std::string& flags) {
  const auto start = std::chrono::steady_clock::now();
  std::string command = "\"";  // built in steps: g++ 12 warns falsely on "literal" + std::string&&
  command += program.string();
  command += "\" ";
  command += flags;
  command += " 2>&1";
  ProgramRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    run.output = "cannot start " + program.string() + "\n";
    return run;
  }
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) run.output.append(buffer, n);
  const int status = pclose(pipe);
  run.ok = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  run.seconds = pa::seconds_since(start);
  return run;
}

/// Every line of \p text, indented by \p indent.
std::string indented(const std::string& text, const std::string& indent) {
  std::istringstream lines(text);
  std::string out;
  for (std::string line; std::getline(lines, line);) out += indent + line + "\n";
  return out;
}

/// The CPU steps, each with its one-line role; step 01's story is what its program prints.
bool print_cpu_steps(const std::filesystem::path& here, std::ostream& out) {
  const ProgramRun oracle = run_program(here / "step00_reference", "--quiet");
  out << "step 00, reference: " << (oracle.ok ? "ok" : "FAIL") << " in " << pa::format_seconds(oracle.seconds)
      << ". The oracle: attention for one decode token in double, read\n"
         "  through the block table; every kernel below is checked against it.\n";
  if (!oracle.ok) out << indented(oracle.output, "  ");
  const ProgramRun cache = run_program(here / "step01_paged_cache", "--summary");
  out << "step 01, paged_cache: " << (cache.ok ? "ok" : "FAIL") << " in " << pa::format_seconds(cache.seconds)
      << ". The paged KV cache, as its program tells it (--summary):\n"
      << indented(cache.output, "  ");
  return oracle.ok && cache.ok;
}

/// Where to go from here; the commands run as written after scripts/tour or scripts/test.
void print_read_next(std::ostream& out) {
  out << "read next\n"
         "  each step's page: steps/NN_name/README.md, or the built docs (scripts/test builds them):\n"
         "    build/current/docs/html/index.html\n"
         "  one step alone, with its flags:  build/current/steps/step03_naive_decode --help\n"
         "  which pages one program read:    build/current/steps/step07_split_kv --trace 0,0\n"
         "  debugging with the emulator, and broken kernels to fix: docs/pages/debugging.md\n"
         "  pictures (bandwidth, traffic, memory, traces): notebooks/, executed into the docs\n";
}

}  // namespace

int main(int argc, char** argv) {
  bool run_gpu = true;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const bool query = flag == "--gpu-status" || flag == "--kernel-steps" || flag == "--fp8-kv-steps";
    if (query && argc != 2) {  // a question for scripts: answered alone, or a flag beside it would go unread
      std::fprintf(stderr, "%s: %s takes no other flag (see --help)\n", argv[0], flag.c_str());
      return 2;
    }
    if (flag == "--no-gpu") {
      run_gpu = false;
    } else if (flag == "--gpu-status") {  // one line for scripts: the GPU, or why there is none
      if (pa::cuda_built() && pa::gpu::available()) std::printf("GPU: %s\n", pa::gpu::device_info().name.c_str());
      else std::printf("GPU: none (%s)\n", pa::gpu::unavailable_reason().c_str());
      return 0;
    } else if (flag == "--kernel-steps") {  // for scripts: the program of every step with a kernel, in order
      for (int step : pa::kernel_steps()) std::printf("%s\n", pa::kernel(step, pa::Backend::emulator).name);
      return 0;
    } else if (flag == "--fp8-kv-steps") {  // for scripts: the program of every step that runs fp8 K/V
      for (int step : pa::kernel_steps())
        if (pa::kernel(step, pa::Backend::emulator).runs_fp8_kv) std::printf("%s\n", pa::kernel(step, pa::Backend::emulator).name);
      return 0;
    } else if (flag == "--help" || flag == "-h") {
      std::printf("usage: %s [--no-gpu | --gpu-status | --kernel-steps | --fp8-kv-steps]\n"
                  "Runs every step in order on the tour workload and prints one table, its legend and what\n"
                  "to read next. The tour has no knobs: each step's program has its own (--help there).\n"
                  "--no-gpu         the emulator only, even where a GPU is present.\n"
                  "--gpu-status     prints the GPU the GPU path would use, or why there is none.\n"
                  "--kernel-steps   prints the program of every step with a kernel, one a line, in order.\n"
                  "--fp8-kv-steps   the same for the steps whose kernel reads fp8 e4m3 K/V.\n",
                  argv[0]);
      return 0;
    } else {
      std::fprintf(stderr, "%s: unknown flag '%s' (see --help)\n", argv[0], flag.c_str());
      return 2;
    }
  }
  try {
    const bool gpu_here = run_gpu && pa::cuda_built() && pa::gpu::available();
    const pa::Stamp stamp = pa::Stamp::collect(gpu_here);
    std::cout << pa::wrapped("pagedattn tour | " + stamp.line(), 100, "", "  ") << '\n';

    const std::filesystem::path here = std::filesystem::absolute(argv[0]).parent_path();
    bool ok = print_cpu_steps(here, std::cout);
    std::cout << '\n';

    const pa::Workload workload = pa::make_workload(pa::tour_spec());
    std::cout << "kernel steps on the tour workload: " << pa::describe(workload.problem) << '\n';
    pa::StepRunSettings settings;
    settings.run_gpu = run_gpu;
    if (gpu_here) settings.roof_gbps = pa::gpu::measure_roof_gbps(std::size_t{1} << 30, 10);
    std::vector<pa::StepReport> reports;
    for (int step : pa::kernel_steps()) {
      reports.push_back(pa::run_step(step, workload, {}, settings));
      ok = ok && reports.back().ok;
    }
    pa::print_step_table(reports, std::cout);
    std::cout << "\nbytes a decode step must move here: " << pa::format_bytes(static_cast<double>(workload.bytes_moved()))
              << " (x min is emu bytes over this)\n";
    if (settings.roof_gbps > 0) std::cout << "roof (streaming read, this run): " << pa::format_fixed(settings.roof_gbps, 0) << " GB/s\n";
    std::cout << "\nlegend\n" << pa::step_table_legend(pa::step_table_has_gpu(reports), workload.problem.dtype) << '\n';
    print_read_next(std::cout);
    std::cout << '\n' << (ok ? "tour: all steps ok\n" : "tour: FAILURES above\n");
    return ok ? 0 : 1;
  } catch (const pa::Error& error) {
    std::fprintf(stderr, "%s: %s\n", argv[0], error.what());
    return 1;
  }
}
