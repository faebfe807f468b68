#!/usr/bin/env python3
"""The PyTorch extension against torch's scaled_dot_product_attention (docs/pages/pytorch.md).

    python3 bindings/torch/test_decode.py --module DIR [--device cuda|cpu] [--quick] [--case N] [--seed S]

DIR holds pagedattn.so (build.py --out). For every shape of a grid (batches of 1, 5 and 16
sequences of ragged lengths, 0 and 1 among them; groups of 1, 4 and 8 query heads over 2 KV heads;
head dims 64 and 128; pages of 16 and 32 tokens; bf16 and f16, and f32 at a few; ragged batches
planned with the host copy of their lengths; fp8 e4m3 K/V with a scale for each cache), it fills a
paged cache in vLLM's layout, plans with pagedattn.DecodePlan, checks that the plan is the rung
pa::plan_decode's rule picks (choose_rungs: step 12 for fp8 K/V, step 11 for a ragged batch planned
with its lengths, step 10 for bf16 and f16, step 09 for f32), decodes, and compares every output
row with torch.nn.functional.scaled_dot_product_attention in float64 over the K/V gathered through
the sequence's block-table row (fp8 ones dequantised: each stored value times its cache's scale),
by docs/design/CORRECTNESS.md rule 5 as the C++ harness applies it (check_against_oracle; for fp8
K/V the output type's tolerance, as its fp8 section says). As rule 1 asks, `out` is NaN before the
decode, and every cache slot no table reaches (pages outside the tables, slots past a context's
end) and every block-table entry past a row's used pages hold poison. Then: cache strides of
another layout, a plan kept over several steps (16-bit K/V, planned with and without the lengths,
and fp8 K/V), another CUDA stream (and a decode queued there while its plan is deleted), a CUDA
graph, and the errors: each bad argument is refused with ArgumentError naming it.

A failure prints the shape and the command that runs that case alone. The last line is
"N passed, N failed"; exit 0 when every check passed, 1 otherwise, 2 for a bad argument (argparse's,
or a --case that no shape of the grid has). --device cpu runs the emulator (slow: use --quick).
"""

import argparse
import dataclasses
import math
import sys
from typing import Callable, List, Optional, Sequence

import torch
import torch.nn.functional as F

# docs/design/CORRECTNESS.md rule 5: (atol, rtol) per storage type (Tolerance::for_dtype).
TOLERANCES = {torch.float32: (1e-5, 1e-5), torch.float16: (1e-3, 1e-3), torch.bfloat16: (1e-3, 1.6e-2)}
FLOAT_EPSILON = 2.0**-23
NUM_KV_HEADS = 2
SPARE_PAGES = 5        # pages in the pool no table uses: poison the decode must not read
PADDING_ENTRIES = 2    # block-table entries past the longest row's pages: poison too
POISON_ENTRY = 2**31 - 1  # what those entries hold (the harness's INT32_MAX)
FP8 = torch.float8_e4m3fn  # step 12's K/V storage (OCP's E4M3FN, CUDA's __nv_fp8_e4m3)
E4M3_MAX = 448.0           # its largest finite value
# The C++ workloads' fp8 scales (common/workload.h): K's maps 1 to 448, V's is twice that, so that
# a kernel that swapped the two would be off by 2x.
K_SCALE, V_SCALE = 1.0 / 448.0, 2.0 / 448.0
RAGGED_RATIO = 1.5  # choose_rungs (api/decode.cpp): step 11 when the longest >= 1.5 x the mean


@dataclasses.dataclass
class Case:
    """One shape of the grid."""
    number: int
    dtype: torch.dtype
    num_seqs: int
    group: int
    head_dim: int
    block_size: int
    lengths: List[int]
    layout: str = "nhd"  # "hnd": the caches are views of [num_blocks, num_kv_heads, block_size, head_dim]
    with_lengths: bool = False  # planned with the host copy of the lengths (DecodePlan's context_lens)
    kv_dtype: Optional[torch.dtype] = None  # FP8: K/V stored as e4m3 with k_scale and v_scale
    k_scale: float = 1.0
    v_scale: float = 1.0

    def describe(self) -> str:
        lengths = self.lengths if len(self.lengths) <= 8 else self.lengths[:8] + ["..."]
        kv = f" kv_dtype={str(self.kv_dtype).replace('torch.', '')} k_scale={self.k_scale:.6g} " \
             f"v_scale={self.v_scale:.6g}" if self.kv_dtype is not None else ""
        return (f"case {self.number}: {str(self.dtype).replace('torch.', '')} num_seqs={self.num_seqs} "
                f"num_q_heads={self.group * NUM_KV_HEADS} num_kv_heads={NUM_KV_HEADS} head_dim={self.head_dim} "
                f"block_size={self.block_size} {self.layout}{kv} context_lens={lengths}"
                + (", planned with them" if self.with_lengths else ""))

    def storage_name(self) -> str:
        """The summary's key: the storage type of q and out, and of K/V when they differ."""
        name = str(self.dtype).replace("torch.", "")
        return name + (f" ({str(self.kv_dtype).replace('torch.', '')} K/V)" if self.kv_dtype is not None else "")


def ragged(lengths: Sequence[int]) -> bool:
    """choose_rungs's test (api/decode.cpp): the longest at least RAGGED_RATIO times the mean."""
    total = sum(lengths)
    return total > 0 and max(lengths) >= RAGGED_RATIO * total / len(lengths)


def expected_step(case: Case) -> int:
    """The rung pa::plan_decode's rule tries first for the case (kFastestFirst in api/decode.cpp),
    which runs every shape of the grid: step 12 for fp8 K/V, step 11 for bf16 and f16 planned with
    ragged lengths, step 10 for bf16 and f16, step 09 for f32."""
    if case.kv_dtype == FP8:
        return 12
    if case.dtype == torch.float32:
        return 9
    return 11 if case.with_lengths and ragged(case.lengths) else 10


def grid(quick: bool) -> List[Case]:
    """The shapes, numbered. Lengths: 1, a page less one, a page, a page and one, 0, a prime, and
    long ones (4099 tokens: several splits), plus seeded random ones in the batch of 16. Then
    batches planned with their lengths (one long sequence among short ones, seeded uniform ones,
    equal ones, ones just under the rule's ratio) and fp8 K/V, numbered after the others so that
    the earlier shapes keep their numbers."""
    cases: List[Case] = []
    lengths_random = torch.Generator().manual_seed(7)
    dtypes = [torch.bfloat16, torch.float16]
    for dtype in dtypes:
        for num_seqs in (1, 5, 16):
            for group in (1, 4, 8):
                for head_dim in (64, 128):
                    for block_size in (16, 32):
                        special = [1, block_size - 1, block_size, block_size + 1, 0, 37, 1000, 4099]
                        if num_seqs == 1:
                            lengths = [4099 if (group + head_dim // 64 + block_size // 16) % 2 else 1]
                        elif num_seqs == 5:
                            lengths = [1, block_size - 1, block_size + 1, 37, 1000]
                        else:
                            extra = torch.randint(1, 3000, (num_seqs - len(special),), generator=lengths_random)
                            lengths = special + extra.tolist()
                        cases.append(Case(len(cases), dtype, num_seqs, group, head_dim, block_size, lengths))
    for group in (1, 4, 8):  # f32 runs on step 09
        cases.append(Case(len(cases), torch.float32, 5, group, 128, 16, [1, 15, 17, 37, 1000]))
    for dtype in dtypes:  # FlashInfer's HND pages, seen through cache_strides
        cases.append(Case(len(cases), dtype, 5, 4, 128, 16, [1, 15, 17, 37, 1000], layout="hnd"))
    for dtype in dtypes:  # planned with the lengths: step 11 where they are ragged, else step 10
        for group in (1, 4, 8):
            for head_dim, block_size in ((128, 16), (64, 32)):
                # One long sequence and 15 short ones (0, 1 and page edges among them): ragged-skew's shape.
                short = torch.randint(0, 40, (15,), generator=lengths_random).tolist()
                cases.append(Case(len(cases), dtype, 16, group, head_dim, block_size, [4099] + short,
                                  with_lengths=True))
        uniform = torch.randint(1, 3000, (16,), generator=lengths_random).tolist()
        cases.append(Case(len(cases), dtype, 16, 4, 128, 16, uniform, with_lengths=True))
        cases.append(Case(len(cases), dtype, 5, 4, 128, 16, [1000] * 5, with_lengths=True))  # equal: step 10
        # The longest 1.27 times the mean, under the rule's 1.5: step 10.
        cases.append(Case(len(cases), dtype, 4, 4, 128, 16, [1400, 1000, 1000, 1000], with_lengths=True))
        cases.append(Case(len(cases), dtype, 5, 4, 128, 16, [1000, 1, 15, 17, 37], layout="hnd", with_lengths=True))
    for dtype in dtypes:  # fp8 e4m3 K/V (step 12): q and out bf16 or f16
        fp8 = dict(kv_dtype=FP8, k_scale=K_SCALE, v_scale=V_SCALE)
        for group in (1, 4, 8):
            for head_dim in (64, 128):
                cases.append(Case(len(cases), dtype, 5, group, head_dim, 16, [1, 15, 17, 37, 1000], **fp8))
        special = [1, 31, 32, 33, 0, 37, 1000, 4099]
        extra = torch.randint(1, 3000, (8,), generator=lengths_random).tolist()
        cases.append(Case(len(cases), dtype, 16, 4, 128, 32, special + extra, with_lengths=True, **fp8))
        cases.append(Case(len(cases), dtype, 5, 4, 128, 16, [1, 15, 17, 37, 1000], kv_dtype=FP8))  # the default scales, 1
        cases.append(Case(len(cases), dtype, 5, 4, 128, 16, [1, 15, 17, 37, 1000], layout="hnd", **fp8))
    if quick:  # the emulator: a few shapes, short contexts
        keep = []
        for case in cases:
            planned_or_fp8 = case.with_lengths or case.kv_dtype is not None  # a quarter of those
            if (case.number % 7 == 0 or case.dtype == torch.float32 or case.layout == "hnd"
                    or (planned_or_fp8 and case.number % 4 == 0)):
                case.lengths = [min(length, 70) for length in case.lengths]
                keep.append(case)
        cases = keep
    return cases


class PagedBatch:
    """A paged cache in vLLM's layout holding one batch, its block tables and query, all seeded;
    the pages of each sequence are scattered over the pool (a shuffled free list). fp8 caches hold
    each value quantised as the project's write path does (stored)."""

    def __init__(self, case: Case, device: torch.device, seed: int):
        self.case = case
        generator = torch.Generator().manual_seed(seed)
        block_size, head_dim = case.block_size, case.head_dim
        pages_per_seq = [math.ceil(length / block_size) for length in case.lengths]
        self.max_blocks_per_seq = max(pages_per_seq + [1]) + PADDING_ENTRIES
        self.num_blocks = sum(pages_per_seq) + SPARE_PAGES
        free_list = torch.randperm(self.num_blocks, generator=generator).tolist()
        tables = torch.full((case.num_seqs, self.max_blocks_per_seq), POISON_ENTRY, dtype=torch.int32)
        for seq, pages in enumerate(pages_per_seq):
            for entry in range(pages):
                tables[seq, entry] = free_list.pop()
        self.spare_pages = free_list  # in no table: a sequence that grows takes its next page here
        # Poison everywhere (NaN, 0x7f in e4m3), then each sequence's tokens: what no table reaches stays NaN.
        shape = (self.num_blocks, block_size, NUM_KV_HEADS, head_dim)
        key_cache = torch.full(shape, math.nan, dtype=torch.float32).to(case.kv_dtype or case.dtype)
        value_cache = torch.full(shape, math.nan, dtype=torch.float32).to(case.kv_dtype or case.dtype)
        for seq, length in enumerate(case.lengths):
            for token in range(length):
                page, slot = tables[seq, token // block_size].item(), token % block_size
                key_cache[page, slot] = self.stored(uniform((NUM_KV_HEADS, head_dim), generator), case.k_scale)
                value_cache[page, slot] = self.stored(uniform((NUM_KV_HEADS, head_dim), generator), case.v_scale)
        self.query = uniform((case.num_seqs, case.group * NUM_KV_HEADS, head_dim), generator).to(case.dtype).to(device)
        self.block_tables = tables.to(device)
        self.context_lens = torch.tensor(case.lengths, dtype=torch.int32).to(device)
        if case.layout == "hnd":
            # One page of one head contiguous ([num_blocks, num_kv_heads, block_size, head_dim]),
            # seen as [num_blocks, block_size, num_kv_heads, head_dim] with other strides.
            key_cache = key_cache.transpose(1, 2).contiguous().transpose(1, 2)
            value_cache = value_cache.transpose(1, 2).contiguous().transpose(1, 2)
        self.key_cache = key_cache.to(device)
        self.value_cache = value_cache.to(device)

    def stored(self, values: torch.Tensor, scale: float) -> torch.Tensor:
        """values as the cache stores them: rounded to the storage type; for fp8, the project's write
        path (common/workload.cpp): divided by the cache's scale, saturated at +-448 (explicitly, not
        left to torch's conversion), rounded to nearest even; NaN stays NaN."""
        if self.case.kv_dtype != FP8:
            return values.to(self.case.dtype)
        return (values.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(FP8)

    def plan(self, pagedattn, device: torch.device, **options):
        case = self.case
        strides = list(self.key_cache.stride()) if case.layout != "nhd" else None
        if case.kv_dtype is not None:  # the scales only where they are not the default 1
            options["kv_dtype"] = case.kv_dtype
            options.update({name: value for name, value in (("k_scale", case.k_scale), ("v_scale", case.v_scale))
                            if value != 1.0})
        if case.with_lengths:  # the host copy of the lengths: a list, or a CPU int32 tensor at odd case numbers
            options["context_lens"] = (case.lengths if case.number % 2 == 0
                                       else torch.tensor(case.lengths, dtype=torch.int32))
        return pagedattn.DecodePlan(case.num_seqs, case.group * NUM_KV_HEADS, NUM_KV_HEADS, case.head_dim,
                                    case.block_size, self.max_blocks_per_seq, self.num_blocks, case.dtype,
                                    cache_strides=strides, device=device, **options)

    def decode(self, plan, **options) -> torch.Tensor:
        out = torch.full_like(self.query, math.nan)  # rule 1: every element must be written
        return plan.decode(self.query, self.key_cache, self.value_cache, self.block_tables, self.context_lens,
                           out, **options)

    def gathered(self, seq: int):
        """Sequence seq's K and V as stored, [num_kv_heads, context_len, head_dim], read through its
        row (fp8 pages are gathered as their bytes, which every torch indexes)."""
        length = int(self.context_lens[seq])
        pages = self.block_tables[seq, :math.ceil(length / self.case.block_size)].long()
        def gather(cache):
            stored = cache.view(torch.uint8) if cache.dtype == FP8 else cache
            rows = stored[pages].reshape(-1, NUM_KV_HEADS, self.case.head_dim)[:length].transpose(0, 1)
            return rows.view(cache.dtype)
        return gather(self.key_cache), gather(self.value_cache)


def uniform(shape, generator) -> torch.Tensor:
    """Seeded values in [-1, 1), the project's workloads' range."""
    return torch.rand(shape, generator=generator, dtype=torch.float64) * 2 - 1


def dequantised(stored: torch.Tensor, scale: float, precision: torch.dtype) -> torch.Tensor:
    """The values stored elements stand for, in precision: each element times its cache's scale
    (an fp8 byte's e4m3 value times k_scale or v_scale; 16-bit and f32 caches have scale 1). In
    float64 exact (4 significant bits times 24); in float32 rounded once, as the plain loop reads them."""
    values = stored.float().to(precision)
    return values * scale if scale != 1.0 else values


def references(batch: PagedBatch, scale: float, weights_in_storage_type: bool, k_scale: float = 1.0,
               v_scale: float = 1.0):
    """The oracle, torch's scaled_dot_product_attention in float64 on the gathered, dequantised K/V
    (0 for a context of 0), and the plainest same-precision loop (float math on the same values
    dequantised in float, two passes, weights rounded to the storage type of q and out where the
    rung rounds them, the output rounded): rule 5 bounds the error by 3x that loop's
    (reference/oracle.h, plain_float_attention). k_scale and v_scale: the plan's, as the kernel
    reads them (floats)."""
    case = batch.case
    exact = torch.zeros(batch.query.shape, dtype=torch.float64, device=batch.query.device)
    plain = torch.zeros(batch.query.shape, dtype=torch.float32, device=batch.query.device)
    for seq in range(case.num_seqs):
        if int(batch.context_lens[seq]) == 0:
            continue
        keys, values = batch.gathered(seq)  # as stored: [num_kv_heads, context_len, head_dim]
        query = batch.query[seq]            # [num_q_heads, head_dim]
        # Query head h reads KV head h // group (enable_gqa), as pa's kv_head_of does.
        exact[seq] = F.scaled_dot_product_attention(query.double()[None, :, None],
                                                    dequantised(keys, k_scale, torch.float64)[None],
                                                    dequantised(values, v_scale, torch.float64)[None], scale=scale,
                                                    enable_gqa=True)[0, :, 0]
        keys = dequantised(keys, k_scale, torch.float32).repeat_interleave(case.group, dim=0)
        values = dequantised(values, v_scale, torch.float32).repeat_interleave(case.group, dim=0)
        logits = torch.einsum("hd,htd->ht", query.float(), keys) * scale
        weights = torch.exp(logits - logits.max(dim=1, keepdim=True).values)
        if weights_in_storage_type:
            weights = weights.to(case.dtype).float()
        plain[seq] = (torch.einsum("ht,htd->hd", weights, values) / weights.sum(dim=1, keepdim=True)).to(case.dtype).float()
    return exact, plain


def compare(case: Case, exact: torch.Tensor, plain: torch.Tensor, got: torch.Tensor) -> Optional[str]:
    """Rule 5 as check_against_oracle (harness/harness.cpp) applies it: |got - ref| <= atol +
    rtol |ref| at every element, with ref the oracle rounded to the storage type and atol raised to
    the bound 3 x the plain loop's error + 8 float ulps of the largest output; the largest error
    within that bound; NaN never passes. None when it passes, else where it failed first. With
    fp8 K/V the tolerance is that of q and out's type (docs/design/CORRECTNESS.md, "fp8 K/V": the
    oracle reads the dequantised cache, so the quantisation is no part of the error, and the
    kernel's arithmetic on those values is no coarser than a 16-bit kernel's)."""
    atol, rtol = TOLERANCES[case.dtype]
    plain_error = (plain.double() - exact).abs().max().item()
    bound = 3 * plain_error + 8 * FLOAT_EPSILON * exact.abs().max().item()
    atol = max(atol, bound)
    ref = exact.float().to(case.dtype).double()
    value = got.double()
    diff = (value - ref).abs()
    failed = ~(diff <= atol + rtol * ref.abs())  # NaN compares false: it fails
    max_error = diff.nan_to_num(math.inf).max().item()
    if failed.any():
        seq, head, dim = failed.nonzero()[0].tolist()
        return (f"FAIL {int(failed.sum())}/{failed.numel()}: |d|={diff[seq, head, dim].item():.1e} at (seq {seq}, "
                f"head {head}, dim {dim}) ref {ref[seq, head, dim].item():.7g} got {value[seq, head, dim].item():.7g} "
                f"(atol {atol:.1e}, rtol {rtol:.1e})")
    if max_error > bound:
        return f"FAIL: max |d| {max_error:.1e} exceeds 3x the plain float loop's error ({plain_error:.1e})"
    return None


class Results:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, name: str, failure: Optional[str], rerun: str = ""):
        if failure is None:
            self.passed += 1
            return
        self.failed += 1
        print(f"FAIL {name}: {failure}" + (f"\n  rerun: {rerun}" if rerun else ""))


def run_case(pagedattn, case: Case, device: torch.device, seed: int):
    """Decodes one case; returns (failure or None, max |d|, the plan's kernel name, the plan's repr)."""
    batch = PagedBatch(case, device, seed + case.number)
    try:
        plan = batch.plan(pagedattn, device)
    except pagedattn.Error as error:
        return f"the plan refused it: {error}", math.inf, "refused", ""
    step = expected_step(case)
    if plan.step != step or not plan.description.startswith(f"step {step:02d} ({plan.kernel_name})"):
        return (f"the plan is step {plan.step}, not step {step} (api/decode.cpp's rule: step 12 for fp8 K/V, "
                f"step 11 for ragged lengths given, step 10 for bf16 and f16, step 09 for f32)",
                math.inf, plan.kernel_name, repr(plan))
    try:
        got = batch.decode(plan)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            pagedattn.raise_table_fault()
    except pagedattn.Error as error:
        return f"the decode raised {type(error).__name__}: {error}", math.inf, plan.kernel_name, repr(plan)
    exact, plain = references(batch, plan.scale, plan.weights_in_storage_type, plan.k_scale, plan.v_scale)
    failure = compare(case, exact, plain, got)
    error = (got.double() - exact.float().to(case.dtype).double()).abs().nan_to_num(math.inf).max().item()
    return failure, error, plan.kernel_name, repr(plan)


def expect_error(results: Results, name: str, call: Callable[[], object], kind, *words: str):
    """Rule 3: \\p call raises \\p kind, and its message holds each of \\p words (the argument)."""
    try:
        call()
    except kind as error:
        missing = [word for word in words if word not in str(error)]
        results.check(name, f"the message lacks {missing}: {error}" if missing else None)
        return
    except Exception as error:  # noqa: BLE001: any other type is the failure reported
        results.check(name, f"expected {kind.__name__}, got {type(error).__name__}: {error}")
        return
    results.check(name, f"expected {kind.__name__}, nothing was raised")


def check_errors(pagedattn, device: torch.device, seed: int, results: Results):
    """Each bad argument refused, naming it, before anything runs; a bad table entry found by
    the checked mode."""
    case = Case(-1, torch.bfloat16, 5, 4, 128, 16, [1, 15, 17, 37, 100])
    batch = PagedBatch(case, device, seed)
    plan = batch.plan(pagedattn, device)
    args = dict(query=batch.query, key_cache=batch.key_cache, value_cache=batch.value_cache,
                block_tables=batch.block_tables, context_lens=batch.context_lens)

    def decode_with(**changed):
        return lambda: plan.decode(**{**args, **changed})

    arg_error = pagedattn.ArgumentError
    expect_error(results, "key_cache of another dtype", decode_with(key_cache=batch.key_cache.half()), arg_error,
                 "pagedattn.DecodePlan.decode: key_cache.dtype: expected torch.bfloat16, got torch.float16")
    if torch.cuda.is_available():
        other_device = torch.device("cpu") if device.type == "cuda" else torch.device("cuda")
        expect_error(results, "query on another device", decode_with(query=batch.query.to(other_device)), arg_error,
                     "query.device: expected")
    expect_error(results, "block_tables of another shape", decode_with(block_tables=batch.block_tables[:, :-1]),
                 arg_error, "block_tables.shape: expected [num_seqs, max_blocks_per_seq]")
    transposed = batch.query.transpose(1, 2).contiguous().transpose(1, 2)  # same shape, other strides
    expect_error(results, "query not contiguous", decode_with(query=transposed), arg_error, "query.stride()")
    expect_error(results, "context_lens of int64", decode_with(context_lens=batch.context_lens.long()), arg_error,
                 "context_lens.dtype: expected torch.int32, got torch.int64")
    expect_error(results, "out is query", decode_with(out=batch.query), arg_error,
                 "pagedattn.DecodePlan.decode: out: expected memory disjoint from query")
    expect_error(results, "value_cache of other strides",
                 decode_with(value_cache=batch.value_cache.transpose(1, 2).contiguous().transpose(1, 2)), arg_error,
                 "value_cache.stride()")
    expect_error(results, "plan: group not whole", lambda: pagedattn.DecodePlan(
        5, 6, 4, 128, 16, 8, 64, torch.bfloat16, device=device), arg_error, "num_q_heads % num_kv_heads")
    expect_error(results, "plan: float64", lambda: pagedattn.DecodePlan(
        5, 8, 2, 128, 16, 8, 64, torch.float64, device=device), arg_error,
        "pagedattn.DecodePlan: dtype: expected torch.bfloat16, torch.float16 or torch.float32, got torch.float64")
    expect_error(results, "plan: cache_strides of 3", lambda: pagedattn.DecodePlan(
        5, 8, 2, 128, 16, 8, 64, torch.bfloat16, cache_strides=[1, 2, 3], device=device), arg_error, "cache_strides")
    expect_error(results, "ArgumentError is a ValueError", decode_with(key_cache=batch.key_cache.half()), ValueError,
                 "key_cache.dtype")

    # fp8 K/V: the caches must be the plan's kv_dtype, both ways; the plan's K/V arguments.
    fp8_plan = batch.plan(pagedattn, device, kv_dtype=FP8, k_scale=K_SCALE, v_scale=V_SCALE)
    fp8_key_cache, fp8_value_cache = batch.key_cache.to(FP8), batch.value_cache.to(FP8)
    expect_error(results, "fp8 plan: key_cache of bf16", lambda: fp8_plan.decode(**args), arg_error,
                 "pagedattn.DecodePlan.decode: key_cache.dtype: expected torch.float8_e4m3fn, got torch.bfloat16")
    expect_error(results, "fp8 plan: value_cache of bf16",
                 lambda: fp8_plan.decode(**{**args, "key_cache": fp8_key_cache}), arg_error,
                 "pagedattn.DecodePlan.decode: value_cache.dtype: expected torch.float8_e4m3fn, got torch.bfloat16")
    expect_error(results, "bf16 plan: caches of fp8",
                 decode_with(key_cache=fp8_key_cache, value_cache=fp8_value_cache), arg_error,
                 "pagedattn.DecodePlan.decode: key_cache.dtype: expected torch.bfloat16, got torch.float8_e4m3fn")
    expect_error(results, "plan: kv_dtype of another 16-bit type", lambda: pagedattn.DecodePlan(
        5, 8, 2, 128, 16, 8, 64, torch.bfloat16, kv_dtype=torch.float16, device=device), arg_error,
        "pagedattn.DecodePlan: kv_dtype: expected None, torch.bfloat16 (the plan's dtype) or torch.float8_e4m3fn, "
        "got torch.float16")
    expect_error(results, "plan: kv_dtype e5m2", lambda: pagedattn.DecodePlan(
        5, 8, 2, 128, 16, 8, 64, torch.bfloat16, kv_dtype=torch.float8_e5m2, device=device), arg_error,
        "kv_dtype: expected", "got torch.float8_e5m2")
    expect_error(results, "plan: k_scale without fp8 K/V", lambda: pagedattn.DecodePlan(
        5, 8, 2, 128, 16, 8, 64, torch.bfloat16, k_scale=0.5, device=device), arg_error,
        "pa::plan_decode: k_scale: expected 1 (K/V are not fp8: fp8_kv is false), got 0.5")
    expect_error(results, "plan: fp8 v_scale of 0", lambda: pagedattn.DecodePlan(
        5, 8, 2, 128, 16, 8, 64, torch.bfloat16, kv_dtype=FP8, v_scale=0.0, device=device), arg_error,
        "pa::plan_decode: v_scale: expected finite and > 0 (fp8 K/V), got 0")

    # The host lengths at plan time: their count and range are plan_decode's checks (validate_lengths);
    # their type is the binding's.
    def plan_with(context_lens):  # max_context_len: a row of 8 pages of 16 tokens, 128
        return lambda: pagedattn.DecodePlan(5, 8, 2, 128, 16, 8, 64, torch.bfloat16, context_lens=context_lens,
                                            device=device)

    expect_error(results, "plan: 3 lengths for 5 sequences", plan_with([1, 2, 3]), arg_error,
                 "pa::plan_decode: context_lens.size(): expected num_seqs = 5, got 3")
    expect_error(results, "plan: no lengths for 5 sequences", plan_with([]), arg_error,
                 "pagedattn.DecodePlan: context_lens.size(): expected num_seqs = 5, got 0")
    expect_error(results, "plan: a length past max_context_len", plan_with([1, 2, 3, 4, 129]), arg_error,
                 "pa::plan_decode: context_lens[4]: expected the length of sequence 4 in [0, max_context_len = 128]",
                 "got 129")
    expect_error(results, "plan: a negative length (a tensor)",
                 plan_with(torch.tensor([1, -1, 3, 4, 5], dtype=torch.int32)), arg_error,
                 "pa::plan_decode: context_lens[1]: expected the length of sequence 1", "got -1")
    expect_error(results, "plan: lengths of int64", plan_with(torch.tensor([1, 2, 3, 4, 5])), arg_error,
                 "pagedattn.DecodePlan: context_lens.dtype: expected torch.int32, got torch.int64")
    expect_error(results, "plan: a length that is a float", plan_with([1, 2.5, 3, 4, 5]), arg_error,
                 "pagedattn.DecodePlan: context_lens[1]: expected an int, got 2.5")
    expect_error(results, "plan: a length past int32", plan_with([1, 2, 2**40, 4, 5]), arg_error,
                 "pagedattn.DecodePlan: context_lens[2]: expected an int32", str(2**40))
    expect_error(results, "plan: lengths that are not a sequence", plan_with(5), arg_error,
                 "pagedattn.DecodePlan: context_lens: expected None, a sequence of ints or a CPU torch.int32 tensor",
                 "got int")
    if torch.cuda.is_available():
        expect_error(results, "plan: lengths on the GPU",
                     plan_with(torch.tensor([1, 2, 3, 4, 5], dtype=torch.int32, device="cuda")), arg_error,
                     "pagedattn.DecodePlan: context_lens.device: expected cpu")

    # The checked mode: a block-table entry outside the pool. On the GPU that sequence's row is
    # zeros and the error comes at the next wait; the emulator refuses before the launch.
    tables = batch.block_tables.clone()
    tables[3, 1] = batch.num_blocks + 5
    if device.type == "cuda":
        out = plan.decode(**{**args, "block_tables": tables})
        torch.cuda.synchronize(device)
        expect_error(results, "checked mode: a page outside the pool", pagedattn.raise_table_fault, arg_error,
                     "block_tables[3][1]", str(batch.num_blocks + 5))
        results.check("checked mode: the faulty row is zeros",
                      None if bool((out[3] == 0).all()) else "row 3 is not all zeros")
        try:
            pagedattn.raise_table_fault()
            results.check("checked mode: raised once", None)
        except pagedattn.Error as error:
            results.check("checked mode: raised once", f"raised again: {error}")
    else:
        expect_error(results, "checked mode: a page outside the pool", decode_with(block_tables=tables), arg_error,
                     "block_tables[3][1]")


def check_plan_reuse(pagedattn, device: torch.device, seed: int, results: Results):
    """One plan over three steps while the sequences grow (max_context_len is what a row holds),
    on a stream of its own, then the same decode captured in a CUDA graph and replayed: with 16-bit
    K/V (step 10), planned with the first step's ragged lengths (step 11: balanced for those, right
    for the next ones), and with fp8 K/V (step 12)."""
    lengths = [1, 15, 17, 37, 100]
    variants = (("", Case(-2, torch.bfloat16, 5, 4, 128, 16, lengths)),
                (", planned with the lengths", Case(-3, torch.bfloat16, 5, 4, 128, 16, lengths, with_lengths=True)),
                (", fp8 K/V", Case(-4, torch.bfloat16, 5, 4, 128, 16, lengths, kv_dtype=FP8, k_scale=K_SCALE,
                                   v_scale=V_SCALE)))
    for what, case in variants:
        try:
            reuse_one_plan(pagedattn, case, what, device, seed, results)
        except Exception as error:  # noqa: BLE001: whatever stopped it is the failure reported
            results.check(f"one plan{what}", f"stopped by {type(error).__name__}: {error}")


def reuse_one_plan(pagedattn, case: Case, what: str, device: torch.device, seed: int, results: Results):
    """check_plan_reuse for one case; what names it in the checks (with the plan's rung)."""
    batch = PagedBatch(case, device, seed)
    plan = batch.plan(pagedattn, device)
    label = f"{what} ({plan.kernel_name})" if what else ""
    for step in range(3):
        # One more token in each sequence: where a page is full, a spare page takes it.
        batch.case = dataclasses.replace(case, lengths=[length + step + 1 for length in case.lengths])
        batch.context_lens = torch.tensor(batch.case.lengths, dtype=torch.int32, device=device)
        for seq, length in enumerate(batch.case.lengths):
            page = int(batch.block_tables[seq, (length - 1) // case.block_size])
            if page == POISON_ENTRY:  # the row's next entry: a new page
                page = batch.spare_pages.pop()
                batch.block_tables[seq, (length - 1) // case.block_size] = page
            slot = (length - 1) % case.block_size
            generator = torch.Generator().manual_seed(seed + 100 * step + seq)
            batch.key_cache[page, slot] = batch.stored(uniform((NUM_KV_HEADS, case.head_dim), generator),
                                                       case.k_scale).to(device)
            batch.value_cache[page, slot] = batch.stored(uniform((NUM_KV_HEADS, case.head_dim), generator),
                                                         case.v_scale).to(device)
        if device.type == "cuda":
            stream = torch.cuda.Stream(device)
            stream.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(stream):
                got = batch.decode(plan)
            stream.synchronize()
            pagedattn.raise_table_fault()
        else:
            got = batch.decode(plan)
        exact, plain = references(batch, plan.scale, plan.weights_in_storage_type, plan.k_scale, plan.v_scale)
        results.check(f"one plan{label}, step {step + 1} (context_lens {batch.case.lengths})"
                      + (", on a stream of its own" if device.type == "cuda" else ""),
                      compare(batch.case, exact, plain, got))
    if device.type != "cuda":
        return
    try:
        check_graph(pagedattn, batch, plan, device, seed, results, label)
    except (RuntimeError, pagedattn.Error) as error:  # a capture torch or the entry point refused
        results.check(f"a CUDA graph{label} replayed on new queries", f"{type(error).__name__}: {error}")


def check_workspace_stream(pagedattn, device: torch.device, seed: int, results: Results):
    """A decode on a stream other than the one its plan was made on, the plan deleted while that
    decode is still queued: the plan's workspace must not be free for torch to hand out again
    until the decode has finished (the binding's record_stream), and the decode is right."""
    if device.type != "cuda":
        return
    case = Case(-5, torch.bfloat16, 5, 4, 128, 16, [1, 15, 17, 37, 100])
    batch = PagedBatch(case, device, seed)
    plan = batch.plan(pagedattn, device)
    workspace = plan.workspace.data_ptr()
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    scale, weights_in_storage_type = plan.scale, plan.weights_in_storage_type
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # about 0.1 s of spinning: the decode queues behind it
        got = batch.decode(plan)
    del plan  # the workspace goes back to torch's allocator while the decode waits
    states = [block["state"] for segment in torch.cuda.memory_snapshot() for block in segment["blocks"]
              if block["address"] == workspace]
    queued = not side.query()
    side.synchronize()
    pagedattn.raise_table_fault()
    if not queued:
        failure = "the side stream had finished before the check: nothing was tested (sleep longer)"
    elif states != ["active_pending_free"]:
        failure = (f"the workspace's block is {states or 'not in the snapshot'} while the decode is queued "
                   "(expected ['active_pending_free'])")
    else:
        failure = None
    results.check("a decode on another stream keeps the workspace of a deleted plan until it finishes", failure)
    exact, plain = references(batch, scale, weights_in_storage_type)
    results.check("a decode on another stream, its plan deleted before it ran", compare(case, exact, plain, got))


def check_graph(pagedattn, batch: PagedBatch, plan, device: torch.device, seed: int, results: Results,
                label: str = ""):
    """The decode captured once in a CUDA graph, replayed on new queries written into its input."""
    case = batch.case
    out = torch.full_like(batch.query, math.nan)
    capture = torch.cuda.CUDAGraph()
    warmup = torch.cuda.Stream(device)  # torch's advice: run once on a side stream before capture
    warmup.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(warmup):
        plan.decode(batch.query, batch.key_cache, batch.value_cache, batch.block_tables, batch.context_lens, out)
    torch.cuda.current_stream(device).wait_stream(warmup)
    with torch.cuda.graph(capture):
        plan.decode(batch.query, batch.key_cache, batch.value_cache, batch.block_tables, batch.context_lens, out)
    generator = torch.Generator().manual_seed(seed + 1000)
    batch.query.copy_(uniform(batch.query.shape, generator).to(case.dtype))
    out.fill_(math.nan)
    capture.replay()
    torch.cuda.synchronize(device)
    pagedattn.raise_table_fault()
    exact, plain = references(batch, plan.scale, plan.weights_in_storage_type, plan.k_scale, plan.v_scale)
    results.check(f"a CUDA graph{label} replayed on new queries", compare(batch.case, exact, plain, out))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", required=True, help="the folder holding pagedattn.so (build.py --out)")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu runs the emulator")
    parser.add_argument("--quick", action="store_true", help="a few shapes, contexts of 70 tokens at most")
    parser.add_argument("--case", type=int, help="run this case of the grid alone (a failure prints its number)")
    parser.add_argument("--seed", type=int, default=1, help="the seed of case 0; case N uses seed + N")
    args = parser.parse_args()
    sys.path.insert(0, args.module)
    import pagedattn  # noqa: E402: from --module

    torch.backends.cuda.matmul.allow_tf32 = False  # the plain loop is float math, not TF32
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("test_decode.py: torch sees no CUDA device (use --device cpu for the emulator)")
        return 1
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "the emulator (CPU)"
    print(f"test_decode.py: torch {torch.__version__} on {where}; module {pagedattn.__file__}")
    results = Results()
    cases = grid(args.quick)
    if args.case is not None:
        cases = [case for case in cases if case.number == args.case]
        if not cases:
            print(f"test_decode.py: --case {args.case}: no shape of the grid has that number", file=sys.stderr)
            return 2
    rungs = {}
    worst = {}
    for case in cases:
        failure, error, kernel_name, plan = run_case(pagedattn, case, device, args.seed)
        rungs[kernel_name] = rungs.get(kernel_name, 0) + 1
        key = case.storage_name()
        worst[key] = max(worst.get(key, 0.0), error)
        rerun = f"python3 bindings/torch/test_decode.py --module {args.module} --device {args.device} " \
                f"--case {case.number} --seed {args.seed}" + (" --quick" if args.quick else "")
        results.check(case.describe(), None if failure is None else f"{failure}\n  plan: {plan}", rerun)
    grid_passed = results.passed
    print(f"grid: {grid_passed} of {len(cases)} shapes passed; rungs: "
          + ", ".join(f"{name} {count}" for name, count in sorted(rungs.items()))
          + "; max |d| against SDPA rounded to the storage type: "
          + ", ".join(f"{dtype} {error:.1e}" for dtype, error in sorted(worst.items())))
    if args.case is None:
        for name, check in (("plan reuse", check_plan_reuse), ("workspace stream", check_workspace_stream),
                            ("errors", check_errors)):
            try:
                check(pagedattn, device, args.seed, results)
            except Exception as error:  # noqa: BLE001: whatever stopped it is the failure reported
                results.check(name, f"stopped by {type(error).__name__}: {error}")
        print(f"plan reuse, streams, graph and errors: {results.passed - grid_passed} of "
              f"{results.passed + results.failed - len(cases)} passed")
    print(f"{results.passed} passed, {results.failed} failed")
    return 0 if results.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
