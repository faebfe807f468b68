#include "common/kernel_api.h"

#include <cstdint>
#include <span>
#include <string>

#include "common/error.h"

namespace pa {
namespace {
struct Range {
  const void* begin;
  std::size_t bytes;
  const char* name;
};
bool overlaps(const Range& a, const Range& b) {
  if (!a.begin || !b.begin || a.bytes == 0 || b.bytes == 0) return false;
  const auto a0 = reinterpret_cast<std::uintptr_t>(a.begin);
  const auto b0 = reinterpret_cast<std::uintptr_t>(b.begin);
  return a0 < b0 + b.bytes && b0 < a0 + a.bytes;
}
}  // namespace

void validate_view(const DecodeView& view, std::size_t workspace_needed, std::string_view function) {
  const DecodeProblem& p = view.problem;
  validate(p, function);
  if (p.num_seqs == 0) return;  // an empty batch launches nothing and reads nothing
  PA_REQUIRE(view.query, function, "query", "a non-null pointer", "nullptr");
  PA_REQUIRE(view.out, function, "out", "a non-null pointer", "nullptr");
  PA_REQUIRE(view.context_lens, function, "context_lens", "a non-null pointer", "nullptr");
  PA_REQUIRE(view.block_tables || p.max_blocks_per_seq == 0, function, "block_tables",
             "a non-null pointer", "nullptr");
  PA_REQUIRE(view.key_cache || p.num_blocks == 0, function, "key_cache", "a non-null pointer", "nullptr");
  PA_REQUIRE(view.value_cache || p.num_blocks == 0, function, "value_cache", "a non-null pointer", "nullptr");
  PA_REQUIRE(view.workspace_bytes >= workspace_needed, function, "workspace_bytes",
             cat(">= ", workspace_needed, " for this problem"), view.workspace_bytes);
  PA_REQUIRE(view.workspace || workspace_needed == 0, function, "workspace", "a non-null pointer",
             "nullptr");
  const std::size_t elem = dtype_size(p.dtype);
  const std::size_t io_bytes = static_cast<std::size_t>(p.query_elems()) * elem;
  const std::size_t cache_bytes = static_cast<std::size_t>(p.cache_elems()) * dtype_size(p.cache_dtype());
  const Range out{view.out, io_bytes, "out"};
  const Range inputs[] = {
      {view.query, io_bytes, "query"},
      {view.key_cache, cache_bytes, "key_cache"},
      {view.value_cache, cache_bytes, "value_cache"},
      {view.block_tables, static_cast<std::size_t>(p.num_seqs) * p.max_blocks_per_seq * 4, "block_tables"},
      {view.context_lens, static_cast<std::size_t>(p.num_seqs) * 4, "context_lens"},
      {view.workspace, view.workspace_bytes, "workspace"},
  };
  for (const Range& input : inputs)
    PA_REQUIRE(!overlaps(out, input), function, "out", cat("memory disjoint from ", input.name),
               "an overlapping range");
}

void require_knobs(const KernelOptions& options, unsigned knobs, std::string_view function) {
  const struct {
    Knob bit;
    int value;
    const char* name;
  } fields[] = {{knob_threads, options.threads_per_block, "options.threads_per_block"},
                {knob_splits, options.num_splits, "options.num_splits"},
                {knob_partition, options.partition_tokens, "options.partition_tokens"},
                {knob_tile, options.tile_tokens, "options.tile_tokens"},
                {knob_variant, options.variant, "options.variant"}};
  for (const auto& field : fields) {
    PA_REQUIRE((knobs & field.bit) != 0 || field.value == 0, function, field.name,
               "0 (this step has no such knob)", field.value);
    // A negative value would otherwise read as 0, "the kernel chooses", in the steps that test > 0.
    PA_REQUIRE(field.value >= 0, function, field.name, ">= 0 (0: the kernel chooses)", field.value);
  }
}

LaunchPlan plan_for(const KernelEntry& entry, const DecodeProblem& problem, std::span<const std::int32_t> context_lens,
                    const KernelOptions& options, const DeviceLimits& device) {
  return entry.plan_lengths ? entry.plan_lengths(problem, context_lens, options, device)
                            : entry.plan(problem, options, device);
}

std::string describe_launch(const LaunchPlan& plan) {
  return cat("grid ", plan.grid[0], " x ", plan.grid[1], " x ", plan.grid[2], " programs of ", plan.threads,
             plan.threads == 1 ? " thread, " : " threads, ", plan.shared_bytes, " B shared memory");
}

bool begin_launch(const DecodeView& view, const LaunchPlan& plan, std::string_view function) {
  PA_REQUIRE(view.problem == plan.problem, function, "view.problem", "the problem the plan was made for",
             cat(describe(view.problem), " (the plan's: ", describe(plan.problem), ')'));
  validate_view(view, plan.workspace_bytes, function);
  const DecodeProblem& p = view.problem;
  if (p.num_seqs == 0) return false;
  if (view.checked)
    validate_tables(p,
                    std::span<const std::int32_t>(view.block_tables,
                                                  static_cast<std::size_t>(p.num_seqs) * static_cast<std::size_t>(p.max_blocks_per_seq)),
                    std::span<const std::int32_t>(view.context_lens, static_cast<std::size_t>(p.num_seqs)), function);
  return true;
}

}  // namespace pa
