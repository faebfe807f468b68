// The oracle of step 00 (steps/00_reference) against closed forms, a hand-worked case, an
// independent double loop, and itself (paged against dense). Every kernel is judged by the
// oracle, so the oracle is judged here by things that need no oracle.
//
// The tensors are built here, by hand, with a small helper (not common/workload.h), so these
// tests stand alone: pages are handed out from a seeded shuffle (scattered block tables), and
// every slot the oracle must not read (past a context's end, spare pages, table padding) holds
// NaN or an out-of-range page id, so a stray read shows up as a NaN or an error.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/kernel_api.h"
#include "common/problem.h"
#include "reference/oracle.h"
#include "tests/catch_compat.h"
#include "tests/test_util.h"

namespace {

using pa::testing::SplitMix;
using pa::testing::error_message;

constexpr float kNaNf = std::numeric_limits<float>::quiet_NaN();
constexpr std::int32_t kTablePad = std::numeric_limits<std::int32_t>::max();

/// What a test case is made of.
struct Shape {
  int num_q_heads = 4;
  int num_kv_heads = 2;
  int head_dim = 8;
  int block_size = 4;
  std::vector<int> context_lens = {5, 1, 8};
  pa::DType dtype = pa::DType::f32;
  std::uint64_t seed = 1;
  bool scatter = true;  ///< pages in a seeded random order (else 0, 1, 2, ...)
  bool nhd = false;     ///< token-major cache layout instead of the default head-major one
  int spare_blocks = 3; ///< pages no table uses (NaN)
};

/// Host tensors of one decode step, laid out in pages, with accessors that go through the
/// block table the same way the definition does.
struct Case {
  pa::DecodeProblem problem;
  std::vector<std::byte> query;        // [num_seqs][num_q_heads][head_dim]
  std::vector<std::byte> key_cache;    // problem.cache_elems() elements
  std::vector<std::byte> value_cache;  // same
  std::vector<std::int32_t> block_tables;  // [num_seqs][max_blocks_per_seq]
  std::vector<std::int32_t> context_lens;  // [num_seqs]

  pa::DecodeView view() const {
    pa::DecodeView v;
    v.problem = problem;
    v.query = query.data();
    v.key_cache = key_cache.data();
    v.value_cache = value_cache.data();
    v.block_tables = block_tables.data();
    v.context_lens = context_lens.data();
    return v;
  }
  std::size_t query_index(int seq, int head, int dim) const {
    return static_cast<std::size_t>((seq * problem.num_q_heads + head) * problem.head_dim + dim);
  }
  std::size_t cache_index(int seq, int kv_head, int token, int dim) const {
    const std::int32_t page =
        block_tables[static_cast<std::size_t>(seq * problem.max_blocks_per_seq + token / problem.block_size)];
    return static_cast<std::size_t>(problem.layout.offset(page, kv_head, token % problem.block_size, dim));
  }
  void set_query(int seq, int head, int dim, float value) {
    pa::store_from_float(query.data(), problem.dtype, query_index(seq, head, dim), value);
  }
  void set_key(int seq, int kv_head, int token, int dim, float value) {
    pa::store_from_float(key_cache.data(), problem.dtype, cache_index(seq, kv_head, token, dim), value);
  }
  void set_value(int seq, int kv_head, int token, int dim, float value) {
    pa::store_from_float(value_cache.data(), problem.dtype, cache_index(seq, kv_head, token, dim), value);
  }
  double q(int seq, int head, int dim) const {
    return pa::load_as_float(query.data(), problem.dtype, query_index(seq, head, dim));
  }
  double k(int seq, int kv_head, int token, int dim) const {
    return pa::load_as_float(key_cache.data(), problem.dtype, cache_index(seq, kv_head, token, dim));
  }
  double v(int seq, int kv_head, int token, int dim) const {
    return pa::load_as_float(value_cache.data(), problem.dtype, cache_index(seq, kv_head, token, dim));
  }
  std::size_t out_index(int seq, int head, int dim) const { return query_index(seq, head, dim); }
};

/// Builds a case: scattered pages, NaN everywhere the oracle must not read, random q/K/V in
/// [-1, 1) (rounded to the storage type) everywhere it must.
Case make_case(const Shape& shape) {
  const int num_seqs = static_cast<int>(shape.context_lens.size());
  int max_context = 0;
  int max_pages = 0;
  std::int64_t used_pages = 0;
  for (int len : shape.context_lens) {
    max_context = std::max(max_context, len);
    max_pages = std::max(max_pages, static_cast<int>(pa::pages_for(len, shape.block_size)));
    used_pages += pa::pages_for(len, shape.block_size);
  }
  const int max_blocks_per_seq = max_pages + 1;  // one padding entry per row, always
  const std::int64_t num_blocks = used_pages + shape.spare_blocks;

  Case c;
  c.problem = pa::make_problem(num_seqs, shape.num_q_heads, shape.num_kv_heads, shape.head_dim, shape.block_size,
                               max_blocks_per_seq, max_context, num_blocks, shape.dtype);
  if (shape.nhd) c.problem.layout = pa::CacheLayout::nhd(shape.num_kv_heads, shape.block_size, shape.head_dim);
  const std::size_t elem = pa::dtype_size(shape.dtype);
  c.query.resize(static_cast<std::size_t>(c.problem.query_elems()) * elem);
  c.key_cache.resize(static_cast<std::size_t>(c.problem.cache_elems()) * elem);
  c.value_cache.resize(c.key_cache.size());
  for (std::size_t i = 0; i < static_cast<std::size_t>(c.problem.cache_elems()); ++i) {
    pa::store_from_float(c.key_cache.data(), shape.dtype, i, kNaNf);
    pa::store_from_float(c.value_cache.data(), shape.dtype, i, kNaNf);
  }

  // Page ids: a seeded Fisher-Yates shuffle of the pool, handed out in order.
  SplitMix random{shape.seed};
  std::vector<std::int32_t> pages(static_cast<std::size_t>(num_blocks));
  std::iota(pages.begin(), pages.end(), 0);
  if (shape.scatter)
    for (std::size_t i = pages.size(); i > 1; --i) std::swap(pages[i - 1], pages[random.next() % i]);
  c.block_tables.assign(static_cast<std::size_t>(num_seqs) * static_cast<std::size_t>(max_blocks_per_seq), kTablePad);
  c.context_lens.assign(shape.context_lens.begin(), shape.context_lens.end());
  std::size_t next_page = 0;
  for (int seq = 0; seq < num_seqs; ++seq)
    for (std::int64_t i = 0; i < pa::pages_for(c.context_lens[static_cast<std::size_t>(seq)], shape.block_size); ++i)
      c.block_tables[static_cast<std::size_t>(seq * max_blocks_per_seq + i)] = pages[next_page++];

  for (int seq = 0; seq < num_seqs; ++seq) {
    for (int head = 0; head < shape.num_q_heads; ++head)
      for (int dim = 0; dim < shape.head_dim; ++dim) c.set_query(seq, head, dim, random.uniform());
    for (int kv_head = 0; kv_head < shape.num_kv_heads; ++kv_head)
      for (int token = 0; token < c.context_lens[static_cast<std::size_t>(seq)]; ++token)
        for (int dim = 0; dim < shape.head_dim; ++dim) {
          c.set_key(seq, kv_head, token, dim, random.uniform());
          c.set_value(seq, kv_head, token, dim, random.uniform());
        }
  }
  return c;
}

/// The definition, written out again as a plain double loop over the case's accessors: an
/// implementation independent of the oracle's Eigen code.
std::vector<double> naive_attention(const Case& c) {
  const pa::DecodeProblem& p = c.problem;
  std::vector<double> out(static_cast<std::size_t>(p.query_elems()), 0.0);
  for (int seq = 0; seq < p.num_seqs; ++seq) {
    const int len = c.context_lens[static_cast<std::size_t>(seq)];
    for (int head = 0; head < p.num_q_heads; ++head) {
      if (len == 0) continue;
      const int kv_head = p.kv_head_of(head);
      std::vector<double> logits(static_cast<std::size_t>(len));
      for (int t = 0; t < len; ++t) {
        double dot = 0.0;
        for (int d = 0; d < p.head_dim; ++d) dot += c.q(seq, head, d) * c.k(seq, kv_head, t, d);
        logits[static_cast<std::size_t>(t)] = dot * static_cast<double>(p.scale);
      }
      const double max_logit = *std::max_element(logits.begin(), logits.end());
      double total = 0.0;
      for (double& logit : logits) total += (logit = std::exp(logit - max_logit));
      for (int d = 0; d < p.head_dim; ++d) {
        double sum = 0.0;
        for (int t = 0; t < len; ++t) sum += logits[static_cast<std::size_t>(t)] * c.v(seq, kv_head, t, d);
        out[c.out_index(seq, head, d)] = sum / total;
      }
    }
  }
  return out;
}

double max_difference(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double largest = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double diff = std::abs(a[i] - b[i]);
    if (std::isnan(diff)) return std::numeric_limits<double>::infinity();
    largest = std::max(largest, diff);
  }
  return largest;
}

bool bit_identical(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST_CASE("reference: context 1 gives V of token 0, exactly") {
  // One logit: its softmax weight is exp(0) / exp(0) = 1, so out = 1 * v / 1, exact in double.
  Shape shape;
  shape.context_lens = {1, 1, 1, 1};
  shape.num_q_heads = 6;
  shape.num_kv_heads = 3;
  for (pa::DType dtype : {pa::DType::f32, pa::DType::f16, pa::DType::bf16}) {
    CAPTURE(pa::dtype_name(dtype));
    shape.dtype = dtype;
    const Case c = make_case(shape);
    const std::vector<double> out = pa::reference::paged_attention(c.view());
    const std::vector<float> plain = pa::reference::plain_float_attention(c.view());
    int wrong = 0;
    int plain_wrong = 0;
    for (int seq = 0; seq < 4; ++seq)
      for (int head = 0; head < 6; ++head)
        for (int dim = 0; dim < shape.head_dim; ++dim) {
          const double expected = c.v(seq, c.problem.kv_head_of(head), 0, dim);
          if (out[c.out_index(seq, head, dim)] != expected) ++wrong;
          if (plain[c.out_index(seq, head, dim)] != expected) ++plain_wrong;  // also exact in float
        }
    CHECK(wrong == 0);
    CHECK(plain_wrong == 0);
  }
}

TEST_CASE("reference: all logits equal (q = 0) gives the mean of V over the context") {
  Shape shape;
  shape.context_lens = {1, 2, 5, 16, 17, 33};
  Case c = make_case(shape);
  for (int seq = 0; seq < 6; ++seq)
    for (int head = 0; head < shape.num_q_heads; ++head)
      for (int dim = 0; dim < shape.head_dim; ++dim) c.set_query(seq, head, dim, 0.0f);
  const std::vector<double> out = pa::reference::paged_attention(c.view());
  const std::vector<float> plain = pa::reference::plain_float_attention(c.view());
  double worst = 0.0;
  double worst_plain = 0.0;
  for (int seq = 0; seq < 6; ++seq)
    for (int head = 0; head < shape.num_q_heads; ++head)
      for (int dim = 0; dim < shape.head_dim; ++dim) {
        const int len = shape.context_lens[static_cast<std::size_t>(seq)];
        double sum = 0.0;
        for (int t = 0; t < len; ++t) sum += c.v(seq, c.problem.kv_head_of(head), t, dim);
        const double mean = sum / len;
        worst = std::max(worst, std::abs(out[c.out_index(seq, head, dim)] - mean));
        worst_plain = std::max(worst_plain, std::abs(plain[c.out_index(seq, head, dim)] - mean));
      }
  CHECK(worst <= 1e-15);
  CHECK(worst_plain <= 1e-6);
}

TEST_CASE("reference: a two-token case worked by hand") {
  // One sequence, one head, head_dim 2, page size 1, scale 0.5, and the two tokens stored in
  // pages 1 and 0 (table row [1, 0]) so the table, not memory order, decides which is which.
  //
  //   q  = (2, 1)
  //   k0 = (0, 0)   ->  logit0 = (2*0 + 1*0) * 0.5 = 0
  //   k1 = (1, 0)   ->  logit1 = (2*1 + 1*0) * 0.5 = 1
  //   softmax: max = 1; exp(0 - 1) = 1/e, exp(1 - 1) = 1, sum = 1 + 1/e
  //     w0 = (1/e) / (1 + 1/e) = 1 / (1 + e) = 0.2689414213699951
  //     w1 = 1 / (1 + 1/e)     = e / (1 + e) = 0.7310585786300049
  //   v0 = (1, -1), v1 = (3, 1)
  //     out[0] = 1*w0 + 3*w1 = 1 + 2*w1        = 2.4621171572600098
  //     out[1] = -w0 + w1    = (e - 1)/(e + 1) = tanh(1/2) = 0.46211715726000974
  Case c;
  c.problem = pa::make_problem(/*num_seqs=*/1, /*num_q_heads=*/1, /*num_kv_heads=*/1, /*head_dim=*/2,
                               /*block_size=*/1, /*max_blocks_per_seq=*/2, /*max_context_len=*/2,
                               /*num_blocks=*/2, pa::DType::f32);
  c.problem.scale = 0.5f;
  c.query.resize(2 * 4);
  c.key_cache.resize(4 * 4);
  c.value_cache.resize(4 * 4);
  c.block_tables = {1, 0};
  c.context_lens = {2};
  c.set_query(0, 0, 0, 2.0f);
  c.set_query(0, 0, 1, 1.0f);
  c.set_key(0, 0, 0, 0, 0.0f);
  c.set_key(0, 0, 0, 1, 0.0f);
  c.set_key(0, 0, 1, 0, 1.0f);
  c.set_key(0, 0, 1, 1, 0.0f);
  c.set_value(0, 0, 0, 0, 1.0f);
  c.set_value(0, 0, 0, 1, -1.0f);
  c.set_value(0, 0, 1, 0, 3.0f);
  c.set_value(0, 0, 1, 1, 1.0f);
  // Token 1 lives in page 0: element 0 of the value cache is v1[0].
  CHECK(pa::load_as_float(c.value_cache.data(), pa::DType::f32, 0) == 3.0f);

  const std::vector<double> out = pa::reference::paged_attention(c.view());
  REQUIRE(out.size() == 2);
  CHECK(std::abs(out[0] - 2.4621171572600098) <= 1e-15);
  CHECK(std::abs(out[1] - 0.46211715726000974) <= 1e-15);
  CHECK(std::abs(out[1] - std::tanh(0.5)) <= 1e-15);

  const std::vector<float> plain = pa::reference::plain_float_attention(c.view());
  CHECK(std::abs(plain[0] - 2.4621171572600098) <= 1e-6);
  CHECK(std::abs(plain[1] - 0.46211715726000974) <= 1e-6);
}

TEST_CASE("reference: context 0 gives zeros and its table row is never read") {
  Shape shape;
  shape.context_lens = {6, 0, 3, 0};
  Case c = make_case(shape);
  // Rows of context 0: entries far outside the pool. Reading them would throw (validation) or
  // read garbage; the oracle must do neither.
  const int row = c.problem.max_blocks_per_seq;
  for (int i = 0; i < row; ++i) {
    c.block_tables[static_cast<std::size_t>(1 * row + i)] = 999999;
    c.block_tables[static_cast<std::size_t>(3 * row + i)] = -5;
  }
  const std::vector<double> out = pa::reference::paged_attention(c.view());
  const std::vector<float> plain = pa::reference::plain_float_attention(c.view());
  const std::vector<double> expected = naive_attention(c);
  for (int seq : {1, 3})
    for (int head = 0; head < shape.num_q_heads; ++head)
      for (int dim = 0; dim < shape.head_dim; ++dim) {
        CHECK(bit_identical(out[c.out_index(seq, head, dim)], 0.0));
        CHECK(plain[c.out_index(seq, head, dim)] == 0.0f);
      }
  CHECK(max_difference(out, expected) <= 1e-12);

  SECTION("a batch of nothing but context 0, and an empty batch") {
    Shape empty_contexts = shape;
    empty_contexts.context_lens = {0, 0};
    const Case zeros = make_case(empty_contexts);
    for (double value : pa::reference::paged_attention(zeros.view())) CHECK(bit_identical(value, 0.0));
    pa::DecodeView nothing;
    nothing.problem = pa::make_problem(0, 4, 2, 8, 4, 1, 0, 0, pa::DType::f32);
    CHECK(pa::reference::paged_attention(nothing).empty());
    CHECK(pa::reference::plain_float_attention(nothing).empty());
    CHECK(pa::reference::gather_cache(nothing, nullptr).empty());
  }
}

TEST_CASE("reference: logits near +-1e5 stay finite (max-subtracted softmax)") {
  // Without subtracting the max, exp(1e5) overflows (inf / inf = NaN) and exp(-1e5) underflows
  // (0 / 0 = NaN). With it the largest weight is exp(0) = 1 and the sum is >= 1.
  for (float sign : {1.0f, -1.0f}) {
    CAPTURE(sign);
    Case c;
    c.problem = pa::make_problem(1, 1, 1, /*head_dim=*/1, /*block_size=*/4, /*max_blocks_per_seq=*/2,
                                 /*max_context_len=*/6, /*num_blocks=*/2, pa::DType::f32);
    c.problem.scale = 1.0f;
    c.query.resize(4);
    c.key_cache.resize(8 * 4);
    c.value_cache.resize(8 * 4);
    c.block_tables = {1, 0};
    c.context_lens = {6};
    c.set_query(0, 0, 0, sign * 1000.0f);
    for (int t = 0; t < 6; ++t) {
      c.set_key(0, 0, t, 0, 100.0f - 0.002f * static_cast<float>(t));  // logits 1e5, 1e5 -+ 2, ...
      c.set_value(0, 0, t, 0, static_cast<float>(t));
    }
    const std::vector<double> out = pa::reference::paged_attention(c.view());
    const std::vector<double> expected = naive_attention(c);
    REQUIRE(std::isfinite(out[0]));
    CHECK(std::abs(out[0] - expected[0]) <= 1e-12);
    CHECK(out[0] > 0.0);
    CHECK(out[0] < 5.0);
    // The closed form from the logits the case actually holds (q*k in double, scale 1).
    double numerator = 0.0;
    double denominator = 0.0;
    const double top = sign > 0 ? c.q(0, 0, 0) * c.k(0, 0, 0, 0) : c.q(0, 0, 0) * c.k(0, 0, 5, 0);
    for (int t = 0; t < 6; ++t) {
      const double weight = std::exp(c.q(0, 0, 0) * c.k(0, 0, t, 0) - top);
      numerator += weight * t;
      denominator += weight;
    }
    CHECK(std::abs(out[0] - numerator / denominator) <= 1e-12);
    const std::vector<float> plain = pa::reference::plain_float_attention(c.view());
    REQUIRE(std::isfinite(plain[0]));
    CHECK(std::abs(plain[0] - out[0]) <= 1e-2);  // float logits near 1e5 carry ~4e-3 of rounding
  }
}

TEST_CASE("reference: MHA, GQA and MQA read the KV head kv_head_of(head)") {
  struct Ratio {
    int q_heads;
    int kv_heads;
  };
  for (const Ratio ratio : {Ratio{4, 4}, Ratio{4, 2}, Ratio{4, 1}, Ratio{6, 3}, Ratio{8, 2}}) {
    CAPTURE(ratio.q_heads, ratio.kv_heads);
    Shape shape;
    shape.num_q_heads = ratio.q_heads;
    shape.num_kv_heads = ratio.kv_heads;
    shape.context_lens = {1, 9, 4};
    Case c = make_case(shape);
    // Sequence 0 (context 1): v of KV head g is g + dim/100, so the output names its KV head.
    for (int g = 0; g < ratio.kv_heads; ++g)
      for (int dim = 0; dim < shape.head_dim; ++dim)
        c.set_value(0, g, 0, dim, static_cast<float>(g) + static_cast<float>(dim) / 100.0f);
    const std::vector<double> out = pa::reference::paged_attention(c.view());
    const int group = ratio.q_heads / ratio.kv_heads;
    for (int head = 0; head < ratio.q_heads; ++head) {
      CHECK(c.problem.kv_head_of(head) == head / group);
      for (int dim = 0; dim < shape.head_dim; ++dim)
        CHECK(out[c.out_index(0, head, dim)] == static_cast<double>(static_cast<float>(head / group) +
                                                                     static_cast<float>(dim) / 100.0f));
    }
    CHECK(max_difference(out, naive_attention(c)) <= 1e-12);
  }
}

TEST_CASE("reference: the oracle agrees with an independent double loop") {
  for (const bool nhd : {false, true}) {
    for (const std::uint64_t seed : {1u, 2u, 3u}) {
      CAPTURE(nhd, seed);
      Shape shape;
      shape.seed = seed;
      shape.nhd = nhd;
      shape.head_dim = 16;
      shape.num_q_heads = 8;
      shape.num_kv_heads = 2;
      shape.context_lens = {3, 4, 5, 0, 1, 13, 40};  // page-1, page, page+1, 0, 1, a prime, the maximum
      const Case c = make_case(shape);
      const std::vector<double> out = pa::reference::paged_attention(c.view());
      CHECK(max_difference(out, naive_attention(c)) <= 1e-12);
      for (double value : out) CHECK(std::isfinite(value));  // the NaN poison was never read
    }
  }
}

TEST_CASE("reference: the layout does not change the answer (hnd and nhd, same values)") {
  Shape shape;
  shape.context_lens = {7, 2, 12};
  const Case hnd = make_case(shape);
  shape.nhd = true;
  const Case nhd = make_case(shape);  // same seed: same pages, same values, other strides
  REQUIRE(nhd.problem.layout != hnd.problem.layout);
  const std::vector<double> a = pa::reference::paged_attention(hnd.view());
  const std::vector<double> b = pa::reference::paged_attention(nhd.view());
  int differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i) differ += bit_identical(a[i], b[i]) ? 0 : 1;
  CHECK(differ == 0);
}

TEST_CASE("reference: paged and dense oracles agree on a scattered table, and gather_cache is exact") {
  for (pa::DType dtype : {pa::DType::f32, pa::DType::bf16}) {
    CAPTURE(pa::dtype_name(dtype));
    Shape shape;
    shape.dtype = dtype;
    shape.seed = 11;
    shape.num_q_heads = 6;
    shape.num_kv_heads = 2;
    shape.context_lens = {13, 0, 4, 1, 21, 5};
    const Case c = make_case(shape);

    // The table really is scattered: some row is not an ascending run of page ids.
    bool scattered = false;
    const int row = c.problem.max_blocks_per_seq;
    for (int seq = 0; seq < 6; ++seq)
      for (std::int64_t i = 1; i < pa::pages_for(shape.context_lens[static_cast<std::size_t>(seq)], 4); ++i)
        scattered |= c.block_tables[static_cast<std::size_t>(seq * row + i)] !=
                     c.block_tables[static_cast<std::size_t>(seq * row + i - 1)] + 1;
    REQUIRE(scattered);

    const std::vector<double> keys = pa::reference::gather_cache(c.view(), c.key_cache.data());
    const std::vector<double> values = pa::reference::gather_cache(c.view(), c.value_cache.data());
    const int max_len = c.problem.max_context_len;
    REQUIRE(keys.size() == static_cast<std::size_t>(6 * 2 * max_len * shape.head_dim));
    int gather_wrong = 0;
    for (int seq = 0; seq < 6; ++seq)
      for (int kv_head = 0; kv_head < 2; ++kv_head)
        for (int t = 0; t < max_len; ++t)
          for (int dim = 0; dim < shape.head_dim; ++dim) {
            const std::size_t i = static_cast<std::size_t>(((seq * 2 + kv_head) * max_len + t) * shape.head_dim + dim);
            const bool valid = t < shape.context_lens[static_cast<std::size_t>(seq)];
            gather_wrong += (valid ? keys[i] == c.k(seq, kv_head, t, dim) && values[i] == c.v(seq, kv_head, t, dim)
                                   : bit_identical(keys[i], 0.0) && bit_identical(values[i], 0.0))
                                ? 0
                                : 1;
          }
    CHECK(gather_wrong == 0);

    std::vector<double> query(static_cast<std::size_t>(c.problem.query_elems()));
    for (std::size_t i = 0; i < query.size(); ++i) query[i] = pa::load_as_float(c.query.data(), dtype, i);
    const std::vector<double> dense = pa::reference::dense_attention(c.problem, query, keys, values, c.context_lens);
    const std::vector<double> paged = pa::reference::paged_attention(c.view());
    CHECK(max_difference(dense, paged) <= 1e-12);
  }
}

TEST_CASE("reference: f16 and bf16 storage are read exactly and computed in double") {
  for (pa::DType dtype : {pa::DType::f16, pa::DType::bf16}) {
    CAPTURE(pa::dtype_name(dtype));
    Shape shape;
    shape.dtype = dtype;
    shape.head_dim = 32;
    shape.context_lens = {1, 17, 30, 3};
    const Case c = make_case(shape);
    const std::vector<double> out = pa::reference::paged_attention(c.view());
    CHECK(max_difference(out, naive_attention(c)) <= 1e-12);
    // The plain float loop, rounded to the storage type, is within that type's tolerance.
    const std::vector<float> plain = pa::reference::plain_float_attention(c.view());
    std::vector<std::byte> stored(plain.size() * 2);
    for (std::size_t i = 0; i < plain.size(); ++i) {
      CHECK(pa::round_to(dtype, plain[i]) == plain[i]);  // already rounded to the storage type
      pa::store_from_float(stored.data(), dtype, i, plain[i]);
    }
    const pa::CompareResult result =
        pa::compare_to_reference(c.problem, out, stored.data(), pa::Tolerance::for_dtype(dtype));
    INFO(result.summary());
    CHECK(result.ok);
  }
}

TEST_CASE("reference: NaN in one sequence's valid K or V reaches only the rows that read it") {
  Shape shape;
  shape.num_q_heads = 4;
  shape.num_kv_heads = 2;  // heads 0, 1 read KV head 0; heads 2, 3 read KV head 1
  shape.context_lens = {9, 6, 11};
  Case c = make_case(shape);
  const std::vector<double> clean = pa::reference::paged_attention(c.view());
  const std::vector<float> clean_plain = pa::reference::plain_float_attention(c.view());
  // Outputs that differ from the clean run where they should not, or are not NaN where they
  // should be, in both the oracle and the plain float loop.
  auto count_wrong = [&](auto affected) {
    const std::vector<double> out = pa::reference::paged_attention(c.view());
    const std::vector<float> plain = pa::reference::plain_float_attention(c.view());
    int wrong = 0;
    for (int seq = 0; seq < 3; ++seq)
      for (int head = 0; head < 4; ++head)
        for (int dim = 0; dim < shape.head_dim; ++dim) {
          const std::size_t i = c.out_index(seq, head, dim);
          const bool hit = affected(seq, head, dim);
          if (hit ? !std::isnan(out[i]) : !bit_identical(out[i], clean[i])) ++wrong;
          if (hit ? !std::isnan(plain[i]) : plain[i] != clean_plain[i]) ++wrong;
        }
    return wrong;
  };

  SECTION("NaN in K of (seq 1, KV head 0, token 2): every channel of seq 1's heads 0 and 1") {
    c.set_key(1, 0, 2, 3, kNaNf);
    CHECK(count_wrong([](int seq, int head, int) { return seq == 1 && head < 2; }) == 0);
  }
  SECTION("NaN in V of (seq 2, KV head 1, token 10, dim 5): only channel 5 of seq 2's heads 2 and 3") {
    c.set_value(2, 1, 10, 5, kNaNf);
    CHECK(count_wrong([](int seq, int head, int dim) { return seq == 2 && head >= 2 && dim == 5; }) == 0);
  }
  SECTION("NaN past the context's end (and in the spare pages) is never read") {
    // make_case already poisons every unused slot with NaN; the clean run is finite.
    for (double value : clean) CHECK(std::isfinite(value));
    for (float value : clean_plain) CHECK(std::isfinite(value));
  }
}

TEST_CASE("reference: the plain float loop stays close to the double oracle") {
  Shape shape;
  shape.head_dim = 64;
  shape.num_q_heads = 8;
  shape.num_kv_heads = 2;
  shape.block_size = 16;
  shape.context_lens = {100, 1, 37, 16, 17, 0};
  shape.seed = 5;
  const Case c = make_case(shape);
  const std::vector<double> out = pa::reference::paged_attention(c.view());
  const std::vector<float> plain = pa::reference::plain_float_attention(c.view());
  const double error = pa::max_abs_error(out, plain);
  INFO("plain float loop max |d| = " << error);
  CHECK(error <= 1e-6);
  int outside = 0;
  const pa::Tolerance tolerance = pa::Tolerance::for_dtype(pa::DType::f32);
  for (std::size_t i = 0; i < out.size(); ++i)
    outside += std::abs(plain[i] - out[i]) <= tolerance.atol + tolerance.rtol * std::abs(out[i]) ? 0 : 1;
  CHECK(outside == 0);
}

TEST_CASE("reference: bad input is refused with the function and the argument named") {
  Shape shape;
  Case c = make_case(shape);  // contexts {5, 1, 8}, page 4
  SECTION("a problem validate() rejects") {
    pa::DecodeView view = c.view();
    view.problem.scale = 0.0f;
    PA_REQUIRE_THROWS_AS_WITH(pa::reference::paged_attention(view), pa::ArgumentError,
                              "reference::paged_attention: scale");
    PA_REQUIRE_THROWS_AS_WITH(pa::reference::plain_float_attention(view), pa::ArgumentError,
                              "reference::plain_float_attention: scale");
  }
  SECTION("null pointers") {
    pa::DecodeView view = c.view();
    std::string name;
    SECTION("query") { view.query = nullptr; name = "query"; }
    SECTION("key_cache") { view.key_cache = nullptr; name = "key_cache"; }
    SECTION("value_cache") { view.value_cache = nullptr; name = "value_cache"; }
    SECTION("block_tables") { view.block_tables = nullptr; name = "block_tables"; }
    SECTION("context_lens") { view.context_lens = nullptr; name = "context_lens"; }
    PA_REQUIRE_THROWS_AS_WITH(pa::reference::paged_attention(view), pa::ArgumentError,
                              "reference::paged_attention: " + name);
  }
  SECTION("out and workspace are not needed") {
    CHECK(error_message([&] { pa::reference::paged_attention(c.view()); }) == "");
  }
  SECTION("a block-table entry of the used prefix outside the pool") {
    c.block_tables[static_cast<std::size_t>(c.problem.max_blocks_per_seq + 0)] =
        static_cast<std::int32_t>(c.problem.num_blocks);
    PA_REQUIRE_THROWS_AS_WITH(pa::reference::paged_attention(c.view()), pa::ArgumentError, "block_tables[1][0]");
    PA_REQUIRE_THROWS_AS_WITH(pa::reference::gather_cache(c.view(), c.key_cache.data()), pa::ArgumentError,
                              "reference::gather_cache: block_tables[1][0]");
  }
  SECTION("a context above max_context_len") {
    c.context_lens[2] = c.problem.max_context_len + 1;
    PA_REQUIRE_THROWS_AS_WITH(pa::reference::paged_attention(c.view()), pa::ArgumentError, "context_lens[2]");
  }
  SECTION("gather_cache without a cache") {
    PA_REQUIRE_THROWS_AS_WITH(pa::reference::gather_cache(c.view(), nullptr), pa::ArgumentError,
                              "reference::gather_cache: cache");
  }
  SECTION("dense_attention with tensors of the wrong size") {
    const std::size_t kv = static_cast<std::size_t>(3 * 2 * c.problem.max_context_len * 8);
    std::vector<double> query(static_cast<std::size_t>(c.problem.query_elems()));
    std::vector<double> keys(kv);
    std::vector<double> values(kv);
    CHECK(error_message([&] {
            pa::reference::dense_attention(c.problem, query, keys, values, c.context_lens);
          }) == "");
    std::vector<double> short_keys(kv - 1);
    PA_REQUIRE_THROWS_AS_WITH(pa::reference::dense_attention(c.problem, query, short_keys, values, c.context_lens),
                              pa::ArgumentError, "reference::dense_attention: keys.size()");
    PA_REQUIRE_THROWS_AS_WITH(pa::reference::dense_attention(c.problem, query, keys, short_keys, c.context_lens),
                              pa::ArgumentError, "values.size()");
    PA_REQUIRE_THROWS_AS_WITH(
        pa::reference::dense_attention(c.problem, std::span<const double>(query).first(3), keys, values, c.context_lens),
        pa::ArgumentError, "query.size()");
    std::vector<std::int32_t> lens = c.context_lens;
    lens[0] = -1;
    PA_REQUIRE_THROWS_AS_WITH(pa::reference::dense_attention(c.problem, query, keys, values, lens), pa::ArgumentError,
                              "context_lens[0]");
    lens.pop_back();
    PA_REQUIRE_THROWS_AS_WITH(pa::reference::dense_attention(c.problem, query, keys, values, lens), pa::ArgumentError,
                              "context_lens.size()");
  }
}
