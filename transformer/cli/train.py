"""`python -m transformer train induction|translate [--steps N --seed S --out DIR]`, and
`generate --checkpoint DIR PROMPT` for the models it trains.

    python -m transformer train induction --out runs/induction      # the tiny decoder, ~1 minute
    python -m transformer train translate --out runs/translate      # the encoder–decoder, ~half a minute
    python -m transformer generate --checkpoint runs/induction "3 17 5 9 3 17"
    python -m transformer generate --checkpoint runs/translate "ka lu mo"

Training shows a progress bar (loss, tokens/s), writes DIR/checkpoint.npz and DIR/metrics.json
when --out is given, and prints the held-out accuracy as its last line. The output folder is
checked before the first step, so a bad --out costs no training time.
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from .shown import counted, cut, shown, shown_int

TASKS = ("induction", "translate")
# The run keeps 4 numbers a step (loss, lr, gradient norm, tokens) and induction an attention snapshot every 10
# steps (9 KB): 100,000 steps hold about 0.2 GB and take over an hour on 2 cores, 170 times the default schedule
MAX_STEPS = 100_000


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask, as taskset or a container sets it), else the
    machine's count: a worker thread past them waits for a core and slows every step."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity mask
        return os.cpu_count() or 1


def register(sub) -> None:
    p = sub.add_parser("train", help="train a tiny model from scratch in NumPy: induction (decoder) or translate "
                                     "(encoder–decoder)",
                       description="Train from scratch with AdamW on a synthetic task, showing a progress bar "
                                   "(loss, tokens/s); print the held-out accuracy as the last line. induction: a "
                                   "2-layer decoder continues random tokens that repeat. translate: the original "
                                   "encoder–decoder reverses and translates sentences of a toy language.")
    p.add_argument("task", choices=TASKS, help="induction or translate")
    p.add_argument("--steps", type=int, default=None,
                   help=f"optimizer steps, 1 to {MAX_STEPS:,} (default: the task's own schedule, which reaches its "
                        "threshold)")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and the data (default 0)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="write DIR/checkpoint.npz and DIR/metrics.json (default: keep nothing); a checkpoint of the "
                        "other task already there is kept unless --force")
    p.add_argument("--force", action="store_true",
                   help="let --out replace a checkpoint of the other task (one of the same task is always replaced)")
    p.add_argument("--packed", action="store_true",
                   help="induction: train on packed rows (document mask, restarted positions) instead of padded ones")
    p.add_argument("--workers", type=int, default=1,
                   help="induction: split each batch's rows over this many threads, one core each, at most the "
                        "cores this process may use (default 1; the same losses up to float rounding)")
    p.set_defaults(func=_train)


def check_train_options(args) -> None:
    """Refuse what cannot train, before the first step, naming the option."""
    from ..tasks.induction_checks import writable_folder

    if args.steps is not None and not 1 <= args.steps <= MAX_STEPS:
        raise ValueError(f"--steps must be an integer from 1 to {MAX_STEPS:,}, got {shown_int(args.steps)}")
    if args.seed < 0:  # NumPy's seeds are integers ≥ 0
        raise ValueError(f"--seed must be an integer ≥ 0, got {args.seed}")
    if args.packed and args.task != "induction":
        raise ValueError(f"--packed applies to the induction task only, not to {args.task}")
    cores = usable_cores()
    if not 1 <= args.workers <= cores:
        raise ValueError(f"--workers must be an integer from 1 to {cores} (the cores this process may use), "
                         f"got {shown_int(args.workers)}")
    if args.workers != 1 and args.task != "induction":
        raise ValueError(f"--workers applies to the induction task only, not to {args.task}")
    if args.out is not None:
        if not args.out.strip():
            raise ValueError("--out must name a folder, got an empty string")
        writable_folder(Path(args.out))
        other = checkpoint_task(Path(args.out))
        if other is not None and other != args.task and not args.force:
            what = shown(other) if other.startswith("kind ") else f"the {shown(other)} task"
            raise ValueError(f"{shown(Path(args.out) / 'checkpoint.npz')} holds a model of {what}, which training "
                             f"{args.task} would replace: give another --out, or add --force to replace it")


def checkpoint_task(out: Path) -> str | None:
    """The task of the model out/checkpoint.npz holds: its config's "task", else the task of its "kind"
    (a translate checkpoint names only its kind, seq2seq), else the kind itself; None when there is no
    checkpoint. Read from the config, no weight read (writable_folder refused a file that is not one)."""
    from ..train.checkpoint import checkpoint_contents

    if not (out / "checkpoint.npz").is_file():
        return None
    config, _ = checkpoint_contents(out)
    kind = config.get("kind")
    return str(config.get("task") or {"seq2seq": "translate", "decoder": "induction"}.get(kind, f"kind {kind!r}"))


def _train(args) -> int:
    check_train_options(args)
    steps = {} if args.steps is None else {"steps": args.steps}
    if args.task == "induction":
        from ..tasks.induction import train_induction

        r = train_induction(seed=args.seed, out=args.out, packed=args.packed, workers=args.workers, **steps)
        h, slots = r["history"], r["slots"]
        print(f"trained {h['steps']} steps on {r['layout']} rows in {h['seconds']:.1f} s "
              f"({h['tokens_per_s']:,.0f} tokens/s); final loss {h['loss'][-1]:.4f}")
        print(f"padded slots over the run: {slots[r['layout']]['padded_slots']:,} of {slots[r['layout']]['slots']:,} "
              f"(the same documents {'padded' if args.packed else 'packed'}: "
              f"{slots['padded' if args.packed else 'packed']['padded_slots']:,})")
        _saved(args.out)
        print(f"held-out accuracy: {r['heldout_accuracy']:.2%} of {r['heldout_predictions']:,} predictions "
              f"(the second halves of held-out documents)")
    else:
        from ..tasks.translate import train_translation

        r = train_translation(seed=args.seed, out=args.out, **steps)
        h = r["history"]
        print(f"trained {h['steps']} steps in {h['seconds']:.1f} s ({h['tokens_per_s']:,.0f} tokens/s); "
              f"final loss {h['loss'][-1]:.4f}")
        _saved(args.out)
        print(f"held-out accuracy: {r['heldout_exact_match']:.2%} of {r['heldout_sentences']} sentences "
              f"translated exactly (greedy)")
    return 0


def _saved(out) -> None:
    if out is None:
        print("nothing saved (add --out DIR to keep the checkpoint and the metrics)")
    else:
        print(f"wrote {shown(Path(out) / 'checkpoint.npz')} and {shown(Path(out) / 'metrics.json')}")


# --- generate --checkpoint DIR ------------------------------------------------------------------
SMOLLM2_ONLY = ("chat", "no_cache", "gguf", "max_memory")


def generate_trained(args) -> int:
    """`generate --checkpoint DIR PROMPT`: continuation with a model `train` wrote.
    A decoder (induction) continues token ids given as numbers, through the same Llama model and
    generation loop as SmolLM2 (greedy, or sampled with --temperature, --top-k, --top-p, --seed);
    an encoder–decoder translates a sentence of the toy source language, greedily."""
    from ..train.checkpoint import checkpoint_contents
    from .sampling_options import check_sampling_options, given_sampling

    given = [f"--{k.replace('_', '-')}" for k in SMOLLM2_ONLY if getattr(args, k, None) not in (None, False)]
    if given:
        raise ValueError(f"{', '.join(given)}: not used with --checkpoint (SmolLM2's options: a trained model has "
                         "no chat template and runs from memory)")
    check_sampling_options(args)
    if args.backend != "numpy":
        raise ValueError(f"--backend {args.backend}: a checkpoint runs on numpy")
    if args.max_new_tokens is not None and args.max_new_tokens < 0:
        raise ValueError(f"--max-new-tokens must be ≥ 0, got {args.max_new_tokens}")
    config, _ = checkpoint_contents(args.checkpoint)  # the file's own checks, no weight read; the model's loader
    # checks the rest
    kind = config.get("kind")
    if kind == "decoder":
        return _continue_ids(args)
    if kind == "seq2seq":
        sampling = (["--temperature"] if args.temperature != 0 else []) + given_sampling(args)
        if sampling:
            raise ValueError(f"{', '.join(sampling)}: the translation model decodes greedily (sampling applies to "
                             "a decoder checkpoint, e.g. the induction task)")
        return _translate(args)
    raise ValueError(f"{shown(args.checkpoint)}: unknown model kind {kind!r} (expected 'decoder' or 'seq2seq')")


def parse_ids(text: str, v: int, low: int = 0) -> list:
    """'3 17 5' (spaces or commas) -> [3, 17, 5], each id in [low, v), one line naming a bad one; '3,,5'
    (an id left out between two commas) is refused, not read as '3 5'.

    >>> parse_ids("3 17, 5", 32)
    [3, 17, 5]
    """
    words = text.replace(",", " ").split()
    if not words:
        raise ValueError("the prompt is empty: give token ids as numbers, e.g. \"3 17 5 9 3 17\"")
    gap = re.search(r"(?:^|,)\s*,", text)  # "1,,2" or ",1": an id left out, not a separator
    if gap:
        near = shown(text[max(0, gap.end() - 12):gap.end() + 8])  # a long prompt is not repeated whole
        raise ValueError(f"the prompt has no id before the comma at character {gap.end()} (\"{near}\"): give token "
                         "ids as numbers separated by spaces or single commas, e.g. \"3, 17, 5\"")
    ids = []
    for w in words:
        if not w.isdigit() or not w.isascii():
            raise ValueError(f"prompt token {cut(w)!r} is not a token id: this model reads ids {low}…{v - 1} as "
                             "numbers, e.g. \"3 17 5 9 3 17\"")
        digits = w.lstrip("0") or "0"  # "0003" is 3; int() of over 4,300 digits is Python's own refusal
        if len(digits) > len(str(v)) or not low <= int(digits) < v:
            shown_id = digits if len(digits) <= 20 else f"of {len(digits):,} digits"
            raise ValueError(f"prompt token id {shown_id} is outside this model's vocabulary {low}…{v - 1}")
        ids.append(int(digits))
    return ids


def check_generation_memory(need: int, what: str) -> None:
    """Refuse, before any step, a generation whose KV cache and attention need more than the memory
    the system reports available (as `generate` does for SmolLM2): a config's n_max sets the
    default length, and a checkpoint from elsewhere may say 2⁴⁰."""
    from .memory import available_bytes, in_units

    limit = available_bytes()
    if limit is not None and need > limit:
        raise ValueError(f"{what} needs about {in_units(need)} (KV cache and attention), over the memory "
                         f"available ({in_units(limit)}): lower --max-new-tokens")


def generation_bytes(L: int, h_kv: int, h: int, d_h: int, n_prompt: int, n_total: int, itemsize: int) -> int:
    """An upper bound of a translation's memory beyond the weights (a trained decoder is a Llama and
    has its own, `Llama.generation_bytes`): the KV cache of every position, 2·L·h_kv·n_total·d_h
    (KVCache's formula), and the prefill's attention, a few h·n_prompt² arrays (scores, weights,
    mask), in the weights' itemsize."""
    return (2 * L * h_kv * n_total * d_h + 4 * h * n_prompt * n_prompt) * itemsize


def _logits_named(args, run):
    """run(), with a refusal of non-finite logits naming the checkpoint (and NumPy's overflow
    warnings silenced: the refusal is the one line that says it)."""
    import numpy as np

    try:
        with np.errstate(over="ignore", invalid="ignore"):
            return run()
    except ValueError as e:
        if "generation step" in str(e):
            raise ValueError(f"{shown(args.checkpoint)}: {e}") from None
        raise


def _continue_ids(args) -> int:
    from ..models.llama_params import llama_from_params
    from ..tasks.induction import load_decoder
    from .sampling_options import sampling_seed

    params, cfg, config = load_decoder(args.checkpoint)
    first = int(config.get("first_token", 0)) if isinstance(config.get("first_token", 0), int) else 0
    if not 0 <= first < cfg.v:  # the ids a prompt may hold are first … v − 1: none would be left
        raise ValueError(f"{shown(args.checkpoint)}: its config's first_token {first} leaves no id of the vocabulary "
                         f"0 … {cfg.v - 1}")
    ids = parse_ids(args.prompt, cfg.v, first)
    room = cfg.n_max - len(ids)
    prompt = f"a prompt of {counted(len(ids), 'token')}"
    if room < 0:
        raise ValueError(f"{prompt} is longer than the model's n_max={cfg.n_max}")
    new = room if args.max_new_tokens is None else args.max_new_tokens
    if new > room:
        raise ValueError(f"{prompt} + --max-new-tokens {new} = {len(ids) + new} is over the "
                         f"model's n_max={cfg.n_max}: lower --max-new-tokens to at most {room}")
    model = llama_from_params(params, cfg)  # the Llama of SmolLM2, holding these weights: one generation loop
    check_generation_memory(model.generation_bytes(len(ids), new), f"{prompt} + {new} new ones")
    seed = sampling_seed(args)
    if seed != args.seed:  # drawn for this run: printed, so that a good sample can be had again with --seed
        print(f"seed: {seed}", file=sys.stderr, flush=True)
    # ids below first_token (0: padding) are refused in a prompt, and never generated either
    out = _logits_named(args, lambda: model.generate(ids, new, args.temperature, args.top_k, args.top_p, seed,
                                                     stop_at_eos=False, suppress_tokens=range(first)))
    how = "greedily" if args.temperature == 0 else f"sampled at temperature {args.temperature:g}"
    print(" ".join(map(str, ids)) + " | " + " ".join(map(str, out)))
    print(f"[{counted(len(ids), 'prompt id')}, {len(out)} generated {how} by the {config.get('task', 'trained')} "
          f"decoder ({model.last_stats.engine} engine); after | the model's own]", file=sys.stderr)
    return 0


def _translate(args) -> int:
    import numpy as np
    from ..train.seq2seq_decode import translate_greedy
    from ..tasks.translate import load_seq2seq
    from ..tasks.translation_data import detokenize

    params, cfg, vocab = load_seq2seq(args.checkpoint)
    words = args.prompt.split()
    if not words:
        raise ValueError("the sentence is empty: give words of the toy source language, e.g. "
                         f"\"{' '.join(vocab.tokens[vocab.first_source:vocab.first_source + 3])}\"")
    source = set(vocab.tokens[vocab.first_source:vocab.first_source + vocab.words])
    unknown = [w for w in words if w not in source]
    if unknown:
        raise ValueError(f"{cut(unknown[0])!r} is not a word of the source language; its words are "
                         f"{' '.join(sorted(source))}")
    if len(words) >= cfg.n_max:
        raise ValueError(f"a sentence of {counted(len(words), 'word')} is too long for this model "
                         f"(n_max={cfg.n_max}): at most {cfg.n_max - 1}")
    src = np.array([[vocab.id_of(w) for w in words]], dtype=np.int64)  # [1, n_src]
    if args.max_new_tokens == 0:
        raise ValueError("--max-new-tokens 0: a translation takes at least one step (give ≥ 1, or leave it out)")
    max_len = cfg.n_max if args.max_new_tokens is None else min(args.max_new_tokens, cfg.n_max)
    check_generation_memory(generation_bytes(cfg.L_dec, cfg.h, cfg.h, cfg.d_h, len(words), max_len,
                                             params["W_E"].dtype.itemsize),
                            f"a translation of up to {max_len} tokens")
    ids, _ = _logits_named(args, lambda: translate_greedy(params, cfg, src, np.array([len(words)]), max_len,
                                                          bos=vocab.bos, eos=vocab.eos, pad=vocab.pad))
    out = [int(i) for i in np.asarray(ids)[0]]
    if vocab.eos in out:
        out = out[:out.index(vocab.eos)]
    print(detokenize(out, vocab))
    return 0
