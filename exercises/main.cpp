// The exercises' runner: runs a broken kernel of exercises/ in the emulator on a small
// workload, compares what it wrote with the oracle and prints what the emulator and the oracle
// said. docs/pages/debugging.md is the lesson; `exercise --help` lists the commands.
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/error.h"
#include "common/workload.h"
#include "exercises/01_missing_barrier.cuh"
#include "exercises/02_read_past_context.cuh"
#include "exercises/03_off_by_one_page.cuh"
#include "exercises/04_shuffle_mask.cuh"
#include "exercises/05_reduction_lanes.cuh"
#include "exercises/06_async_before_wait.cuh"
#include "exercises/07_thread_order.cuh"
#include "exercises/08_fragment_layout.cuh"
#include "exercises/09_stale_accumulator.cuh"
#include "exercises/10_empty_split.cuh"
#include "reference/oracle.h"

namespace pa::PA_KERNELS::exercises {
namespace {

/// One exercise: its kernel (in exercises/<name>.cuh), what the kernel does, and a hint that
/// says where to look, not what to change.
struct Exercise {
  const char* name;
  const char* idea;
  const char* hint;
  ExerciseKernel kernel;  ///< launched on a grid (num_seqs, num_q_heads)
  int threads;            ///< of one program
  std::size_t dynamic_shared_bytes = 0;
  /// The output is held to this type's tolerance (Tolerance::for_dtype): f32, the storage, unless
  /// the kernel computes in a narrower type on purpose.
  DType tolerance = DType::f32;
};

const std::vector<Exercise>& all_exercises() {
  static const std::vector<Exercise> list = {
      {"01_missing_barrier",
       "64 threads score the tokens into shared memory; then thread d computes channel d from every score",
       "Which thread wrote the score that the report says was read, and when? Something must make every thread "
       "wait until all scores are written.",
       ex01::two_phase_decode, kHeadDim},
      {"02_read_past_context",
       "one thread walks the context page by page, every slot, and weighs the slots past the context by zero",
       "No fault, but NaN: where does the workload keep NaN, and what is 0 times NaN? A slot past the context "
       "must not be read at all.",
       ex02::whole_pages, 1},
      {"03_off_by_one_page",
       "one thread walks the context page by page and prefetches the first row of the next page",
       "The report names the block-table entry the bad page came from. How many entries of the row are used, "
       "and which one did the last page look up?",
       ex03::prefetch_next_page, 1},
      {"04_shuffle_mask",
       "a warp holds the query, two channels a lane, and adds the lanes' products with xor shuffles",
       "A shuffle's mask names the lanes that take part, one bit a lane. Which lanes call it here, and which "
       "does the mask name?",
       warp_decode<ex04::warp_sum>, 32},
      {"05_reduction_lanes",
       "the warp of exercise 04 adds the lanes' products with shuffles down",
       "No fault: the emulator saw nothing illegal. Which channels does the report say are wrong, which lanes "
       "own the ones that are right, and which lanes end a shuffle-down reduction with the whole sum?",
       warp_decode<ex05::warp_sum>, 32},
      {"06_async_before_wait",
       "one thread stages each K row in shared memory with asynchronous copies and reads the staged row",
       "An asynchronous copy has landed only after the wait that covers its group. Where is the wait, and "
       "where is the first read of the row?",
       ex06::staged_keys, 1, kHeadDim * sizeof(float)},
      {"07_thread_order",
       "thread 0 scores every token into global memory; then thread d computes channel d from the scores",
       "It passes in the fixed order, where thread 0 runs first. The race detector watches shared memory only; "
       "what orders thread 0's global writes before the other threads' reads?",
       ex07::scores_in_global, kHeadDim},
      {"08_fragment_layout",
       "a warp scores 8 tokens at a time with a tensor-core mma in f16 (q as A, K as B), then lane l computes "
       "channels l and l + 32; held to f16's tolerance, the precision of its scores",
       "No fault: the emulator multiplied whatever each lane gave it. B is 16 x 8, k x n: for q·Kᵀ, which of "
       "k and n is the channel and which the token, and which two elements does register r of a lane hold "
       "(mma_layout, or `step10_tensor_cores --fragments`)? Which two did this lane put there?",
       ex08::tensor_core_scores, 32, 0, DType::f16},
      {"09_stale_accumulator",
       "one thread reads each token once, keeping a running maximum, a running sum and 64 accumulators",
       "No fault, and the one-token sequence is right. Each weight was taken under the maximum of its time; "
       "when the maximum grows, what becomes of the weights already summed, and of the ones already in acc?",
       ex09::one_pass, 1},
      {"10_empty_split",
       "two warps take the two halves of the context, then warp 0 merges their maxima, sums and outputs",
       "Which sequence does the report name, and how many tokens does each warp take there? What does a warp "
       "that took none leave in shared memory, and what is 0 times that?",
       ex10::two_halves, 64},
  };
  return list;
}

/// The workload every exercise runs on, spelled out here so that it never changes under the
/// recorded reports: a context that ends inside a page (37), one token, exactly one page (16),
/// and several pages (100); two query heads a KV head; pages scattered over the pool, and NaN
/// in every slot past a context's end and every unused page (docs/design/CORRECTNESS.md).
WorkloadSpec exercise_spec() {
  return {.name = "exercises", .num_q_heads = 4, .num_kv_heads = 2, .head_dim = kHeadDim, .block_size = 16,
          .context_lens = {37, 1, 16, 100}, .dtype = DType::f32, .seed = 1, .layout = LayoutKind::hnd,
          .scatter = true, .alias = false, .pages_near_top = false, .spare_blocks = 3, .table_slack = 1,
          .poison = true};
}

std::string describe(const WorkloadSpec& spec) {
  std::ostringstream out;
  out << "contexts";
  for (std::size_t i = 0; i < spec.context_lens.size(); ++i) out << (i == 0 ? " " : ", ") << spec.context_lens[i];
  out << "; " << spec.num_q_heads << " query heads, " << spec.num_kv_heads << " KV heads; head dim " << spec.head_dim
      << "; page " << spec.block_size << "; " << dtype_name(spec.dtype) << "; seed " << spec.seed;
  return out.str();
}

/// \p text broken at spaces into lines of at most \p width characters, each after \p indent.
std::string wrap(const std::string& text, const std::string& indent, std::size_t width = 100) {
  std::string out, line;
  std::istringstream words(text);
  std::string word;
  while (words >> word) {
    if (!line.empty() && indent.size() + line.size() + 1 + word.size() > width) {
      out += indent + line + '\n';
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += indent + line + '\n';
  return out;
}

enum Outcome { solved = 0, wrong_answer = 1, fault = 4 };

/// One run of \p ex in the emulator's current thread order: "ok (...)", "FAIL ..." or
/// "FAULT" and the emulator's message.
Outcome run_once(const Exercise& ex, const Workload& workload, const std::vector<double>& oracle, std::string& report) {
  const DecodeProblem& p = workload.problem;
  std::vector<float> out(static_cast<std::size_t>(p.query_elems()), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> scratch(static_cast<std::size_t>(p.num_seqs) * p.num_q_heads * kMaxContext,
                             std::numeric_limits<float>::quiet_NaN());
  const DecodeView view = workload.host_view(out.data());
  try {
    launch_kernel(ex.name, ex.kernel, dim3(p.num_seqs, p.num_q_heads), dim3(ex.threads), ex.dynamic_shared_bytes,
                  nullptr, make_args<float>(view),
                  gspan<float>(scratch.data(), static_cast<std::int64_t>(scratch.size()), "scratch"));
  } catch (const KernelError& error) {
    report = "FAULT\n" + wrap(error.what(), "    ");
    return fault;
  }
  const CompareResult result = compare_to_reference(p, oracle, out.data(), Tolerance::for_dtype(ex.tolerance));
  report = result.summary() + '\n';
  return result.ok ? solved : wrong_answer;
}

/// Runs \p ex in the emulator's thread order (fixed unless PAGEDATTN_EMU_SHUFFLE says
/// otherwise) and, when that passes, in three shuffled orders; prints what each run said.
Outcome run(const Exercise& ex, std::FILE* out) {
  const Workload workload = make_workload(exercise_spec());
  const std::vector<double> oracle = reference::paged_attention(workload.host_view());
  const std::string number(ex.name, 2);
  std::fprintf(out, "exercise %s\n%s", ex.name, wrap(ex.idea, "  ").c_str());
  std::fprintf(out, "%s", wrap(cat("workload: ", describe(workload.spec)), "  ").c_str());
  std::fprintf(out, "  launch: grid %d x %d programs of %d thread%s\n", workload.problem.num_seqs,
               workload.problem.num_q_heads, ex.threads, ex.threads == 1 ? "" : "s");
  std::vector<emu::ThreadOrder> orders = {emu::thread_order()};
  for (std::uint64_t seed : {1, 2, 3}) orders.push_back({true, seed});
  Outcome outcome = solved;
  for (const emu::ThreadOrder& order : orders) {
    const emu::ScopedThreadOrder scoped(order);
    std::string report;
    outcome = run_once(ex, workload, oracle, report);
    std::fprintf(out, "%s", wrap(cat(emu::describe(order), ": ", report.substr(0, report.find('\n'))), "  ").c_str());
    std::fprintf(out, "%s", report.substr(report.find('\n') + 1).c_str());
    if (outcome != solved) break;
  }
  if (outcome == solved)
    std::fprintf(out, "  solved: it matches the oracle in every order above\n");
  else
    std::fprintf(out, "%s",
                 wrap(cat("not solved: fix exercises/", ex.name, ".cuh and run it again (hint: `exercise ", number,
                          " --hint`)"), "  ").c_str());
  return outcome;
}

const Exercise* find(const std::string& name) {
  for (const Exercise& ex : all_exercises()) {
    const std::string full = ex.name;
    if (name == full || name == full.substr(0, 2) || (name.size() == 1 && full.substr(0, 2) == "0" + name)) return &ex;
  }
  return nullptr;
}

int usage(std::FILE* out, int code) {
  std::fprintf(out,
               "usage: exercise                  list the exercises\n"
               "       exercise NN               run exercise NN (01 or 01_missing_barrier) in the emulator and\n"
               "                                 compare it with the oracle; exit 0 when it matches in the fixed\n"
               "                                 order and three shuffled ones, 1 on a wrong answer, 4 on a fault\n"
               "       exercise NN --hint        where to look\n"
               "       exercise --all            every exercise; exit 0 when all are solved\n"
               "       exercise --all --markdown the same, as the page docs/pages/debugging.md shows it\n"
               "The lesson: docs/pages/debugging.md; the kernels: exercises/NN_name.cuh.\n");
  return code;
}

int run_all(bool markdown) {
  int solved_count = 0;
  for (const Exercise& ex : all_exercises()) {
    if (markdown) std::printf("`exercise %.2s` (`exercises/%s.cuh`):\n\n```\n", ex.name, ex.name);
    solved_count += run(ex, stdout) == solved;
    std::printf(markdown ? "```\n\n" : "\n");
  }
  std::printf("%d of %zu exercises solved\n", solved_count, all_exercises().size());
  return solved_count == static_cast<int>(all_exercises().size()) ? 0 : 1;
}

int exercise_main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    for (const Exercise& ex : all_exercises()) std::printf("%-22s %s\n", ex.name, ex.idea);
    return 0;
  }
  if (args[0] == "--help" || args[0] == "-h") return usage(stdout, 0);
  if (args[0] == "--all") {
    if (args.size() == 1) return run_all(false);
    if (args.size() == 2 && args[1] == "--markdown") return run_all(true);
    return usage(stderr, 2);
  }
  const Exercise* ex = find(args[0]);
  if (ex == nullptr) {
    std::fprintf(stderr, "exercise: no exercise '%s' (`exercise` lists them)\n", args[0].c_str());
    return 2;
  }
  if (args.size() == 2 && args[1] == "--hint") {
    std::printf("%s", wrap(ex->hint, "").c_str());
    return 0;
  }
  if (args.size() != 1) return usage(stderr, 2);
  return run(*ex, stdout);
}

}  // namespace
}  // namespace pa::PA_KERNELS::exercises

int main(int argc, char** argv) {
  try {
    return pa::PA_KERNELS::exercises::exercise_main(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "exercise: %s\n", error.what());
    return 4;
  }
}
