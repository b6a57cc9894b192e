"""Solutions to lesson 15's "Try it" (encoder–decoder and cross-attention)."""
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
