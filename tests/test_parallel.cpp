// The host's threads: common/parallel.h's parallel_for, and the oracle's rows for a sample of
// sequences (harness/harness.h, oracle_rows), whose pieces run on it.
#include "tests/catch_compat.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/parallel.h"
#include "common/workload.h"
#include "harness/harness.h"
#include "tests/test_util.h"

namespace {

using pa::OracleRows;
using pa::parallel_for;
using pa::Workload;
using pa::WorkloadSpec;

TEST_CASE("parallel_for: every index runs exactly once, on one thread or many", "[parallel]") {
  for (int threads : {0, 1, 2, 3, 8, 64}) {
    std::vector<std::atomic<int>> runs(1000);
    parallel_for(static_cast<std::int64_t>(runs.size()), threads, [&](std::int64_t i) { ++runs[static_cast<std::size_t>(i)]; });
    for (std::size_t i = 0; i < runs.size(); ++i) {
      INFO("threads " << threads << ", index " << i);
      REQUIRE(runs[i].load() == 1);
    }
  }
  int calls = 0;
  parallel_for(0, 4, [&](std::int64_t) { ++calls; });
  REQUIRE(calls == 0);
}

TEST_CASE("parallel_for: the lowest index that throws is the one rethrown, on every run", "[parallel]") {
  // Indices 700 and 300 throw; 300 must win however the threads interleave, and every index
  // below it must still have run.
  for (int repeat = 0; repeat < 50; ++repeat) {
    std::vector<std::atomic<int>> runs(1000);
    std::string message;
    try {
      parallel_for(1000, 8, [&](std::int64_t i) {
        ++runs[static_cast<std::size_t>(i)];
        if (i == 700 || i == 300) throw std::runtime_error("piece " + std::to_string(i));
      });
    } catch (const std::runtime_error& error) {
      message = error.what();
    }
    INFO("repeat " << repeat);
    REQUIRE(message == "piece 300");
    for (std::size_t i = 0; i <= 300; ++i) {
      INFO("index " << i);
      REQUIRE(runs[i].load() == 1);
    }
  }
  // One thread: the first that throws, and nothing after it runs.
  std::vector<int> runs(10, 0);
  REQUIRE_THROWS_WITH(parallel_for(10, 1,
                                   [&](std::int64_t i) {
                                     ++runs[static_cast<std::size_t>(i)];
                                     if (i >= 4) throw std::runtime_error("piece " + std::to_string(i));
                                   }),
                      "piece 4");
  REQUIRE(runs == std::vector<int>{1, 1, 1, 1, 1, 0, 0, 0, 0, 0});
}

/// The index of the first element where \p a and \p b differ in their bits, or -1.
template <class T>
long first_bit_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return static_cast<long>(i);
  return -1;
}

/// Checks \p sample against \p whole: the sampled sequences' rows the same bits, the others NaN.
template <class T>
void require_sampled(const std::vector<T>& whole, const std::vector<T>& sample, const pa::DecodeProblem& p,
                     const std::vector<int>& sequences, const char* loop) {
  INFO(loop);
  REQUIRE(sample.size() == whole.size());
  const std::size_t row = static_cast<std::size_t>(p.num_q_heads) * p.head_dim;
  for (int seq = 0; seq < p.num_seqs; ++seq) {
    const bool sampled = std::find(sequences.begin(), sequences.end(), seq) != sequences.end();
    const auto begin = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(seq) * row);
    const std::vector<T> got(sample.begin() + begin, sample.begin() + begin + static_cast<std::ptrdiff_t>(row));
    INFO("sequence " << seq << (sampled ? " (sampled)" : " (not sampled)"));
    if (sampled) {
      const std::vector<T> want(whole.begin() + begin, whole.begin() + begin + static_cast<std::ptrdiff_t>(row));
      INFO("first element whose bits differ: " << first_bit_difference(want, got));
      REQUIRE(first_bit_difference(want, got) == -1);
    } else {
      for (std::size_t i = 0; i < row; ++i) {
        INFO("element " << i);
        REQUIRE(std::isnan(got[i]));
      }
    }
  }
}

TEST_CASE("oracle_rows: a sample's rows are the whole oracle's rows bit for bit, NaN elsewhere", "[parallel][oracle]") {
  // Each sampled (sequence, KV head) and each loop runs as a piece of its own on every thread;
  // the rows must not notice: groups of 1 (MHA), 3 and 8 (MQA over one KV head), every storage
  // type, fp8 K/V, both layouts, a sampled sequence of context 0 and one with a NaN in its K.
  struct Case {
    const char* name;
    int q_heads, kv_heads;
    pa::DType dtype;
    pa::LayoutKind layout;
    bool fp8_kv;
    std::vector<int> lens;
    int nan_sequence;
    std::vector<int> sample;
  };
  const std::vector<Case> cases = {
      {"MHA f32 hnd", 4, 4, pa::DType::f32, pa::LayoutKind::hnd, false, {37, 1, 16, 100}, -1, {0, 2, 3}},
      {"group 3 bf16 nhd", 6, 2, pa::DType::bf16, pa::LayoutKind::nhd, false, {70, 33, 5, 129, 64}, -1, {1, 3}},
      {"MQA group 8 f16", 8, 1, pa::DType::f16, pa::LayoutKind::hnd, false, {200, 0, 17}, -1, {0, 1, 2}},
      {"fp8 K/V bf16 q", 8, 2, pa::DType::bf16, pa::LayoutKind::hnd, true, {48, 96, 3}, -1, {2, 0}},
      {"NaN in K", 4, 2, pa::DType::bf16, pa::LayoutKind::hnd, false, {40, 50, 60}, 1, {1, 2}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    WorkloadSpec spec;
    spec.num_q_heads = c.q_heads;
    spec.num_kv_heads = c.kv_heads;
    spec.dtype = c.dtype;
    spec.layout = c.layout;
    spec.fp8_kv = c.fp8_kv;
    spec.context_lens = c.lens;
    spec.nan_sequence = c.nan_sequence;
    const Workload w = pa::make_workload(spec);
    const OracleRows whole = pa::oracle_rows(w);
    const OracleRows sample = pa::oracle_rows(w, c.sample);
    REQUIRE(sample.sequences == c.sample);
    require_sampled(whole.exact, sample.exact, w.problem, c.sample, "exact");
    require_sampled(whole.plain, sample.plain, w.problem, c.sample, "plain");
    REQUIRE(sample.plain_storage_weights.empty() == (c.dtype == pa::DType::f32));
    if (c.dtype != pa::DType::f32)
      require_sampled(whole.plain_storage_weights, sample.plain_storage_weights, w.problem, c.sample, "plain, storage weights");
  }
}

TEST_CASE("oracle_rows: a sample with a bad context length names it, as the whole oracle does", "[parallel][oracle]") {
  WorkloadSpec spec;
  spec.context_lens = {20, 30, 40};
  Workload w = pa::make_workload(spec);
  w.context_lens[1] = w.problem.max_context_len + 1;  // past every table row's pages
  pa::DecodeView view = w.host_view();
  const std::string whole = pa::testing::error_message([&] { (void)pa::oracle_rows(view); });
  const std::string sample = pa::testing::error_message([&] { (void)pa::oracle_rows(view, {0, 1, 2}); });
  INFO("whole: " << whole);
  INFO("sample: " << sample);
  REQUIRE(whole.find("reference::paged_attention") != std::string::npos);
  REQUIRE(sample.find("reference::paged_attention") != std::string::npos);
  REQUIRE(sample.find("context_lens") != std::string::npos);
}

}  // namespace
