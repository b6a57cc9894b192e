"""The tiny decoder of transformer/train/decoder.py written again in torch, for its tests.

Independent of the package: torch's own rms_norm, embedding, scaled_dot_product_attention (with
enable_gqa), SiLU and cross_entropy, and RoPE written as HF writes it (rotate_half). The weights
are copied from the package's dict, so logits and gradients can be compared name by name.
"""
import torch
import torch.nn.functional as F


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class NamedWeights(torch.nn.Module):
    """A torch twin holding our weight dict as parameters, reached by our names ("layers.0.W_q")."""

    def __init__(self, cfg, params: dict, dtype=torch.float64):
        super().__init__()
        self.cfg = cfg
        self.names = list(params)
        for name, w in params.items():  # parameter names may not hold dots
            self.register_parameter(name.replace(".", "__"), torch.nn.Parameter(torch.tensor(w, dtype=dtype)))

    def w(self, name):
        return getattr(self, name.replace(".", "__"))

    def named_weights(self):  # our names -> torch parameters
        return {name: self.w(name) for name in self.names}


class TorchTinyDecoder(NamedWeights):

    def forward(self, ids, positions=None, doc_ids=None, keep=None):  # [b, n] -> [b, n, v]
        """keep: {layer: bool [b, h, n, n]} dropout keep-masks of the attention weights (the package's
        saved "layers.{l}.keep"): the attention is then written out, P · keep / (1 − p) before V."""
        c = self.cfg
        b, n = ids.shape
        d_h = c.d // c.h
        ids = torch.as_tensor(ids)
        pos = torch.arange(n).expand(b, n) if positions is None else torch.as_tensor(positions)
        inv_freq = c.rope_base ** (-torch.arange(0, d_h, 2, dtype=torch.float64) / d_h)
        ang = pos[..., None].double() * inv_freq  # [b, n, d_h/2]
        dt = self.w("W_E").dtype
        cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None].to(dt)  # [b, 1, n, d_h]
        sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None].to(dt)
        mask = torch.ones(n, n, dtype=torch.bool).tril().expand(b, n, n)
        if doc_ids is not None:
            doc = torch.as_tensor(doc_ids)
            mask = mask & (doc[:, :, None] == doc[:, None, :]) & (doc[:, None, :] >= 0)
            # a padding query sees nothing; torch's softmax would give it NaN, so let it see itself
            # (its logits are not compared, and no loss or gradient reaches it)
            mask = mask | (torch.eye(n, dtype=torch.bool) & ~mask.any(-1, keepdim=True))
        mask = mask[:, None]  # [b, 1, n, n]
        x = F.embedding(ids, self.w("W_E"))
        for l in range(c.L):
            p = lambda k: self.w(f"layers.{l}.{k}")  # noqa: E731
            a = F.rms_norm(x, (c.d,), p("norm1"), eps=c.eps)
            q = (a @ p("W_q")).view(b, n, c.h, d_h).transpose(1, 2)
            k = (a @ p("W_k")).view(b, n, c.h_kv, d_h).transpose(1, 2)
            v = (a @ p("W_v")).view(b, n, c.h_kv, d_h).transpose(1, 2)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            if keep is None:
                o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
            else:  # the weights, dropped out with the given mask, as torch's own dropout computes it
                rep = c.h // c.h_kv
                s = q @ k.repeat_interleave(rep, 1).mT / d_h ** 0.5
                P = torch.softmax(s.masked_fill(~mask, float("-inf")), -1)
                o = (P * torch.as_tensor(keep[l]) / (1 - c.dropout)) @ v.repeat_interleave(rep, 1)
            x = x + o.transpose(1, 2).reshape(b, n, c.h * d_h) @ p("W_o")
            f = F.rms_norm(x, (c.d,), p("norm2"), eps=c.eps)
            x = x + (F.silu(f @ p("W_gate")) * (f @ p("W_up"))) @ p("W_down")
        hN = F.rms_norm(x, (c.d,), self.w("norm"), eps=c.eps)
        return hN @ (self.w("W_E").mT if c.tied else self.w("W_out"))

    def loss(self, ids, targets, **kw):
        logits = self.forward(ids, **kw)
        return F.cross_entropy(logits.reshape(-1, self.cfg.v), torch.as_tensor(targets).reshape(-1), ignore_index=-100)
