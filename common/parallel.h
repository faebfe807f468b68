#pragma once
/// \file
/// parallel_for(): the host's one way of spreading independent pieces of work over threads
/// (filling a workload's caches, the oracle's rows).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

namespace pa {

/// The host's hardware threads (at least 1).
inline int hardware_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

/// Runs `work(i)` for every i in [0, \p count) on up to \p num_threads threads (the caller's
/// among them), each thread taking the next index when it is done with one. The pieces must not
/// depend on each other's order. If a piece throws, the pieces of higher indices not yet started
/// are skipped (those of lower indices still run) and, once every thread has stopped, the
/// exception of the lowest index that threw is rethrown: the same one on every run, whatever the
/// threads' timing.
template <class Work>
void parallel_for(std::int64_t count, int num_threads, const Work& work) {
  const int threads = static_cast<int>(std::min<std::int64_t>(std::max(num_threads, 1), count));
  if (threads <= 1) {
    for (std::int64_t i = 0; i < count; ++i) work(i);
    return;
  }
  std::atomic<std::int64_t> next{0};
  std::atomic<std::int64_t> failed_index{std::numeric_limits<std::int64_t>::max()};  // lowest index that threw
  std::mutex mutex;  // guards first_failure
  std::exception_ptr first_failure;
  const auto worker = [&] {
    for (std::int64_t i = next++; i < count && i < failed_index.load(); i = next++) {
      try {
        work(i);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(mutex);
        if (i < failed_index.load()) failed_index = i, first_failure = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads - 1));
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& thread : pool) thread.join();
  if (first_failure) std::rethrow_exception(first_failure);
}

}  // namespace pa
