"""HF transformers' LlamaForCausalLM holding the weights of one of our (random) Llama models.

The reference for tests that need HF to run the very weights ours runs: our W_q/W_k rows
are in interleaved-RoPE order (as GGUF stores them) and are un-permuted to HF's rotate-half
order; every matrix is transposed back to torch's (out, in).

And HF's own reading of SmolLM2's GGUF (`hf_smollm2_from_gguf`), the reference for the real model.
"""
import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path

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


HF_CACHE = Path(tempfile.gettempdir()) / "transformer-hf-smollm2"


def hf_smollm2_from_gguf(attn_implementation=None):
    """HF transformers' LlamaForCausalLM (float32, eval) as HF's GGUF reader converts SmolLM2's file.

    The conversion parses and dequantises the GGUF in about 15 s, and each pytest worker and the
    decoder benchmark needs it. Its result is kept as a plain HF folder (config.json,
    generation_config.json and model.safetensors, 538 MB) in $TMPDIR/transformer-hf-smollm2/,
    named by the GGUF's SHA-256 (0.3 s to read; a new venv installs the same file with a new
    modification time) and the transformers version, and read back in well under a second. The
    folder is written under a temporary name and renamed, so two workers never read half of it;
    where it cannot be written (a full disk), the conversion is used as it is. Each use removes the
    folders of other GGUFs or transformers versions not used for an hour.
    """
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    gguf = Path(T.smollm2_path())
    with open(gguf, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()[:16]
    folder = HF_CACHE / f"{digest}-transformers-{transformers.__version__}"
    kw = {"dtype": torch.float32} | ({"attn_implementation": attn_implementation} if attn_implementation else {})
    if (folder / "model.safetensors").is_file():
        os.utime(folder)  # in use: not stale
        _remove_stale(folder)
        return AutoModelForCausalLM.from_pretrained(folder, **kw).eval()
    m = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, **kw).eval()
    _keep(m, folder)
    _remove_stale(folder)
    return m


def _remove_stale(kept: Path, idle_s: float = 3600) -> None:
    """Remove the folders beside `kept` (another GGUF, another transformers version, a copy left
    half-written) that were last used over `idle_s` seconds ago: 538 MB each."""
    for other in kept.parent.glob("*"):
        try:
            if other != kept and other.is_dir() and time.time() - other.stat().st_mtime > idle_s:
                shutil.rmtree(other, ignore_errors=True)
        except OSError:
            continue


def _keep(m, folder: Path) -> None:
    """Write the model `m` as a plain HF folder `folder`, under a temporary name, then renamed.
    Where it cannot be written (a full disk) or another worker renamed its copy first, nothing is kept."""
    from safetensors.torch import save_model

    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        part = Path(tempfile.mkdtemp(dir=folder.parent, prefix=folder.name + ".part-"))
    except OSError:
        return
    try:
        m.config.quantization_config = None  # the folder holds float32 weights, not the GGUF's blocks
        m.config.save_pretrained(part)
        m.generation_config.save_pretrained(part)
        save_model(m, str(part / "model.safetensors"))  # the tied lm_head is stored once
        part.rename(folder)
    except OSError:
        shutil.rmtree(part, ignore_errors=True)
