"""Train the encoder–decoder on the toy translation task: reverse the sentence and translate each word.

    train_translation(steps=…, seed=0, out=DIR)  ->  params, cfg, history, held-out exact match,
                                                     the cross-attention of a held-out sentence
    load_seq2seq(DIR)                            ->  params, cfg, vocab (shapes checked against the config)

The task (`translation_data.py`): a source sentence of 4–12 made-up words; its translation is the
dictionary words in reversed order, so the decoder position that writes target word i must read
source word n − 1 − i. The model has to learn the dictionary (24 word pairs, through the shared
embedding table) and the anti-diagonal alignment (through cross-attention, from the sinusoidal
positions and the padding mask that tells it where the sentence ends).

Held-out exact match: greedy translation (`translate_greedy`) of sentences that training never
draws (`is_heldout`), counted right only if every word and the final EOS are right. Every
number of a run comes from its seed: the same seed gives the same weights and the same history.
"""
from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from . import translate_checks
from ..backend import to_numpy
from ..files import interrupts_deferred
from ..require import checked_by
from ..train.checkpoint import checkpoint_contents, load_checkpoint, save_checkpoint, write_metrics
from ..train.data import HELDOUT_SEED_OFFSET, IGNORE_INDEX, batches
from ..train.loop import train_loop
from ..train.seq2seq import Seq2SeqConfig, init_seq2seq, seq2seq_loss_and_grads
from ..train.seq2seq_decode import translate_greedy
from .translation_data import TranslationVocab, translation_batch, translation_split, translation_vocab

__all__ = ["TRANSLATION_SIZES", "TRANSLATION_RECIPE", "DEFAULT_STEPS", "translation_config", "train_translation",
           "translation_exact_match", "load_seq2seq", "seq2seq_checkpoint_config"]

# d = 64 with h = 4 heads of d_h = 16 learns the task in 600 steps (measured on seeds 0–3); the paper's
# d_ff = 4·d is kept at 2·d to halve the FFN's time. n_max = 16 ≥ 12 source words + EOS + a spare step
# for greedy decoding to show a missing EOS.
TRANSLATION_SIZES = dict(d=64, h=4, d_ff=128, L_enc=2, L_dec=2, n_max=16)
TRANSLATION_RECIPE = dict(
    batch_size=64,  # sentences per step
    lr_max=3e-3,  # with the warm-up, this small model trains stably at 3e-3 (seeds 0–3)
    warmup=100,  # the paper's linear warm-up (post-norm is unstable without one), shortened
    min_lr=3e-4,  # cosine decay to lr_max / 10
    weight_decay=0.01,
    betas=(0.9, 0.98),  # the paper's β₂ = 0.98
    clip=1.0,
)
DEFAULT_STEPS = 600  # seeds 0–3 reach 99.0–99.6 % held-out exact match (400 steps: 98 %), ~23 s of one core
HELDOUT_SENTENCES = 512  # 4 batches of 128 held-out sentences: 1 / 512 = 0.2 % resolution
EXAMPLE_WORDS = 9  # the held-out example whose cross-attention is returned has 9 words: 10 × 9 weights


def translation_config(vocab: TranslationVocab | None = None) -> Seq2SeqConfig:
    """The model trained by `train_translation`: TRANSLATION_SIZES over the task's vocabulary (v = 51)."""
    vocab = translation_vocab() if vocab is None else vocab
    return Seq2SeqConfig(v=vocab.v, **TRANSLATION_SIZES)


def seq2seq_checkpoint_config(cfg: Seq2SeqConfig, vocab: TranslationVocab) -> dict:
    """What a checkpoint stores beside the weights: "kind": "seq2seq", the config's fields, the vocabulary."""
    return {"kind": "seq2seq", **cfg.as_dict(), "vocab": dataclasses.asdict(vocab)}


def padded_to(ids, n: int, pad: int):  # [b, n_out] -> [b, n]: cut, or filled with PAD
    out = np.full((ids.shape[0], n), pad, dtype=np.int64)
    k = min(n, ids.shape[1])
    out[:, :k] = ids[:, :k]
    return out


@checked_by(translate_checks.translation_exact_match)
def translation_exact_match(params: dict, cfg: Seq2SeqConfig, held: list, vocab: TranslationVocab | None = None):
    # list of TranslationBatch -> (fraction right, [sentences] bool)
    """Greedy-translate every sentence of the batches (max_len = n_src + 2: one spare step, so a
    missing EOS shows) and count a sentence right only if its words and its EOS all are."""
    vocab = translation_vocab() if vocab is None else vocab
    right = []
    for batch in held:
        n_src = batch.src_ids.shape[1]
        max_len = min(n_src + 2, cfg.n_max)
        ids, _ = translate_greedy(params, cfg, batch.src_ids, batch.src_lengths, max_len,
                                  bos=vocab.bos, eos=vocab.eos, pad=vocab.pad)  # [b, n_out]
        got = padded_to(to_numpy(ids), n_src + 1, vocab.pad)  # [b, n_tgt]
        want = np.asarray(batch.tgt_out)  # [b, n_tgt]: the translation, EOS, then IGNORE_INDEX
        right.append(np.all((got == want) | (want == IGNORE_INDEX), axis=1))  # [b]
    right = np.concatenate(right)
    return float(right.mean()), right


def cross_attention_of(params, cfg, example, vocab):  # -> ids written, weights [L_dec, h, n_out, n_src]
    ids, rows = translate_greedy(params, cfg, example.src_ids, example.src_lengths,
                                 example.src_ids.shape[1] + 2, bos=vocab.bos, eos=vocab.eos, pad=vocab.pad)
    return to_numpy(ids)[0], to_numpy(rows)[:, 0]


@checked_by(translate_checks.train_translation)
def train_translation(*, steps: int = DEFAULT_STEPS, seed: int = 0, out=None, progress: bool = True, on_step=None,
                      dtype: str = "float32", cross_attention: bool = True) -> dict:
    """Train the encoder–decoder on "reverse and translate" from init_seq2seq(cfg, seed), with batches
    from default_rng(seed) (training split only) and the TRANSLATION_RECIPE of AdamW, warm-up and
    cosine decay; then greedy-translate HELDOUT_SENTENCES held-out sentences.

    Returns a dict: "params", "cfg", "vocab", "history" (train_loop's: loss, lr, grad_norm per step,
    seconds, tokens/s), "heldout_exact_match" (fraction), "heldout_sentences", "example" (a held-out
    sentence: "src", "output", "reference" ids), "cross_attention" and "cross_attention_init" (its
    greedy translation's cross-attention weights, [L_dec, h, n_out, n_src], after training and at
    initialisation), "seconds" (training), "eval_seconds", "load_average" (1-minute load at the start
    and the end). With out: writes out/checkpoint.npz (config with "kind": "seq2seq" and the
    vocabulary) and out/metrics.json.

    cross_attention=False is the control run: every decoder layer's cross-attention output
    projection W_o starts at 0 and its gradient is set to 0, so the cross-attention sub-layers add
    nothing and the decoder never sees the source (the encoder then gets no gradient either).
    """
    vocab = translation_vocab()
    cfg = translation_config(vocab)
    r = TRANSLATION_RECIPE
    load_start = os.getloadavg()[0]
    params = init_seq2seq(cfg, seed, dtype=dtype)
    cut = [f"dec.{l}.cross.W_o" for l in range(cfg.L_dec)] if not cross_attention else []
    for name in cut:  # the control: cross-attention writes 0 into the decoder's residual stream
        params[name][...] = 0

    def loss_and_grads(p, batch):
        loss, grads = seq2seq_loss_and_grads(p, batch, cfg)
        for name in cut:  # and stays 0: no gradient, so AdamW never moves it (its decay keeps 0 at 0)
            grads[name] = grads[name] * 0
        return loss, grads
    example = translation_batch(np.random.default_rng(seed + HELDOUT_SEED_OFFSET + 1), 1,
                                n_range=(EXAMPLE_WORDS, EXAMPLE_WORDS), split="heldout")
    _, cross_init = cross_attention_of(params, cfg, example, vocab)

    make = lambda rng: translation_batch(rng, r["batch_size"])  # noqa: E731
    # One BLAS thread: the matrices are tiny ((768, 64) @ (64, 64)), and a second BLAS thread only
    # waits on the first; on a busy 2-core machine it made a step 7 to 25 times slower (80 ms -> 0.6-2 s).
    with threadpool_limits(limits=1, user_api="blas"):
        history = train_loop(loss_and_grads, params,
                             batches(make, seed, steps), steps=steps, lr_max=r["lr_max"],
                             warmup=min(r["warmup"], steps), min_lr=r["min_lr"], clip=r["clip"],
                             weight_decay=r["weight_decay"], betas=r["betas"], progress=progress, on_step=on_step,
                             desc="translate")
        t0 = time.perf_counter()
        _, held = translation_split(seed, 0, HELDOUT_SENTENCES // 128, 128)
        exact, _ = translation_exact_match(params, cfg, held, vocab)
        output, cross = cross_attention_of(params, cfg, example, vocab)
        eval_seconds = time.perf_counter() - t0
    result = {
        "params": params, "cfg": cfg, "vocab": vocab, "history": history,
        "heldout_exact_match": exact, "heldout_sentences": HELDOUT_SENTENCES,
        "example": {"src": example.src_ids[0].tolist(), "output": output.tolist(),
                    "reference": example.tgt_out[0].tolist()},
        "cross_attention": cross, "cross_attention_init": cross_init,
        "seconds": history["seconds"], "eval_seconds": eval_seconds,
        "load_average": (load_start, os.getloadavg()[0]),
    }
    if out is not None:
        with interrupts_deferred():  # the checkpoint and its metrics: both new or both old
            save_checkpoint(out, params, seq2seq_checkpoint_config(cfg, vocab),
                            extra={"seed": seed, "steps": steps, "heldout_exact_match": exact})
            write_metrics(out, {
                "task": "translate", "seed": seed, "steps": steps, "config": cfg.as_dict(),
                "recipe": {k: list(v) if isinstance(v, tuple) else v for k, v in r.items()},
                "heldout_exact_match": exact, "heldout_sentences": HELDOUT_SENTENCES,
                "seconds": history["seconds"], "eval_seconds": eval_seconds, "tokens_per_s": history["tokens_per_s"],
                "tokens_seen": history["tokens_seen"], "load_average": list(result["load_average"]),
                "cpu_count": os.cpu_count(),
                "loss": history["loss"], "lr": history["lr"], "grad_norm": history["grad_norm"],
            })
    return result


def config_from_checkpoint(config: dict, where: str, held: dict | None = None):  # -> (Seq2SeqConfig, TranslationVocab)
    """The model's config and vocabulary from a checkpoint's config dict, each problem one line.
    held: the file's parameter shapes (checkpoint_contents): L_enc + L_dec is bounded by them
    before the per-layer shapes are listed."""
    if config.get("kind") != "seq2seq":
        raise ValueError(f"{where}: not an encoder–decoder checkpoint: kind is {config.get('kind')!r}, "
                         f"expected 'seq2seq'")
    fields = [f.name for f in dataclasses.fields(Seq2SeqConfig)]
    missing = [f for f in fields + ["vocab"] if f not in config]
    if missing:
        raise ValueError(f"{where}: the config lacks {missing[0]!r}")
    try:
        cfg = Seq2SeqConfig(**{f: config[f] for f in fields})
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: bad config: {e}") from None
    if held is not None and cfg.L_enc + cfg.L_dec > len(held):
        raise ValueError(f"{where}: config L_enc={cfg.L_enc}, L_dec={cfg.L_dec} names more layers than the file "
                         f"holds weights ({len(held)})")
    v = config["vocab"]
    vocab_fields = [f.name for f in dataclasses.fields(TranslationVocab)]
    if not isinstance(v, dict) or sorted(v) != sorted(vocab_fields):
        raise ValueError(f"{where}: the vocabulary must be a dict with the keys {vocab_fields}")
    tokens = v["tokens"]
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens) or len(set(tokens)) != len(tokens):
        raise ValueError(f"{where}: the vocabulary's tokens must be a list of distinct strings")
    if len(tokens) != cfg.v:
        raise ValueError(f"{where}: the vocabulary holds {len(tokens)} tokens, the config v={cfg.v}")
    ints = {k: v[k] for k in vocab_fields if k != "tokens"}
    if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < cfg.v for i in ints.values()):
        raise ValueError(f"{where}: the vocabulary's special and first ids must be integers in [0, {cfg.v}), "
                         f"got {ints}")
    if max(ints["first_source"], ints["first_target"]) + ints["words"] > cfg.v:
        raise ValueError(f"{where}: the vocabulary's words run past v={cfg.v}: {ints}")
    return cfg, TranslationVocab(tuple(tokens), **ints)


@checked_by(translate_checks.load_seq2seq)
def load_seq2seq(dir, *, xp=None) -> tuple:  # -> (params, cfg, vocab)
    """Read a checkpoint written by train_translation: (params, Seq2SeqConfig, TranslationVocab).
    The checkpoint's own checks run (load_checkpoint), then its config is read as a Seq2SeqConfig
    and every weight's name and shape checked against it: one line per problem."""
    where = str(Path(dir))
    config, held = checkpoint_contents(dir)  # headers only: the sizes are bounded before any weight is read
    cfg, vocab = config_from_checkpoint(config, where, held)
    params, _ = load_checkpoint(dir, xp=xp, expected_shapes=cfg.parameter_shapes())
    dtype = params["W_E"].dtype
    odd = [k for k, w in params.items() if w.dtype != dtype]
    if odd:
        raise ValueError(f"{where}: parameter {odd[0]!r} has dtype {params[odd[0]].dtype}, W_E {dtype}: "
                         f"one dtype for all")
    return params, cfg, vocab
