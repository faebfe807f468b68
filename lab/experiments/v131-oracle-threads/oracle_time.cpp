// v131: the host time of bench_ladder's oracle on a workload's sample, oracle_rows (each
// (sequence, KV head) and loop a piece on every hardware thread) against the loop it replaced
// (each sampled sequence whole, one loop after the other, on one thread), and whether their bits
// agree. Usage: oracle_time new|old WORKLOAD... (a named workload or a bench sweep point:
// group-G, head-dim-D, single-N, sweep-N, gqa-batch-nhd). build.sh builds it.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include "common/workload.h"
#include "harness/harness.h"
#include "reference/oracle.h"
using namespace pa;
static WorkloadSpec spec_named(const std::string& n) {
  auto after = [&](const char* p) { return n.rfind(p, 0) == 0 ? std::stoi(n.substr(std::strlen(p))) : 0; };
  WorkloadSpec s = named_spec(after("group-")||after("single-")||after("head-dim-")||after("sweep-")||n=="gqa-batch-nhd" ? "gqa-batch" : n);
  if (int g = after("group-")) s.num_q_heads = s.num_kv_heads * g;
  if (int c = after("single-")) s.context_lens.assign(1, c);
  if (int c = after("sweep-")) s.context_lens.assign(16, c);
  if (int d = after("head-dim-")) s.head_dim = d;
  if (n == "gqa-batch-nhd") s.layout = LayoutKind::nhd;
  return s;
}
static DecodeView single_sequence(const DecodeView& full, int seq) {
  const DecodeProblem& p = full.problem;
  const std::size_t row_bytes = static_cast<std::size_t>(p.num_q_heads) * p.head_dim * dtype_size(p.dtype);
  DecodeView one = full; one.problem.num_seqs = 1; one.problem.total_context_len = 0;
  one.query = static_cast<const std::byte*>(full.query) + seq * row_bytes;
  one.block_tables = full.block_tables + static_cast<std::size_t>(seq) * p.max_blocks_per_seq;
  one.context_lens = full.context_lens + seq;
  return one;
}
template <class V, class F> std::vector<V> old_rows(const DecodeView& full, const std::vector<int>& seqs, F f) {
  const DecodeProblem& p = full.problem; const std::size_t row = std::size_t(p.num_q_heads) * p.head_dim;
  std::vector<V> out(p.query_elems(), std::numeric_limits<V>::quiet_NaN());
  for (int s : seqs) { auto r = f(single_sequence(full, s)); std::copy(r.begin(), r.end(), out.begin() + s * row); }
  return out;
}
template <class V> bool same(const std::vector<V>& a, const std::vector<V>& b) { return a.size()==b.size() && std::memcmp(a.data(), b.data(), a.size()*sizeof(V))==0; }
int main(int argc, char** argv) {
  bool old = std::string(argv[1]) == "old";
  for (int i = 2; i < argc; ++i) {
    std::string n = argv[i];
    WorkloadSpec s = spec_named(n);
    Workload w = make_workload(s);
    auto seqs = sample_sequences(w);
    auto t1 = std::chrono::steady_clock::now();
    OracleRows o = oracle_rows(w, seqs);
    auto t2 = std::chrono::steady_clock::now();
    std::printf("%-16s new %.2f s", n.c_str(), std::chrono::duration<double>(t2-t1).count());
    if (old) {
      const DecodeView v = w.host_view();
      auto e = old_rows<double>(v, seqs, [](const DecodeView& x){ return reference::paged_attention(x); });
      auto pl = old_rows<float>(v, seqs, [](const DecodeView& x){ return reference::plain_float_attention(x); });
      std::vector<float> ps;
      if (w.problem.dtype != DType::f32) ps = old_rows<float>(v, seqs, [](const DecodeView& x){ return reference::plain_float_attention(x, true); });
      auto t3 = std::chrono::steady_clock::now();
      std::printf("  old %.2f s  same bits: exact %d plain %d storage %d", std::chrono::duration<double>(t3-t2).count(), same(e,o.exact), same(pl,o.plain), same(ps,o.plain_storage_weights));
    }
    std::printf("\n"); std::fflush(stdout);
  }
}
