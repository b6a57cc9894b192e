"""HF transformers' LlamaForCausalLM holding the weights of one of our (random) Llama models.

The reference for tests that need HF to run the very weights ours runs: our W_q/W_k rows
are in interleaved-RoPE order (as GGUF stores them) and are un-permuted to HF's rotate-half
order; every matrix is transposed back to torch's (out, in).
"""
import numpy as np

import transformer as T


def hf_llama_holding(ours):
    """A LlamaForCausalLM (float32, eval) with `ours`'s config and weights."""
    import torch
    from transformers import LlamaConfig as HFConfig, LlamaForCausalLM

    cfg, w = ours.config, ours.weights
    hf = LlamaForCausalLM(HFConfig(vocab_size=cfg.v, hidden_size=cfg.d, intermediate_size=cfg.d_ff,
                                   num_hidden_layers=cfg.L, num_attention_heads=cfg.h,
                                   num_key_value_heads=cfg.h_kv, head_dim=cfg.d_h,
                                   max_position_embeddings=cfg.n_ctx, rms_norm_eps=cfg.eps,
                                   rope_theta=cfg.rope_base, tie_word_embeddings=cfg.tied,
                                   attention_bias=False, mlp_bias=False)).eval()
    perm = np.array(T.interleaved_to_half_permutation(cfg.d_h))

    def t(W):  # (d_in, d_out) -> torch (d_out, d_in)
        return torch.from_numpy(np.ascontiguousarray(W.T))

    def unpermute(W, heads):  # (d, heads·d_h) interleaved rows -> rotate-half rows, as torch (out, in)
        return t(W[:, np.concatenate([perm + cfg.d_h * i for i in range(heads)])])

    sd = {"model.embed_tokens.weight": torch.from_numpy(w.W_E), "model.norm.weight": torch.from_numpy(w.norm),
          "lm_head.weight": torch.from_numpy(w.W_E) if cfg.tied else t(w.W_out)}
    for i, lw in enumerate(w.layers):
        p = f"model.layers.{i}."
        sd.update({p + "input_layernorm.weight": torch.from_numpy(lw.attn_norm),
                   p + "post_attention_layernorm.weight": torch.from_numpy(lw.ffn_norm),
                   p + "self_attn.q_proj.weight": unpermute(lw.W_q, cfg.h),
                   p + "self_attn.k_proj.weight": unpermute(lw.W_k, cfg.h_kv),
                   p + "self_attn.v_proj.weight": t(lw.W_v), p + "self_attn.o_proj.weight": t(lw.W_o),
                   p + "mlp.gate_proj.weight": t(lw.W_gate), p + "mlp.up_proj.weight": t(lw.W_up),
                   p + "mlp.down_proj.weight": t(lw.W_down)})
    missing, unexpected = hf.load_state_dict(sd, strict=False)
    assert not unexpected and all("rotary" in k for k in missing), (missing, unexpected)
    return hf


def hf_logits(hf, ids):  # list of n ids -> [n, v] NumPy
    import torch
    with torch.no_grad():
        return hf(torch.tensor([ids])).logits[0].numpy()
