#pragma once
/// \file
/// Exercise 02: a read past the context (step 03's page walk).
///
/// A one-thread program (sequence, query head) walks its context page by page through the
/// block table, every slot of every page, and gives the tokens past the context a weight of
/// zero. Run it: `exercise 02`.

#include "exercises/exercise.h"

namespace pa::PA_KERNELS::exercises::ex02 {

__global__ void whole_pages(DecodeArgs<float> args, gspan<float>) {
  const Program p = this_program(args);
  const int pages = (p.context_len + args.block_size - 1) / args.block_size;
  OneThreadAttention attention;
  for (int page_index = 0; page_index < pages; ++page_index) {
    const std::int32_t page = args.block_tables[std::int64_t{p.seq} * args.max_blocks_per_seq + page_index];
    for (int slot = 0; slot < args.block_size; ++slot) {
      const std::int64_t kv_row = args.kv_offset(page, p.kv_head, slot);
      const bool in_context = page_index * args.block_size + slot < p.context_len;
      attention.add(args, in_context ? logit_of(args, p, kv_row) : -INFINITY, kv_row);
    }
  }
  attention.write(args, p);
}

}  // namespace pa::PA_KERNELS::exercises::ex02
