#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include "kernels/11_persistent.cuh"
namespace s11 = pa::kernels_emu::step11;
int main(int argc, char** argv) {
  std::vector<std::int32_t> lengths(64, 512); lengths[0] = 65536;
  const int programs = 792, tile = 32, kv = 8;
  s11::Schedule a = s11::make_schedule(lengths, kv, tile, programs);
  const int lead = argc > 1 ? std::atoi(argv[1]) : 0;
  std::vector<int> w;
  for (int q = 0; q < a.programs(); ++q) {
    bool whole = false;
    for (int i = a.first_item[q]; i < a.first_item[q + 1]; ++i) whole = whole || (a.items[i].begin == 0 && a.items[i].last);
    w.push_back(whole ? 1000 : 1000 - lead);
  }
  s11::Schedule b = lead ? s11::make_schedule(lengths, kv, tile, programs, s11::kItemCost, w) : a;
  // time ~ load; a piece run first ends at its tiles (+cost); report when the last piece ends vs the last program
  double last_piece = 0, last_end = 0; int pure = 0; double lo = 1e9, hi = 0;
  for (int q = 0; q < b.programs(); ++q) {
    double t = 0, piece_end = 0; bool whole = false; int k = 0;
    std::vector<s11::WorkItem> its(b.items.begin() + b.first_item[q], b.items.begin() + b.first_item[q + 1]);
    std::stable_partition(its.begin(), its.end(), [](const s11::WorkItem& i) { return !(i.begin == 0 && i.last); });
    for (auto& i : its) {
      t += (i.end - i.begin + tile - 1) / tile + (k++ ? b.item_cost : 0);
      if (!(i.begin == 0 && i.last)) piece_end = t; else whole = true;
    }
    pure += !whole; last_piece = std::max(last_piece, piece_end); last_end = std::max(last_end, t);
    lo = std::min(lo, t); hi = std::max(hi, t);
  }
  std::printf("lead %d: work %lld, pure-piece programs %d, load %.0f..%.0f, last piece ends %.0f, last program %.0f (tiles), pieces %d\n",
              lead, (long long)b.work, pure, lo, hi, last_piece, last_end, b.parts);
}
