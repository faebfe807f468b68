// Seeded workloads (common/workload.h): determinism, poison exactly where a kernel must not
// read, scattered / aliased / top-of-pool tables, the adversarial set and the named specs.
#include "tests/catch_compat.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/workload.h"

namespace {

using pa::ArgumentError;
using pa::Workload;
using pa::WorkloadSpec;

/// Which cache elements some sequence reads: the union over sequences of every token's row.
std::vector<char> read_mask(const Workload& workload) {
  const pa::DecodeProblem& p = workload.problem;
  std::vector<char> mask(static_cast<std::size_t>(p.cache_elems()), 0);
  for (int seq = 0; seq < p.num_seqs; ++seq)
    for (std::int64_t token = 0; token < workload.context_lens[static_cast<std::size_t>(seq)]; ++token) {
      const std::int32_t page = workload.block_tables[static_cast<std::size_t>(seq) * p.max_blocks_per_seq +
                                                      static_cast<std::size_t>(token / p.block_size)];
      for (int head = 0; head < p.num_kv_heads; ++head)
        for (int d = 0; d < p.head_dim; ++d)
          mask[static_cast<std::size_t>(p.layout.offset(page, head, token % p.block_size, d))] = 1;
    }
  return mask;
}

/// The used prefix of each table row, as page ids.
std::vector<std::vector<std::int32_t>> used_tables(const Workload& workload) {
  const pa::DecodeProblem& p = workload.problem;
  std::vector<std::vector<std::int32_t>> tables(static_cast<std::size_t>(p.num_seqs));
  for (int seq = 0; seq < p.num_seqs; ++seq) {
    const std::int64_t used = pa::pages_for(workload.context_lens[static_cast<std::size_t>(seq)], p.block_size);
    for (std::int64_t i = 0; i < used; ++i)
      tables[static_cast<std::size_t>(seq)].push_back(
          workload.block_tables[static_cast<std::size_t>(seq) * p.max_blocks_per_seq + static_cast<std::size_t>(i)]);
  }
  return tables;
}

template <class Bytes>  // the query's std::vector<std::byte> or a cache's pa::CacheBytes
float element(const Bytes& tensor, pa::DType dtype, std::size_t index) {
  return pa::load_as_float(tensor.data(), dtype, index);
}

std::vector<WorkloadSpec> every_small_spec() {
  std::vector<WorkloadSpec> specs = pa::adversarial_specs();
  specs.push_back(pa::debug_spec());
  specs.push_back(pa::tour_spec());
  return specs;
}

bool same_bytes(const Workload& a, const Workload& b) {
  return a.query == b.query && a.key_cache == b.key_cache && a.value_cache == b.value_cache &&
         a.block_tables == b.block_tables && a.context_lens == b.context_lens;
}

}  // namespace

TEST_CASE("workload: the same spec gives the same bytes", "[workload]") {
  for (const WorkloadSpec& spec : every_small_spec()) {
    CAPTURE(spec.name, spec.seed);
    REQUIRE(same_bytes(pa::make_workload(spec), pa::make_workload(spec)));
  }
  WorkloadSpec other = pa::debug_spec();
  other.seed += 1;
  REQUIRE_FALSE(pa::make_workload(other).key_cache == pa::make_workload(pa::debug_spec()).key_cache);
}

TEST_CASE("workload: the thread count does not change a byte", "[workload]") {
  WorkloadSpec spec = pa::debug_spec();
  spec.num_q_heads = 8;
  spec.num_kv_heads = 4;
  spec.head_dim = 128;
  spec.context_lens = {300, 257, 1, 400, 0, 33};  // about 0.5M elements per cache: several chunks
  spec.alias = true;
  spec.dtype = pa::DType::f16;
  const Workload one = pa::make_workload(spec, 1);
  REQUIRE(one.problem.cache_elems() > 4 * 65536);
  for (const int threads : {2, 3, 7, 0}) {
    CAPTURE(threads);
    REQUIRE(same_bytes(pa::make_workload(spec, threads), one));
  }
  PA_REQUIRE_THROWS_AS_WITH(pa::make_workload(spec, -1), ArgumentError, "num_threads");
}

TEST_CASE("workload: poison differs from zeros only where no sequence reads", "[workload][poison]") {
  for (WorkloadSpec spec : every_small_spec()) {
    CAPTURE(spec.name, spec.seed);
    spec.poison = true;
    const Workload poisoned = pa::make_workload(spec);
    spec.poison = false;
    const Workload zeros = pa::make_workload(spec);
    const pa::DecodeProblem& p = poisoned.problem;
    const std::vector<char> mask = read_mask(poisoned);
    REQUIRE(poisoned.query == zeros.query);
    REQUIRE(poisoned.context_lens == zeros.context_lens);
    std::int64_t wrong = 0;
    std::int64_t nan_read = 0;
    std::int64_t unread = 0;
    for (const auto* pair : {&poisoned.key_cache, &poisoned.value_cache}) {
      const bool keys = pair == &poisoned.key_cache;
      const pa::CacheBytes& zero_cache = keys ? zeros.key_cache : zeros.value_cache;
      for (std::size_t i = 0; i < mask.size(); ++i) {
        const float got = element(*pair, p.dtype, i);
        const float zero = element(zero_cache, p.dtype, i);
        if (mask[i]) {
          // Read slots: the same bits either way, NaN only where the spec plants one.
          const std::size_t at = i * pa::dtype_size(p.dtype);
          wrong += !std::equal(pair->begin() + static_cast<std::ptrdiff_t>(at),
                               pair->begin() + static_cast<std::ptrdiff_t>(at + pa::dtype_size(p.dtype)),
                               zero_cache.begin() + static_cast<std::ptrdiff_t>(at));
          nan_read += std::isnan(got);
        } else {
          ++unread;
          wrong += !std::isnan(got) || pa::float_bits(zero) != 0;
        }
      }
    }
    REQUIRE(wrong == 0);
    REQUIRE(nan_read == (spec.nan_sequence >= 0 ? 1 : 0));  // the planted NaN, in K
    REQUIRE(unread > 0);  // every spec has spare pages
    // Table entries past the used prefix: INT32_MAX when poisoned, 0 otherwise.
    for (int seq = 0; seq < p.num_seqs; ++seq) {
      const std::int64_t used = pa::pages_for(poisoned.context_lens[static_cast<std::size_t>(seq)], p.block_size);
      for (int i = 0; i < p.max_blocks_per_seq; ++i) {
        const std::size_t at = static_cast<std::size_t>(seq) * p.max_blocks_per_seq + static_cast<std::size_t>(i);
        if (i < used) {
          REQUIRE(poisoned.block_tables[at] == zeros.block_tables[at]);
        } else {
          REQUIRE(poisoned.block_tables[at] == INT32_MAX);
          REQUIRE(zeros.block_tables[at] == 0);
        }
      }
    }
  }
}

TEST_CASE("workload: the nan spec plants one NaN in its sequence's own page", "[workload][poison]") {
  const std::vector<WorkloadSpec> specs = pa::adversarial_specs();
  const auto nan_spec = std::find_if(specs.begin(), specs.end(), [](const WorkloadSpec& s) { return s.nan_sequence >= 0; });
  REQUIRE(nan_spec != specs.end());
  for (const bool alias : {false, true}) {
    WorkloadSpec spec = *nan_spec;
    spec.alias = alias;
    spec.context_lens = {40, 37, 40, 100};  // with alias, sequence 1 shares 2 pages with sequence 0
    spec.nan_sequence = 1;
    CAPTURE(alias);
    const Workload workload = pa::make_workload(spec);
    const pa::DecodeProblem& p = workload.problem;
    const auto tables = used_tables(workload);
    std::int64_t nans = 0;
    for (std::size_t i = 0; i < static_cast<std::size_t>(p.cache_elems()); ++i) {
      if (!std::isnan(element(workload.key_cache, p.dtype, i))) continue;
      const std::int64_t page = static_cast<std::int64_t>(i) / p.layout.block_stride;
      const std::int64_t in_page = static_cast<std::int64_t>(i) % p.layout.block_stride;
      // Only poisoned (unread) NaNs elsewhere; the planted one is slot 0, head 0, dim 0 of a
      // page of sequence 1 that no other table lists.
      if (in_page != 0) continue;
      int holders = 0;
      bool in_seq1 = false;
      for (std::size_t seq = 0; seq < tables.size(); ++seq)
        if (std::count(tables[seq].begin(), tables[seq].end(), page)) {
          ++holders;
          in_seq1 = in_seq1 || seq == 1;
        }
      if (holders == 0) continue;  // a spare page: poison
      ++nans;
      REQUIRE(in_seq1);
      REQUIRE(holders == 1);
    }
    REQUIRE(nans == 1);
  }
  WorkloadSpec all_shared = *nan_spec;
  all_shared.alias = true;
  all_shared.context_lens = {32, 32};
  all_shared.nan_sequence = 1;
  PA_REQUIRE_THROWS_AS_WITH(pa::make_workload(all_shared), ArgumentError, "spec.nan_sequence");
}

TEST_CASE("workload: block tables are scattered unless asked otherwise", "[workload][tables]") {
  WorkloadSpec spec = pa::debug_spec();
  std::vector<std::int32_t> pages;
  for (const auto& row : used_tables(pa::make_workload(spec))) pages.insert(pages.end(), row.begin(), row.end());
  std::vector<std::int32_t> identity(pages.size());
  for (std::size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<std::int32_t>(i);
  REQUIRE(pages.size() > 4);
  REQUIRE(pages != identity);
  REQUIRE_FALSE(std::is_sorted(pages.begin(), pages.end()));
  for (const WorkloadSpec& adversarial : pa::adversarial_specs()) REQUIRE(adversarial.scatter);

  spec.scatter = false;
  pages.clear();
  for (const auto& row : used_tables(pa::make_workload(spec))) pages.insert(pages.end(), row.begin(), row.end());
  REQUIRE(pages == identity);
}

TEST_CASE("workload: the aliased spec shares pages between tables", "[workload][tables]") {
  const std::vector<WorkloadSpec> specs = pa::adversarial_specs();
  const auto aliased = std::find_if(specs.begin(), specs.end(), [](const WorkloadSpec& s) { return s.alias; });
  REQUIRE(aliased != specs.end());
  const Workload workload = pa::make_workload(*aliased);
  const auto tables = used_tables(workload);
  const int block_size = workload.problem.block_size;
  std::map<std::int32_t, int> holders;
  for (const auto& row : tables)
    for (std::int32_t page : std::set<std::int32_t>(row.begin(), row.end())) ++holders[page];
  int shared = 0;
  for (const auto& [page, count] : holders) shared += count > 1;
  REQUIRE(shared > 0);
  // Each odd sequence shares exactly the pages full in both it and the sequence before it.
  int expected = 0;
  for (std::size_t seq = 1; seq < tables.size(); seq += 2) {
    const int common = std::min(workload.context_lens[seq - 1], workload.context_lens[seq]) / block_size;
    expected += common;
    for (int i = 0; i < common; ++i) REQUIRE(tables[seq][static_cast<std::size_t>(i)] == tables[seq - 1][static_cast<std::size_t>(i)]);
    if (static_cast<std::size_t>(common) < tables[seq].size())
      REQUIRE(holders[tables[seq][static_cast<std::size_t>(common)]] == 1);
  }
  REQUIRE(shared == expected);
  // Without aliasing no page appears twice.
  WorkloadSpec plain = *aliased;
  plain.alias = false;
  std::set<std::int32_t> seen;
  std::size_t listed = 0;
  for (const auto& row : used_tables(pa::make_workload(plain))) {
    seen.insert(row.begin(), row.end());
    listed += row.size();
  }
  REQUIRE(seen.size() == listed);
}

TEST_CASE("workload: pages near the top of the pool", "[workload][tables]") {
  const std::vector<WorkloadSpec> specs = pa::adversarial_specs();
  const auto top = std::find_if(specs.begin(), specs.end(), [](const WorkloadSpec& s) { return s.pages_near_top; });
  REQUIRE(top != specs.end());
  for (const bool scatter : {true, false}) {
    WorkloadSpec spec = *top;
    spec.scatter = scatter;
    CAPTURE(scatter);
    const Workload workload = pa::make_workload(spec);
    const std::int64_t num_blocks = workload.problem.num_blocks;
    std::vector<std::int32_t> pages;
    for (const auto& row : used_tables(workload)) pages.insert(pages.end(), row.begin(), row.end());
    const std::int64_t used = static_cast<std::int64_t>(pages.size());
    REQUIRE(num_blocks == used + spec.spare_blocks);
    REQUIRE(*std::max_element(pages.begin(), pages.end()) == num_blocks - 1);
    REQUIRE(*std::min_element(pages.begin(), pages.end()) == num_blocks - used);
    REQUIRE(std::is_sorted(pages.rbegin(), pages.rend()) == !scatter);  // descending unless scattered
  }
}

namespace {
/// Bytes of this process's memory that are resident (Linux: /proc/self/statm's second field).
std::int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * 4096;
}
}  // namespace

TEST_CASE("workload: a sparse pool writes only its used pages and a canary page either side", "[workload][sparse]") {
  WorkloadSpec spec = pa::debug_spec();
  spec.spare_blocks = 40;
  spec.alias = true;
  spec.sparse = true;
  WorkloadSpec dense_spec = spec;
  dense_spec.sparse = false;
  const Workload sparse = pa::make_workload(spec);
  const Workload dense = pa::make_workload(dense_spec);
  REQUIRE(sparse.problem == dense.problem);
  REQUIRE(sparse.block_tables == dense.block_tables);
  REQUIRE(sparse.query == dense.query);
  const pa::DecodeProblem& p = sparse.problem;
  std::set<std::int64_t> used;
  for (const auto& row : used_tables(sparse)) used.insert(row.begin(), row.end());
  const std::size_t page_bytes = static_cast<std::size_t>(p.layout.block_stride) * pa::dtype_size(p.dtype);
  int canaries = 0, untouched = 0;
  for (std::int64_t page = 0; page < p.num_blocks; ++page) {
    CAPTURE(page);
    const auto begin = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(page) * page_bytes);
    const auto end = begin + static_cast<std::ptrdiff_t>(page_bytes);
    for (const auto* cache : {&sparse.key_cache, &sparse.value_cache}) {
      const pa::CacheBytes& twin = cache == &sparse.key_cache ? dense.key_cache : dense.value_cache;
      if (used.count(page)) {  // as written densely, poison past the context included
        REQUIRE(std::equal(cache->begin() + begin, cache->begin() + end, twin.begin() + begin));
      } else if (used.count(page - 1) || used.count(page + 1)) {  // a canary: all NaN, as the dense pool's
        for (std::int64_t i = 0; i < p.layout.block_stride; ++i)
          REQUIRE(std::isnan(element(*cache, p.dtype, static_cast<std::size_t>(page * p.layout.block_stride + i))));
        REQUIRE(std::equal(cache->begin() + begin, cache->begin() + end, twin.begin() + begin));
        canaries += cache == &sparse.key_cache;
      } else {  // never written
        REQUIRE(std::all_of(cache->begin() + begin, cache->begin() + end, [](std::byte b) { return b == std::byte{0}; }));
        untouched += cache == &sparse.key_cache;
      }
    }
  }
  REQUIRE(canaries > 0);
  REQUIRE(untouched > 0);

  // A pool of 280,000 pages of 16384 bf16 elements reserves 9.2 GB a cache; memory grows by
  // about its used pages and the bookkeeping of a quarter of a million page ids.
  WorkloadSpec huge = spec;
  huge.num_q_heads = 16;
  huge.num_kv_heads = 8;
  huge.head_dim = 128;
  huge.dtype = pa::DType::bf16;
  huge.spare_blocks = 280000;
  huge.pages_near_top = true;
  const std::int64_t before = resident_bytes();
  const Workload big = pa::make_workload(huge);
  const std::int64_t grown = resident_bytes() - before;
  INFO("resident memory grew by " << grown << " bytes");
  REQUIRE(big.key_cache.size() > std::size_t{9000000000});
  REQUIRE(grown < (std::int64_t{64} << 20));
}

TEST_CASE("workload: every adversarial spec is valid, distinct and small", "[workload][adversarial]") {
  std::set<std::string> names;
  for (const WorkloadSpec& spec : pa::adversarial_specs()) {
    CAPTURE(spec.name);
    REQUIRE(names.insert(spec.name).second);
    REQUIRE(spec.poison);
    const Workload workload = pa::make_workload(spec);
    const pa::DecodeProblem& p = workload.problem;
    pa::validate(p, "test");
    pa::validate_tables(p, workload.block_tables, workload.context_lens, "test");
    std::vector<std::byte> out(workload.out_bytes());
    pa::validate_view(workload.host_view(out.data()), 0, "test");
    // The emulator runs every spec through several kernels on two cores: keep K+V small.
    REQUIRE(2 * p.cache_elems() <= 200000);
  }
}

TEST_CASE("workload: the adversarial set covers CORRECTNESS.md", "[workload][adversarial]") {
  const pa::AdversarialOptions options;
  const std::vector<WorkloadSpec> specs = pa::adversarial_specs(options);
  const int page = options.block_size;
  std::set<int> lengths;
  std::set<std::string> ratios;
  bool aliased = false, top = false, nhd = false, nan = false, equal = false, large = false;
  for (const WorkloadSpec& spec : specs) {
    lengths.insert(spec.context_lens.begin(), spec.context_lens.end());
    const int group = spec.num_q_heads / spec.num_kv_heads;
    ratios.insert(group == 1 ? "mha" : spec.num_kv_heads == 1 ? "mqa" : "gqa");
    aliased |= spec.alias;
    top |= spec.pages_near_top;
    nhd |= spec.layout == pa::LayoutKind::nhd;
    nan |= spec.nan_sequence >= 0;
    equal |= spec.query_multiplier == 0.0f;
    large |= spec.query_multiplier > 1000.0f;
  }
  for (const int length : {0, 1, page - 1, page, page + 1, options.max_context}) {
    CAPTURE(length);
    REQUIRE(lengths.count(length));
  }
  const bool has_prime = std::any_of(lengths.begin(), lengths.end(), [&](int n) {
    if (n <= page + 1) return false;
    for (int d = 2; d * d <= n; ++d)
      if (n % d == 0) return false;
    return true;
  });
  REQUIRE(has_prime);
  REQUIRE(ratios == std::set<std::string>{"gqa", "mha", "mqa"});
  REQUIRE(aliased);
  REQUIRE(top);
  REQUIRE(nhd);
  REQUIRE(nan);
  REQUIRE(equal);
  REQUIRE(large);
  PA_REQUIRE_THROWS_AS_WITH(pa::adversarial_specs({pa::DType::f32, 64, 16, 0, 7}), ArgumentError, "options.max_context");
}

TEST_CASE("workload: equal logits and large logits", "[workload][adversarial]") {
  for (const pa::DType dtype : {pa::DType::f32, pa::DType::f16, pa::DType::bf16}) {
    pa::AdversarialOptions options;
    options.dtype = dtype;
    const std::string dtype_name(pa::dtype_name(dtype));
    CAPTURE(dtype_name);
    for (const WorkloadSpec& spec : pa::adversarial_specs(options)) {
      if (spec.query_multiplier == 0.0f) {
        const Workload workload = pa::make_workload(spec);
        REQUIRE(std::all_of(workload.query.begin(), workload.query.end(), [](std::byte b) { return b == std::byte{0}; }));
      }
      if (spec.query_multiplier <= 1000.0f) continue;
      // The largest |q.k * scale| over every (sequence, head, token) a kernel reads.
      const Workload workload = pa::make_workload(spec);
      const pa::DecodeProblem& p = workload.problem;
      double largest = 0.0;
      std::int64_t not_finite = 0;
      for (int seq = 0; seq < p.num_seqs; ++seq)
        for (int head = 0; head < p.num_q_heads; ++head)
          for (int token = 0; token < workload.context_lens[static_cast<std::size_t>(seq)]; ++token) {
            const std::int32_t page = workload.block_tables[static_cast<std::size_t>(seq) * p.max_blocks_per_seq +
                                                            static_cast<std::size_t>(token / p.block_size)];
            double dot = 0.0;
            for (int d = 0; d < p.head_dim; ++d) {
              const float q = element(workload.query, p.dtype, static_cast<std::size_t>((seq * p.num_q_heads + head) * p.head_dim + d));
              not_finite += !std::isfinite(q);
              const float k = element(workload.key_cache, p.dtype,
                                      static_cast<std::size_t>(p.layout.offset(page, p.kv_head_of(head), token % p.block_size, d)));
              dot += double(q) * k;
            }
            largest = std::max(largest, std::abs(dot * p.scale));
          }
      CAPTURE(largest);
      REQUIRE(not_finite == 0);
      REQUIRE(largest > 3e4);
      REQUIRE(largest < 3e5);
    }
  }
}

TEST_CASE("workload: values are in [-1, 1] and exact in the storage type", "[workload]") {
  for (const WorkloadSpec& spec : {pa::debug_spec(), pa::tour_spec()}) {
    CAPTURE(spec.name);
    const Workload workload = pa::make_workload(spec);
    const pa::DecodeProblem& p = workload.problem;
    const std::vector<char> mask = read_mask(workload);
    std::int64_t outside = 0;
    std::int64_t inexact = 0;
    for (std::size_t i = 0; i < mask.size(); ++i) {
      if (!mask[i]) continue;
      const float k = element(workload.key_cache, p.dtype, i);
      const float v = element(workload.value_cache, p.dtype, i);
      outside += !(k >= -1.0f && k <= 1.0f && v >= -1.0f && v <= 1.0f);
      inexact += pa::round_to(p.dtype, k) != k || pa::round_to(p.dtype, v) != v;
    }
    for (std::size_t i = 0; i < static_cast<std::size_t>(p.query_elems()); ++i) {
      const float q = element(workload.query, p.dtype, i);
      outside += !(q >= -1.0f && q <= 1.0f);
    }
    REQUIRE(outside == 0);
    REQUIRE(inexact == 0);
  }
}

TEST_CASE("workload: hnd and nhd hold the same tokens", "[workload]") {
  WorkloadSpec spec = pa::tour_spec();
  spec.layout = pa::LayoutKind::hnd;
  const Workload hnd = pa::make_workload(spec);
  spec.layout = pa::LayoutKind::nhd;
  const Workload nhd = pa::make_workload(spec);
  REQUIRE(hnd.block_tables == nhd.block_tables);
  REQUIRE(hnd.query == nhd.query);
  REQUIRE(nhd.problem.layout.name(spec.num_kv_heads, spec.block_size, spec.head_dim) == "nhd");
  const pa::DecodeProblem& p = hnd.problem;
  std::int64_t different = 0;
  for (std::int64_t page = 0; page < p.num_blocks; ++page)
    for (int head = 0; head < p.num_kv_heads; ++head)
      for (int slot = 0; slot < p.block_size; ++slot)
        for (int d = 0; d < p.head_dim; ++d) {
          const float a = element(hnd.key_cache, p.dtype, static_cast<std::size_t>(p.layout.offset(page, head, slot, d)));
          const float b = element(nhd.key_cache, p.dtype, static_cast<std::size_t>(nhd.problem.layout.offset(page, head, slot, d)));
          different += pa::float_bits(a) != pa::float_bits(b);
        }
  REQUIRE(different == 0);
}

TEST_CASE("workload: the problem follows the spec", "[workload]") {
  const WorkloadSpec spec = pa::debug_spec();  // contexts {37, 0, 1, 15, 16, 17}, page 16
  const Workload workload = pa::make_workload(spec);
  const pa::DecodeProblem& p = workload.problem;
  REQUIRE(p.num_seqs == 6);
  REQUIRE(p.num_q_heads == 4);
  REQUIRE(p.num_kv_heads == 2);
  REQUIRE(p.head_dim == 64);
  REQUIRE(p.block_size == 16);
  REQUIRE(p.max_context_len == 37);
  REQUIRE(p.total_context_len == 37 + 0 + 1 + 15 + 16 + 17);  // the split-count hint
  REQUIRE(p.max_blocks_per_seq == 3 + spec.table_slack);
  REQUIRE(p.num_blocks == 3 + 0 + 1 + 1 + 1 + 2 + spec.spare_blocks);
  REQUIRE(p.dtype == pa::DType::f32);
  REQUIRE(p.layout == pa::CacheLayout::hnd(2, 16, 64));
  REQUIRE(p.scale == 1.0f / std::sqrt(64.0f));
  REQUIRE(workload.query.size() == 6u * 4 * 64 * 4);
  REQUIRE(workload.key_cache.size() == static_cast<std::size_t>(p.cache_elems()) * 4);
  REQUIRE(workload.context_lens == std::vector<std::int32_t>{37, 0, 1, 15, 16, 17});

  int out = 0;
  const pa::DecodeView view = workload.host_view(&out, &out, 4);
  REQUIRE(view.query == workload.query.data());
  REQUIRE(view.key_cache == workload.key_cache.data());
  REQUIRE(view.value_cache == workload.value_cache.data());
  REQUIRE(view.block_tables == workload.block_tables.data());
  REQUIRE(view.context_lens == workload.context_lens.data());
  REQUIRE(view.out == &out);
  REQUIRE(view.workspace_bytes == 4);

  // docs/design/BENCHMARKS.md: K and V of every context token, q, out, the table entries used, the lengths.
  const std::uint64_t kv = (37 + 0 + 1 + 15 + 16 + 17) * 2 * 64 * 2 * 4;
  const std::uint64_t q_and_out = 2 * 6 * 4 * 64 * 4;
  const std::uint64_t tables = 4 * (3 + 0 + 1 + 1 + 1 + 2);
  REQUIRE(workload.bytes_moved() == kv + q_and_out + tables + 4 * 6);

  WorkloadSpec empty = spec;
  empty.context_lens.clear();
  const Workload none = pa::make_workload(empty);
  REQUIRE(none.problem.num_seqs == 0);
  REQUIRE(none.bytes_moved() == 0);
}

TEST_CASE("workload: spec errors name the field", "[workload][errors]") {
  WorkloadSpec spec = pa::debug_spec();
  spec.context_lens[3] = -2;
  PA_REQUIRE_THROWS_AS_WITH(pa::make_workload(spec), ArgumentError, "make_workload: spec.context_lens[3]: expected >= 0, got -2");
  spec = pa::debug_spec();
  spec.num_q_heads = 6;
  spec.num_kv_heads = 4;
  PA_REQUIRE_THROWS_AS_WITH(pa::make_workload(spec), ArgumentError, "spec.num_q_heads % spec.num_kv_heads");
  spec = pa::debug_spec();
  spec.nan_sequence = 6;
  PA_REQUIRE_THROWS_AS_WITH(pa::make_workload(spec), ArgumentError, "spec.nan_sequence");
  spec.nan_sequence = 1;  // context 0: no valid slot to hold the NaN
  PA_REQUIRE_THROWS_AS_WITH(pa::make_workload(spec), ArgumentError, "context 0");
  spec = pa::debug_spec();
  spec.block_size = 0;
  PA_REQUIRE_THROWS_AS_WITH(pa::make_workload(spec), ArgumentError, "spec.block_size");
  spec = pa::debug_spec();
  spec.spare_blocks = -1;
  PA_REQUIRE_THROWS_AS_WITH(pa::make_workload(spec), ArgumentError, "spec.spare_blocks");
  spec = pa::debug_spec();
  spec.query_multiplier = INFINITY;
  PA_REQUIRE_THROWS_AS_WITH(pa::make_workload(spec), ArgumentError, "spec.query_multiplier");
}

TEST_CASE("workload: host memory that cannot be had is an error naming the size", "[workload][errors]") {
  // docs/design/CATALOGUE.md R6: 2^62 bytes is more address space than any machine maps.
  const std::size_t too_much = std::size_t{1} << 62;
  PA_REQUIRE_THROWS_AS_WITH(pa::CacheBytes{too_much}, pa::MemoryError,
                            "CacheBytes: cannot reserve 4611686018427387904 bytes (4611686.02 TB) of host memory");
  const pa::CacheBytes fits(std::size_t{1} << 30);  // a reservation that fits still works after it
  REQUIRE(fits.size() == std::size_t{1} << 30);
}

TEST_CASE("workload: named specs match BENCHMARKS.md", "[workload][named]") {
  struct Expected {
    const char* name;
    std::size_t batch;
    int q_heads, kv_heads;
  };
  const Expected table[] = {{"gqa-batch", 64, 32, 8},   {"mha-batch", 16, 32, 32},  {"long-single", 1, 32, 8},
                            {"small-batch", 8, 64, 8},  {"ragged-skew", 64, 32, 8}, {"ragged-uniform", 64, 32, 8},
                            {"gqa-batch-fp8", 64, 32, 8}};
  std::vector<std::string> names;
  for (const Expected& row : table) names.emplace_back(row.name);
  REQUIRE(pa::named_workloads() == names);
  // Only the specs: the workloads themselves are ~2 GB each.
  for (const Expected& row : table) {
    CAPTURE(row.name);
    const WorkloadSpec spec = pa::named_spec(row.name);
    REQUIRE(spec.name == row.name);
    REQUIRE(spec.context_lens.size() == row.batch);
    REQUIRE(spec.num_q_heads == row.q_heads);
    REQUIRE(spec.num_kv_heads == row.kv_heads);
    REQUIRE(spec.head_dim == 128);
    REQUIRE(spec.block_size == 16);
    REQUIRE(spec.dtype == pa::DType::bf16);
    REQUIRE(spec.scatter);
    REQUIRE(spec.spare_blocks <= 16);
    REQUIRE(spec.fp8_kv == (std::string(row.name) == "gqa-batch-fp8"));
  }
  const auto all = [](const WorkloadSpec& spec, int length) {
    return std::all_of(spec.context_lens.begin(), spec.context_lens.end(), [&](int n) { return n == length; });
  };
  REQUIRE(all(pa::named_spec("gqa-batch"), 8192));
  REQUIRE(all(pa::named_spec("gqa-batch-fp8"), 8192));
  REQUIRE(all(pa::named_spec("mha-batch"), 8192));
  REQUIRE(all(pa::named_spec("long-single"), 32768));
  REQUIRE(all(pa::named_spec("small-batch"), 4096));
  const WorkloadSpec skew = pa::named_spec("ragged-skew");
  REQUIRE(std::count(skew.context_lens.begin(), skew.context_lens.end(), 65536) == 1);
  REQUIRE(std::count(skew.context_lens.begin(), skew.context_lens.end(), 512) == 63);
  const WorkloadSpec uniform = pa::named_spec("ragged-uniform");
  REQUIRE(*std::min_element(uniform.context_lens.begin(), uniform.context_lens.end()) >= 128);
  REQUIRE(*std::max_element(uniform.context_lens.begin(), uniform.context_lens.end()) <= 16384);
  REQUIRE(std::set<int>(uniform.context_lens.begin(), uniform.context_lens.end()).size() > 32);  // really spread
  PA_REQUIRE_THROWS_AS_WITH(pa::named_spec("gqa"), ArgumentError,
                            "named_spec: name: expected one of gqa-batch, mha-batch, long-single, small-batch, "
                            "ragged-skew, ragged-uniform, gqa-batch-fp8, got 'gqa'");
}
