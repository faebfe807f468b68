#include "harness/harness.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <new>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/parallel.h"
#include "common/report.h"
#include "kernels/registry.h"
#include "reference/oracle.h"

#include <unistd.h>

namespace pa {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::byte kPoison{0xff};  // NaN in f32, f16 and bf16 alike
/// The poison word: NaN as a float and INT_MAX as an int, whose 16-bit halves (0xffff, 0x7fff)
/// are NaN in f16 and bf16.
constexpr std::uint32_t kPoisonWord = 0x7fffffffu;

/// What out and the workspace hold before a run (docs/design/CORRECTNESS.md rule 1): words of
/// kPoisonWord; zeros for a workload without poison (WorkloadSpec::poison false: the twin
/// the poison checks compare with), so a kernel that reads either before writing it shows.
std::vector<std::byte> poison_fill(std::size_t bytes, bool poison) {
  std::vector<std::byte> fill(bytes, poison ? kPoison : std::byte{0});
  if (!poison) return fill;
  for (std::size_t i = 0; i + sizeof kPoisonWord <= bytes; i += sizeof kPoisonWord)
    std::memcpy(fill.data() + i, &kPoisonWord, sizeof kPoisonWord);
  return fill;  // a tail shorter than a word is 0xff bytes: the word's first bytes, as on the device
}

/// Decoded output values (for differences between two runs).
std::vector<float> decode(const DecodeProblem& p, const std::vector<std::byte>& out) {
  std::vector<float> values(static_cast<std::size_t>(p.query_elems()));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = load_as_float(out.data(), p.dtype, i);
  return values;
}

double max_difference(const DecodeProblem& p, const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  const std::vector<float> x = decode(p, a), y = decode(p, b);
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) != std::isnan(y[i])) return std::numeric_limits<double>::infinity();
    if (std::isfinite(x[i]) && std::isfinite(y[i])) worst = std::max(worst, std::abs(double{x[i]} - y[i]));
  }
  return worst;
}

}  // namespace

// ----- running kernels -----------------------------------------------------------------------

RunOutput run_emulator(const KernelEntry& kernel, const Workload& workload, const KernelOptions& options) {
  const LaunchPlan plan = plan_for(kernel, workload.problem, workload.context_lens, options, DeviceLimits::pretend_h200());
  RunOutput run;
  run.out = poison_fill(workload.out_bytes(), workload.spec.poison);
  std::vector<std::byte> workspace = poison_fill(plan.workspace_bytes, workload.spec.poison);
  const DecodeView view = workload.host_view(run.out.data(), workspace.data(), plan.workspace_bytes);
  emu::reset_counters();
  const auto start = Clock::now();
  kernel.launch(view, plan, nullptr);
  run.seconds = seconds_since(start);
  run.traffic = emu::counters();
  run.plan = plan;
  return run;
}

DeviceWorkload::DeviceWorkload(const Workload& w)
    : problem_(w.problem),
      poison_(w.spec.poison),
      query_(w.query.size(), "query"),
      key_cache_(w.key_cache.size(), "key_cache"),
      value_cache_(w.value_cache.size(), "value_cache"),
      block_tables_(w.block_tables.size() * sizeof(std::int32_t), "block_tables"),
      context_lens_(w.context_lens.size() * sizeof(std::int32_t), "context_lens"),
      out_(w.out_bytes(), "out") {
  query_.upload(w.query.data(), w.query.size());
  if (!w.spec.sparse) {
    key_cache_.upload(w.key_cache.data(), w.key_cache.size());
    value_cache_.upload(w.value_cache.data(), w.value_cache.size());
  } else {
    // A sparse pool: the pages no table uses are poison (NaN) on the device, and only the
    // pages the tables use are copied, not the gigabytes of untouched host memory.
    key_cache_.fill(poison_ ? 0xff : 0x00);  // NaN in every storage type, fp8 e4m3 too
    value_cache_.fill(poison_ ? 0xff : 0x00);
    const DecodeProblem& p = w.problem;
    const std::size_t elem = dtype_size(p.cache_dtype());
    std::set<std::int32_t> pages;
    for (int seq = 0; seq < p.num_seqs; ++seq)
      for (std::int64_t i = 0; i < pages_for(w.context_lens[static_cast<std::size_t>(seq)], p.block_size); ++i)
        pages.insert(w.block_tables[static_cast<std::size_t>(seq) * p.max_blocks_per_seq + static_cast<std::size_t>(i)]);
    for (const std::int32_t page : pages) {
      const std::size_t begin = static_cast<std::size_t>(page * p.layout.block_stride) * elem;
      const std::size_t bytes = std::min(static_cast<std::size_t>(p.layout.block_stride) * elem, w.key_cache.size() - begin);
      key_cache_.upload(w.key_cache.data() + begin, bytes, begin);
      value_cache_.upload(w.value_cache.data() + begin, bytes, begin);
    }
  }
  block_tables_.upload(w.block_tables.data(), block_tables_.size());
  context_lens_.upload(w.context_lens.data(), context_lens_.size());
}

DecodeView DeviceWorkload::view(std::size_t workspace_bytes) {
  if (workspace_.size() < workspace_bytes) {
    workspace_ = gpu::Buffer();  // free first: the old and new buffers may not both fit
    workspace_ = gpu::Buffer(workspace_bytes, "workspace");
    fill_poison(workspace_);
  }
  DecodeView v;
  v.problem = problem_;
  v.query = query_.data();
  v.key_cache = key_cache_.data();
  v.value_cache = value_cache_.data();
  v.block_tables = static_cast<const std::int32_t*>(block_tables_.data());
  v.context_lens = static_cast<const std::int32_t*>(context_lens_.data());
  v.out = out_.data();
  v.workspace = workspace_.data();
  v.workspace_bytes = workspace_.size();
  return v;
}

void DeviceWorkload::poison() {
  fill_poison(out_);
  fill_poison(workspace_);
}

void DeviceWorkload::fill_poison(gpu::Buffer& buffer) {
  // On the device: the benchmarks poison a workspace of up to gigabytes before every row (step
  // 02's gathered K and V on ragged-skew: 17 GB), and a host copy cost seconds a row (lab v130).
  if (poison_) buffer.fill_words(kPoisonWord);
  else buffer.fill(0);
}

std::vector<std::byte> DeviceWorkload::download_out() const {
  std::vector<std::byte> out(out_.size());
  out_.download(out.data(), out.size());
  return out;
}

double time_gpu_launches(const KernelEntry& kernel, DeviceWorkload& device, const LaunchPlan& plan, int runs,
                         bool checked) {
  DecodeView view = device.view(plan.workspace_bytes);
  view.checked = checked;
  for (int i = 0; i < 2; ++i) kernel.launch(view, plan, nullptr);  // warm-up
  gpu::synchronize(kernel.name);
  std::vector<float> times;
  gpu::Event start, stop;
  for (int i = 0; i < runs; ++i) {
    gpu::flush_l2();
    start.record();
    kernel.launch(view, plan, nullptr);
    stop.record();
    times.push_back(gpu::Event::elapsed_ms(start, stop));
  }
  gpu::synchronize(kernel.name);
  std::sort(times.begin(), times.end());
  return times.empty() ? 0.0 : times[times.size() / 2] * 1e-3;
}

RunOutput run_gpu(const KernelEntry& kernel, const Workload& workload, const KernelOptions& options,
                  int timed_runs) {
  const LaunchPlan plan = plan_for(kernel, workload.problem, workload.context_lens, options, gpu::device_info().limits);
  DeviceWorkload device(workload);
  const DecodeView view = device.view(plan.workspace_bytes);
  device.poison();
  kernel.launch(view, plan, nullptr);
  gpu::synchronize(kernel.name);
  RunOutput run;
  run.out = device.download_out();
  run.plan = plan;
  if (timed_runs > 0) {
    run.seconds = time_gpu_launches(kernel, device, plan, timed_runs);
    // Re-validate after timing: the same input must give the same bits (a race would not).
    const std::vector<std::byte> again = device.download_out();
    const CompareResult same = compare_bitwise(workload.problem, run.out.data(), again.data());
    if (!same.ok)
      throw Error(cat(kernel.name, ": the output changed between runs on the same input (a race?): ",
                      same.first_failure));
  }
  return run;
}

// ----- checking ------------------------------------------------------------------------------

namespace {
/// The host's physical memory in bytes (0 where the system does not say).
double physical_memory_bytes() {
  return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
}

/// The same tensors seen as a batch of one: sequence \p seq alone.
DecodeView single_sequence(const DecodeView& full, int seq) {
  const DecodeProblem& p = full.problem;
  const std::size_t row_bytes = static_cast<std::size_t>(p.num_q_heads) * p.head_dim * dtype_size(p.dtype);
  DecodeView one = full;
  one.problem.num_seqs = 1;
  one.problem.total_context_len = 0;  // unknown here: the lengths may live on the device
  one.query = static_cast<const std::byte*>(full.query) + static_cast<std::size_t>(seq) * row_bytes;
  one.block_tables = full.block_tables + static_cast<std::size_t>(seq) * p.max_blocks_per_seq;
  one.context_lens = full.context_lens + seq;
  return one;
}

/// The query heads of \p kv_head in \p one_sequence (a view of one sequence) alone: a problem of
/// one KV head and its group of query heads, the query and the caches' pointers moved to them.
/// The layout keeps the pool's strides, so the pages are read where they are.
DecodeView single_kv_head(const DecodeView& one_sequence, int kv_head) {
  const DecodeProblem& p = one_sequence.problem;
  const int group = p.group_size();
  DecodeView one = one_sequence;
  one.problem.num_q_heads = group;
  one.problem.num_kv_heads = 1;
  const std::size_t query_bytes = static_cast<std::size_t>(kv_head) * group * p.head_dim * dtype_size(p.dtype);
  const std::size_t cache_bytes = static_cast<std::size_t>(p.layout.offset(0, kv_head, 0, 0)) * dtype_size(p.cache_dtype());
  one.query = static_cast<const std::byte*>(one_sequence.query) + query_bytes;
  one.key_cache = static_cast<const std::byte*>(one_sequence.key_cache) + cache_bytes;
  one.value_cache = static_cast<const std::byte*>(one_sequence.value_cache) + cache_bytes;
  return one;
}
}  // namespace

OracleRows oracle_rows(const DecodeView& host_view, const std::vector<int>& sequences) {
  OracleRows rows;
  rows.sequences = sequences;
  const DecodeProblem& p = host_view.problem;
  const bool storage_weights = p.dtype != DType::f32;  // the plain loop with 16-bit weights too
  if (sequences.empty()) {
    rows.exact = reference::paged_attention(host_view);
    rows.plain = reference::plain_float_attention(host_view);
    if (storage_weights) rows.plain_storage_weights = reference::plain_float_attention(host_view, true);
    return rows;
  }
  // A sample: each (sequence, KV head) alone and each of the two or three loops on it is a
  // piece of its own, on every hardware thread. The oracle computes every (sequence, query
  // head) row by itself, so the rows are the same bits as from one call on the whole view.
  // bench_ladder's single-1048576 (one sequence, 8 KV heads) took 82 s on one thread, 49 s on
  // two (lab/perf-log.md, v131). A piece of the exact loop holds its K and V in double (16
  // bytes a token and channel), so the threads are also held to a quarter of the host's memory.
  const auto elems = static_cast<std::size_t>(p.query_elems());  // NaN in the rows not computed
  rows.exact.assign(elems, std::numeric_limits<double>::quiet_NaN());
  rows.plain.assign(elems, std::numeric_limits<float>::quiet_NaN());
  if (storage_weights) rows.plain_storage_weights.assign(elems, std::numeric_limits<float>::quiet_NaN());
  const int loops = storage_weights ? 3 : 2;
  const std::int64_t pieces = static_cast<std::int64_t>(sequences.size()) * p.num_kv_heads;
  const double piece_bytes = 16.0 * std::max(p.max_context_len, 1) * p.head_dim;
  const double memory = physical_memory_bytes();
  const double fit = memory > 0 ? std::max(1.0, memory / 4 / piece_bytes) : hardware_threads();
  const int threads = static_cast<int>(std::min<double>(fit, hardware_threads()));
  const std::size_t group_elems = static_cast<std::size_t>(p.group_size()) * p.head_dim;
  parallel_for(pieces * loops, threads, [&](std::int64_t task) {
    const int loop = static_cast<int>(task % loops);
    const std::int64_t piece = task / loops;
    const int seq = sequences[static_cast<std::size_t>(piece / p.num_kv_heads)];
    const int kv_head = static_cast<int>(piece % p.num_kv_heads);
    const DecodeView view = single_kv_head(single_sequence(host_view, seq), kv_head);
    const auto at = static_cast<std::ptrdiff_t>((static_cast<std::size_t>(seq) * p.num_kv_heads + kv_head) * group_elems);
    if (loop == 0) {
      const std::vector<double> exact = reference::paged_attention(view);
      std::copy(exact.begin(), exact.end(), rows.exact.begin() + at);
    } else {
      const std::vector<float> plain = reference::plain_float_attention(view, loop == 2);
      std::copy(plain.begin(), plain.end(), (loop == 1 ? rows.plain : rows.plain_storage_weights).begin() + at);
    }
  });
  return rows;
}

OracleRows oracle_rows(const Workload& w, const std::vector<int>& sequences) {
  return oracle_rows(w.host_view(), sequences);
}

CompareResult check_against_oracle(const Workload& w, const OracleRows& oracle, const std::vector<std::byte>& out,
                                   bool weights_in_storage_type) {
  return check_against_oracle(w.problem, oracle, out, weights_in_storage_type);
}

CompareResult check_against_oracle(const DecodeProblem& p, const OracleRows& oracle, const std::vector<std::byte>& out,
                                   bool weights_in_storage_type) {
  std::vector<std::byte> sampled_out;  // a copy only when rows must be masked
  if (!oracle.sequences.empty()) {  // rows not computed are NaN in the oracle: make them NaN here too
    sampled_out = out;
    const std::size_t row_bytes = static_cast<std::size_t>(p.num_q_heads) * p.head_dim * dtype_size(p.dtype);
    std::vector<bool> sampled(static_cast<std::size_t>(p.num_seqs), false);
    for (int seq : oracle.sequences) sampled[static_cast<std::size_t>(seq)] = true;
    for (int seq = 0; seq < p.num_seqs; ++seq)
      if (!sampled[static_cast<std::size_t>(seq)])
        std::fill_n(sampled_out.begin() + static_cast<std::ptrdiff_t>(seq * row_bytes), row_bytes, kPoison);
  }
  const std::byte* checked = oracle.sequences.empty() ? out.data() : sampled_out.data();
  // docs/design/CORRECTNESS.md rule 5. The plainest same-precision loop says what this
  // precision allows on this input: the kernel may be 3x as far from the oracle, and where that
  // loop itself misses the dtype's atol (logits whose differences float cannot hold, a few
  // tokens whose 16-bit weights each carry a rounding error) the atol is raised to that bound.
  // The floor (a few float ulps of the largest output) keeps exact cases from failing on rounding.
  const std::vector<float>& plain =
      weights_in_storage_type && !oracle.plain_storage_weights.empty() ? oracle.plain_storage_weights : oracle.plain;
  const double plain_error = max_abs_error(oracle.exact, plain);
  double largest = 0;
  for (double v : oracle.exact)
    if (std::isfinite(v)) largest = std::max(largest, std::abs(v));
  const double bound = 3.0 * plain_error + 8.0 * std::numeric_limits<float>::epsilon() * largest;
  Tolerance tolerance = Tolerance::for_dtype(p.dtype);
  tolerance.atol = std::max(tolerance.atol, bound);
  CompareResult result = compare_to_reference(p, oracle.exact, checked, tolerance);
  if (!result.ok) return result;
  if (result.max_abs_error > bound) {
    result.ok = false;
    result.first_failure = cat("FAIL: max |d| ", format_sci(result.max_abs_error), " exceeds 3x the plain float loop's error (",
                               format_sci(plain_error), weights_in_storage_type ? ", its weights rounded as the kernel's" : "",
                               ")");
  }
  return result;
}

std::vector<int> sample_sequences(const Workload& w) {
  const int n = w.problem.num_seqs;
  std::vector<int> seqs;
  for (int seq : {0, n / 2, n - 1})
    if (seq >= 0 && seq < n && std::find(seqs.begin(), seqs.end(), seq) == seqs.end()) seqs.push_back(seq);
  return seqs;
}

// ----- files and statuses ------------------------------------------------------------------

std::string with_thread_order(const std::string& status) {
  const emu::ThreadOrder order = emu::thread_order();
  return order.shuffled ? cat(status, " [", emu::describe(order), ']') : status;
}

// ----- one step, side by side ----------------------------------------------------------------

StepReport run_step(int step, const Workload& w, const KernelOptions& options, const StepRunSettings& settings) {
  StepReport report;
  report.step = step;
  const KernelEntry& emulated = kernel(step, Backend::emulator);
  report.kernel = emulated.name;
  report.bytes_must_move = w.bytes_moved();
  auto start = Clock::now();
  const OracleRows oracle = oracle_rows(w, settings.sample ? sample_sequences(w) : std::vector<int>{});
  report.oracle_seconds = seconds_since(start);

  std::optional<RunOutput> emu_run;
  if (!settings.run_emulator) {
    report.emulator_status = "skipped: workload too big to emulate";
  } else try {
    emu_run = run_emulator(emulated, w, options);
    const CompareResult result = check_against_oracle(w, oracle, emu_run->out, emulated.weights_in_storage_type);
    report.emulator_error = result.max_abs_error;
    report.emulator_seconds = emu_run->seconds;
    report.emulator_bytes = emu_run->traffic.total_read() + emu_run->traffic.total_written();
    report.emulator_status = result.ok ? "ok" : with_thread_order(result.first_failure);
    report.ok = report.ok && result.ok;
    report.ran = emu_run->plan.options;
    report.emulator_ran = true;
  } catch (const ArgumentError& refused) {
    report.emulator_status = cat("refused: ", refused.what());
    report.refused = true;
  } catch (const KernelError& fault) {
    report.emulator_status = cat("FAIL ", fault.what());
    report.ok = false;
    report.faulted = true;
  }

  report.roof_gbps = settings.roof_gbps;
  if (!settings.run_gpu) {
    report.gpu_status = "skipped: --no-gpu";
  } else if (!cuda_built() || !gpu::available()) {
    report.gpu_status = cat("skipped: ", gpu::unavailable_reason());
  } else {
    try {
      const KernelEntry& gpu_kernel = kernel(step, Backend::cuda);
      const RunOutput run = run_gpu(gpu_kernel, w, options, settings.gpu_timed_runs);
      const CompareResult result = check_against_oracle(w, oracle, run.out, gpu_kernel.weights_in_storage_type);
      report.gpu_error = result.max_abs_error;
      report.gpu_seconds = run.seconds;
      if (run.seconds > 0) report.gpu_gbps = static_cast<double>(w.bytes_moved()) / run.seconds / 1e9;
      if (emu_run) report.gpu_vs_emulator = max_difference(w.problem, emu_run->out, run.out);
      report.gpu_status = result.ok ? "ok" : result.first_failure;
      report.ok = report.ok && result.ok;
      report.ran = run.plan.options;  // the GPU's plan (its occupancy may differ from the emulator's)
      report.gpu_ran = true;
    } catch (const ArgumentError& refused) {
      report.gpu_status = cat("refused: ", refused.what());
      report.refused = true;
    } catch (const Error& fault) {
      report.gpu_status = cat("FAIL ", fault.what());
      report.ok = false;
      report.faulted = true;
    }
  }
  return report;
}

std::string wrapped(const std::string& text, std::size_t width, const std::string& first, const std::string& rest) {
  std::string out, line = first;
  std::size_t words = 0;
  std::istringstream stream(text);
  for (std::string word; stream >> word;) {
    if (words > 0 && line.size() + 1 + word.size() > width) {
      out += line + '\n';
      line = rest;
      words = 0;
    }
    line += (words > 0 ? " " : "") + word;
    ++words;
  }
  return out + line + '\n';
}

namespace {
/// "05" and "warps_and_vectors" from "step05_warps_and_vectors": the step column says the number.
std::string short_kernel_name(const std::string& kernel) {
  const std::size_t underscore = kernel.find('_');
  return kernel.rfind("step", 0) == 0 && underscore != std::string::npos ? kernel.substr(underscore + 1) : kernel;
}
}  // namespace

bool step_table_has_gpu(const std::vector<StepReport>& reports) {
  return std::any_of(reports.begin(), reports.end(),
                     [](const StepReport& r) { return r.gpu_status.rfind("skipped", 0) != 0; });
}

void print_step_table(const std::vector<StepReport>& reports, std::ostream& out) {
  // The emulator's and the GPU's columns hold the largest |difference| from the oracle of a run
  // that finished, or the word that says why there is none (the reason is a note below). Without
  // a GPU the table keeps the emulator's time; with one, the GPU's time and bandwidth take its
  // place (the emulator's CPU time says nothing about a GPU), which keeps it within 100 columns.
  const bool gpu_columns = step_table_has_gpu(reports);
  std::vector<std::string> columns = {"step", "kernel", "emulator"};
  if (!gpu_columns) columns.push_back("emu time");
  for (const char* c : {"emu bytes", "x min"}) columns.push_back(c);
  if (gpu_columns)
    for (const char* c : {"GPU", "|gpu-emu|", "GPU time", "GB/s", "% roof"}) columns.push_back(c);
  Table table(columns);
  std::vector<std::pair<int, std::string>> notes;
  for (const StepReport& r : reports) {
    // A backend that refused, faulted or was skipped measured nothing: its word, then "-", not
    // zeros that look like a perfect run. A run that finished has a time, whether or not it matched.
    auto result = [&](const std::string& status, double error) -> std::string {
      if (status != "ok") notes.emplace_back(r.step, status);
      if (status == "ok") return format_sci(error);
      if (status.rfind("skipped", 0) == 0) return "skipped";
      if (status.rfind("refused", 0) == 0) return "refused";
      return "FAIL";
    };
    const bool emu_ran = r.emulator_ran, gpu_ran = r.gpu_ran;
    std::vector<std::string> row = {cat(r.step < 10 ? "0" : "", r.step), short_kernel_name(r.kernel),
                                    result(r.emulator_status, r.emulator_error)};
    if (!gpu_columns) row.push_back(emu_ran ? format_seconds(r.emulator_seconds) : "-");
    row.push_back(emu_ran ? format_bytes(static_cast<double>(r.emulator_bytes)) : "-");
    row.push_back(r.times_minimum_bytes() > 0 ? format_fixed(r.times_minimum_bytes(), 2) : "-");
    if (gpu_columns) {
      row.push_back(result(r.gpu_status, r.gpu_error));
      row.push_back(gpu_ran && emu_ran ? format_sci(r.gpu_vs_emulator) : "-");
      row.push_back(r.gpu_seconds > 0 ? format_seconds(r.gpu_seconds) : "-");
      row.push_back(r.gpu_seconds > 0 ? format_fixed(r.gpu_gbps, 1) : "-");
      row.push_back(r.gpu_seconds > 0 && r.roof_gbps > 0 ? format_fixed(100.0 * r.gpu_gbps / r.roof_gbps, 1) : "-");
    }
    table.add_row(row);
  }
  table.print(out);
  // One line per distinct note, naming the steps it applies to ("steps 2, 3: refused: ..."). A
  // GPU skipped everywhere has no columns: one line says why, once.
  std::vector<std::pair<std::string, std::string>> grouped;  // note -> steps
  for (const auto& [step, note] : notes) {
    if (!gpu_columns && note.rfind("skipped", 0) == 0 &&
        std::any_of(reports.begin(), reports.end(), [&](const StepReport& r) { return r.gpu_status == note; }))
      continue;
    auto it = std::find_if(grouped.begin(), grouped.end(), [&](const auto& g) { return g.first == note; });
    if (it == grouped.end()) grouped.emplace_back(note, cat("step ", step));
    else it->second += cat(", ", step);
  }
  // Notes wrap at the table's 100 columns too (a refusal names its limit at length).
  for (const auto& [note, steps] : grouped) out << wrapped(cat(steps, ": ", note), 100, "  ", "      ");
  if (!gpu_columns && !reports.empty()) out << wrapped(cat("GPU: ", reports.front().gpu_status), 100, "  ", "      ");
}

std::string step_table_legend(bool gpu_columns, DType dtype) {
  std::ostringstream out;
  const auto item = [&out](const char* column, const std::string& text) {
    std::string name = cat("  ", column);
    name.resize(13, ' ');
    out << name << text << '\n';
  };
  item("emulator", "the largest |output - oracle| of the emulated kernel (the oracle computes in");
  item("", "double and is rounded to the output's type); FAIL, refused or skipped: see the notes");
  if (!gpu_columns) item("emu time", "the emulator's CPU time: a pretend GPU, so no guide to a real one");
  item("emu bytes", "global-memory bytes the emulated kernel read and wrote");
  item("x min", "emu bytes over the bytes a decode step must move (K and V of every token once,");
  item("", "q, out, the block-table entries): 1.00 is the floor; 4 means each byte four times");
  if (gpu_columns) {
    item("GPU", "the largest |output - oracle| on the GPU; |gpu-emu|: GPU against emulator");
    item("GPU time", "median of the timed launches, L2 flushed before each");
    item("GB/s", "the bytes a decode step must move over the GPU time; % roof: of the streaming");
    item("", "read measured in this run");
  }
  if (dtype == DType::bf16 || dtype == DType::f16) {
    const std::string type(dtype_name(dtype));
    const int bits = dtype == DType::bf16 ? 8 : 11;
    item("why 0?", cat(type, " keeps ", bits, " significant bits. The check rounds the exact answer to ", type,
                       ";"));
    item("", cat("a kernel adds in f32 and rounds once, when it stores, so both land on the same ", type));
    item("", "value unless the exact answer lies within f32's tiny error of a halfway point");
    item("", cat("between two ", type, " values (then they differ by one ", type,
                 " step). A larger error means the"));
    item("", cat("kernel rounded earlier: step 10 rounds the softmax weights to ", type, " for P*V."));
  }
  return out.str();
}

// ----- traces --------------------------------------------------------------------------------

std::vector<TraceRead> summarize_trace(const Workload& w, int seq) {
  const DecodeProblem& p = w.problem;
  const CacheLayout& l = p.layout;
  // Decode an element offset into (page, kv_head, slot) by peeling the strides, largest first.
  struct Axis {
    std::int64_t stride;
    int which;  // 0 page, 1 head, 2 slot
  };
  std::vector<Axis> axes = {{l.block_stride, 0}, {l.head_stride, 1}, {l.token_stride, 2}};
  std::sort(axes.begin(), axes.end(), [](const Axis& a, const Axis& b) { return a.stride > b.stride; });
  std::map<std::int32_t, int> position_of_page;  // page -> index in this sequence's table row
  const std::int64_t used = seq >= 0 && seq < p.num_seqs ? pages_for(w.context_lens[seq], p.block_size) : 0;
  for (std::int64_t i = 0; i < used; ++i)
    position_of_page.emplace(w.block_tables[static_cast<std::size_t>(seq) * p.max_blocks_per_seq + i], static_cast<int>(i));

  struct Sets {
    std::set<std::int64_t> tokens;
    std::set<int> heads;
    std::set<std::int32_t> foreign;
  };
  std::vector<TraceRead> reads;
  std::vector<Sets> sets;
  for (const emu::TraceEntry& e : emu::trace()) {
    if (e.write) continue;
    auto it = std::find_if(reads.begin(), reads.end(),
                           [&](const TraceRead& r) { return r.kernel == e.kernel && r.tensor == e.tensor; });
    if (it == reads.end()) {
      TraceRead read;
      read.kernel = e.kernel;
      read.tensor = e.tensor;
      read.lowest = std::numeric_limits<std::int64_t>::max();
      read.highest = -1;
      read.cache = e.tensor == "key_cache" || e.tensor == "value_cache";
      reads.push_back(read);
      sets.emplace_back();
      it = reads.end() - 1;
    }
    TraceRead& r = *it;
    Sets& s = sets[static_cast<std::size_t>(it - reads.begin())];
    r.elements += e.count;
    r.lowest = std::min(r.lowest, e.index);
    r.highest = std::max(r.highest, e.index + e.count - 1);
    if (!r.cache) continue;
    std::int64_t rest = e.index;
    std::int64_t coords[3] = {0, 0, 0};
    for (const Axis& a : axes) {
      coords[a.which] = rest / a.stride;
      rest %= a.stride;
    }
    const auto page = static_cast<std::int32_t>(coords[0]);
    if (std::find(r.pages.begin(), r.pages.end(), page) == r.pages.end()) r.pages.push_back(page);
    s.heads.insert(static_cast<int>(coords[1]));
    const auto where = position_of_page.find(page);
    if (where == position_of_page.end()) s.foreign.insert(page);
    else s.tokens.insert(std::int64_t{where->second} * p.block_size + coords[2]);
  }
  for (std::size_t i = 0; i < reads.size(); ++i) {
    reads[i].kv_heads.assign(sets[i].heads.begin(), sets[i].heads.end());
    reads[i].tokens.assign(sets[i].tokens.begin(), sets[i].tokens.end());
    reads[i].foreign.assign(sets[i].foreign.begin(), sets[i].foreign.end());
  }
  return reads;
}

std::string describe_trace(const Workload& w, int seq, const std::string& grid_note) {
  const std::vector<TraceRead> reads = summarize_trace(w, seq);
  std::ostringstream out;
  if (reads.empty()) out << "  " << (grid_note.empty() ? "(the traced program read nothing)" : grid_note) << '\n';
  for (const TraceRead& r : reads) {
    out << "  " << r.kernel << " read " << r.tensor << ": " << r.elements << " elements";
    if (r.cache) {
      out << ", pages [";
      for (std::size_t i = 0; i < r.pages.size(); ++i) out << (i ? ", " : "") << r.pages[i];
      out << "], kv heads {";
      for (std::size_t i = 0; i < r.kv_heads.size(); ++i) out << (i ? ", " : "") << r.kv_heads[i];
      out << "}";
      if (!r.tokens.empty())
        out << ", tokens " << r.tokens.front() << ".." << r.tokens.back() << " (" << r.tokens.size() << " distinct)";
      if (!r.foreign.empty()) out << "  <-- " << r.foreign.size() << " page(s) NOT in sequence " << seq << "'s table";
    } else {
      out << ", indices " << r.lowest << ".." << r.highest;
    }
    out << '\n';
  }
  return out.str();
}

// ----- the step programs' main ----------------------------------------------------------------

namespace {

struct Flags {
  WorkloadSpec spec = debug_spec();
  std::vector<KernelOptions> options{KernelOptions{}};  ///< every combination of the knob lists
  bool adversarial = false;
  bool dtype_given = false;  ///< --dtype on the command line (else a step that runs no f32 takes bf16)
  bool seed_given = false;   ///< --seed on the command line (with --adversarial: the set's first seed)
  bool run_gpu = true;
  bool quiet = false;
  int runs = 20;
  std::string json_path;
  bool trace = false;
  emu::dim3 trace_at;  ///< (sequence, head, z) of the traced program, whatever the grid's order
};

const char* kUsage = R"(usage: %s [flags]
Runs this step's kernel in the emulator and, where a GPU is present, on the GPU; compares
both with the Eigen oracle and prints one table.
exit codes (docs/design/CORRECTNESS.md lists them): 0 every run matched the oracle; 1 a wrong
  answer; 2 a bad flag or value, or a bad PAGEDATTN_EMU_SHUFFLE (nothing ran); 3 the kernel
  refused the workload or a knob (and nothing was wrong); 4 a fault or error (an emulator
  fault, a CUDA error, host memory, the JSON file); 5 a workload nothing checked (too big to
  emulate, and no GPU ran); 4 wins over 1, 1 over 3, and 3 over 5.
environment: PAGEDATTN_EMU_SHUFFLE=SEED runs the emulator's threads in a shuffled order (a
  decimal seed; "off" or unset: the fixed order); a failure then names the seed.

workload (default: the debug workload)
  --workload NAME      a named benchmark workload (gqa-batch, mha-batch, long-single, small-batch,
                       ragged-skew, ragged-uniform, gqa-batch-fp8); the emulator skips workloads this big;
                       first, then any flag below changes it (its name then says which)
  --batch N            sequences
  --context A[,B,...]  context lengths (one for all, or one per sequence)
  --q-heads N  --kv-heads N  --head-dim N  --page N   (--q-heads a multiple of --kv-heads)
  --dtype f32|f16|bf16 (default f32; bf16 for a step that runs no f32)
  --seed N             the workload's seed (with --adversarial, the set's first seed)
  --kv-dtype e4m3|same  storage of K/V: fp8 e4m3 (or: fp8) with scales, or the same as --dtype;
                       default e4m3 for a step that reads it (step 12), but a named workload
                       keeps its own (gqa-batch-fp8 is fp8, the others the same as --dtype)
  --layout hnd|nhd
  --adversarial        run the whole adversarial set of docs/design/CORRECTNESS.md instead
%s
output
  --json FILE          write the results as JSON (with the hardware stamp)
  --trace SEQ,HEAD[,Z] print what the program of sequence SEQ, head HEAD (and split Z) read in
                       the emulator
  --runs N             timed GPU runs (median reported; default 20)
  --no-gpu             skip the GPU even if one is present
  --quiet              print nothing unless something fails or is refused
)";

/// The knobs a flag sets, in the order --help lists them.
struct KnobFlag {
  Knob bit;
  const char* flag;
  const char* help;
};
constexpr KnobFlag kKnobFlags[] = {
    {knob_threads, "--threads", "threads per program"},
    {knob_splits, "--splits", "context splits (0: the step chooses)"},
    {knob_partition, "--partition", "tokens a split or portion covers (0: the step chooses)"},
    {knob_tile, "--tile", "tokens a thread group takes an iteration (1, 2 or 4)"},
    {knob_variant, "--variant", "ablations: 0 every idea, 1 to the last one left out (the step's page lists them)"},
};

/// The "kernel knobs" section of --help for \p entry: only the knobs it has.
std::string knob_help(const KernelEntry& entry) {
  std::string out = "kernel knobs (never change the answer; a comma-separated list runs every combination on the\n"
                    "same workload, one table each: a sweep)";
  bool any = false;
  for (const KnobFlag& k : kKnobFlags) {
    if ((entry.knobs & k.bit) == 0) continue;
    std::string line = cat("  ", k.flag, " N");
    line.resize(23, ' ');
    out += cat("\n", line, k.help);
    if (k.bit == knob_variant) out += cat("; the last is ", entry.variants);
    any = true;
  }
  if (!any) out += cat("\n  none: ", entry.name, " has no knobs");
  return out;
}

/// Throws ArgumentError unless \p entry has the knob \p flag sets.
void require_knob_flag(const KernelEntry& entry, const std::string& flag) {
  std::string has;
  for (const KnobFlag& k : kKnobFlags)
    if (entry.knobs & k.bit) has += cat(has.empty() ? "" : ", ", k.flag);
  for (const KnobFlag& k : kKnobFlags)
    if (flag == k.flag && (entry.knobs & k.bit) == 0)
      throw_argument("flags", flag, cat("a knob of ", entry.name, " (", has.empty() ? "it has none" : has, ")"),
                     "a knob it does not have");
}

/// The integer \p text, at least \p least: anything else (not a number, below \p least, past
/// 2^31-1) is an ArgumentError naming \p flag and the range.
int parse_at_least(const std::string& flag, const std::string& text, int least) {
  std::size_t used = 0;
  bool overflow = false;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::out_of_range&) {
    overflow = true;
  } catch (const std::invalid_argument&) {
    used = 0;
  }
  if (!overflow && (text.empty() || used != text.size())) throw_argument("flags", flag, "an integer", cat('\'', text, '\''));
  if (!overflow && value < least) throw_argument("flags", flag, cat("an integer >= ", least), std::to_string(value));
  if (overflow || value > std::numeric_limits<int>::max())
    throw_argument("flags", flag, cat("an integer from ", least, " to 2147483647"), cat('\'', text, '\''));
  return static_cast<int>(value);
}

/// A comma-separated list of integers, each at least \p least.
std::vector<int> parse_list(const std::string& flag, const std::string& text, int least = 0) {
  std::vector<int> values;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) values.push_back(parse_at_least(flag, item, least));
  if (values.empty()) throw_argument("flags", flag, "a comma-separated list of integers", "''");
  return values;
}

/// Replaces \p options by every option set in it with \p field set to each of \p values.
void expand(std::vector<KernelOptions>& options, const std::vector<int>& values, int KernelOptions::*field) {
  std::vector<KernelOptions> expanded;
  for (const KernelOptions& base : options)
    for (int value : values) {
      KernelOptions one = base;
      one.*field = value;
      expanded.push_back(one);
    }
  options = std::move(expanded);
}

/// "  launch on <device>: ..." lines: the plan the pretend H200 of the emulator makes for \p w,
/// and the GPU's when there is one. Nothing for a refused problem.
void print_launch(int step, const Workload& w, const KernelOptions& options, bool gpu_here, std::ostream& out) {
  try {  // each plan made before anything is printed: a refused one prints nothing
    const std::string emulated =
        plan_for(kernel(step, Backend::emulator), w.problem, w.context_lens, options, DeviceLimits::pretend_h200()).description;
    out << "  launch in the emulator: " << emulated << '\n';
    if (gpu_here) {
      const std::string real =
          plan_for(kernel(step, Backend::cuda), w.problem, w.context_lens, options, gpu::device_info().limits).description;
      out << "  launch on the GPU: " << real << '\n';
    }
  } catch (const ArgumentError&) {
  }
}

/// "threads 128, splits 0, partition 0, tile 2, variant 0" (0: the kernel's choice).
std::string describe_knobs(const KernelOptions& o) {
  return cat("threads ", o.threads_per_block, ", splits ", o.num_splits, ", partition ", o.partition_tokens, ", tile ",
             o.tile_tokens, ", variant ", o.variant);
}

/// Bytes of host memory \p spec's tensors take at least: K and V (every sequence's pages), and
/// q and out ([num_seqs][num_q_heads][head_dim] each). In double: the products cannot wrap.
struct HostBytes {
  double caches = 0;   ///< K and V
  double queries = 0;  ///< q and out
  double total() const { return caches + queries; }
  /// "1.02 TB (K and V caches 1.02 TB, q and out 2.05 kB)"
  std::string describe() const {
    return cat(format_bytes(total()), " (K and V caches ", format_bytes(caches), ", q and out ", format_bytes(queries), ')');
  }
};
HostBytes host_bytes_at_least(const WorkloadSpec& spec) {
  const double elem = static_cast<double>(dtype_size(spec.dtype));
  HostBytes bytes;
  double pages = 0;
  for (int context : spec.context_lens) pages += (context + spec.block_size - 1) / spec.block_size;
  bytes.caches = 2.0 * pages * spec.block_size * spec.num_kv_heads * spec.head_dim * elem;
  bytes.queries = 2.0 * static_cast<double>(spec.context_lens.size()) * spec.num_q_heads * spec.head_dim * elem;
  return bytes;
}

/// make_workload, refusing up front a workload whose tensors would not fit in this machine's
/// memory (rather than failing inside the allocator after a long wait), and turning an
/// allocation failure into an Error that names the size asked for.
Workload make_workload_or_explain(const WorkloadSpec& spec) {
  const HostBytes needed = host_bytes_at_least(spec);
  const double physical = physical_memory_bytes();
  if (physical > 0 && needed.total() > physical)
    throw MemoryError(cat("workload '", spec.name, "' needs at least ", needed.describe(),
                          " of host memory, more than this machine's ", format_bytes(physical)));
  try {
    return make_workload(spec);
  } catch (const std::bad_alloc&) {
    throw MemoryError(cat("out of host memory building workload '", spec.name, "', which needs at least ", needed.describe()));
  }
}

/// Why a traced program read nothing, when the reason is that it never ran: it is not in the
/// kernel's grid for this problem, or the kernel refused the problem. "" when it is in the grid.
std::string trace_grid_note(const KernelEntry& entry, const Workload& w, const KernelOptions& options,
                            const emu::dim3& traced) {
  try {
    const LaunchPlan plan = plan_for(entry, w.problem, w.context_lens, options, DeviceLimits::pretend_h200());
    if (traced.x < plan.grid[0] && traced.y < plan.grid[1] && traced.z < plan.grid[2]) return "";
    return cat("(no such program: ", entry.name, "'s grid is ", plan.grid[0], " x ", plan.grid[1], " x ",
               plan.grid[2], " here, and program ", traced.x, ',', traced.y, ',', traced.z, " is outside it)");
  } catch (const ArgumentError&) {
    return "(nothing ran: the kernel refused this workload or knob)";
  }
}

/// The trace of one program as JSON: the sequence's block table and length, and per tensor read
/// what summarize_trace found (notebooks/pages_read.ipynb plots it).
Json trace_json(const Workload& w, int seq, const emu::dim3& traced) {
  const DecodeProblem& p = w.problem;
  Json program = Json::array();
  for (unsigned c : {traced.x, traced.y, traced.z}) program.push(static_cast<int>(c));
  Json table = Json::array();
  const bool real = seq >= 0 && seq < p.num_seqs;
  if (real)
    for (std::int64_t i = 0; i < pages_for(w.context_lens[static_cast<std::size_t>(seq)], p.block_size); ++i)
      table.push(w.block_tables[static_cast<std::size_t>(seq) * p.max_blocks_per_seq + static_cast<std::size_t>(i)]);
  const auto list = [](const auto& values) {
    Json array = Json::array();
    for (const auto value : values) array.push(static_cast<std::int64_t>(value));
    return array;
  };
  Json reads = Json::array();
  for (const TraceRead& r : summarize_trace(w, seq)) {
    Json read = Json::object();
    read.set("kernel", r.kernel).set("tensor", r.tensor).set("elements", r.elements);
    read.set("lowest_index", r.lowest).set("highest_index", r.highest);
    if (r.cache) {
      read.set("pages", list(r.pages)).set("kv_heads", list(r.kv_heads)).set("tokens", list(r.tokens));
      read.set("foreign_pages", list(r.foreign));
    }
    reads.push(std::move(read));
  }
  Json trace = Json::object();
  trace.set("program", std::move(program)).set("sequence", seq);
  trace.set("context_len", real ? Json(w.context_lens[static_cast<std::size_t>(seq)]) : Json());
  trace.set("block_size", p.block_size).set("block_table", std::move(table)).set("reads", std::move(reads));
  return trace;
}

Flags parse_flags(int step, int argc, char** argv, std::string_view own_flags) {
  const KernelEntry& entry = kernel(step, Backend::emulator);
  Flags f;
  f.spec.fp8_kv = entry.runs_fp8_kv;  // a step that reads fp8 K/V runs them unless told otherwise
  int batch = -1;
  std::vector<int> contexts;
  bool named = false;
  std::vector<std::string> changed;  // the flags that change the workload, in order
  static constexpr std::string_view kWorkloadFlags[] = {"--batch", "--context", "--q-heads", "--kv-heads", "--head-dim",
                                                        "--page",  "--dtype",   "--seed",    "--kv-dtype", "--layout"};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (std::find(std::begin(kWorkloadFlags), std::end(kWorkloadFlags), flag) != std::end(kWorkloadFlags))
      changed.push_back(flag);
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw_argument("flags", flag, "a value after it", "nothing");
      return argv[++i];
    };
    require_knob_flag(entry, flag);  // a knob this step does not have is a bad flag
    if (flag == "--help" || flag == "-h") {
      std::printf(kUsage, argv[0], knob_help(entry).c_str());
      if (!own_flags.empty()) std::printf("this step's own (each alone on the command line)\n%.*s", static_cast<int>(own_flags.size()), own_flags.data());
      std::exit(0);
    } else if (flag == "--workload") {
      // A named workload replaces the whole spec: a flag before it would be lost without a word.
      if (!changed.empty()) throw_argument("flags", flag, "before the flags that change the workload", cat("after ", changed.front()));
      const WorkloadSpec named_one = named_spec(value());
      f.spec = named_one;
      named = true;
    } else if (flag == "--batch") batch = parse_at_least(flag, value(), 0);
    else if (flag == "--context") contexts = parse_list(flag, value(), 0);
    else if (flag == "--q-heads") f.spec.num_q_heads = parse_at_least(flag, value(), 1);
    else if (flag == "--kv-heads") f.spec.num_kv_heads = parse_at_least(flag, value(), 1);
    else if (flag == "--head-dim") f.spec.head_dim = parse_at_least(flag, value(), 1);
    else if (flag == "--page") f.spec.block_size = parse_at_least(flag, value(), 1);
    else if (flag == "--dtype") {
      f.spec.dtype = parse_dtype(value(), flag);
      f.dtype_given = true;
    }
    else if (flag == "--seed") {
      f.spec.seed = static_cast<std::uint64_t>(parse_at_least(flag, value(), 0));
      f.seed_given = true;
    }
    else if (flag == "--kv-dtype") {
      const std::string kv = value();
      if (kv == "e4m3" || kv == "fp8") f.spec.fp8_kv = true;
      else if (kv == "same") f.spec.fp8_kv = false;
      else throw_argument("flags", flag, "e4m3 or same", kv);
    }
    else if (flag == "--layout") {
      const std::string layout = value();
      if (layout == "hnd") f.spec.layout = LayoutKind::hnd;
      else if (layout == "nhd") f.spec.layout = LayoutKind::nhd;
      else throw_argument("flags", flag, "hnd or nhd", layout);
    } else if (flag == "--threads") expand(f.options, parse_list(flag, value()), &KernelOptions::threads_per_block);
    else if (flag == "--splits") expand(f.options, parse_list(flag, value()), &KernelOptions::num_splits);
    else if (flag == "--partition") expand(f.options, parse_list(flag, value()), &KernelOptions::partition_tokens);
    else if (flag == "--tile") expand(f.options, parse_list(flag, value()), &KernelOptions::tile_tokens);
    else if (flag == "--variant") expand(f.options, parse_list(flag, value()), &KernelOptions::variant);
    else if (flag == "--adversarial") f.adversarial = true;
    else if (flag == "--no-gpu") f.run_gpu = false;
    else if (flag == "--quiet") f.quiet = true;
    else if (flag == "--runs") f.runs = parse_at_least(flag, value(), 0);
    else if (flag == "--json") f.json_path = value();
    else if (flag == "--trace") {
      const std::vector<int> at = parse_list(flag, value(), 0);
      if (at.size() < 2 || at.size() > 3)
        throw_argument("flags", flag, "SEQ,HEAD or SEQ,HEAD,Z", cat(at.size(), at.size() == 1 ? " number" : " numbers"));
      f.trace = true;
      f.trace_at = emu::dim3(static_cast<unsigned>(at[0]), static_cast<unsigned>(at[1]),
                                static_cast<unsigned>(at.size() == 3 ? at[2] : 0));
    } else {
      throw_argument("flags", "flag", "one of the flags --help lists", flag);
    }
  }
  if (!named) f.spec.name = "custom";
  // A named workload that flags changed is another workload: its name says so.
  if (named && !changed.empty()) {
    std::string list;
    for (const std::string& flag : changed)
      if (list.find(flag) == std::string::npos) list += (list.empty() ? "" : " ") + flag;
    f.spec.name += cat(" (changed by ", list, ")");
  }
  // Both set the split count, and the kernels would take --splits without a word.
  for (const KernelOptions& o : f.options)
    if (o.num_splits > 0 && o.partition_tokens > 0)
      throw_argument("flags", "--partition", "0 where --splits is given (each sets the split count)",
                     cat(o.partition_tokens, " beside --splits ", o.num_splits));
  if (f.spec.num_q_heads % f.spec.num_kv_heads != 0)
    throw_argument("flags", "--q-heads", cat("a multiple of --kv-heads (", f.spec.num_kv_heads, ": each KV head serves a whole group)"),
                   cat(f.spec.num_q_heads));
  if (contexts.size() == 1 && batch > 0) contexts.assign(static_cast<std::size_t>(batch), contexts[0]);
  if (!contexts.empty()) {
    if (batch > 0 && static_cast<int>(contexts.size()) != batch)
      throw_argument("flags", "--context", cat(batch, " values (one per sequence) or one"), cat(contexts.size(), " values"));
    f.spec.context_lens = contexts;
  } else if (batch >= 0) {
    std::vector<int> cycled;  // keep the debug workload's ragged pattern, repeated to the batch size
    for (int s = 0; s < batch; ++s) cycled.push_back(f.spec.context_lens[static_cast<std::size_t>(s) % f.spec.context_lens.size()]);
    f.spec.context_lens = cycled;
  }
  if (f.spec.context_lens == debug_spec().context_lens && f.spec.name == "custom" && !named) f.spec.name = "debug";
  return f;
}

}  // namespace

int kernel_step_main(int step, int argc, char** argv, std::string_view own_flags) {
  Flags flags;
  try {
    flags = parse_flags(step, argc, argv, own_flags);
    emu::thread_order();  // PAGEDATTN_EMU_SHUFFLE is an argument too: a bad value throws here
  } catch (const Error& bad) {
    std::fprintf(stderr, "%s: %s\n(see --help)\n", argv[0], bad.what());
    return exit_bad_argument;
  }
  try {
    if (!flags.json_path.empty()) require_writable(flags.json_path);  // before the run, not after it
  } catch (const Error& unwritable) {
    std::fprintf(stderr, "%s: --json: %s\n", argv[0], unwritable.what());
    return exit_fault;
  }
  try {
    if (!flags.dtype_given && !kernel(step, Backend::emulator).runs_f32) flags.spec.dtype = DType::bf16;
    std::vector<WorkloadSpec> specs;
    if (flags.adversarial) {
      AdversarialOptions adversarial;
      adversarial.dtype = flags.spec.dtype;
      adversarial.head_dim = flags.spec.head_dim;
      adversarial.block_size = flags.spec.block_size;
      adversarial.fp8_kv = flags.spec.fp8_kv;
      if (flags.seed_given) adversarial.seed = flags.spec.seed;
      specs = adversarial_specs(adversarial);
    } else {
      specs.push_back(flags.spec);
    }
    StepRunSettings settings;
    settings.run_gpu = flags.run_gpu;
    settings.gpu_timed_runs = flags.runs;
    const bool gpu_here = flags.run_gpu && cuda_built() && gpu::available();
    // The roof only matters when timing (and a 1 GiB sweep is slow under compute-sanitizer).
    if (gpu_here && flags.runs > 0) settings.roof_gbps = gpu::measure_roof_gbps(std::size_t{1} << 30, 10);

    const KernelEntry& entry = kernel(step, Backend::emulator);
    const emu::dim3 traced = entry.heads_first ? emu::dim3(flags.trace_at.y, flags.trace_at.x, flags.trace_at.z)
                                               : flags.trace_at;  // the traced program's grid coordinates
    const Stamp stamp = Stamp::collect(gpu_here);
    Json results = Json::array();
    std::vector<StepReport> reports;
    bool all_ok = true, any_wrong = false, any_refused = false, any_fault = false;
    int unchecked = 0;  // workloads (with their knobs) that no backend checked
    for (const WorkloadSpec& spec : specs) {
      const Workload workload = make_workload_or_explain(spec);
      const bool big = workload.problem.cache_elems() > (std::int64_t{1} << 26);
      StepRunSettings these = settings;
      if (big) {  // the emulator would take minutes and the full oracle long: GPU, sampled rows
        these.run_emulator = false;
        these.sample = true;
      }
      for (const KernelOptions& options : flags.options) {
        if (!big && flags.trace) emu::trace_program(traced.x, traced.y, traced.z);
        const StepReport report = run_step(step, workload, options, these);
        all_ok = all_ok && report.ok;
        any_fault = any_fault || report.faulted;
        any_wrong = any_wrong || (!report.ok && !report.faulted);
        any_refused = any_refused || report.refused;
        if (!report.checked()) ++unchecked;
        if (!flags.quiet || !report.ok || report.refused || !report.checked()) {
          std::cout << entry.name << " on '" << spec.name << "': " << describe(workload.problem) << '\n';
          if (flags.options.size() > 1) std::cout << "knobs: " << describe_knobs(options) << '\n';
          print_step_table({report}, std::cout);
          const double floor_s = settings.roof_gbps > 0 ? static_cast<double>(report.emulator_bytes) / (settings.roof_gbps * 1e9) : 0;
          if (floor_s > 0) std::cout << "  predicted floor (emulator bytes / measured roof): " << format_seconds(floor_s) << '\n';
          std::cout << "  bytes a decode step must move: " << format_bytes(static_cast<double>(workload.bytes_moved()));
          if (report.emulator_ran) std::cout << "; the emulator counted " << format_bytes(static_cast<double>(report.emulator_bytes));
          std::cout << '\n';
          print_launch(step, workload, options, gpu_here, std::cout);
          std::cout << '\n';
        }
        Json row = Json::object();
        row.set("workload", spec.name).set("problem", describe(workload.problem));
        if (flags.trace) {
          const int seq = static_cast<int>(flags.trace_at.x);
          const std::string note = big ? "(not traced: the emulator skips a workload this big)"
                                       : trace_grid_note(entry, workload, options, traced);
          if (!flags.quiet) std::cout << "trace of program " << traced.x << ',' << traced.y << ',' << traced.z
                                      << " (sequence " << seq << "):\n"
                                      << describe_trace(workload, seq, note) << '\n';
          row.set("trace", big ? Json() : trace_json(workload, seq, traced));
          emu::clear_trace();
        }
        // The knobs as they ran (the kernel's choices filled in: the GPU's plan where the GPU ran,
        // else the emulator's, as knobs_from says); null for a knob the step does not have, and
        // for every knob of a run that did not happen.
        const auto knob = [&](Knob bit, int KernelOptions::*field) {
          return report.ran && (entry.knobs & bit) != 0 ? Json((*report.ran).*field) : Json();
        };
        row.set("knobs_from", report.gpu_ran ? Json("gpu") : report.emulator_ran ? Json("emulator") : Json());
        row.set("threads_per_block", knob(knob_threads, &KernelOptions::threads_per_block));
        row.set("num_splits", knob(knob_splits, &KernelOptions::num_splits));
        row.set("partition_tokens", knob(knob_partition, &KernelOptions::partition_tokens));
        row.set("tile_tokens", knob(knob_tile, &KernelOptions::tile_tokens));
        row.set("variant", knob(knob_variant, &KernelOptions::variant));
        // What a backend measured; null where it did not run (refused, faulted, skipped), so no
        // reader mistakes a missing number for a perfect zero.
        const auto measured = [](bool ran, Json value) { return ran ? value : Json(); };
        const bool emu = report.emulator_ran, gpu = report.gpu_ran, timed = gpu && report.gpu_seconds > 0;
        row.set("bytes_moved", workload.bytes_moved()).set("oracle_seconds", report.oracle_seconds);
        row.set("emulator_status", report.emulator_status);
        row.set("emulator_max_abs_error", measured(emu, report.emulator_error));
        row.set("emulator_seconds", measured(emu, report.emulator_seconds));
        row.set("emulator_bytes", measured(emu, report.emulator_bytes));
        row.set("emulator_times_minimum_bytes", measured(emu, report.times_minimum_bytes()));
        row.set("gpu_status", report.gpu_status).set("gpu_max_abs_error", measured(gpu, report.gpu_error));
        row.set("gpu_vs_emulator", measured(gpu && emu, report.gpu_vs_emulator));
        row.set("gpu_median_seconds", measured(timed, report.gpu_seconds));
        row.set("gpu_gbps", measured(timed, report.gpu_gbps));
        row.set("roof_gbps", measured(report.roof_gbps > 0, report.roof_gbps));
        // ok: null where no backend checked the workload (nothing is known), not true.
        row.set("ok", report.checked() ? Json(report.ok && !report.refused) : Json());
        row.set("refused", report.refused).set("faulted", report.faulted);
        results.push(std::move(row));
        reports.push_back(report);
      }
    }
    if (flags.adversarial && !flags.quiet) {
      std::cout << "adversarial set: " << specs.size() << " workloads, " << (all_ok ? "all ok" : "FAILURES") << '\n';
    }
    if (!flags.json_path.empty()) {
      Json doc = Json::object();
      doc.set("stamp", stamp.to_json()).set("step", step).set("kernel", entry.name).set("results", std::move(results));
      write_file_whole(flags.json_path, [&](std::ostream& file) {
        doc.write(file);
        file << '\n';
      });
    }
    if (unchecked > 0)
      std::cout << "not checked: " << unchecked << (unchecked == 1 ? " run" : " runs")
                << " that no backend ran (the emulator skips a workload this big; "
                << (flags.run_gpu ? "and there is no GPU here" : "and --no-gpu asked for no GPU run") << ")\n";
    return any_fault ? exit_fault : any_wrong ? exit_wrong : any_refused ? exit_refused : unchecked > 0 ? exit_unchecked : exit_ok;
  } catch (const Error& error) {
    std::fprintf(stderr, "%s: %s\n", argv[0], error.what());
    return exit_fault;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: out of host memory\n", argv[0]);
    return exit_fault;
  }
}

}  // namespace pa
