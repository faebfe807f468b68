#!/usr/bin/env python3
"""A decode loop over a paged KV cache kept as vLLM keeps it, through the PyTorch extension.

    python3 bindings/torch/example.py --module DIR [--device cuda|cpu]

DIR holds pagedattn.so (build.py --out). Four sequences (prompts of 37, 1, 16 and 100 tokens) in a
pool of 64 pages of 16 tokens: one tensor [2, num_blocks, block_size, num_kv_heads, head_dim] whose
two halves are key_cache and value_cache, as vLLM's FlashAttention backend allocates it. One plan,
then three decode steps, each after one more token per sequence is written into its slot (a new
page from the free list when a page is full), each output compared with torch's
scaled_dot_product_attention over the sequence's gathered K/V. docs/pages/pytorch.md shows it;
test_decode.py is the test (per storage type, docs/design/CORRECTNESS.md rule 5). This example
exits 0 when every output is within 2e-2 of SDPA's in float64 (a sanity check, five bf16
roundings of an output below 1), 1 otherwise.
"""

import argparse
import sys

import torch
import torch.nn.functional as F

NUM_Q_HEADS, NUM_KV_HEADS, HEAD_DIM = 8, 2, 128  # a group of 4 query heads over each KV head
NUM_BLOCKS, BLOCK_SIZE = 64, 16
MAX_BLOCKS_PER_SEQ = 8  # a block-table row: 128 tokens at most
PROMPTS = [37, 1, 16, 100]
STEPS = 3
WITHIN = 2e-2  # a sanity check: bf16 keeps 8 significant bits, so an output below 1 rounds by 4e-3 at most


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", required=True, help="the folder holding pagedattn.so")
    parser.add_argument("--device", default="cuda", help="cuda, or cpu for the emulator")
    args = parser.parse_args()
    sys.path.insert(0, args.module)
    import pagedattn  # noqa: E402: from --module

    device, dtype = torch.device(args.device), torch.bfloat16
    torch.manual_seed(1)
    num_seqs = len(PROMPTS)
    # [cache]
    kv_cache = torch.zeros(2, NUM_BLOCKS, BLOCK_SIZE, NUM_KV_HEADS, HEAD_DIM, dtype=dtype, device=device)
    key_cache, value_cache = kv_cache.unbind(0)  # each [num_blocks, block_size, num_kv_heads, head_dim]
    block_tables = torch.zeros(num_seqs, MAX_BLOCKS_PER_SEQ, dtype=torch.int32, device=device)
    context_lens = torch.zeros(num_seqs, dtype=torch.int32, device=device)
    # [cache]
    free_pages = torch.randperm(NUM_BLOCKS).tolist()  # scattered pages, as in a busy engine

    def append_token(seq: int):
        """Writes sequence seq's next token's K and V into its slot (vLLM's reshape_and_cache)."""
        length = int(context_lens[seq])
        if length % BLOCK_SIZE == 0:  # the last page is full: take a new one
            block_tables[seq, length // BLOCK_SIZE] = free_pages.pop()
        page, slot = int(block_tables[seq, length // BLOCK_SIZE]), length % BLOCK_SIZE
        key_cache[page, slot] = torch.rand(NUM_KV_HEADS, HEAD_DIM, device=device) * 2 - 1
        value_cache[page, slot] = torch.rand(NUM_KV_HEADS, HEAD_DIM, device=device) * 2 - 1
        context_lens[seq] += 1

    for seq, prompt in enumerate(PROMPTS):
        for _ in range(prompt):
            append_token(seq)

    # [plan]
    plan = pagedattn.DecodePlan(num_seqs=num_seqs, num_q_heads=NUM_Q_HEADS, num_kv_heads=NUM_KV_HEADS,
                                head_dim=HEAD_DIM, block_size=BLOCK_SIZE, max_blocks_per_seq=MAX_BLOCKS_PER_SEQ,
                                num_blocks=NUM_BLOCKS, dtype=dtype, device=device)
    print(plan.description)  # the rung, why, and its launch
    # [plan]
    out = torch.empty(num_seqs, NUM_Q_HEADS, HEAD_DIM, dtype=dtype, device=device)
    ok = True
    for step in range(1, STEPS + 1):
        for seq in range(num_seqs):
            append_token(seq)
        query = (torch.rand(num_seqs, NUM_Q_HEADS, HEAD_DIM, device=device) * 2 - 1).to(dtype)
        # [decode]
        plan.decode(query, key_cache, value_cache, block_tables, context_lens, out)  # on the current stream
        # [decode]
        worst = 0.0
        for seq in range(num_seqs):
            length = int(context_lens[seq])
            pages = block_tables[seq, :(length + BLOCK_SIZE - 1) // BLOCK_SIZE].long()
            keys = key_cache[pages].reshape(-1, NUM_KV_HEADS, HEAD_DIM)[:length].transpose(0, 1)[None].double()
            values = value_cache[pages].reshape(-1, NUM_KV_HEADS, HEAD_DIM)[:length].transpose(0, 1)[None].double()
            expected = F.scaled_dot_product_attention(query[seq].double()[None, :, None], keys, values,
                                                      scale=plan.scale, enable_gqa=True)[0, :, 0]
            worst = max(worst, (out[seq].double() - expected).abs().max().item())
        ok = ok and worst <= WITHIN
        print(f"decode {step}: context_lens {context_lens.tolist()}, max |out - SDPA| {worst:.1e}"
              f" {'ok' if worst <= WITHIN else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
