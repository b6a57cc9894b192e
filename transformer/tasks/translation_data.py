"""A toy translation task for an encoder–decoder: reverse the sentence and translate each word.

The source language has 24 made-up words ("ka", "lu", …), the target language 24 English ones
("dog", "sun", …), and a fixed dictionary pairs them one to one. A source sentence is 4–12
random source words; its translation is the dictionary words of the source IN REVERSED ORDER:

    source  ka lu mi        (n = 3 words)
    target  cat sun dog     target word i translates source word n − 1 − i

So the alignment is known exactly: the decoder position that writes target word i should
look (cross-attend) at source word n − 1 − i, an anti-diagonal, never the diagonal a
word-by-word copy would give. `translation_alignment` is that matrix, to set beside the
cross-attention a trained model learned.

One shared vocabulary serves both sides, so one embedding table can: PAD = 0, BOS = 1,
EOS = 2, the source words 3 … 26, the target words 27 … 50 (v = 51); source word 3 + k
translates to target word 27 + k. Seeds and the held-out split work as in train/data.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from . import translation_data_checks as checks
from ..require import checked_by
from ..train.data import HELDOUT_SEED_OFFSET, IGNORE_INDEX, MAX_DRAWS, is_heldout

__all__ = ["SOURCE_WORDS", "TARGET_WORDS", "TranslationVocab", "translation_vocab", "TranslationBatch",
           "translation_batch", "translation_split", "reference_translation", "translation_alignment",
           "detokenize"]

SOURCE_WORDS = ("ka", "lu", "mi", "po", "ren", "sa", "ti", "vo", "ze", "bu", "fi", "go",
                "ha", "jo", "ke", "la", "mu", "ni", "or", "pe", "qi", "ro", "su", "wa")
TARGET_WORDS = ("dog", "sun", "cat", "tree", "moon", "fish", "bird", "rain", "star", "rock", "milk", "bread",
                "boat", "fire", "snow", "wind", "door", "book", "hand", "ring", "lamp", "road", "leaf", "cup")


@dataclass(frozen=True)
class TranslationVocab:
    """The shared vocabulary: tokens[id] is the id's text."""
    tokens: tuple
    pad: int = 0
    bos: int = 1
    eos: int = 2
    first_source: int = 3  # source word k has id first_source + k
    first_target: int = 3 + len(SOURCE_WORDS)  # its translation has id first_target + k
    words: int = len(SOURCE_WORDS)  # words per language

    @property
    def v(self) -> int:
        """Vocabulary size."""
        return len(self.tokens)

    @property
    def source_ids(self) -> range:
        return range(self.first_source, self.first_source + self.words)

    @property
    def target_ids(self) -> range:
        return range(self.first_target, self.first_target + self.words)

    def translate(self, source_id: int) -> int:
        """The dictionary: a source word's id -> its target word's id."""
        return source_id - self.first_source + self.first_target

    def id_of(self, token: str) -> int:
        """A token's id from its text ("ka" -> 3)."""
        return self.tokens.index(token)


def translation_vocab() -> TranslationVocab:
    """The task's vocabulary: <pad> <bos> <eos>, then the 24 source words, then the 24 target words.

    >>> voc = translation_vocab()
    >>> voc.v, voc.tokens[voc.id_of("ka")], voc.tokens[voc.translate(voc.id_of("ka"))]
    (51, 'ka', 'dog')
    """
    return TranslationVocab(("<pad>", "<bos>", "<eos>") + SOURCE_WORDS + TARGET_WORDS)


class TranslationBatch(NamedTuple):
    """A padded batch for an encoder–decoder (n_src = longest source, n_tgt = n_src + 1)."""
    src_ids: np.ndarray  # [b, n_src] int64: source words, PAD after each sentence's end
    src_lengths: np.ndarray  # [b] int64: words in each source sentence
    tgt_in: np.ndarray  # [b, n_tgt] int64: BOS, then the translation (teacher forcing), then PAD
    tgt_out: np.ndarray  # [b, n_tgt] int64: the translation, then EOS, then IGNORE_INDEX


@checked_by(checks.reference_translation)
def reference_translation(src, vocab: TranslationVocab | None = None) -> list:  # [n] -> [n]
    """The right answer: the dictionary words of the source (padding dropped), last word first.

    >>> voc = translation_vocab()
    >>> detokenize(reference_translation([voc.id_of(w) for w in ("ka", "lu", "mi")]))
    'cat sun dog'
    """
    vocab = translation_vocab() if vocab is None else vocab
    words = [int(t) for t in np.asarray(src).tolist() if int(t) in vocab.source_ids]
    return [vocab.translate(t) for t in reversed(words)]


def draw_sentence(rng, vocab: TranslationVocab, n_range, split: str) -> np.ndarray:  # -> [n] source ids
    """One source sentence of this split: its length uniform in n_range (both ends), words uniform."""
    for _ in range(MAX_DRAWS):
        n = int(rng.integers(n_range[0], n_range[1] + 1))
        src = rng.integers(0, vocab.words, size=n) + vocab.first_source  # [n]
        if is_heldout(src) == (split == "heldout"):
            return src
    raise ValueError(f"too few sentences fall in the {split!r} split for n_range={tuple(n_range)}: widen n_range")


@checked_by(checks.translation_batch)
def translation_batch(rng, b: int, *, n_range=(4, 12), split: str = "train") -> TranslationBatch:
    """b source sentences of split "train" or "heldout" (`is_heldout` of the source ids) and their
    translations, padded to the batch's longest: (src_ids, src_lengths, tgt_in, tgt_out).

    >>> x = translation_batch(np.random.default_rng(0), 2, n_range=(2, 3))
    >>> detokenize(x.src_ids[0]), detokenize(x.tgt_out[0]), detokenize(x.tgt_in[0])
    ('la ha ti', 'bird boat wind', 'bird boat wind')
    >>> detokenize(x.src_ids[1]), x.src_ids[1].tolist(), x.tgt_in[1].tolist(), x.tgt_out[1].tolist()
    ('ka lu', [3, 4, 0], [1, 28, 27, 0], [28, 27, 2, -100])
    """
    vocab = translation_vocab()
    sources = [draw_sentence(rng, vocab, n_range, split) for _ in range(b)]
    lengths = np.array([len(s) for s in sources], dtype=np.int64)  # [b]
    n_src = int(lengths.max())
    src_ids = np.full((b, n_src), vocab.pad, dtype=np.int64)  # [b, n_src]
    tgt_in = np.full((b, n_src + 1), vocab.pad, dtype=np.int64)  # [b, n_tgt]
    tgt_out = np.full((b, n_src + 1), IGNORE_INDEX, dtype=np.int64)  # [b, n_tgt]
    for row, src in enumerate(sources):
        n = len(src)
        tgt = reference_translation(src, vocab)  # [n]
        src_ids[row, :n] = src
        tgt_in[row, :n + 1] = [vocab.bos] + tgt  # shifted right: position i reads word i − 1
        tgt_out[row, :n + 1] = tgt + [vocab.eos]  # and must write word i
    return TranslationBatch(src_ids, lengths, tgt_in, tgt_out)


@checked_by(checks.translation_split)
def translation_split(seed: int, n_train_batches: int, n_heldout_batches: int, b: int, *,
                      n_range=(4, 12)) -> tuple:
    """(train, heldout): lists of TranslationBatch from default_rng(seed) and default_rng(seed +
    HELDOUT_SEED_OFFSET), each holding only sentences of its own split: none is in both."""
    train_rng = np.random.default_rng(seed)
    held_rng = np.random.default_rng(seed + HELDOUT_SEED_OFFSET)
    train = [translation_batch(train_rng, b, n_range=n_range) for _ in range(n_train_batches)]
    held = [translation_batch(held_rng, b, n_range=n_range, split="heldout") for _ in range(n_heldout_batches)]
    return train, held


@checked_by(checks.translation_alignment)
def translation_alignment(n_src: int) -> np.ndarray:  # -> [n_src + 1, n_src]
    """The known alignment: A[i, j] = 1 where decoder position i (writing target word i) should
    look, source word j = n_src − 1 − i; the last row, the position that writes EOS, has no
    source word and is all 0. Rows match tgt_in's positions, columns src_ids'.

    >>> translation_alignment(3).tolist()
    [[0, 0, 1], [0, 1, 0], [1, 0, 0], [0, 0, 0]]
    """
    A = np.zeros((n_src + 1, n_src), dtype=np.int64)  # [n_tgt, n_src]
    i = np.arange(n_src)
    A[i, n_src - 1 - i] = 1  # the anti-diagonal
    return A


@checked_by(checks.detokenize)
def detokenize(ids, vocab: TranslationVocab | None = None) -> str:  # [n] -> text
    """The words of one sequence joined by spaces, for printing: stops at EOS, skips PAD, BOS
    and IGNORE_INDEX.

    >>> detokenize([1, 3, 27, 2, 5])
    'ka dog'
    """
    vocab = translation_vocab() if vocab is None else vocab
    words = []
    for t in np.asarray(ids).tolist():
        if t == vocab.eos:
            break
        if t not in (vocab.pad, vocab.bos, IGNORE_INDEX):
            words.append(vocab.tokens[t])
    return " ".join(words)
