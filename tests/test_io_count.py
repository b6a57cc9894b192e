"""IO and memory: the instrumented loops against hand-derived formulas, and measured peak bytes.

The counters live in the loops of `flash/tiled.py` and `flash/backward.py`; the formulas in
`io_count.py` are derived on paper from the algorithms (FlashAttention paper, Algorithms 0 and
1, and the FA2 loop order). Small cases are also worked by hand below, so the formulas themselves are checked.
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import transformer as T
from transformer.flash.io_count import (IOCounter, flash1_io, flash2_io, flash_attention_peak_bytes,
                                  flash_io_bound, measure_peak_bytes, naive_io_bound,
                                  paper_block_sizes, standard_attention_io,
                                  standard_attention_peak_bytes, visible_key_tiles)


def _qkv(b, h, h_kv, n_q, n_k, d_h, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((b, h, n_q, d_h)).astype(dtype),
            rng.standard_normal((b, h_kv, n_k, d_h)).astype(dtype),
            rng.standard_normal((b, h_kv, n_k, d_h)).astype(dtype))


# --- the formulas, worked by hand -------------------------------------------------------------------

def test_counter_adds_per_name():
    io = IOCounter()
    io.load("Q", 3), io.load("Q", 4), io.store("O", 5)
    assert (io.loads, io.stores, io.total_loads, io.total_stores, io.total) == ({"Q": 7}, {"O": 5}, 7, 5, 12)


def test_io_formulas_hand_worked():
    # n = 4, d = 2, Br = Bc = 2 (Tr = Tc = 2), one head
    # standard: loads Q 8 + K 8 + S 16 + P 16 + V 8 = 56; stores S 16 + P 16 + O 8 = 40
    assert standard_attention_io(4, 4, 2) == {"loads": 56, "stores": 40, "total": 96}
    # FA1: K, V once = 16; 4 tiles × 2 rows × (Q 2 + O 2 + l 1 + m 1) = 48 → loads 64
    #      init O, l, m = 4·(2 + 2) = 16; 4 tiles × 2 rows × (O 2 + l 1 + m 1) = 32 → stores 48
    assert flash1_io(4, 4, 2, 2, 2) == {"loads": 64, "stores": 48, "total": 112}
    # FA2: Q once = 8; each of the 2 query blocks streams K and V: 2 × 2·4·2 = 32 → loads 40
    #      O 8 + L 4 → stores 12
    assert flash2_io(4, 4, 2, 2, 2) == {"loads": 40, "stores": 12, "total": 52}
    # causal FA2: block 0 needs key block 0 (2 keys), block 1 both (4 keys): 8 + 2·2·6 = 32
    assert flash2_io(4, 4, 2, 2, 2, causal=True)["loads"] == 32
    # causal FA1: 3 tiles of 2 rows: K, V 16 + 3·2·6 = 52 loads; 16 + 3·2·4 = 40 stores
    assert flash1_io(4, 4, 2, 2, 2, causal=True) == {"loads": 52, "stores": 40, "total": 92}
    # heads multiply everything
    assert flash2_io(4, 4, 2, 2, 2, heads=6)["total"] == 6 * 52


def test_visible_key_tiles_hand_worked():
    # n_q = 3 queries at positions 5, 6, 7 of n_k = 8 keys, Br = 2, Bc = 3:
    # block 0 ends at position 6 → key blocks 0, 1, 2 (starts 0, 3, 6); block 1 ends at 7 → 3
    assert visible_key_tiles(3, 8, 2, 3, causal=True) == [3, 3]
    # n_q = 6 > n_k = 2, Br = 2: positions -4..1; block 0 ends at -3 (nothing), 1 at -1, 2 at 1
    assert visible_key_tiles(6, 2, 2, 1, causal=True) == [0, 0, 2]
    assert visible_key_tiles(5, 7, 2, 3, causal=False) == [3, 3, 3]


def test_theorem_2_bounds_hand_worked():
    # FlashAttention paper, Theorem 2: standard attention makes Θ(N d + N²) HBM accesses,
    # FlashAttention Θ(N² d² M⁻¹), for N tokens, head size d and an SRAM of M elements.
    # N = 4, d = 2, M = 8: standard 4·2 + 4² = 24; flash 4²·2² / 8 = 64 / 8 = 8
    assert naive_io_bound(4, 2) == 24
    assert flash_io_bound(4, 2, 8) == 8.0
    # N = 1024, d = 64, M = 16 384: standard 65 536 + 1 048 576 = 1 114 112;
    # flash 1024² · 64² / 16 384 = 2²⁰ · 2¹² / 2¹⁴ = 2¹⁸ = 262 144
    assert naive_io_bound(1024, 64) == 1_114_112
    assert flash_io_bound(1024, 64, 16384) == 262_144
    # M = d² is the break-even point: N²d²/M = N², the standard bound's leading term
    assert flash_io_bound(1024, 64, 64 * 64) == 1024 * 1024
    # a non-power-of-two case keeps the fraction: 3² · 5² / 7 = 225 / 7
    assert flash_io_bound(3, 5, 7) == pytest.approx(225 / 7, rel=1e-15)


def test_paper_block_sizes():
    # Bc = ⌈M / 4d⌉, Br = min(Bc, d): M = 16 384 elements, d = 64 → Bc = 64, Br = 64
    assert paper_block_sizes(16384, 64) == (64, 64)
    assert paper_block_sizes(16384, 16) == (16, 256)
    with pytest.raises(ValueError, match="M"):
        paper_block_sizes(0, 64)


# --- the counters equal the formulas exactly -----------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(b=st.integers(1, 2), hs=st.sampled_from([(1, 1), (4, 2), (3, 1), (2, 2)]), n_q=st.integers(1, 40),
       n_k=st.integers(1, 40), block_q=st.integers(1, 45), block_k=st.integers(1, 45),
       d_h=st.sampled_from([1, 4]), causal=st.booleans())
def test_counters_equal_formulas(b, hs, n_q, n_k, block_q, block_k, d_h, causal):
    h, h_kv = hs
    q, k, v = _qkv(b, h, h_kv, n_q, n_k, d_h)
    Br, Bc = min(block_q, n_q), min(block_k, n_k)  # a block never exceeds the sequence
    for version, formula in ((1, flash1_io), (2, flash2_io)):
        io = IOCounter()
        T.flash_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k, version=version, io=io)
        assert formula(n_q, n_k, d_h, Br, Bc, causal=causal, heads=b * h) == \
            {"loads": io.total_loads, "stores": io.total_stores, "total": io.total}
    io = IOCounter()
    T.standard_attention(q, k, v, causal=causal, io=io)
    assert standard_attention_io(n_q, n_k, d_h, heads=b * h)["total"] == io.total


def test_counters_by_array_hand_worked():
    # FA2, n = 10, d = 4, Br = 4 (blocks of 4, 4, 2), Bc = 3 (Tc = 4): each of the 3 query
    # blocks streams all 10 keys: K = V = 3·10·4 = 120 elements; Q once = 40; O = 40, L = 10
    q, k, v = _qkv(1, 1, 1, 10, 10, 4)
    io = IOCounter()
    T.flash_attention(q, k, v, block_q=4, block_k=3, io=io)
    assert io.loads == {"Q": 40, "K": 120, "V": 120} and io.stores == {"O": 40, "L": 10}


def test_flash_io_follows_n2_d2_over_M():
    # with the paper's block sizes the traffic is Θ(n² d² / M): the ratio to that bound stays
    # within a constant factor as M grows 16× (it is ≈ 8, from 2 d n·Tr with Br = M/4d)
    n, d = 8192, 64
    ratios = []
    for M in (16384, 65536, 262144):
        Br, Bc = paper_block_sizes(M, d)
        Br = Bc  # the FA2 bound needs Br ≈ M/4d as well; the paper caps Br at d for FA1's SRAM fit
        ratios.append(flash2_io(n, n, d, Br, Bc)["total"] / flash_io_bound(n, d, M))
    assert max(ratios) / min(ratios) < 1.2
    assert all(7 < r < 9.5 for r in ratios)
    # and standard attention is Θ(n d + n²): 4n² dominates
    assert standard_attention_io(n, n, d)["total"] / naive_io_bound(n, d) == pytest.approx(4, rel=0.05)


def test_flash_saves_io_when_M_exceeds_d2():
    # tiled traffic / standard traffic ≈ 2 d² / M: below 1 once M > 2d²
    n, d = 4096, 64
    for M, better in ((2 * d * d // 4, False), (16 * d * d, True)):
        Bc = math.ceil(M / (4 * d))
        assert (flash2_io(n, n, d, Bc, Bc)["total"] < standard_attention_io(n, n, d)["total"]) == better


# --- peak memory: formula vs tracemalloc -------------------------------------------------------------

def test_measure_peak_bytes_sees_numpy_buffers():
    def two_arrays():
        a = np.ones(1_000_000)  # 8 MB
        return a + 1.0  # another 8 MB while a is alive

    result, peak = measure_peak_bytes(two_arrays)
    assert result.shape == (1_000_000,)
    assert 16_000_000 <= peak < 16_000_000 + 65_536


def test_peak_formulas_hand_worked():
    # b = 1, h = 4, n = 8, d = 2, float32; standard: S and P 2·4·8·8 = 512, m 4·8 = 32 → 544 · 4 bytes;
    # a causal mask adds 8·8 one-byte entries
    assert standard_attention_peak_bytes(1, 4, 8, 8, 2, 4) == 544 * 4
    assert standard_attention_peak_bytes(1, 4, 8, 8, 2, 4, causal=True) == 544 * 4 + 64
    # tiled, Br = Bc = 4, h_kv = 1: O and L 4·8·(2 + 1) = 96; four 4 × 4 tiles per head 4·4·16 = 256;
    # Q_i and O_i 2·4·4·2 = 64; K_j and V_j of the one KV head 2·1·4·2 = 16 → 432 · 4 bytes
    assert flash_attention_peak_bytes(1, 4, 8, 8, 2, 4, 4, 4, h_kv=1) == 432 * 4
    # h_kv = h = 4: K_j, V_j are 2·4·4·2 = 64 → 480 · 4 bytes
    assert flash_attention_peak_bytes(1, 4, 8, 8, 2, 4, 4, 4) == 480 * 4


@pytest.mark.parametrize("n", [512, 1024, 2048])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("h_kv", [4, 1])  # MHA and MQA: S and P are per query head either way
def test_standard_attention_peak_matches_formula(n, causal, h_kv):
    b, h, d = 1, 4, 32
    q, k, v = _qkv(b, h, h_kv, n, n, d)
    T.standard_attention(q, k, v, causal=causal)  # warm-up: first calls allocate caches
    _, peak = measure_peak_bytes(T.standard_attention, q, k, v, causal=causal)
    formula = standard_attention_peak_bytes(b, h, n, n, d, 4, causal)
    assert abs(peak - formula) <= 0.02 * formula  # within 2 %


@pytest.mark.parametrize("n,block_q,block_k", [(512, 64, 64), (1024, 128, 128), (1000, 96, 96), (384, 512, 512),
                                               (1000, 96, 40)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("h_kv", [4, 2, 1])
def test_flash_attention_peak_matches_formula(n, block_q, block_k, causal, h_kv):
    # measured within +0.3 … +2.2 % for equal blocks, +4.4 % for Br = 96, Bc = 40, at every h_kv
    # (before the K_j, V_j tiles were counted by h_kv, MQA came out 6 % under the formula)
    b, h, d = 1, 4, 32
    q, k, v = _qkv(b, h, h_kv, n, n, d)
    T.flash_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k)  # warm-up
    _, peak = measure_peak_bytes(T.flash_attention, q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    formula = flash_attention_peak_bytes(b, h, n, n, d, 4, block_q, block_k, h_kv=h_kv)
    assert abs(peak - formula) <= 0.05 * formula  # within 5 %: small Python objects are counted too


@pytest.mark.parametrize("h_kv", [4, 1])
def test_flash_attention_peak_float16_formula(h_kv):
    b, h, d, n, block = 1, 4, 32, 1024, 128
    q, k, v = _qkv(b, h, h_kv, n, n, d, dtype=np.float16)
    T.flash_attention(q, k, v, block_q=block, block_k=block)
    _, peak = measure_peak_bytes(T.flash_attention, q, k, v, block_q=block, block_k=block)
    formula = flash_attention_peak_bytes(b, h, n, n, d, 4, block, block, out_itemsize=2, h_kv=h_kv)
    assert abs(peak - formula) <= 0.05 * formula


def test_tiled_peak_is_under_two_percent_of_naive_at_4096():
    # the target, on the formulas (measured by benchmarks/bench_flash.py):
    # b = 1, h = 8, d_h = 64, float32, block 256
    naive = standard_attention_peak_bytes(1, 8, 4096, 4096, 64, 4, causal=True)
    tiled = flash_attention_peak_bytes(1, 8, 4096, 4096, 64, 4, 256, 256)
    assert tiled <= 0.02 * naive
    # and the formulas grow as n² and n: doubling n multiplies them by ≈ 4 and ≈ 2
    assert standard_attention_peak_bytes(1, 8, 8192, 8192, 64, 4) / \
        standard_attention_peak_bytes(1, 8, 4096, 4096, 64, 4) == pytest.approx(4, rel=0.01)
    assert flash_attention_peak_bytes(1, 8, 8192, 8192, 64, 4, 256, 256) / tiled < 2
