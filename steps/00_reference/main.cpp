// Step 00: attention for one decode token, computed three ways on the CPU.
//
//   out[s][h] = softmax(q[s][h] . K[s][g]^T * scale) . V[s][g],   g = kv_head_of(h)
//
// 1. the paged oracle (reference::paged_attention): double, token by token through the table;
// 2. the dense oracle (reference::dense_attention): the same math on K/V gathered into
//    contiguous rows, so paging itself is checked (the two must agree to 1e-12);
// 3. the plainest float loop (reference::plain_float_attention): the precision a kernel works
//    in; its error against the oracle is the yardstick of docs/design/CORRECTNESS.md (a kernel may be at
//    most 3x worse), and it must pass the storage type's tolerance.
//
// Run:  step00_reference                      MHA, GQA and MQA on a small seeded batch
//       step00_reference --kv-heads 1 --dtype bf16 --context 100
//       step00_reference --quiet              what ctest runs: silent, exit code only
//
// The batch comes from the workload library (common/workload.h): pages from a seeded shuffle
// of the pool, and every slot no context covers holds NaN, so a finite answer also shows that
// nothing outside a context was read.

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "common/compare.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/kernel_api.h"
#include "common/problem.h"
#include "common/workload.h"
#include "reference/oracle.h"

namespace {

constexpr std::string_view kProgram = "step00_reference";
constexpr double kPagedVsDenseLimit = 1e-12;

/// Command-line settings.
struct Options {
  int num_seqs = 3;
  int num_q_heads = 4;
  int num_kv_heads = 0;  ///< 0: show MHA, GQA and MQA in turn
  int head_dim = 64;
  int context = 37;      ///< the longest context; the others are shorter (a ragged batch)
  int block_size = 16;
  pa::DType dtype = pa::DType::f32;
  std::uint64_t seed = 1;
  bool quiet = false;
  bool help = false;
};

void print_help() {
  std::printf(
      "step00_reference: attention for one decode token, computed three ways (paged oracle,\n"
      "dense oracle, plain float loop), for MHA, GQA and MQA.\n\n"
      "  --seqs N       sequences in the batch (default 3)\n"
      "  --q-heads N    query heads (default 4)\n"
      "  --kv-heads N   KV heads; a divisor of --q-heads (default: show MHA, GQA and MQA)\n"
      "  --head-dim N   channels per head (default 64)\n"
      "  --context N    the longest context; sequence s gets N - s*N/seqs tokens (default 37)\n"
      "  --page N       tokens per page (default 16)\n"
      "  --dtype T      storage of q, K, V and out: f32, f16 or bf16 (default f32)\n"
      "  --seed N       seed of the values and of the page shuffle (default 1)\n"
      "  --quiet        print nothing on success (the exit code says it all)\n"
      "  --help         this text\n\n"
      "Exit code 0 when paged and dense oracles agree to 1e-12 and the float loop is within the\n"
      "storage type's tolerance, 1 when not, 2 on a bad argument.\n");
}

/// Parses a whole decimal integer in [minimum, maximum]; throws ArgumentError naming the flag.
long long parse_integer(std::string_view flag, const char* text, long long minimum, long long maximum) {
  const std::string expected = pa::cat("an integer in [", minimum, ", ", maximum, "]");
  if (text == nullptr) pa::throw_argument(kProgram, flag, expected, "nothing");
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || value < minimum || value > maximum)
    pa::throw_argument(kProgram, flag, expected, pa::cat('\'', text, '\''));
  return value;
}

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    auto integer = [&](long long minimum, long long maximum) {
      ++i;
      return static_cast<int>(parse_integer(flag, value, minimum, maximum));
    };
    if (flag == "--help" || flag == "-h") options.help = true;
    else if (flag == "--quiet") options.quiet = true;
    else if (flag == "--seqs") options.num_seqs = integer(0, 4096);
    else if (flag == "--q-heads") options.num_q_heads = integer(1, 1024);
    else if (flag == "--kv-heads") options.num_kv_heads = integer(1, 1024);
    else if (flag == "--head-dim") options.head_dim = integer(1, 4096);
    else if (flag == "--context") options.context = integer(0, 1 << 20);
    else if (flag == "--page") options.block_size = integer(1, 4096);
    else if (flag == "--seed") options.seed = static_cast<std::uint64_t>(integer(0, INT32_MAX));
    else if (flag == "--dtype") {
      if (value == nullptr) pa::throw_argument(kProgram, flag, "f32, f16 or bf16", "nothing");
      options.dtype = pa::parse_dtype(value, flag);
      ++i;
    } else {
      pa::throw_argument(kProgram, "arguments", "a known flag (see --help)", pa::cat('\'', flag, '\''));
    }
  }
  return options;
}

/// A ragged batch with scattered pages, built like every workload of the project
/// (common/workload.h): values in [-1, 1]; slots outside every context (the tail of a last
/// page, spare pages) hold NaN; unused table entries hold INT32_MAX. Throws ArgumentError for
/// shapes that make no sense.
pa::Workload build(const Options& options, int num_kv_heads) {
  pa::WorkloadSpec spec;
  spec.name = "step00";
  spec.num_q_heads = options.num_q_heads;
  spec.num_kv_heads = num_kv_heads;
  spec.head_dim = options.head_dim;
  spec.block_size = options.block_size;
  spec.dtype = options.dtype;
  spec.seed = options.seed;
  spec.spare_blocks = 2;
  spec.table_slack = 0;
  spec.context_lens.clear();
  for (int seq = 0; seq < options.num_seqs; ++seq)
    spec.context_lens.push_back(options.context - static_cast<int>(std::int64_t{options.context} * seq / options.num_seqs));
  return pa::make_workload(spec);
}

/// Which head ratio a KV-head count gives.
const char* ratio_name(int num_q_heads, int num_kv_heads) {
  if (num_kv_heads == num_q_heads) return "MHA";
  if (num_kv_heads == 1) return "MQA";
  return "GQA";
}

/// Prints, for sequence 0 and query head 0, the steps of the formula with numbers.
void show_worked_example(const pa::Workload& t, const std::vector<double>& out) {
  const pa::DecodeProblem& p = t.problem;
  const int len = t.context_lens[0];
  if (len == 0) return;
  const pa::DecodeView view = t.host_view();
  std::vector<double> keys = pa::reference::gather_cache(view, t.key_cache.data());
  std::vector<double> logits(static_cast<std::size_t>(len));
  for (int token = 0; token < len; ++token) {
    double dot = 0.0;
    for (int d = 0; d < p.head_dim; ++d)
      dot += pa::load_as_float(t.query.data(), p.dtype, static_cast<std::size_t>(d)) *
             keys[static_cast<std::size_t>(token) * static_cast<std::size_t>(p.head_dim) + static_cast<std::size_t>(d)];
    logits[static_cast<std::size_t>(token)] = dot * p.scale;
  }
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  double total = 0.0;
  for (double logit : logits) total += std::exp(logit - max_logit);
  std::printf("seq 0, head 0 (reads KV head 0), %d tokens:\n", len);
  std::printf("  logits = q.k * scale (scale %.4g): ", static_cast<double>(p.scale));
  for (int token = 0; token < std::min(len, 6); ++token) std::printf("%+.3f ", logits[static_cast<std::size_t>(token)]);
  std::printf("%s\n", len > 6 ? "..." : "");
  std::printf("  weights = exp(logit - %.3f) / %.4f: ", max_logit, total);
  for (int token = 0; token < std::min(len, 6); ++token)
    std::printf("%.3f ", std::exp(logits[static_cast<std::size_t>(token)] - max_logit) / total);
  std::printf("%s (they sum to 1)\n", len > 6 ? "..." : "");
  std::printf("  out = sum of weights * V rows: ");
  for (int d = 0; d < std::min(p.head_dim, 6); ++d) std::printf("%+.4f ", out[static_cast<std::size_t>(d)]);
  std::printf("%s\n", p.head_dim > 6 ? "..." : "");
}

/// Runs the three computations for one head ratio and prints the table; true when all agree.
bool run_ratio(const Options& options, int num_kv_heads) {
  const pa::Workload t = build(options, num_kv_heads);
  const pa::DecodeProblem& p = t.problem;
  const pa::DecodeView view = t.host_view();

  const std::vector<double> paged = pa::reference::paged_attention(view);
  const std::vector<double> keys = pa::reference::gather_cache(view, t.key_cache.data());
  const std::vector<double> values = pa::reference::gather_cache(view, t.value_cache.data());
  std::vector<double> query(static_cast<std::size_t>(p.query_elems()));
  for (std::size_t i = 0; i < query.size(); ++i) query[i] = pa::load_as_float(t.query.data(), p.dtype, i);
  const std::vector<double> dense = pa::reference::dense_attention(p, query, keys, values, t.context_lens);
  const std::vector<float> plain = pa::reference::plain_float_attention(view);

  // The float loop's output, stored as a kernel would store it, checked like a kernel.
  std::vector<std::byte> plain_stored(plain.size() * pa::dtype_size(p.dtype));
  for (std::size_t i = 0; i < plain.size(); ++i) pa::store_from_float(plain_stored.data(), p.dtype, i, plain[i]);
  const pa::CompareResult plain_check =
      pa::compare_to_reference(p, paged, plain_stored.data(), pa::Tolerance::for_dtype(p.dtype));

  // Paged against dense: NaN counts as a failure (a NaN difference is never "small").
  double worst_paged_dense = 0.0;
  for (std::size_t i = 0; i < paged.size(); ++i) {
    const double diff = std::abs(paged[i] - dense[i]);
    worst_paged_dense = std::isnan(diff) ? std::numeric_limits<double>::infinity() : std::max(worst_paged_dense, diff);
  }
  const bool paged_ok = worst_paged_dense <= kPagedVsDenseLimit;

  if (!options.quiet) {
    std::printf("\n== %s: %d query heads, %d KV heads (groups of %d) ==\n", ratio_name(p.num_q_heads, p.num_kv_heads),
                p.num_q_heads, p.num_kv_heads, p.group_size());
    std::printf("problem: %s\n", pa::describe(p).c_str());
    std::printf("kv_head_of(h) = h / %d:", p.group_size());
    for (int head = 0; head < p.num_q_heads && head < 16; ++head) std::printf(" h%d->g%d", head, p.kv_head_of(head));
    std::printf("%s\n", p.num_q_heads > 16 ? " ..." : "");
    if (p.num_seqs > 0) {
      std::printf("block table of seq 0 (context %d; token t is in page table[t / %d], slot t %% %d):",
                  t.context_lens[0], p.block_size, p.block_size);
      for (std::int64_t i = 0; i < pa::pages_for(t.context_lens[0], p.block_size); ++i)
        std::printf(" %d", t.block_tables[static_cast<std::size_t>(i)]);
      std::printf("\n");
      show_worked_example(t, paged);
    }
    std::printf(" seq head  kv context |paged-dense| |float-oracle|\n");
    for (int seq = 0; seq < p.num_seqs; ++seq)
      for (int head = 0; head < p.num_q_heads; ++head) {
        double paged_dense = 0.0;
        double float_oracle = 0.0;
        for (int d = 0; d < p.head_dim; ++d) {
          const std::size_t i =
              (static_cast<std::size_t>(seq) * static_cast<std::size_t>(p.num_q_heads) + static_cast<std::size_t>(head)) *
                  static_cast<std::size_t>(p.head_dim) +
              static_cast<std::size_t>(d);
          paged_dense = std::max(paged_dense, std::abs(paged[i] - dense[i]));
          float_oracle = std::max(float_oracle, std::abs(static_cast<double>(plain[i]) - paged[i]));
        }
        std::printf("%4d %4d %3d %7d %13.1e %14.1e\n", seq, head, p.kv_head_of(head),
                    t.context_lens[static_cast<std::size_t>(seq)], paged_dense, float_oracle);
      }
    std::printf("paged vs dense oracle: max |d| %.1e (limit %.0e) %s\n", worst_paged_dense, kPagedVsDenseLimit,
                paged_ok ? "ok" : "FAIL");
    std::printf("plain float loop vs oracle (%s tolerance): %s\n", std::string(pa::dtype_name(p.dtype)).c_str(),
                plain_check.summary().c_str());
  } else if (!paged_ok || !plain_check.ok) {
    std::printf("%s (%s): paged vs dense max |d| %.1e; float loop %s\n", ratio_name(p.num_q_heads, p.num_kv_heads),
                pa::describe(p).c_str(), worst_paged_dense, plain_check.summary().c_str());
  }
  return paged_ok && plain_check.ok;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse_options(argc, argv);
    if (options.help) {
      print_help();
      return 0;
    }
    // The head ratios to show: the one asked for, or MHA, GQA (groups of 2) and MQA.
    std::vector<int> kv_head_counts;
    if (options.num_kv_heads > 0) {
      kv_head_counts = {options.num_kv_heads};
    } else {
      kv_head_counts.push_back(options.num_q_heads);
      if (options.num_q_heads % 2 == 0 && options.num_q_heads > 2) kv_head_counts.push_back(options.num_q_heads / 2);
      if (options.num_q_heads > 1) kv_head_counts.push_back(1);
    }
    if (!options.quiet)
      std::printf("step 00: attention for one decode token\n"
                  "  out[s][h] = softmax(q[s][h] . K[s][g]^T * scale) . V[s][g],  g = kv_head_of(h)\n"
                  "  three ways: paged oracle (double, through the block table), dense oracle (double,\n"
                  "  gathered K/V), plain float loop (fp32, two passes), stored as %s\n",
                  std::string(pa::dtype_name(options.dtype)).c_str());
    bool all_ok = true;
    for (int kv_heads : kv_head_counts) all_ok = run_ratio(options, kv_heads) && all_ok;
    if (!options.quiet) std::printf("\n%s\n", all_ok ? "all checks passed" : "FAILED");
    return all_ok ? 0 : 1;
  } catch (const pa::Error& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 2;
  }
}
