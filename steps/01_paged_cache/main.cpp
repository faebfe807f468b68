// Step 01: the paged KV cache, as a program.
//
// A serving engine does not give each sequence one long K/V buffer; it keeps a pool of
// fixed-size pages and, per sequence, a block table of page ids. This program walks through
// the life of a few sequences in such a cache and checks every step:
//
//   1. prefill   ragged sequences grow one token at a time (decode steps interleave them),
//                the allocator hands out pages from its shuffled free list
//   2. fork      a sequence is forked (prefix sharing): no copy, every page gains a reference
//   3. COW       the fork appends: its last page is shared, so it is copied first
//   4. write     one batched decode step through the write path: slot mapping, then
//                write_slots() (vLLM's reshape_and_cache), a padding row skipped
//   5. memory    pages held against a contiguous cache reserving --max-len per sequence
//   6. free      every sequence is freed; the pool must be whole again
//
// After every phase: allocator and table invariants, and gather() of every sequence equal,
// bit for bit, to the tokens that went in. Any failure prints FAIL and exits 1.
//
// --summary prints the story in a few lines instead (the tour shows them); --dot prints the
// block tables and the pool after the copy-on-write as a Graphviz graph (the step's page draws it).
//
//   build/current/steps/step01_paged_cache [--seqs 4] [--page 16] [--seed 1] [--json FILE] [--quiet | --summary | --dot]

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/paged_cache.h"
#include "common/report.h"

namespace {

struct Options {
  int seqs = 4;
  int page = 16;
  std::uint64_t seed = 1;
  int kv_heads = 8;
  int head_dim = 128;
  pa::DType dtype = pa::DType::bf16;
  std::int64_t max_len = 2048;
  bool quiet = false;
  bool summary = false;
  bool dot = false;
  std::string json;
};

const char* usage =
    "usage: step01_paged_cache [options]\n"
    "  --seqs N       sequences to build (1..64, default 4)\n"
    "  --page N       tokens per page (1..1024, default 16)\n"
    "  --seed N       seed of the lengths, the values and the free-list order (default 1)\n"
    "  --kv-heads N   KV heads per token (default 8)\n"
    "  --head-dim N   channels per head (default 128)\n"
    "  --dtype T      storage type: f32, f16, bf16 (default bf16)\n"
    "  --max-len N    tokens a contiguous cache reserves per sequence (default 2048)\n"
    "  --json FILE    write the memory report as JSON\n"
    "  --quiet        print nothing unless a check fails (how ctest runs it)\n"
    "  --summary      print only the story: a block table, copy-on-write, memory waste\n"
    "  --dot          print only the block tables and the pool after the copy-on-write, as a\n"
    "                 Graphviz graph (docs/results/step01-block-tables.dot is this output)\n"
    "  --help         this text\n"
    "exit codes: 0 every check passed; 1 a check failed (FAIL names it); 2 a bad flag or value;\n"
    "  4 the --json file could not be written (nothing is half-written)\n";

long long parse_integer(std::string_view flag, const char* text, long long low, long long high) {
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || value < low || value > high)
    pa::throw_argument("step01_paged_cache", flag, pa::cat("an integer in [", low, ", ", high, "]"),
                       pa::cat('\'', text, '\''));
  return value;
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << usage;
      std::exit(0);
    }
    if (flag == "--quiet" || flag == "--summary" || flag == "--dot") {
      (flag == "--quiet" ? options.quiet : flag == "--summary" ? options.summary : options.dot) = true;
      continue;
    }
    if (i + 1 >= argc) pa::throw_argument("step01_paged_cache", flag, "a value after it", "nothing");
    const char* value = argv[++i];
    if (flag == "--seqs") options.seqs = static_cast<int>(parse_integer(flag, value, 1, 64));
    else if (flag == "--page") options.page = static_cast<int>(parse_integer(flag, value, 1, 1024));
    else if (flag == "--seed") options.seed = static_cast<std::uint64_t>(parse_integer(flag, value, 0, INT64_MAX));
    else if (flag == "--kv-heads") options.kv_heads = static_cast<int>(parse_integer(flag, value, 1, 64));
    else if (flag == "--head-dim") options.head_dim = static_cast<int>(parse_integer(flag, value, 1, 1024));
    else if (flag == "--dtype") options.dtype = pa::parse_dtype(value, "--dtype");
    else if (flag == "--max-len") options.max_len = parse_integer(flag, value, 1, INT32_MAX);
    else if (flag == "--json") options.json = value;
    else pa::throw_argument("step01_paged_cache", "flag", "one of the flags --help lists", pa::cat('\'', flag, '\''));
  }
  return options;
}

/// Seeded values in [-1, 1), rounded to the storage type so the shadow copy is exact.
class Values {
 public:
  Values(std::uint64_t seed, pa::DType dtype) : state_(pa::mix64(seed)), dtype_(dtype) {}
  std::vector<float> row(std::int64_t elems) {
    std::vector<float> row(static_cast<std::size_t>(elems));  // [num_kv_heads][head_dim]
    for (float& value : row) value = pa::round_to(dtype_, static_cast<float>(next() >> 40) * 0x1p-23f - 1.0f);
    return row;
  }
  std::uint64_t next() { return pa::mix64(state_ += 0x9e3779b97f4a7c15ull); }

 private:
  std::uint64_t state_;
  pa::DType dtype_;
};

/// What each sequence should hold: its K and V rows in token order (a contiguous cache).
struct Shadow {
  std::vector<std::vector<float>> keys, values;  // [token][num_kv_heads * head_dim]
};

std::string table_text(const std::vector<pa::PageId>& table) {
  std::string text = "[";
  for (std::size_t i = 0; i < table.size(); ++i) text += pa::cat(i ? ", " : "", table[i]);
  return text + "]";
}

/// One character per page: '.' free, otherwise its reference count (9+ shows as '+').
std::string pool_map(const pa::BlockAllocator& allocator) {
  std::string text;
  for (pa::PageId page = 0; page < allocator.num_blocks(); ++page) {
    if (page % 64 == 0) text += pa::cat(page ? "\n" : "", "    ", std::setw(5), page, "  ");
    const std::int32_t refs = allocator.ref_count(page);
    text += refs == 0 ? '.' : refs > 9 ? '+' : static_cast<char>('0' + refs);
  }
  return text + "\n";
}

class Step01 {
 public:
  /// Builds the cache; everything the step prints goes to \p log.
  Step01(const Options& options, std::ostringstream& log)
      : options_(options), values_(options.seed, options.dtype), cache_(config_for(options)), log_(log) {}

  /// Runs the six phases; throws pa::Error on the first failed check.
  void run();
  /// The story in a few lines, from what run() did (--summary).
  const std::string& summary() const { return summary_; }
  /// The block tables and the pool after the copy-on-write, as a Graphviz graph (--dot).
  const std::string& dot() const { return dot_; }
  /// The memory report and the live block tables as JSON (--json), from what run() did.
  const std::string& json() const { return json_; }

 private:
  static pa::CacheConfig config_for(const Options& options);
  static std::vector<std::int64_t> lengths_for(const Options& options);
  void append(int seq);
  void check(const char* phase);
  void print_tables();
  std::string dot_graph(int copied_page, int copied_from) const;

  Options options_;
  Values values_;
  pa::PagedKVCache cache_;
  std::map<int, Shadow> shadow_;
  std::ostringstream& log_;
  std::string summary_;
  std::string dot_;
  std::string json_;
};

std::vector<std::int64_t> Step01::lengths_for(const Options& options) {
  // Ragged lengths up to six pages; the first one ends mid-page so its fork shows
  // copy-on-write on its first append.
  std::uint64_t state = pa::mix64(options.seed ^ 0x1e9);
  std::vector<std::int64_t> lengths;
  for (int i = 0; i < options.seqs; ++i)
    lengths.push_back(1 + static_cast<std::int64_t>(pa::mix64(state += 0x9e3779b97f4a7c15ull) % (6u * options.page)));
  if (options.page > 1 && lengths[0] % options.page == 0) ++lengths[0];
  return lengths;
}

pa::CacheConfig Step01::config_for(const Options& options) {
  std::int64_t pages = 0;
  for (std::int64_t length : lengths_for(options)) pages += pa::pages_for(length, options.page);
  pa::CacheConfig config;
  config.num_kv_heads = options.kv_heads;
  config.block_size = options.page;
  config.head_dim = options.head_dim;
  // Room for the prefill, the fork's copied page, one new page per sequence in the decode
  // step, and a few left free so the pool map shows free pages.
  config.num_blocks = pages + 2 * (options.seqs + 1) + 4;
  config.dtype = options.dtype;
  config.page_order = pa::PageOrder::shuffled;  // pages come out scattered, as in a busy engine
  config.seed = options.seed;
  return config;
}

void Step01::append(int seq) {
  Shadow& shadow = shadow_[seq];
  shadow.keys.push_back(values_.row(cache_.row_elems()));
  shadow.values.push_back(values_.row(cache_.row_elems()));
  cache_.append_token(seq, shadow.keys.back(), shadow.values.back());
}

void Step01::check(const char* phase) {
  cache_.check_invariants();  // throws AllocatorError naming the page or sequence
  for (int seq : cache_.sequences()) {
    const pa::GatheredSequence gathered = cache_.gather(seq);
    const Shadow& shadow = shadow_.at(seq);
    const std::size_t dim = static_cast<std::size_t>(options_.head_dim);
    const std::size_t length = shadow.keys.size();
    if (gathered.context_len != static_cast<std::int64_t>(length))
      throw pa::Error(pa::cat(phase, ": sequence ", seq, " has ", gathered.context_len, " tokens, expected ", length));
    // gather() is [head][token][dim]; the shadow is [token][head * dim].
    for (std::size_t head = 0; head < static_cast<std::size_t>(options_.kv_heads); ++head)
      for (std::size_t token = 0; token < length; ++token)
        for (std::size_t d = 0; d < dim; ++d) {
          const std::size_t at = (head * length + token) * dim + d;
          const std::size_t in_row = head * dim + d;
          if (pa::float_bits(gathered.keys[at]) != pa::float_bits(shadow.keys[token][in_row]) ||
              pa::float_bits(gathered.values[at]) != pa::float_bits(shadow.values[token][in_row]))
            throw pa::Error(pa::cat(phase, ": sequence ", seq, " token ", token, " head ", head, " dim ", d,
                                    ": gather() differs from what was appended"));
        }
  }
  log_ << "    check: invariants hold, gather() of every sequence equals its tokens bit for bit\n";
}

void Step01::print_tables() {
  log_ << "    seq  tokens  pages  block table\n";
  for (int seq : cache_.sequences())
    log_ << "    " << std::setw(3) << seq << "  " << std::setw(6) << cache_.context_len(seq) << "  " << std::setw(5)
         << cache_.block_table(seq).size() << "  " << table_text(cache_.block_table(seq)) << "\n";
}

std::string Step01::dot_graph(int copied_page, int copied_from) const {
  // Each sequence's table is a column of entries (position -> page), the pool a column of pages
  // in id order; an edge per table entry. A page two tables share is shaded, the copy-on-write's
  // new page is marked, free pages are grey.
  const pa::BlockAllocator& allocator = cache_.allocator();
  const char* colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
  std::ostringstream dot;
  dot << "digraph block_tables {\n  rankdir=LR; ranksep=1.2; nodesep=0.15;\n"
      << "  node [shape=plaintext, fontname=\"Helvetica\", fontsize=10]; edge [arrowsize=0.6];\n";
  for (const int seq : cache_.sequences()) {
    dot << "  seq" << seq << " [label=<<table border=\"0\" cellborder=\"1\" cellspacing=\"0\" cellpadding=\"3\">"
        << "<tr><td bgcolor=\"" << colours[seq % 8] << "\"><font color=\"white\"><b>seq " << seq << "</b></font></td></tr>"
        << "<tr><td>" << cache_.context_len(seq) << " tokens</td></tr>";
    const std::vector<pa::PageId>& table = cache_.block_table(seq);
    for (std::size_t i = 0; i < table.size(); ++i) dot << "<tr><td port=\"e" << i << "\">[" << i << "] " << table[i] << "</td></tr>";
    dot << "</table>>];\n";
  }
  dot << "  pool [label=<<table border=\"0\" cellborder=\"1\" cellspacing=\"0\" cellpadding=\"3\">"
      << "<tr><td><b>pool</b></td></tr>";
  for (pa::PageId page = 0; page < allocator.num_blocks(); ++page) {
    const std::int32_t refs = allocator.ref_count(page);
    const char* fill = refs == 0 ? "#e0e0e0" : refs > 1 ? "#ffe08a" : "white";
    dot << "<tr><td port=\"p" << page << "\" bgcolor=\"" << fill << "\">page " << page;
    if (refs > 1) dot << ": " << refs << " holders";
    if (page == copied_page) dot << ": copy of " << copied_from;
    dot << "</td></tr>";
  }
  dot << "</table>>];\n";
  for (const int seq : cache_.sequences()) {
    const std::vector<pa::PageId>& table = cache_.block_table(seq);
    for (std::size_t i = 0; i < table.size(); ++i)
      dot << "  seq" << seq << ":e" << i << ":e -> pool:p" << table[i] << ":w [color=\"" << colours[seq % 8] << "\"];\n";
  }
  dot << "}\n";
  return dot.str();
}

void Step01::run() {
  const pa::CacheConfig& config = cache_.config();
  log_ << "step01_paged_cache: a pool of " << config.num_blocks << " pages of " << config.block_size << (config.block_size == 1 ? " token, " : " tokens, ")
       << config.num_kv_heads << " KV heads x " << config.head_dim << " channels, " << pa::dtype_name(config.dtype)
       << ", seed " << options_.seed << "\n\n";

  // 1. Prefill, one token per sequence per step, the way decode steps interleave sequences.
  const std::vector<std::int64_t> lengths = lengths_for(options_);
  std::vector<int> seqs;
  for (std::size_t i = 0; i < lengths.size(); ++i) seqs.push_back(cache_.add_sequence());
  const std::int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  for (std::int64_t position = 0; position < longest; ++position)
    for (std::size_t i = 0; i < seqs.size(); ++i)
      if (position < lengths[i]) append(seqs[i]);
  log_ << "1. prefill: " << seqs.size() << " sequences grow one token at a time; pages come off a shuffled free list\n";
  print_tables();
  check("prefill");
  const int widest = seqs[static_cast<std::size_t>(std::max_element(lengths.begin(), lengths.end()) - lengths.begin())];
  summary_ += pa::cat("block tables: ", seqs.size(), " sequences in a pool of ", config.num_blocks, " pages of ",
                      config.block_size, config.block_size == 1 ? " token" : " tokens", ", taken off a shuffled free\n  list, so tables are scattered: seq ",
                      widest, " (", cache_.context_len(widest), " tokens) is in pages ",
                      table_text(cache_.block_table(widest)), "\n");

  // 2. Fork: the child lists the parent's pages; nothing is copied.
  const int parent = seqs[0];
  const int child = cache_.fork(parent);
  shadow_[child] = shadow_[parent];
  log_ << "\n2. fork: seq " << child << " = fork(seq " << parent << ") lists the same pages "
       << table_text(cache_.block_table(child)) << "; each now has ref count "
       << cache_.allocator().ref_count(cache_.block_table(child).front()) << "\n";
  check("fork");

  // 3. Copy-on-write: the child's last page is shared, so its first append copies it.
  const auto describe_append = [this](int seq, const pa::AppendResult& result) {
    log_ << "    append to seq " << seq << ": token " << result.position << " -> slot " << result.slot << " (page "
         << result.page << ", offset " << result.slot % options_.page << ")";
    if (result.copied_from >= 0)
      log_ << ": page " << result.copied_from << " was shared, so it was copied to page " << result.page
           << " first (copy-on-write)";
    else if (result.new_page)
      log_ << ": the last page was full, so a new page was allocated";
    else
      log_ << ": written in place (the page is held by this sequence alone)";
    log_ << "\n";
  };
  log_ << "\n3. copy-on-write\n";
  int copied_page = -1, copied_from = -1;
  for (const int seq : {child, parent}) {
    Shadow& shadow = shadow_[seq];
    shadow.keys.push_back(values_.row(cache_.row_elems()));
    shadow.values.push_back(values_.row(cache_.row_elems()));
    const pa::AppendResult result = cache_.append_token(seq, shadow.keys.back(), shadow.values.back());
    describe_append(seq, result);
    if (result.copied_from >= 0) copied_page = static_cast<int>(result.page), copied_from = static_cast<int>(result.copied_from);
    if (result.copied_from >= 0)
      summary_ += pa::cat("copy-on-write: seq ", child, " = fork(seq ", parent, ") shares its pages; its first append found page ",
                          result.copied_from, "\n  shared, so it copied it to page ", result.page, " and wrote there\n");
    else if (seq == child)
      summary_ += pa::cat("fork: seq ", child, " = fork(seq ", parent, ") shares its pages; its last page was full, so its first\n",
                          "  append took a new page and nothing was copied\n");
  }
  print_tables();
  check("copy-on-write");
  dot_ = dot_graph(copied_page, copied_from);

  // 4. One batched decode step through the write path: the scheduler reserves a slot per
  //    sequence (append_slot), the kernel writes rows to slots (write_slots). A padding row
  //    (slot -1) stands for a batch entry with nothing to store.
  std::vector<std::int64_t> slots;
  std::vector<float> k_rows, v_rows;  // [rows][num_kv_heads][head_dim]
  for (const int seq : cache_.sequences()) {
    slots.push_back(cache_.append_slot(seq).slot);
    Shadow& shadow = shadow_[seq];
    shadow.keys.push_back(values_.row(cache_.row_elems()));
    shadow.values.push_back(values_.row(cache_.row_elems()));
    k_rows.insert(k_rows.end(), shadow.keys.back().begin(), shadow.keys.back().end());
    v_rows.insert(v_rows.end(), shadow.values.back().begin(), shadow.values.back().end());
  }
  slots.push_back(-1);
  const std::vector<float> padding(static_cast<std::size_t>(cache_.row_elems()), 0.0f);
  k_rows.insert(k_rows.end(), padding.begin(), padding.end());
  v_rows.insert(v_rows.end(), padding.begin(), padding.end());
  cache_.write_slots(slots, k_rows, v_rows);
  log_ << "\n4. write path: one decode step, slot_mapping = [";
  for (std::size_t i = 0; i < slots.size(); ++i) log_ << (i ? ", " : "") << slots[i];
  log_ << "] (slot = page * " << options_.page << " + offset; -1 is padding and skipped)\n";
  check("write path");

  // 5. Allocator state and memory.
  const pa::BlockAllocator& allocator = cache_.allocator();
  log_ << "\n5. allocator: " << allocator.num_used() << " of " << allocator.num_blocks() << " pages used, "
       << allocator.num_free() << " free\n";
  if (allocator.num_blocks() <= 1024) log_ << "    pool ('.' free, digit = ref count):\n" << pool_map(allocator);
  const pa::MemoryReport reserved = cache_.memory_report(std::max(options_.max_len, longest + 2));
  const pa::MemoryReport tight = cache_.memory_report();
  summary_ += pa::cat("memory wasted: paged ", pa::format_fixed(reserved.paged_waste_percent(), 1),
                      "% (under a page a sequence); contiguous, reserving ", reserved.reserved_len,
                      " tokens a\n  sequence, ", pa::format_fixed(reserved.contiguous_waste_percent(), 1), "% (",
                      pa::format_fixed(tight.contiguous_waste_percent(), 1), "% if it reserved only the longest)\n");
  log_ << "\n    memory, against a contiguous cache reserving --max-len tokens per sequence:\n";
  std::istringstream reserved_table(reserved.table());
  for (std::string line; std::getline(reserved_table, line);) log_ << "    " << line << "\n";
  log_ << "\n    and against one reserving only the longest sequence (the contiguous cache's best case):\n";
  std::istringstream tight_table(tight.table());
  for (std::string line; std::getline(tight_table, line);) log_ << "    " << line << "\n";
  if (!options_.json.empty()) {
    std::ostringstream file;
    // The live sequences' tables (after the fork and the decode step) with the pool's size: enough
    // to draw which page each sequence holds (notebooks/paged_memory.ipynb).
    std::string sequences;
    for (const int seq : cache_.sequences())
      sequences += pa::cat(sequences.empty() ? "" : ", ", "{\"seq\": ", seq, ", \"tokens\": ", cache_.context_len(seq),
                           ", \"block_table\": ", table_text(cache_.block_table(seq)), "}");
    file << "{\"step\": \"01_paged_cache\", \"seed\": " << options_.seed << ", \"dtype\": \"" << pa::dtype_name(config.dtype)
         << "\", \"memory\": " << reserved.json() << ", \"memory_best_case_contiguous\": " << tight.json()
         << ", \"pool_pages\": " << config.num_blocks << ", \"sequences\": [" << sequences
         << "], \"stamp\": " << pa::Stamp::collect(false).to_json().dump() << "}\n";
    json_ = file.str();
    log_ << "    wrote " << options_.json << "\n";
  }

  // 6. Free everything: the pool must be whole.
  for (const int seq : cache_.sequences()) {
    cache_.free_sequence(seq);
    shadow_.erase(seq);
  }
  check("free");
  const std::string leaks = cache_.leak_report();
  if (!leaks.empty()) throw pa::Error(pa::cat("free: the pool is not whole: ", leaks));
  log_ << "\n6. free: every sequence freed; " << allocator.num_free() << " of " << allocator.num_blocks()
       << " pages free, no leaks\n\nPASS\n";
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    options = parse(argc, argv);
  } catch (const pa::Error& error) {
    std::cerr << error.what() << "\n\n" << usage;
    return 2;
  }
  // The exit codes are the step programs' (docs/design/CORRECTNESS.md): 1 a failed check, 2 a
  // bad flag, 4 the --json file (asked before the run; written whole or not at all).
  try {
    if (!options.json.empty()) pa::require_writable(options.json);
  } catch (const pa::Error& error) {
    std::cerr << "step01_paged_cache: --json: " << error.what() << "\n";
    return 4;
  }
  // Everything is logged to a buffer: --quiet prints it only when a check fails.
  std::ostringstream log;
  std::string failure, summary, dot, json;
  try {
    Step01 step(options, log);
    step.run();
    summary = step.summary();
    dot = step.dot();
    json = step.json();
  } catch (const std::exception& error) {
    failure = error.what();
  }
  if (failure.empty() && !options.json.empty()) try {
      pa::write_file_whole(options.json, [&](std::ostream& file) { file << json; });
    } catch (const pa::Error& error) {
      std::cerr << "step01_paged_cache: --json: " << error.what() << "\n";
      return 4;
    }
  if (options.dot && failure.empty()) std::cout << dot;
  else if (options.summary && failure.empty()) std::cout << summary;
  else if (!options.quiet || !failure.empty()) std::cout << log.str();
  if (!failure.empty()) {
    std::cout << "FAIL: " << failure << "\n";
    return 1;
  }
  return 0;
}
