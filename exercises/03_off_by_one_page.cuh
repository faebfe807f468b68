#pragma once
/// \file
/// Exercise 03: an off-by-one page (step 09's block-table prefetch).
///
/// A one-thread program (sequence, query head) walks its context page by page. While it reads
/// one page, it looks up the next page in the block table and asks the L2 for that page's first
/// row, so that it is on its way when the loop gets there. Run it: `exercise 03`.

#include "exercises/exercise.h"

namespace pa::PA_KERNELS::exercises::ex03 {

__global__ void prefetch_next_page(DecodeArgs<float> args, gspan<float>) {
  const Program p = this_program(args);
  const std::int64_t table_row = std::int64_t{p.seq} * args.max_blocks_per_seq;
  const int pages = (p.context_len + args.block_size - 1) / args.block_size;
  OneThreadAttention attention;
  for (int page_index = 0; page_index < pages; ++page_index) {
    const std::int32_t page = args.block_tables[table_row + page_index];
    const std::int32_t next_page = args.block_tables[table_row + page_index + 1];
    prefetch_l2(args.key_cache, args.kv_offset(next_page, p.kv_head, 0));
    const int slots = std::min(args.block_size, p.context_len - page_index * args.block_size);
    for (int slot = 0; slot < slots; ++slot) {
      const std::int64_t kv_row = args.kv_offset(page, p.kv_head, slot);
      attention.add(args, logit_of(args, p, kv_row), kv_row);
    }
  }
  attention.write(args, p);
}

}  // namespace pa::PA_KERNELS::exercises::ex03
