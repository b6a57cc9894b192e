"""The encoder–decoder of transformer/train/seq2seq.py written again in torch, for its tests.

Independent of the package: torch's own embedding, layer_norm, scaled_dot_product_attention (boolean
attn_mask, True = may attend), ReLU and cross_entropy; the sinusoidal table written from the paper's
formula. The weights are copied from the package's dict, so logits and gradients can be compared
name by name.
"""
import math

import torch
import torch.nn.functional as F

from torch_tiny import NamedWeights


def sinusoids(n, d, dtype):  # PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(…)
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    angle = pos / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = angle.sin(), angle.cos()
    return pe.to(dtype)


class TorchSeq2Seq(NamedWeights):

    def attention(self, x, c, pre, mask):  # [b, n_q, d], [b, n_k, d] -> [b, n_q, d], weights [b, h, n_q, n_k]
        b, n_q, d = x.shape
        h = self.cfg.h
        heads = lambda t: t.view(b, t.shape[1], h, d // h).transpose(1, 2)  # noqa: E731
        q, k, v = heads(x @ self.w(pre + "W_q")), heads(c @ self.w(pre + "W_k")), heads(c @ self.w(pre + "W_v"))
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        weights = torch.softmax((q @ k.mT / math.sqrt(d // h)).masked_fill(~mask, -math.inf), dim=-1)
        return o.transpose(1, 2).reshape(b, n_q, d) @ self.w(pre + "W_o"), weights

    def add_norm(self, x, f, pre, k):
        return F.layer_norm(x + f, (self.cfg.d,), self.w(f"{pre}ln{k}_g"), self.w(f"{pre}ln{k}_b"), eps=self.cfg.eps)

    def ffn(self, x, pre):
        return F.relu(x @ self.w(pre + "W_1") + self.w(pre + "b_1")) @ self.w(pre + "W_2") + self.w(pre + "b_2")

    def embed(self, ids):
        W_E = self.w("W_E")
        return F.embedding(ids, W_E) * math.sqrt(self.cfg.d) + sinusoids(ids.shape[1], self.cfg.d, W_E.dtype)

    def forward(self, src, tgt_in, src_lengths):  # -> logits [b, n_tgt, v], cross weights per decoder layer
        c = self.cfg
        src, tgt = torch.as_tensor(src), torch.as_tensor(tgt_in)
        n_src, n_tgt = src.shape[1], tgt.shape[1]
        keys = torch.arange(n_src)[None, :] < torch.as_tensor(src_lengths)[:, None]  # [b, n_src]
        pad = keys[:, None, None, :]  # [b, 1, 1, n_src]
        causal = torch.ones(n_tgt, n_tgt, dtype=torch.bool).tril()
        x = self.embed(src)
        for l in range(c.L_enc):
            pre = f"enc.{l}."
            x = self.add_norm(x, self.attention(x, x, pre + "self.", pad)[0], pre, 1)
            x = self.add_norm(x, self.ffn(x, pre), pre, 2)
        y = self.embed(tgt)
        cross = []
        for l in range(c.L_dec):
            pre = f"dec.{l}."
            y = self.add_norm(y, self.attention(y, y, pre + "self.", causal)[0], pre, 1)
            a, w = self.attention(y, x, pre + "cross.", pad)
            cross.append(w)
            y = self.add_norm(y, a, pre, 2)
            y = self.add_norm(y, self.ffn(y, pre), pre, 3)
        return y @ self.w("W_E").mT, cross

    def loss(self, src, src_lengths, tgt_in, tgt_out):  # a TranslationBatch's order
        logits, _ = self.forward(src, tgt_in, src_lengths)
        return F.cross_entropy(logits.reshape(-1, self.cfg.v), torch.as_tensor(tgt_out).reshape(-1), ignore_index=-100)
