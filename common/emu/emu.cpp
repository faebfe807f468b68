#include "common/emu/emu.h"

#include <algorithm>
#include <bit>
#include <boost/context/fiber.hpp>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <numeric>
#include <span>
#include <sstream>

namespace pa::emu {
namespace {

namespace bctx = boost::context;

enum class ThreadState : std::uint8_t { runnable, at_barrier, at_collective, exited };

struct Thread {
  bctx::fiber fiber;      // the thread's own context while it is suspended
  bctx::fiber scheduler;  // the scheduler's context while the thread runs
  ThreadState state = ThreadState::runnable;
  dim3 idx;
  int linear = 0;
  int warp = 0;
  int lane = 0;
  std::source_location where;  // the barrier or collective it waits at
  Collective kind = Collective::syncwarp;
  unsigned mask = 0;
  int param = 0;
  int width = 32;
  std::uint64_t payload = 0;
  std::uint64_t result = 0;
  WarpCombine combine = nullptr;  // Collective::combine: the operation, and its name for messages
  const char* op_name = "";
  std::uint32_t groups_committed = 0;  // async_commit() calls so far: the open group's number
  bool waited_for_previous = false;    // has called wait_for_previous_kernel()
};

/// An asynchronous copy a thread has issued and no async_wait has completed yet.
struct PendingCopy {
  SharedArray* array;
  std::int64_t index;          // first destination element
  std::int64_t count;          // elements
  std::uint32_t group;         // the group it joined (its thread's groups_committed at issue)
  bool zero;                   // a zero fill: nothing to land but zeros
  std::source_location where;  // the copy_async / zero_async
  unsigned char data[16];      // the bytes read from global memory at issue
};

/// Global bytes [begin, end) a launch wrote.
struct ByteRange {
  std::uintptr_t begin;
  std::uintptr_t end;
};

/// What a launch wrote (or read) so far: byte ranges, compacted (sorted and merged) whenever the
/// list has doubled since the last compaction.
struct RangeLog {
  std::vector<ByteRange> ranges;
  std::size_t compacted = 0;  ///< the list's size after its last compaction
};

/// A read of a block table (a tensor some paged tensor names as its table) by one thread: the
/// entries are read back from \p base when a message needs them (a table is a kernel's input,
/// unchanged while it runs).
struct TableRead {
  int tensor;
  const void* base;
  std::int64_t index;  // first element
  std::int64_t count;  // elements
  std::size_t elem_size;
  std::source_location where;
};

/// A thread's most recent block-table reads, a ring: a kernel may look up several pages ahead
/// of the one it reads (step 10 looks up a tile's pages while it reads the previous tile's).
struct TableReads {
  static constexpr std::uint32_t kKept = 16;
  TableRead recent[kKept];
  std::uint32_t total = 0;  // reads so far in this program; the newest is recent[(total - 1) % kKept]
};

/// splitmix64: a 64-bit mixing function, the same on every platform (the orders a seed gives
/// must not depend on the standard library).
std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// The generator of the shuffled orders (splitmix64's sequence).
struct OrderRng {
  std::uint64_t state;
  /// A number in [0, n).
  std::uint32_t below(std::uint32_t n) {
    state += 0x9e3779b97f4a7c15ull;
    return static_cast<std::uint32_t>((mix64(state) >> 32) * n >> 32);
  }
  /// Fisher-Yates over \p items.
  template <class Item>
  void shuffle(std::vector<Item>& items) {
    for (std::size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[below(static_cast<std::uint32_t>(i))]);
  }
};

/// FNV-1a of \p text, so that two kernels of one run get different orders from one seed.
std::uint64_t name_hash(const char* text) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (; *text; ++text) hash = (hash ^ static_cast<unsigned char>(*text)) * 0x100000001b3ull;
  return hash;
}

struct StaticKey {
  const char* file;
  std::uint_least32_t line;
  std::uint_least32_t column;
  bool operator==(const StaticKey&) const = default;
};

/// Stacks are reused across programs: a decode launch runs thousands of programs.
class StackPool {
 public:
#if defined(BOOST_USE_ASAN)
  static constexpr std::size_t kStackBytes = 512 * 1024;
#else
  static constexpr std::size_t kStackBytes = 128 * 1024;
#endif
  bctx::stack_context allocate() {
    if (free_.empty()) {
      free_.push_back(std::make_unique<unsigned char[]>(kStackBytes));
    }
    unsigned char* base = free_.back().release();
    free_.pop_back();
    bctx::stack_context sctx;
    sctx.size = kStackBytes;
    sctx.sp = base + kStackBytes;
    return sctx;
  }
  void deallocate(bctx::stack_context& sctx) noexcept {
    unsigned char* base = static_cast<unsigned char*>(sctx.sp) - sctx.size;
    free_.emplace_back(base);
  }

 private:
  std::vector<std::unique_ptr<unsigned char[]>> free_;
};

/// Adapts the pool to Boost.Context's StackAllocator concept (copied into each fiber).
struct PooledStack {
  StackPool* pool;
  bctx::stack_context allocate() { return pool->allocate(); }
  void deallocate(bctx::stack_context& sctx) noexcept { pool->deallocate(sctx); }
};

struct Program {
  const LaunchShape* shape = nullptr;
  dim3 block_idx;
  std::vector<Thread> threads;
  std::uint32_t epoch = 1;  // barrier epochs start at 1 so a zeroed record is never current
  /// A warp's count of completed __syncwarp calls; a shared access records its warp's count.
  std::vector<std::uint32_t> warp_epochs;
  /// A warp's count after its last __syncwarp that named every lane of the warp.
  std::vector<std::uint32_t> full_syncs;
  /// A warp's count after its last __syncwarp that named both lanes a and b ([a * 32 + b]), for
  /// partial masks only; empty until the warp's first such call.
  std::vector<std::vector<std::uint32_t>> pair_syncs;
  std::vector<std::pair<StaticKey, std::unique_ptr<SharedArray>>> static_arrays;
  std::size_t static_bytes = 0;
  std::unique_ptr<SharedArray> dynamic;
  bool traced = false;
};

struct Runtime {
  Program* program = nullptr;
  Thread* current = nullptr;
  std::exception_ptr error;
  bool aborting = false;  ///< a fault ended the program: suspended threads unwind, unstarted ones skip
  StackPool stacks;
  Limits limits;
  std::vector<std::string> tensor_names;
  std::vector<TensorTraffic> traffic;
  Counters totals;  // launches, programs, threads, barriers, collectives (tensors filled on read)
  bool tracing = false;
  dim3 traced_block;
  std::vector<TraceEntry> trace;
  /// Per thread of the running program (by linear id), its pending copies, oldest first. Kept
  /// across programs so that the vectors' storage is reused.
  std::vector<std::vector<PendingCopy>> copies;
  RangeLog launch_writes;                    ///< what the running launch wrote so far
  std::vector<ByteRange> previous_writes;    ///< what the launch before it wrote: sorted, disjoint
  /// What the running launch read so far (global memory), a log a tensor (by tensor id): one
  /// tensor's reads mostly continue each other, where the reads of all tensors interleave.
  std::vector<RangeLog> launch_reads;
  std::vector<ByteRange> previous_reads;     ///< what the launch before it read: sorted, disjoint
  bool launch_allows_next = false;           ///< the running launch called allow_next_kernel(): reads recorded
  std::string previous_kernel;               ///< that launch's kernel name
  ThreadOrder order;                         ///< valid once order_known
  bool order_known = false;                  ///< read from the environment or set
  OrderRng order_rng{0};                     ///< the running program's generator (shuffled order)
  std::vector<int> round_order;              ///< the running program's threads in this round's order
  std::vector<std::uint8_t> is_table;        ///< by tensor id: a paged tensor names it as its table
  std::vector<TableReads> table_reads;       ///< per thread of the running program (by linear id)
};

thread_local Runtime rt;

std::string dim_str(const dim3& d) { return cat('(', d.x, ',', d.y, ',', d.z, ')'); }
/// "file:line" with the file's path relative to the repository (the root is what precedes
/// common/emu/emu.cpp in this file's own path), or from "kernels/" on for a path outside it.
std::string where_str(const std::source_location& w) {
  static const std::string root = [] {
    const std::string self = std::source_location::current().file_name();
    const auto at = self.rfind("common/emu/emu.cpp");
    return at == std::string::npos ? std::string() : self.substr(0, at);
  }();
  std::string file = w.file_name();
  if (!root.empty() && file.starts_with(root)) {
    file = file.substr(root.size());
  } else if (const auto slash = file.find("kernels/"); slash != std::string::npos) {
    file = file.substr(slash);
  }
  return cat(file, ':', w.line());
}

/// "kernel K, program (x,y,z), thread (x,y,z)": the prefix of every message.
std::string here() {
  std::ostringstream out;
  out << "kernel " << (rt.program ? rt.program->shape->kernel_name : "?");
  if (rt.program) out << ", program " << dim_str(rt.program->block_idx);
  if (rt.current) out << ", thread " << dim_str(rt.current->idx);
  return out.str();
}

/// The thread order's note at the end of a message: empty in the fixed order, which needs none to
/// be repeated; the seed in a shuffled one.
std::string order_note() { return rt.order_known && rt.order.shuffled ? cat(" [", describe(rt.order), ']') : ""; }

[[noreturn]] void fault(const std::string& what) { throw KernelError(cat(here(), ": ", what, order_note())); }

/// " at file:line": the place a fault happened, as messages end.
std::string at(const std::source_location& where) { return cat(" at ", where_str(where)); }

Program& program() {
  if (!rt.program || !rt.current) throw KernelError("emulator: a kernel built-in was used outside a launch");
  return *rt.program;
}

/// Thrown into a suspended thread when a fault has ended its program (see abort_program).
struct ProgramAborted {};

/// Suspends the running thread and returns to the scheduler.
void yield_to_scheduler() {
  Thread& self = *rt.current;
  self.scheduler = std::move(self.scheduler).resume();
  if (rt.aborting) throw ProgramAborted{};
}

std::string lanes_str(const std::vector<int>& lanes) {
  std::ostringstream out;
  for (std::size_t i = 0; i < lanes.size(); ++i) {
    std::size_t j = i;
    while (j + 1 < lanes.size() && lanes[j + 1] == lanes[j] + 1) ++j;
    if (i) out << ',';
    out << lanes[i];
    if (j > i) out << '-' << lanes[j];
    i = j;
  }
  return out.str();
}

const char* collective_name(Collective kind) {
  switch (kind) {
    case Collective::syncwarp: return "__syncwarp";
    case Collective::shfl_xor: return "__shfl_xor_sync";
    case Collective::shfl_down: return "__shfl_down_sync";
    case Collective::shfl_up: return "__shfl_up_sync";
    case Collective::shfl_idx: return "__shfl_sync";
    case Collective::ballot: return "__ballot_sync";
    case Collective::combine: return "a warp-wide matrix instruction";
  }
  return "?";
}

/// What a thread waits at, for messages: the collective, or the matrix instruction's own name.
const char* collective_label(const Thread& t) {
  return t.kind == Collective::combine ? t.op_name : collective_name(t.kind);
}

std::string hex(unsigned mask) {
  std::ostringstream out;
  out << "0x" << std::hex;
  out.width(8);
  out.fill('0');
  out << mask;
  return out.str();
}

/// Whether \p a and \p b are the same line of source.
bool same_place(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && std::strcmp(a.file_name(), b.file_name()) == 0;
}

/// Records a completed __syncwarp of warp \p warp with \p mask (of its \p lanes_here lanes):
/// from now on it orders the shared accesses before it of the lanes it named (and only those:
/// a shuffle, a ballot or a matrix instruction orders no memory, as the CUDA guide says of them).
void record_syncwarp(Program& prog, int warp, unsigned mask, int lanes_here) {
  const auto w = static_cast<std::size_t>(warp);
  const std::uint32_t now = ++prog.warp_epochs[w];
  const unsigned every = lanes_here == 32 ? 0xffffffffu : (1u << lanes_here) - 1;
  if ((mask & every) == every) {
    prog.full_syncs[w] = now;
    return;
  }
  std::vector<std::uint32_t>& pairs = prog.pair_syncs[w];
  if (pairs.empty()) pairs.assign(32 * 32, 0);
  for (int a = 0; a < 32; ++a)
    if (mask >> a & 1u)
      for (int b = 0; b < 32; ++b)
        if (mask >> b & 1u) pairs[static_cast<std::size_t>(a * 32 + b)] = now;
}

/// Completes the warp collectives whose every named lane that has not exited has arrived (CUDA:
/// "all non-exited threads named in mask must execute the same intrinsic"; an exited lane, or
/// one past the end of a partial warp, takes no part, and a shuffle that reads one faults).
/// The matrix instructions (.aligned) need every lane of the warp. Returns true if any thread
/// was released. Called only when no thread is runnable.
bool resolve_warps(Program& prog) {
  bool released = false;
  const int num_threads = static_cast<int>(prog.threads.size());
  const int num_warps = (num_threads + 31) / 32;
  for (int warp = 0; warp < num_warps; ++warp) {
    const int first = warp * 32;
    const int lanes_here = std::min(32, num_threads - first);
    for (int lane = 0; lane < lanes_here; ++lane) {
      Thread& t = prog.threads[first + lane];
      if (t.state != ThreadState::at_collective) continue;
      rt.current = &t;
      const unsigned mask = t.mask;
      if (!(mask >> lane & 1u))
        fault(cat(collective_label(t), " at ", where_str(t.where), " with mask ", hex(mask),
                  ", which does not include the calling lane ", lane));
      const bool matrix = t.kind == Collective::combine;
      if (matrix && lanes_here < 32)
        fault(cat(t.op_name, " at ", where_str(t.where), " needs a whole warp; this one has ", lanes_here, " threads"));
      bool complete = true;
      for (int other = 0; other < lanes_here; ++other) {
        if (!(mask >> other & 1u)) continue;
        const Thread& o = prog.threads[first + other];
        if (o.state == ThreadState::exited) {
          if (matrix)
            fault(cat(collective_label(t), " at ", where_str(t.where), " with mask ", hex(mask),
                      " waits for lane ", other, ", which has exited (a matrix instruction needs every lane)"));
          continue;  // takes no part
        }
        if (o.state == ThreadState::at_barrier)
          fault(cat(collective_label(t), " at ", where_str(t.where), " with mask ", hex(mask),
                    " waits for lane ", other, ", which waits at __syncthreads at ",
                    where_str(o.where), " (deadlock)"));
        if (o.state != ThreadState::at_collective) {
          complete = false;
          continue;
        }
        if (o.kind != t.kind || o.mask != mask || o.combine != t.combine || (matrix && !same_place(o.where, t.where)))
          fault(cat("lane ", lane, " calls ", collective_label(t), " at ", where_str(t.where),
                    " with mask ", hex(mask), " but lane ", other, " calls ", collective_label(o),
                    " at ", where_str(o.where), " with mask ", hex(o.mask)));
      }
      if (!complete) continue;
      if (matrix) {  // one operation over every lane's operands
        void* operands[32];
        for (int other = 0; other < 32; ++other)
          operands[other] = reinterpret_cast<void*>(static_cast<std::uintptr_t>(prog.threads[first + other].payload));
        t.combine(operands);
        for (int other = 0; other < 32; ++other) prog.threads[first + other].state = ThreadState::runnable;
        ++rt.totals.warp_collectives;
        released = true;
        continue;
      }
      // Every named lane that has not exited is here: exchange.
      const auto takes_part = [&](int l) {
        return l < lanes_here && (mask >> l & 1u) && prog.threads[first + l].state == ThreadState::at_collective;
      };
      std::uint64_t ballot = 0;
      for (int other = 0; other < lanes_here; ++other)
        if (takes_part(other) && prog.threads[first + other].payload != 0) ballot |= 1ull << other;
      std::uint64_t values[32] = {};
      for (int other = 0; other < lanes_here; ++other) values[other] = prog.threads[first + other].payload;
      int members[32];
      int count = 0;
      for (int member = 0; member < lanes_here; ++member)
        if (takes_part(member)) members[count++] = member;
      for (const int member : std::span<const int>(members, static_cast<std::size_t>(count))) {
        Thread& m = prog.threads[first + member];
        rt.current = &m;
        const int width = m.width;
        const int base = member & ~(width - 1);
        const int param = m.param & 31;  // the lane operand's low 5 bits (PTX shfl.sync's b[4:0])
        int source = member;
        switch (m.kind) {
          case Collective::syncwarp: break;
          case Collective::ballot: break;
          case Collective::combine: break;  // handled above
          case Collective::shfl_xor: {
            const int s = member ^ param;  // an earlier segment may be read, a later one not (bfly)
            if (s < base + width) source = s;
            break;
          }
          case Collective::shfl_down:
            if (member + param < base + width) source = member + param;
            break;
          case Collective::shfl_up:
            if (member - param >= base) source = member - param;
            break;
          case Collective::shfl_idx: source = base + (m.param & (width - 1)); break;
        }
        if (m.kind == Collective::ballot) {
          m.result = ballot;
        } else if (m.kind != Collective::syncwarp) {
          if (source >= lanes_here || !(mask >> source & 1u))
            fault(cat(collective_label(m), " at ", where_str(m.where), " with mask ", hex(mask),
                      ": lane ", member, " reads lane ", source,
                      source >= lanes_here ? ", which this warp does not have (its value is undefined on a GPU)"
                                           : ", which is not in the mask (its value is undefined on a GPU)"));
          if (prog.threads[first + source].state == ThreadState::exited)
            fault(cat(collective_label(m), " at ", where_str(m.where), " with mask ", hex(mask),
                      ": lane ", member, " reads lane ", source, ", which has exited (its value is undefined on a GPU)"));
          m.result = values[source];
        }
      }
      for (int i = 0; i < count; ++i) prog.threads[first + members[i]].state = ThreadState::runnable;
      if (t.kind == Collective::syncwarp) record_syncwarp(prog, warp, mask, lanes_here);
      ++rt.totals.warp_collectives;
      released = true;
    }
  }
  rt.current = nullptr;
  return released;
}

/// Releases a barrier every live thread waits at; reports divergent barriers and deadlocks.
bool resolve_barrier(Program& prog) {
  std::vector<int> exited, at_barrier, elsewhere;
  for (const Thread& t : prog.threads) {
    if (t.state == ThreadState::exited) exited.push_back(t.linear);
    else if (t.state == ThreadState::at_barrier) at_barrier.push_back(t.linear);
    else elsewhere.push_back(t.linear);
  }
  if (at_barrier.empty()) return false;
  const Thread& first = prog.threads[at_barrier.front()];
  rt.current = nullptr;
  if (!elsewhere.empty()) {
    const Thread& other = prog.threads[elsewhere.front()];
    fault(cat("deadlock: threads ", lanes_str(at_barrier), " wait at __syncthreads at ",
              where_str(first.where), " while threads ", lanes_str(elsewhere), " wait at ",
              collective_label(other), " at ", where_str(other.where)));
  }
  if (!exited.empty())
    fault(cat("divergent barrier: threads ", lanes_str(exited),
              " exited without reaching __syncthreads at ", where_str(first.where),
              ", where threads ", lanes_str(at_barrier), " wait"));
  std::vector<int> other_site;
  for (int id : at_barrier) {
    const Thread& t = prog.threads[id];
    if (t.where.line() != first.where.line() || std::string_view(t.where.file_name()) != first.where.file_name())
      other_site.push_back(id);
  }
  if (!other_site.empty()) {
    std::vector<int> same;
    for (int id : at_barrier)
      if (std::find(other_site.begin(), other_site.end(), id) == other_site.end()) same.push_back(id);
    fault(cat("divergent barrier: threads ", lanes_str(same), " wait at __syncthreads at ",
              where_str(first.where), " but threads ", lanes_str(other_site), " wait at ",
              where_str(prog.threads[other_site.front()].where)));
  }
  ++prog.epoch;
  for (Thread& t : prog.threads) t.state = ThreadState::runnable;
  ++rt.totals.barriers;
  return true;
}

/// Ends every fiber of a program a fault stopped, each on its own: an unstarted thread skips
/// its body, a suspended one unwinds from its yield (ProgramAborted). Destroying suspended
/// fibers instead would unwind them with Boost's forced_unwind, which the ucontext back end of
/// the sanitizer builds did not survive: the next launch resumed into a stale context.
void abort_program(Program& prog) {
  rt.aborting = true;
  for (Thread& t : prog.threads) {
    if (t.fiber && t.state != ThreadState::exited) {
      rt.current = &t;
      t.fiber = std::move(t.fiber).resume();
    }
  }
  rt.aborting = false;
  rt.current = nullptr;
  prog.threads.clear();
}

void run_program(Program& prog, const std::function<void()>& body) {
  const LaunchShape& shape = *prog.shape;
  const int num_threads = static_cast<int>(shape.block.volume());
  prog.threads.clear();
  prog.threads.resize(num_threads);
  prog.warp_epochs.assign((num_threads + 31) / 32, 1);
  prog.full_syncs.assign(prog.warp_epochs.size(), 0);
  prog.pair_syncs.assign(prog.warp_epochs.size(), {});
  if (shape.dynamic_shared_bytes > 0) {
    prog.dynamic = std::make_unique<SharedArray>();
    prog.dynamic->name = "dynamic shared";
  }
  if (rt.copies.size() < static_cast<std::size_t>(num_threads)) rt.copies.resize(static_cast<std::size_t>(num_threads));
  for (int id = 0; id < num_threads; ++id) rt.copies[static_cast<std::size_t>(id)].clear();  // left by a program a fault ended
  if (rt.table_reads.size() < static_cast<std::size_t>(num_threads)) rt.table_reads.resize(static_cast<std::size_t>(num_threads));
  for (int id = 0; id < num_threads; ++id) rt.table_reads[static_cast<std::size_t>(id)].total = 0;
  std::vector<int>& order = rt.round_order;  // the threads in the order this round runs them
  order.resize(static_cast<std::size_t>(num_threads));
  std::iota(order.begin(), order.end(), 0);
  if (rt.order.shuffled) {  // this program's own generator: its orders do not depend on the programs before it
    const dim3& b = prog.block_idx;
    const std::uint64_t program = (std::uint64_t{b.z} * shape.grid.y + b.y) * shape.grid.x + b.x;
    rt.order_rng.state = mix64(mix64(rt.order.seed ^ name_hash(shape.kernel_name)) + program);
  }
  for (int id = 0; id < num_threads; ++id) {
    Thread& t = prog.threads[id];
    t.linear = id;
    t.warp = id / 32;
    t.lane = id % 32;
    t.idx = dim3(id % shape.block.x, (id / shape.block.x) % shape.block.y,
                 id / (shape.block.x * shape.block.y));
    t.fiber = bctx::fiber(std::allocator_arg, PooledStack{&rt.stacks},
                          [&t, &body](bctx::fiber&& scheduler) {
                            t.scheduler = std::move(scheduler);
                            if (!rt.aborting) try {  // an aborted program's unstarted threads skip the body
                              body();
                            } catch (const ProgramAborted&) {
                            } catch (const bctx::detail::forced_unwind&) {
                              throw;
                            } catch (...) {
                              if (!rt.error) rt.error = std::current_exception();
                            }
                            // Copies still in flight are dropped (legal on a GPU while nothing
                            // reads them): their elements stay poison and in flight.
                            rt.copies[static_cast<std::size_t>(t.linear)].clear();
                            t.state = ThreadState::exited;
                            return std::move(t.scheduler);
                          });
  }
  for (;;) {
    if (rt.order.shuffled) rt.order_rng.shuffle(order);
    bool all_exited = true;
    for (const int id : order) {
      Thread& t = prog.threads[static_cast<std::size_t>(id)];
      if (t.state == ThreadState::runnable) {
        rt.current = &t;
        t.fiber = std::move(t.fiber).resume();
        rt.current = nullptr;
        if (rt.error) return;  // the caller unwinds the other fibers and rethrows
      }
      if (t.state != ThreadState::exited) all_exited = false;
    }
    if (all_exited) return;
    if (resolve_warps(prog)) continue;
    if (resolve_barrier(prog)) continue;
    // Blocked at warp collectives that can never complete (a named lane never arrives).
    for (Thread& t : prog.threads) {
      if (t.state == ThreadState::at_collective) {
        rt.current = &t;
        fault(cat(collective_label(t), " at ", where_str(t.where), " with mask ", hex(t.mask),
                  " can never complete"));
      }
    }
    return;
  }
}

/// Sorts \p ranges and merges the ones that overlap or touch.
void compact(std::vector<ByteRange>& ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
  std::size_t kept = 0;
  for (const ByteRange& r : ranges) {
    if (kept > 0 && r.begin <= ranges[kept - 1].end) {
      ranges[kept - 1].end = std::max(ranges[kept - 1].end, r.end);
    } else {
      ranges[kept++] = r;
    }
  }
  ranges.resize(kept);
}

/// Adds [begin, end) to \p log. Consecutive accesses usually continue the last range (threads
/// touch neighbouring elements in turn), so that costs one comparison; otherwise the list
/// grows, and is compacted whenever it has doubled.
void record_range(RangeLog& log, std::uintptr_t begin, std::uintptr_t end) {
  std::vector<ByteRange>& ranges = log.ranges;
  if (!ranges.empty() && begin <= ranges.back().end && end >= ranges.back().begin) {
    ranges.back().begin = std::min(ranges.back().begin, begin);
    ranges.back().end = std::max(ranges.back().end, end);
    return;
  }
  ranges.push_back({begin, end});
  if (ranges.size() >= 2 * log.compacted + 1024) {
    compact(ranges);
    log.compacted = ranges.size();
  }
}

/// The first byte of [begin, end) in \p ranges (sorted, disjoint), or \p end if none.
std::uintptr_t first_in(const std::vector<ByteRange>& ranges, std::uintptr_t begin, std::uintptr_t end) {
  // The first range that ends after begin.
  const auto it = std::upper_bound(ranges.begin(), ranges.end(), begin,
                                   [](std::uintptr_t address, const ByteRange& r) { return address < r.end; });
  if (it == ranges.end() || it->begin >= end) return end;
  return std::max(it->begin, begin);
}

/// Ends a launch (finished or faulted): what it wrote and read becomes what the next launch
/// checks, if it is launched overlapped.
void finish_launch_accesses(const LaunchShape& shape) {
  compact(rt.launch_writes.ranges);
  rt.previous_writes.swap(rt.launch_writes.ranges);
  rt.launch_writes.ranges.clear();  // keeps its storage for the next launch
  rt.launch_writes.compacted = 0;
  rt.previous_reads.clear();
  for (RangeLog& reads : rt.launch_reads) {
    rt.previous_reads.insert(rt.previous_reads.end(), reads.ranges.begin(), reads.ranges.end());
    reads.ranges.clear();
    reads.compacted = 0;
  }
  compact(rt.previous_reads);
  rt.launch_allows_next = false;
  rt.previous_kernel = shape.kernel_name;
}

}  // namespace

Limits& limits() { return rt.limits; }

void launch(const LaunchShape& shape, const std::function<void()>& thread_body) {
  if (rt.program) throw KernelError("emulator: launch() called from inside a kernel");
  const std::string name = shape.kernel_name;
  if (shape.grid.volume() == 0)
    throw KernelError(cat("kernel ", name, ": grid ", dim_str(shape.grid), " has no programs (a GPU "
                          "rejects this launch with an invalid-configuration error)"));
  if (shape.block.volume() == 0 || shape.block.volume() > rt.limits.max_threads_per_block)
    throw KernelError(cat("kernel ", name, ": block ", dim_str(shape.block), " has ", shape.block.volume(),
                          " threads; expected 1 to ", rt.limits.max_threads_per_block));
  if (shape.dynamic_shared_bytes > rt.limits.max_dynamic_shared)
    throw KernelError(cat("kernel ", name, ": asks for ", shape.dynamic_shared_bytes,
                          " bytes of dynamic shared memory; the device allows ", rt.limits.max_dynamic_shared));
  thread_order();  // reads PAGEDATTN_EMU_SHUFFLE on the first launch (a bad value throws here)
  ++rt.totals.launches;
  // The programs by linear index (x fastest), in grid order or shuffled.
  std::vector<std::uint64_t> programs(shape.grid.volume());
  std::iota(programs.begin(), programs.end(), std::uint64_t{0});
  if (rt.order.shuffled) OrderRng{mix64(rt.order.seed ^ name_hash(shape.kernel_name))}.shuffle(programs);
  Program prog;
  prog.shape = &shape;
  for (const std::uint64_t linear : programs) {
    const auto x = static_cast<unsigned>(linear % shape.grid.x);
    const auto y = static_cast<unsigned>(linear / shape.grid.x % shape.grid.y);
    const auto z = static_cast<unsigned>(linear / (std::uint64_t{shape.grid.x} * shape.grid.y));
    prog.block_idx = dim3(x, y, z);
    prog.epoch = 1;
    prog.static_arrays.clear();
    prog.static_bytes = 0;
    prog.dynamic.reset();
    prog.traced = rt.tracing && rt.traced_block.x == x && rt.traced_block.y == y && rt.traced_block.z == z;
    rt.program = &prog;
    // A fault raised inside a thread is parked in rt.error; one found by the scheduler
    // (divergent barrier, bad mask) is thrown directly. Either way the suspended fibers
    // are unwound (their stacks go back to the pool) and the emulator is ready again.
    std::exception_ptr error;
    try {
      run_program(prog, thread_body);
    } catch (...) {
      error = std::current_exception();
    }
    if (!error) error = rt.error;
    rt.error = nullptr;
    if (error) {
      abort_program(prog);
      rt.program = nullptr;
      rt.current = nullptr;
      finish_launch_accesses(shape);
      std::rethrow_exception(error);
    }
    ++rt.totals.programs;
    rt.totals.threads += prog.threads.size();
    prog.threads.clear();
    rt.program = nullptr;
  }
  finish_launch_accesses(shape);
}

ThreadOrder thread_order() {
  if (!rt.order_known) {
    const char* value = std::getenv("PAGEDATTN_EMU_SHUFFLE");
    const std::string text = value ? value : "";
    ThreadOrder order;
    if (!text.empty() && text != "off") {
      std::size_t used = 0;
      try {
        order.seed = std::stoull(text, &used, 10);
      } catch (const std::exception&) {
        used = 0;
      }
      // Error, not ArgumentError: a program reports a bad setting, not a kernel's refusal.
      if (used != text.size() || text.front() == '-')
        throw Error(cat("emulator: PAGEDATTN_EMU_SHUFFLE: expected a seed (a decimal number from 0 to 2^64-1), "
                        "\"off\" or nothing, got \"", text, '"'));
      order.shuffled = true;
    }
    rt.order = order;
    rt.order_known = true;
  }
  return rt.order;
}

void set_thread_order(ThreadOrder order) {
  rt.order = order;
  rt.order_known = true;
}

std::string describe(const ThreadOrder& order) {
  if (!order.shuffled) return "fixed order";
  return cat("shuffled order, seed ", order.seed, " (PAGEDATTN_EMU_SHUFFLE=", order.seed, " repeats it)");
}

const dim3& thread_idx() {
  program();
  return rt.current->idx;
}
const dim3& block_idx() { return program().block_idx; }
const dim3& block_dim() { return program().shape->block; }
const dim3& grid_dim() { return program().shape->grid; }

void syncthreads(std::source_location where) {
  program();
  Thread& self = *rt.current;
  self.state = ThreadState::at_barrier;
  self.where = where;
  yield_to_scheduler();
}

std::uint64_t warp_exchange(Collective kind, unsigned mask, std::uint64_t payload, int param,
                            int width, std::source_location where) {
  program();
  if (width <= 0 || width > 32 || (width & (width - 1)) != 0)
    fault(cat(collective_name(kind), " at ", where_str(where), ": width ", width,
              " is not a power of two in [1, 32]"));
  Thread& self = *rt.current;
  self.state = ThreadState::at_collective;
  self.kind = kind;
  self.mask = mask;
  self.payload = payload;
  self.param = param;
  self.width = width;
  self.where = where;
  yield_to_scheduler();
  return self.result;
}

void warp_combine(const char* name, WarpCombine combine, void* operands, std::source_location where) {
  program();
  Thread& self = *rt.current;
  self.combine = combine;
  self.op_name = name;
  warp_exchange(Collective::combine, 0xffffffffu, static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(operands)), 0,
                32, where);
}

void syncwarp(unsigned mask, std::source_location where) {
  warp_exchange(Collective::syncwarp, mask, 0, 0, 32, where);
}

void wait_for_previous_kernel() {
  program();
  rt.current->waited_for_previous = true;
}

void allow_next_kernel() {
  program();
  rt.launch_allows_next = true;
}

int tensor_id(const char* name) {
  for (std::size_t i = 0; i < rt.tensor_names.size(); ++i)
    if (rt.tensor_names[i] == name) return static_cast<int>(i);
  rt.tensor_names.emplace_back(name);
  rt.traffic.emplace_back();
  rt.is_table.push_back(0);
  return static_cast<int>(rt.tensor_names.size() - 1);
}

TensorInfo tensor_info(const char* name, std::int64_t extent, Paging paging) {
  TensorInfo info;
  info.tensor = tensor_id(name);
  info.extent = extent;
  if (paging.table && paging.page_elems > 0) {
    info.table = tensor_id(paging.table);
    info.page_elems = paging.page_elems;
    rt.is_table[static_cast<std::size_t>(info.table)] = 1;
  }
  return info;
}

namespace {

/// Element \p index of a table of \p elem_size-byte integers at \p base.
std::int64_t table_entry(const void* base, std::int64_t index, std::size_t elem_size) {
  const auto* at = static_cast<const unsigned char*>(base) + static_cast<std::size_t>(index) * elem_size;
  if (elem_size == 8) {
    std::int64_t value;
    std::memcpy(&value, at, 8);
    return value;
  }
  std::int32_t value = 0;
  if (elem_size == 4) std::memcpy(&value, at, 4);
  return value;
}

/// For an out-of-bounds \p index into a paged tensor: the page it falls in, and where that page
/// number came from. The emulator follows accesses, not values, so it can only match: it looks
/// through the running thread's recent reads of the tensor's block table (TableReads) for an
/// entry equal to the page (or equal as a 32-bit unsigned number, as the kernels compute a
/// page's offset: entry -1 is page 4294967295). A match is a fact ("this thread read that page
/// number from entry k"); a page number that reached the thread another way (through shared
/// memory, a shuffle, or arithmetic on an entry) is reported as not read, with the thread's
/// last entry for comparison.
std::string page_origin(const TensorInfo& info, std::int64_t index) {
  if (info.table < 0 || !rt.current) return "";
  const std::int64_t page = index >= 0 ? index / info.page_elems : -((-index - 1) / info.page_elems) - 1;  // floor
  const std::string& table = rt.tensor_names[static_cast<std::size_t>(info.table)];
  const std::string in_page = cat("; element ", index, " is in page ", page, " of a pool of ", info.extent / info.page_elems,
                                  " pages of ", info.page_elems, " elements");
  const TableReads& reads = rt.table_reads[static_cast<std::size_t>(rt.current->linear)];
  const TableRead* last = nullptr;
  for (std::uint32_t k = 0; k < std::min(reads.total, TableReads::kKept); ++k) {  // newest first
    const TableRead& read = reads.recent[(reads.total - 1 - k) % TableReads::kKept];
    if (read.tensor != info.table) continue;
    if (!last) last = &read;
    for (std::int64_t e = 0; e < read.count; ++e) {
      const std::int64_t value = table_entry(read.base, read.index + e, read.elem_size);
      if (value == page || static_cast<std::int64_t>(static_cast<std::uint32_t>(value)) == page)
        return cat(in_page, "; this thread read that page number from ", table, '[', read.index + e, "] = ", value,
                   at(read.where));
    }
  }
  if (!last) return cat(in_page, "; this thread read no ", table, " entry, so the page number did not come from one it read");
  return cat(in_page, "; no ", table, " entry this thread read recently holds that page (its last read: ", table, '[',
             last->index, "] = ", table_entry(last->base, last->index, last->elem_size), at(last->where), ')');
}

/// "name[index]" or "name[first..last]" for \p count elements.
std::string elements_str(const std::string& name, std::int64_t index, std::int64_t count) {
  if (count == 1) return cat(name, '[', index, ']');
  return cat(name, '[', index, "..", index + count - 1, ']');
}

}  // namespace

void global_prefetch(const TensorInfo& tensor, std::int64_t index, std::source_location where) {
  program();
  if (index < 0 || index >= tensor.extent)
    fault(cat("out-of-bounds prefetch of ", rt.tensor_names.at(static_cast<std::size_t>(tensor.tensor)), '[', index,
              "] (extent ", tensor.extent, ')', at(where), page_origin(tensor, index)));
}

void global_access(const TensorInfo& tensor, const void* base, std::int64_t index, std::int64_t count,
                   std::size_t elem_size, bool write, std::size_t align_bytes, std::source_location where) {
  Program& prog = program();
  const std::string& name = rt.tensor_names.at(static_cast<std::size_t>(tensor.tensor));
  if (index < 0 || index + count > tensor.extent)
    fault(cat("out-of-bounds ", write ? "write to " : "read of ", elements_str(name, index, count), " (extent ",
              tensor.extent, ')', at(where), page_origin(tensor, index)));
  if (align_bytes > 1) {
    const auto address = reinterpret_cast<std::uintptr_t>(base) + static_cast<std::uintptr_t>(index) * elem_size;
    if (address % align_bytes != 0)
      fault(cat("misaligned ", align_bytes, "-byte vector ", write ? "write to " : "read of ", name, '[', index,
                "]: the address is not a multiple of ", align_bytes, " bytes", at(where)));
  }
  const std::uint64_t bytes = static_cast<std::uint64_t>(count) * elem_size;
  const auto begin = reinterpret_cast<std::uintptr_t>(base) + static_cast<std::uintptr_t>(index) * elem_size;
  const std::uintptr_t end = begin + bytes;
  if (prog.shape->overlapped && !rt.current->waited_for_previous) {
    // Before the wait the previous launch may still be running: a read of what it wrote, or a
    // write of what it wrote or read, races with it.
    std::uintptr_t hit = first_in(rt.previous_writes, begin, end);
    const char* what_it_did = "wrote";
    if (hit == end && write) {
      hit = first_in(rt.previous_reads, begin, end);
      what_it_did = "read";
    }
    if (hit != end)
      fault(cat(write ? "write to " : "read of ", name, '[', index + static_cast<std::int64_t>((hit - begin) / elem_size),
                "] before wait_for_previous_kernel(): ", rt.previous_kernel, ' ', what_it_did,
                " it and may still be running (launched overlapped)", at(where)));
  }
  if (write) {
    record_range(rt.launch_writes, begin, end);
  } else if (rt.launch_allows_next) {  // the next launch may overlap these reads
    const auto id = static_cast<std::size_t>(tensor.tensor);
    if (rt.launch_reads.size() <= id) rt.launch_reads.resize(id + 1);
    record_range(rt.launch_reads[id], begin, end);
  }
  if (!write && rt.is_table[static_cast<std::size_t>(tensor.tensor)]) {
    TableReads& reads = rt.table_reads[static_cast<std::size_t>(rt.current->linear)];
    reads.recent[reads.total++ % TableReads::kKept] = {tensor.tensor, base, index, count, elem_size, where};
  }
  TensorTraffic& traffic = rt.traffic[static_cast<std::size_t>(tensor.tensor)];
  (write ? traffic.bytes_written : traffic.bytes_read) += bytes;
  ++traffic.accesses;
  if (prog.traced)
    rt.trace.push_back({prog.shape->kernel_name, name, index, count, write,
                        static_cast<unsigned>(rt.current->linear)});
}

namespace {

/// Has warp \p warp completed, since its count was \p stamp, a __syncwarp naming both lane \p a
/// and lane \p b (a < 0: every lane, for accesses by several lanes)?
bool synced_since(const Program& prog, int warp, int a, int b, std::uint32_t stamp) {
  const auto w = static_cast<std::size_t>(warp);
  if (prog.full_syncs[w] > stamp) return true;
  const std::vector<std::uint32_t>& pairs = prog.pair_syncs[w];
  return a >= 0 && !pairs.empty() && pairs[static_cast<std::size_t>(a * 32 + b)] > stamp;
}

/// Is an access by thread \p other at (\p other_epoch, its warp's count \p other_warp_epoch)
/// ordered before an access by \p self now: the same thread, a barrier between, or, between two
/// threads of one warp, a __syncwarp naming both (no other warp collective orders memory)?
bool ordered(const Program& prog, const Thread& self, std::int32_t other, std::uint32_t other_epoch,
             std::uint32_t other_warp_epoch) {
  if (other == self.linear || other_epoch < prog.epoch) return true;
  return other / 32 == self.warp && synced_since(prog, self.warp, other % 32, self.linear % 32, other_warp_epoch);
}

std::string thread_name(const Program& prog, std::int32_t id) {
  return dim_str(prog.threads[static_cast<std::size_t>(id)].idx);
}

/// Who issued the copy in flight into element \p index of \p array, where, and what would
/// complete it: the parenthesis of every in-flight fault.
std::string in_flight_str(const Program& prog, const SharedArray& array, std::int64_t index, std::int32_t issuer) {
  const Thread& thread = prog.threads[static_cast<std::size_t>(issuer)];
  const std::string by = cat("issued by thread ", dim_str(thread.idx));
  if (thread.state == ThreadState::exited) return cat(by, ", which exited before an async_wait covered it");
  for (const PendingCopy& copy : rt.copies[static_cast<std::size_t>(issuer)]) {
    if (copy.array != &array || index < copy.index || index >= copy.index + copy.count) continue;
    if (copy.group >= thread.groups_committed)
      return cat(by, at(copy.where), "; no async_wait covers it yet: its group is not committed (async_commit)");
    const std::uint32_t newer = thread.groups_committed - 1 - copy.group;  // async_wait<newer> completes it
    return cat(by, at(copy.where), "; no async_wait covers it yet: async_wait<", newer, "> would complete it, as ",
               newer == 0 ? std::string("its group is the newest committed")
                          : cat(newer, newer == 1 ? " group was" : " groups were", " committed after its own"));
  }
  return by;
}

/// "; thread T wrote it at file:line": where the other side of a race wrote \p cell.
std::string other_write(const Program& prog, const SharedCell& cell) {
  return cat("; thread ", thread_name(prog, cell.writer), " wrote it", at(cell.write_where));
}

/// Checks a write by the running thread of element \p index of \p array (\p what says how, for
/// messages) against the accesses before it: another thread's write or read with no barrier
/// between is a race.
void check_write(const Program& prog, const Thread& self, const SharedArray& array, std::int64_t index,
                 const SharedCell& cell, const char* what, const std::source_location& where) {
  if (cell.writer >= 0 && !ordered(prog, self, cell.writer, cell.write_epoch, cell.write_warp_epoch))
    fault(cat("shared-memory race on ", array.name, '[', index, "]: ", what, " and by thread ",
              thread_name(prog, cell.writer), " with no barrier between", at(where), other_write(prog, cell)));
  if (cell.reader != -1 && cell.reader_epoch == prog.epoch) {
    const std::uint32_t warp_bit = 1u << (self.warp % 32);
    bool race = (cell.reader_warps & ~warp_bit) != 0;  // read by another warp since the barrier
    if (!race && cell.reader != self.linear)  // by lanes of this warp: a __syncwarp naming them and this lane?
      race = !synced_since(prog, self.warp, cell.reader >= 0 ? cell.reader % 32 : -1, self.linear % 32,
                           cell.reader_warp_epoch);
    if (race)
      fault(cat("shared-memory race on ", array.name, '[', index, "]: ", what, " after thread ",
                cell.reader >= 0 ? thread_name(prog, cell.reader) : std::string("(several)"),
                " read it, with no barrier between (missing __syncthreads?)", at(where)));
  }
}

/// Records a write of \p cell by \p self now, by the code at \p where.
void record_write(const Program& prog, const Thread& self, SharedCell& cell, const std::source_location& where) {
  cell.writer = self.linear;
  cell.write_epoch = prog.epoch;
  cell.write_warp_epoch = prog.warp_epochs[static_cast<std::size_t>(self.warp)];
  cell.write_where = where;
}

}  // namespace

void require_shared_alignment(const SharedArray& array, std::int64_t index, int bytes, std::source_location where) {
  if (bytes > 1 && (index * static_cast<std::int64_t>(array.elem_size)) % bytes != 0)
    fault(cat("misaligned ", bytes, "-byte shared read of ", array.name, '[', index, "]: byte ",
              index * static_cast<std::int64_t>(array.elem_size), " of the array is not a multiple of ", bytes, at(where)));
}

void shared_access(SharedArray& array, std::int64_t index, bool write, std::source_location where) {
  Program& prog = program();
  const Thread& self = *rt.current;
  const auto count = static_cast<std::int64_t>(array.cells.size());
  if (index < 0 || index >= count)
    fault(cat("out-of-bounds shared ", write ? "write to " : "read of ", array.name, '[', index,
              "] (extent ", count, ')', at(where)));
  SharedCell& cell = array.cells[static_cast<std::size_t>(index)];
  if (cell.copy_issuer >= 0)
    fault(cat(write ? "write to shared " : "read of shared ", array.name, '[', index,
              "] while an asynchronous copy into it is still in flight (", write ? "the copy would overwrite it; " : "",
              in_flight_str(prog, array, index, cell.copy_issuer), ')', at(where)));
  const std::uint32_t epoch = prog.epoch;
  const std::uint32_t warp_epoch = prog.warp_epochs[static_cast<std::size_t>(self.warp)];
  if (!write) {
    if (cell.writer < 0)
      fault(cat("read of shared ", array.name, '[', index, "] before any thread of this program wrote it",
                " (if another thread writes it, a __syncthreads between that write and this read is missing)",
                at(where)));
    if (!ordered(prog, self, cell.writer, cell.write_epoch, cell.write_warp_epoch))
      fault(cat("shared-memory race on ", array.name, '[', index, "]: read here, written by thread ",
                thread_name(prog, cell.writer), " with no barrier between (missing __syncthreads?)", at(where),
                other_write(prog, cell)));
    const std::uint32_t warp_bit = 1u << (self.warp % 32);
    if (cell.reader_epoch != epoch || cell.reader == -1) {
      cell.reader = self.linear;
      cell.reader_epoch = epoch;
      cell.reader_warps = warp_bit;
      cell.reader_warp_epoch = warp_epoch;
    } else {
      if (cell.reader != self.linear) cell.reader = -2;
      cell.reader_warps |= warp_bit;
      cell.reader_warp_epoch = std::max(cell.reader_warp_epoch, warp_epoch);
    }
    return;
  }
  check_write(prog, self, array, index, cell, "written here", where);
  record_write(prog, self, cell, where);
}

void async_copy(SharedArray& array, std::int64_t index, const void* data, std::size_t bytes,
                std::source_location where) {
  Program& prog = program();
  const Thread& self = *rt.current;
  if (bytes == 0 || bytes > sizeof(PendingCopy::data) || array.elem_size == 0 || bytes % array.elem_size != 0)
    fault(cat("asynchronous copy of ", bytes, " bytes into shared ", array.name, ", whose elements are ",
              array.elem_size, " bytes: a copy moves whole elements, at most ", sizeof(PendingCopy::data), " bytes",
              at(where)));
  const auto count = static_cast<std::int64_t>(bytes / array.elem_size);
  const auto extent = static_cast<std::int64_t>(array.cells.size());
  if (index < 0 || index + count > extent)
    fault(cat("out-of-bounds asynchronous copy into shared ", array.name, '[', index, "..", index + count - 1,
              "] (extent ", extent, ')', at(where)));
  if ((static_cast<std::size_t>(index) * array.elem_size) % bytes != 0)
    fault(cat("misaligned ", bytes, "-byte asynchronous copy into shared ", array.name, '[', index,
              "]: its offset in the array is not a multiple of ", bytes, " bytes", at(where)));
  for (std::int64_t i = index; i < index + count; ++i) {
    const SharedCell& cell = array.cells[static_cast<std::size_t>(i)];
    if (cell.copy_issuer >= 0)
      fault(cat("asynchronous copy into shared ", array.name, '[', i,
                "] while an earlier asynchronous copy into it is still in flight (", in_flight_str(prog, array, i, cell.copy_issuer),
                ')', at(where)));
    check_write(prog, self, array, i, cell, "written here by an asynchronous copy", where);
  }
  for (std::int64_t i = index; i < index + count; ++i) array.cells[static_cast<std::size_t>(i)].copy_issuer = self.linear;
  std::memset(array.bytes.data() + static_cast<std::size_t>(index) * array.elem_size, 0xff, bytes);  // poison until it lands
  PendingCopy copy{&array, index, count, self.groups_committed, data == nullptr, where, {}};
  if (data) std::memcpy(copy.data, data, bytes);
  rt.copies[static_cast<std::size_t>(self.linear)].push_back(copy);
}

void async_commit() {
  program();
  ++rt.current->groups_committed;
}

void async_wait(int pending, std::source_location where) {
  Program& prog = program();
  const Thread& self = *rt.current;
  if (pending < 0)
    fault(cat("async_wait<", pending, ">: the count of groups left in flight cannot be negative", at(where)));
  std::vector<PendingCopy>& copies = rt.copies[static_cast<std::size_t>(self.linear)];
  // Copies are in issue order, so their groups never decrease: the completed ones are a prefix.
  std::size_t landed = 0;
  for (; landed < copies.size(); ++landed) {
    const PendingCopy& copy = copies[landed];
    if (copy.group + static_cast<std::uint32_t>(pending) >= self.groups_committed) break;
    SharedArray& array = *copy.array;
    for (std::int64_t i = copy.index; i < copy.index + copy.count; ++i) {
      SharedCell& cell = array.cells[static_cast<std::size_t>(i)];
      cell.copy_issuer = -1;
      record_write(prog, self, cell, copy.where);
    }
    unsigned char* destination = array.bytes.data() + static_cast<std::size_t>(copy.index) * array.elem_size;
    const std::size_t bytes = static_cast<std::size_t>(copy.count) * array.elem_size;
    if (copy.zero) std::memset(destination, 0, bytes);
    else std::memcpy(destination, copy.data, bytes);
  }
  copies.erase(copies.begin(), copies.begin() + static_cast<std::ptrdiff_t>(landed));
}

namespace {
void init_array(SharedArray& array, const char* name, std::size_t elem_size, std::size_t count) {
  array.name = name;
  array.elem_size = elem_size;
  array.bytes.assign(elem_size * count, 0xff);  // shared memory starts as garbage (NaN for floats)
  array.cells.assign(count, SharedCell{});
}
}  // namespace

SharedArray& static_shared(const char* name, std::size_t elem_size, std::size_t count,
                           std::source_location where) {
  Program& prog = program();
  const StaticKey key{where.file_name(), where.line(), where.column()};
  for (auto& [k, array] : prog.static_arrays)
    if (k == key) return *array;
  const std::size_t bytes = elem_size * count;
  if (prog.static_bytes + bytes > rt.limits.max_static_shared)
    fault(cat("static shared memory of ", prog.static_bytes + bytes, " bytes (", name, " adds ", bytes,
              ") exceeds the ", rt.limits.max_static_shared, "-byte limit", at(where)));
  prog.static_bytes += bytes;
  auto array = std::make_unique<SharedArray>();
  init_array(*array, name, elem_size, count);
  prog.static_arrays.emplace_back(key, std::move(array));
  return *prog.static_arrays.back().second;
}

SharedArray& dynamic_shared(const char* name, std::size_t elem_size, std::source_location where) {
  Program& prog = program();
  if (!prog.dynamic) fault(cat("dynamic shared array ", name, " used, but the launch asked for 0 bytes", at(where)));
  SharedArray& array = *prog.dynamic;
  if (array.elem_size == 0) {
    init_array(array, name, elem_size, prog.shape->dynamic_shared_bytes / elem_size);
  } else if (array.elem_size != elem_size) {
    fault(cat("dynamic shared memory viewed with elements of ", elem_size, " and ", array.elem_size,
              " bytes; the emulator tracks races per element, so use one element type", at(where)));
  }
  return array;
}

std::uint64_t Counters::total_read() const {
  std::uint64_t sum = 0;
  for (const auto& [name, t] : tensors) sum += t.bytes_read;
  return sum;
}
std::uint64_t Counters::total_written() const {
  std::uint64_t sum = 0;
  for (const auto& [name, t] : tensors) sum += t.bytes_written;
  return sum;
}

void reset_counters() {
  for (TensorTraffic& t : rt.traffic) t = TensorTraffic{};
  rt.totals = Counters{};
}

Counters counters() {
  Counters out = rt.totals;
  for (std::size_t i = 0; i < rt.tensor_names.size(); ++i)
    if (rt.traffic[i].accesses) out.tensors[rt.tensor_names[i]] = rt.traffic[i];
  return out;
}

void trace_program(unsigned x, unsigned y, unsigned z) {
  rt.tracing = true;
  rt.traced_block = dim3(x, y, z);
}
void clear_trace() {
  rt.tracing = false;
  rt.trace.clear();
}
const std::vector<TraceEntry>& trace() { return rt.trace; }

}  // namespace pa::emu
