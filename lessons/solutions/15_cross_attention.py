"""Solutions to lesson 15's "Try it" (encoder–decoder and cross-attention)."""
import math

import numpy as np


def exercise_1():
    """Cross-attention with n_dec = 3 target tokens, n_enc = 7 source tokens, h = 2 heads: each
    head scores every (target, source) pair, 3 × 7, none hidden (the whole source is known):
    2 · 3 · 7 = 42 weights, each row summing to 1, so the weights sum to 2 · 3 = 6."""
    return (1, 2, 3, 7), 2 * 3


def check_1(answer, T):
    rng = np.random.default_rng(0)
    d, h = 8, 2
    attn = lambda: T.AttentionWeights(*(rng.normal(size=(d, d)) for _ in range(4)))  # noqa: E731
    lw = T.Seq2SeqDecoderLayer(self_attn=attn(), cross_attn=attn(), W_1=rng.normal(size=(d, 16)),
                               W_2=rng.normal(size=(16, d)), ln1_g=np.ones(d), ln2_g=np.ones(d), ln3_g=np.ones(d))
    _, _, w_cross = T.seq2seq_decoder_layer(rng.normal(size=(1, 3, d)), rng.normal(size=(1, 7, d)), lw, h)
    assert answer[0] == w_cross.shape and abs(w_cross.sum() - answer[1]) < 1e-9, (answer, w_cross.shape)


def exercise_2():
    """Parameters of one decoder layer of the base Transformer (d = 512, d_ff = 2048, biases):
    two attentions, each 4 · (512 · 512 + 512) = 1 050 624; the FFN 512 · 2048 + 2048 +
    2048 · 512 + 512 = 2 099 712; three LayerNorms 3 · 2 · 512 = 3072. Total 4 204 032, against
    3 153 408 for an encoder layer (one attention, two norms)."""
    attn = 4 * (512 * 512 + 512)
    ffn = 512 * 2048 + 2048 + 2048 * 512 + 512
    return 2 * attn + ffn + 3 * 1024


def check_2(answer, T):
    b = T.parameter_breakdown("transformer-base")  # 6 encoder + 6 decoder layers: 18 attentions, 12 FFNs, 30 norms
    per_decoder_layer = 2 * b["attention"] // 18 + b["ffn"] // 12 + 3 * b["norms"] // 30
    assert answer == per_decoder_layer, (answer, per_decoder_layer)


def exercise_3():
    """Without the cache, every step runs the decoder on the whole prefix, and each of the 3 layers
    projects the encoder output Z to K = Z C_k and V = Z C_v again: 3 · 8 = 24 times. With it, the
    source does not change while the translation grows, so each layer projects Z once, before
    the first step: 3 times, whatever the number of steps."""
    L_dec, steps = 3, 8
    return L_dec * steps, L_dec


def check_3(answer, T):
    cfg = T.Seq2SeqConfig(v=11, d=8, h=2, d_ff=12, L_enc=1, L_dec=3, n_max=8)
    params = T.init_seq2seq(cfg, seed=0)
    src, lengths = np.array([[3, 4, 5, 6]]), np.array([4])
    slow, fast = {}, {}
    ids_slow, _ = T.translate_greedy_uncached(params, cfg, src, lengths, 8, counts=slow)
    ids_fast, _ = T.translate_greedy(params, cfg, src, lengths, 8, counts=fast)
    assert ids_slow.shape[1] == ids_fast.shape[1] == 8, "this untrained model wrote EOS (id 2) early"
    assert answer == (slow["cross_kv"], fast["cross_kv"]), (answer, slow, fast)


def exercise_4():
    """A decoder that cannot see the source still sees its own prefix: it knows how many words it has
    written, i. Then the next word is any of the 24 target words (uniform, repeats allowed), and the
    sentence ends after word i with probability h_i = P(n = i | n ≥ i) = 1/(13 − i) for i = 4 … 12
    (lengths uniform in 4 … 12), h_i = 0 before. The best loss of a sentence of n words:

        word i (i < n):  −ln((1 − h_i)/24) = ln 24 − ln(1 − h_i)
        its EOS:         −ln h_n = ln(13 − n)

    The loss averages over tokens, so long sentences weigh more: E[sum over a sentence] / E[n + 1]
    = 27.62 / 9 = 3.069 nats per token, a little under ln 24 = 3.178 (the EOS is partly predictable)."""
    total = 0.0
    for n in range(4, 13):
        hazard = [0.0] * 4 + [1 / (13 - i) for i in range(4, 13)]
        total += sum(math.log(24) - math.log(1 - hazard[i]) for i in range(n)) + math.log(13 - n)
    return total / sum(n + 1 for n in range(4, 13))


def check_4(answer, T):
    run = T.train_translation(steps=150, seed=0, cross_attention=False, progress=False)  # a few seconds
    settled = float(np.mean(run["history"]["loss"][-50:]))  # 3.10 at 150 steps, 3.07 at 600
    assert abs(answer - settled) < 0.05, f"the control run settles at {settled:.3f} nats, not {answer:.3f}"
    assert run["heldout_exact_match"] < 0.01  # and translates nothing


def wrong_4():
    """The usual slip: forgetting that the EOS is partly predictable from the length so far."""
    return math.log(24)
