// The tour: every step of the ladder in order on one workload, printed side by side.
//
//   scripts/tour            (builds, then runs this)
//   build/cpu/steps/pagedattn_tour --help
//
// Steps 00 and 01 are CPU programs and run as they are (quietly; their status is shown);
// every kernel step runs in the emulator and, where a GPU is present, on the GPU, both checked
// against the oracle.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include "harness/harness.h"
#include "common/report.h"
#include "kernels/registry.h"

namespace {

/// Runs a CPU step's program quietly; returns (ok, seconds).
std::pair<bool, double> run_program(const std::filesystem::path& program) {
  const auto start = std::chrono::steady_clock::now();
  std::string command = "\"";  // built in steps: g++ 12 warns falsely on "literal" + std::string&&
  command += program.string();
  command += "\" --quiet";
  const int status = std::system(command.c_str());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {status == 0, seconds};
}

}  // namespace

int main(int argc, char** argv) {
  bool run_gpu = true;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--no-gpu") {
      run_gpu = false;
    } else if (flag == "--gpu-status") {  // one line for scripts: the GPU, or why there is none
      if (pa::cuda_built() && pa::gpu::available()) std::printf("GPU: %s\n", pa::gpu::device_info().name.c_str());
      else std::printf("GPU: none (%s)\n", pa::gpu::unavailable_reason().c_str());
      return 0;
    } else if (flag == "--kernel-steps") {  // for scripts: the program of every step with a kernel, in order
      for (int step : pa::kernel_steps()) std::printf("%s\n", pa::kernel(step, pa::Backend::emulator).name);
      return 0;
    } else if (flag == "--help" || flag == "-h") {
      std::printf("usage: %s [--no-gpu | --gpu-status | --kernel-steps]\nRuns every step in order on the tour workload and prints one table.\n"
                  "--gpu-status prints the GPU the GPU path would use, or why there is none.\n"
                  "--kernel-steps prints the program of every step with a kernel, one a line, in order.\n", argv[0]);
      return 0;
    } else {
      std::fprintf(stderr, "%s: unknown flag '%s' (see --help)\n", argv[0], flag.c_str());
      return 2;
    }
  }
  try {
    const bool gpu_here = run_gpu && pa::cuda_built() && pa::gpu::available();
    const pa::Stamp stamp = pa::Stamp::collect(gpu_here);
    std::cout << "pagedattn tour | " << stamp.line() << '\n';
    if (!gpu_here) std::cout << "GPU: not used (" << (run_gpu ? pa::gpu::unavailable_reason() : "--no-gpu") << ")\n";
    std::cout << '\n';

    bool ok = true;
    const std::filesystem::path here = std::filesystem::absolute(argv[0]).parent_path();
    pa::Table cpu_steps({"step", "program", "status", "time"});
    for (const char* program : {"step00_reference", "step01_paged_cache"}) {
      const auto [passed, seconds] = run_program(here / program);
      ok = ok && passed;
      cpu_steps.add_row({std::string(program).substr(4, 2), program, passed ? "ok" : "FAIL", pa::format_seconds(seconds)});
    }
    cpu_steps.print(std::cout);
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
    std::cout << "\nbytes a decode step must move: " << pa::format_bytes(static_cast<double>(workload.bytes_moved()))
              << " (emu bytes: what each kernel actually read and wrote)\n";
    if (settings.roof_gbps > 0) std::cout << "roof (streaming read, this run): " << pa::format_fixed(settings.roof_gbps, 0) << " GB/s\n";
    std::cout << (ok ? "tour: all steps ok\n" : "tour: FAILURES above\n");
    return ok ? 0 : 1;
  } catch (const pa::Error& error) {
    std::fprintf(stderr, "%s: %s\n", argv[0], error.what());
    return 1;
  }
}
