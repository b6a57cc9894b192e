"""Solutions to lesson 13's "Try it" (counting a model)."""


def exercise_1():
    """Where attention FLOPs pass the weights' in a prefill of Llama-3-8B with a causal kernel.

    Config (meta-llama/Meta-Llama-3-8B config.json): L = 32, d = 4096, h = 32, h_kv = 8,
    d_h = 128, d_ff = 14336, v = 128256. Weights a token is multiplied by, per layer:
    W_q, W_o 2 · 4096 · 4096 = 33 554 432; W_k, W_v 2 · 4096 · 1024 = 8 388 608;
    SwiGLU 3 · 4096 · 14336 = 176 160 768; so 218 103 808 per layer, 6 979 321 856 for 32
    layers, plus the LM head 128256 · 4096 = 525 336 576: N = 7 504 658 432.
    Weights: 2Nn. Dense attention 4 L h d_h n²; a causal kernel computes about half,
    2 L h d_h n². Equal at n* = N / (L h d_h) = 7 504 658 432 / 131 072 ≈ 57 256 tokens,
    twice the dense crossover."""
    per_layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336
    N = 32 * per_layer + 128256 * 4096
    return N / (32 * 32 * 128)


def check_1(answer, T):
    one = T.prefill_flops("llama-3-8b", 1)  # 2N for the weights, 4 L h d_h for dense attention, at n = 1
    n_star = 2 * one["matmul"] / one["attention"]  # 2N·n = (4 L h d_h n²) / 2 at n = n*: the causal crossover
    assert abs(answer - n_star) < 1e-9 * n_star, (answer, n_star)
    f = T.prefill_flops("llama-3-8b", round(answer))  # and at that length the two really are equal
    assert abs(f["attention"] / 2 / f["matmul"] - 1) < 1e-4, (answer, f)


def exercise_2():
    """Count a model's parameters from its arrays, the measurement beside §1's formula: a small
    random Llama (L = 2, d = 16, h = 4, h_kv = 2, d_h = 4, d_ff = 24, v = 50, tied head). Sum the
    .size of every weight array. By the formula: the table v·d = 800; per layer W_q and W_o
    d × h·d_h = 16 × 16 each, W_k and W_v d × h_kv·d_h = 16 × 8 each (768 in all), SwiGLU
    3·16·24 = 1,152 and two norms 2·16 = 32, so 1,952; the final norm 16: 800 + 2·1,952 + 16 = 4,720."""
    import dataclasses

    import transformer as T  # only to build the arrays; the count is the sum below

    cfg = T.LlamaConfig(L=2, d=16, h=4, h_kv=2, d_h=4, d_ff=24, v=50, n_ctx=64)
    w = T.random_llama(cfg).weights
    per_layer = [getattr(layer, f.name).size for layer in w.layers for f in dataclasses.fields(layer)]
    return w.W_E.size + sum(per_layer) + w.norm.size  # tied: no separate LM head


def check_2(answer, T):
    cfg = T.LlamaConfig(L=2, d=16, h=4, h_kv=2, d_h=4, d_ff=24, v=50, n_ctx=64)
    assert answer == T.count_parameters(cfg) == 4_720, (answer, T.count_parameters(cfg))
