"""Solutions to lesson 14's "Try it" (the paged KV cache)."""
import math


def exercise_1():
    """Three requests of 100, 33 and 64 tokens, blocks of 16 tokens: ⌈100/16⌉ + ⌈33/16⌉ + ⌈64/16⌉
    = 7 + 3 + 4 = 14 blocks = 224 token slots for 197 tokens: 27 slots (12 %) unused, all in the
    last block of each request."""
    blocks = sum(math.ceil(n / 16) for n in (100, 33, 64))
    return blocks, blocks * 16 - (100 + 33 + 64)


def check_1(answer, T):
    r = T.paged_memory_report("smollm2-135m", [100, 33, 64], block_size=16)
    assert answer == (r["blocks"], r["paged_waste"] // r["bytes_per_token"]), (answer, r)


def exercise_2():
    """SmolLM2-135M keeps 2 · L · h_kv · d_h · 2 bytes = 2 · 30 · 3 · 64 · 2 = 23 040 bytes per
    token in float16. Reserving n_max = 2048 tokens for each of the three requests holds
    3 · 2048 · 23 040 = 141 557 760 bytes; paging holds 224 · 23 040 = 5 160 960."""
    per_token = 2 * 30 * 3 * 64 * 2
    return 3 * 2048 * per_token, 224 * per_token


def check_2(answer, T):
    r = T.paged_memory_report("smollm2-135m", [100, 33, 64], block_size=16, n_max=2048)
    assert answer == (r["contiguous_reserved"], r["paged_reserved"]), (answer, r)
