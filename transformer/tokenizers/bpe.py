"""Byte-level BPE tokenizer, from a vocabulary and a merge list (note 002: text -> token ids).

    text --split specials--> segments --pre-tokenize--> words --UTF-8 bytes--> symbols
         --merge the best-ranked adjacent pair until none is left--> tokens --vocab--> ids

Byte level: every string is first turned into its UTF-8 bytes, so no text is ever
"unknown"; each byte is shown as one printable character (GPT-2's table: ' ' -> 'Ġ',
'\n' -> 'Ċ') so that tokens are ordinary strings. Decoding reverses the table.

The pre-tokenizer cuts text into words that merges never cross. SmolLM2's ("smollm"):
every digit alone (so numbers are read digit by digit), then the GPT-2 split pattern
(contractions, letter runs, digit runs, punctuation runs, whitespace).
Each public function with a refusal checks its input at the door (`bpe_checks.py`, same name).
"""
from __future__ import annotations

import codecs
import heapq
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import regex

from . import bpe_checks as checks
from ..require import checked_by

__all__ = ["bytes_to_unicode", "pre_tokenize", "merge_symbols", "BPETokenizer", "CHATML_SYSTEM"]

# The GPT-2 split pattern: contractions | optional space + letters | optional space + digits
# | optional space + other symbols | whitespace not followed by text | remaining whitespace.
GPT2_SPLIT = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
# SmolLM2 first isolates every digit (\p{N}), and splits each stretch in between as GPT-2 does.
DIGIT_SPLIT = regex.compile(r"\p{N}|[^\p{N}]+")

# The system prompt SmolLM2-Instruct's chat template inserts when none is given.
CHATML_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (256 entries, a bijection).

    Printable Latin-1 bytes stand for themselves; the other 68 bytes (controls, space,
    …) are shifted to code points 256, 257, … so that every byte has a visible glyph.

    >>> t = bytes_to_unicode(); t[ord("A")], t[ord(" ")], t[ord("\\n")]
    ('A', 'Ġ', 'Ċ')
    """
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table, shift = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + shift)
            shift += 1
    return table


@checked_by(checks.pre_tokenize)
def pre_tokenize(text: str, pre: str = "smollm") -> list[str]:
    """Cut text into the words BPE works on; merges never cross a word boundary.

    pre="smollm": digits one by one, then the GPT-2 pattern; pre="gpt2": the pattern only.

    >>> pre_tokenize("I'm 42  years")
    ['I', "'m", ' ', '4', '2', ' ', ' years']
    """
    if pre == "gpt2":
        return GPT2_SPLIT.findall(text)
    words = []
    for chunk in DIGIT_SPLIT.findall(text):
        words.extend(GPT2_SPLIT.findall(chunk))  # a digit comes back as itself
    return words


def merge_symbols(symbols: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
    """BPE's merge loop in O(n log n) for n symbols: a heap of ranked pairs over a linked list.

    The rule: merge the adjacent pair of lowest rank, the leftmost one among equals, until no
    adjacent pair has a rank. Rescanning all pairs after every merge costs O(n²) (`bpe_quadratic`).
    Instead every ranked pair waits in a heap ordered by (rank, position), so the next merge is
    the heap's top, O(log n); the symbols form a linked list (prev/next indices), so a merge
    only relinks two neighbours, O(1). A merge changes two pairs, the ones on either side of
    it: those are pushed anew, and the heap entries they replace are recognised as stale when
    popped (one of their symbols is gone or has grown), so each merge costs O(log n).

    >>> merge_symbols(list("abcab"), {("a", "b"): 0, ("ab", "c"): 1, ("c", "a"): 2})
    ['abc', 'ab']
    """
    n = len(symbols)
    sym = list(symbols)  # sym[i]: the symbol that starts at i; "" once merged into its left neighbour
    prev = list(range(-1, n - 1))  # linked list over positions: prev[i], nxt[i]; -1 / n at the ends
    nxt = list(range(1, n + 1))
    heap = [(ranks[pair], i, pair) for i, pair in enumerate(zip(sym, sym[1:])) if pair in ranks]
    heapq.heapify(heap)
    while heap:
        rank, i, (left, right) = heapq.heappop(heap)
        j = nxt[i]
        if sym[i] != left or j >= n or sym[j] != right:  # stale: a symbol of this pair took part in a merge
            continue
        sym[i], sym[j] = left + right, ""  # merge j into i and unlink j
        nxt[i] = nxt[j]
        if nxt[i] < n:
            prev[nxt[i]] = i
        for a in (prev[i], i):  # the two new pairs: (left neighbour, merged) and (merged, right neighbour)
            if a >= 0 and nxt[a] < n and (sym[a], sym[nxt[a]]) in ranks:
                heapq.heappush(heap, (ranks[sym[a], sym[nxt[a]]], a, (sym[a], sym[nxt[a]])))
    return [s for s in sym if s]


@dataclass
class BPETokenizer:
    """Byte-level BPE: `tokens[i]` is the string of id i, `merges` the pairs in learned order.

    special: token strings matched literally in text (never split, never merged), e.g.
    '<|im_start|>'. eos_id ends generation; bos_id is prepended only if add_bos.
    """
    tokens: list[str]
    merges: list[tuple[str, str]]
    special: list[str] = field(default_factory=list)
    pre: str = "smollm"
    bos_id: int | None = None
    eos_id: int | None = None
    pad_id: int | None = None
    add_bos: bool = False

    @checked_by(checks.bpe_tokenizer_post_init)
    def __post_init__(self):
        self.vocab = {t: i for i, t in enumerate(self.tokens)}  # token string -> id
        self.ranks = {pair: r for r, pair in enumerate(self.merges)}  # lower rank merges first
        self.byte_to_char = bytes_to_unicode()
        self.char_to_byte = {c: b for b, c in self.byte_to_char.items()}
        self.special_ids = {self.vocab[s] for s in self.special}
        # Longest first, so that one special token that is a prefix of another never wins.
        alts = "|".join(regex.escape(s) for s in sorted(self.special, key=len, reverse=True))
        self._special_re = regex.compile(f"({alts})") if alts else None
        self._word_cache: dict[str, list[int]] = {}
        self.pre_tokenize = lambda text: pre_tokenize(text, self.pre)  # noqa: E731

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    @cached_property
    def max_token_bytes(self) -> int:
        """The most bytes one token stands for (81 for SmolLM2): a text of N bytes holds at least
        ⌈N / max_token_bytes⌉ tokens, known before it is tokenized."""
        return max((len(self.token_bytes(i)) for i in range(self.vocab_size)), default=1)

    # --- encoding -------------------------------------------------------------------
    def bpe(self, word: str) -> list[str]:
        """Merge one word's byte symbols, best-ranked adjacent pair first, until no pair merges.

        >>> tok = BPETokenizer(tokens=["a", "b", "c", "ab", "abc"], merges=[("a", "b"), ("ab", "c")])
        >>> tok.bpe("abcab")
        ['abc', 'ab']
        """
        symbols = [self.byte_to_char[b] for b in word.encode("utf-8")]  # one char per byte
        return merge_symbols(symbols, self.ranks)

    def bpe_quadratic(self, word: str) -> list[str]:
        """The same merges, written the short way: rescan every pair after each merge.

        Each round looks at all n pairs to find the best one, and there can be n rounds, so a
        word of n bytes costs O(n²): fine for ordinary words, minutes for 100,000 letters
        without a space. Kept beside `bpe` as its readable reference (tested equal).
        """
        symbols = [self.byte_to_char[b] for b in word.encode("utf-8")]  # one char per byte
        while len(symbols) > 1:
            ranked = [(self.ranks[p], i) for i, p in enumerate(zip(symbols, symbols[1:])) if p in self.ranks]
            if not ranked:
                break
            pair = self.merges[min(ranked)[0]]
            merged, i = [], 0
            while i < len(symbols):  # merge every occurrence of the best pair, left to right
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
                    merged.append(symbols[i] + symbols[i + 1])
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            symbols = merged
        return symbols

    def _encode_word(self, word: str) -> list[int]:
        ids = self._word_cache.get(word)
        if ids is None:
            pieces = self.bpe(word)
            unknown = [p for p in pieces if p not in self.vocab]
            if unknown:  # only single bytes can be missing: merges only build vocabulary tokens
                raise ValueError(self._unknown_message(word, unknown[0]))
            ids = [self.vocab[p] for p in pieces]
            # Words repeat a lot, so they are cached; the cache is bounded in entries and in the length
            # of a word (HF's bound, 256): a text of long words without spaces cannot fill memory.
            if len(word) < 256 and len(self._word_cache) < 100_000:
                self._word_cache[word] = ids
        return ids

    def _unknown_message(self, word: str, piece: str) -> str:
        missing = {self.char_to_byte[c] for c in piece}
        for ch in word:
            if missing & set(ch.encode("utf-8")):
                return (f"character {ch!r} (U+{ord(ch):04X}) cannot be tokenized: its UTF-8 bytes include "
                        f"{', '.join(f'0x{b:02X}' for b in sorted(missing))}, which this vocabulary has no token for")
        return f"BPE produced the piece {piece!r}, which is not in the vocabulary"

    def missing_bytes(self) -> list[int]:
        """Bytes with no token of their own: text containing them cannot be encoded.

        SmolLM2 lacks a few control bytes (0x04, 0x06, …) and the UTF-8 lead bytes 0xF1,
        0xF2 (code points U+40000–U+BFFFF, unassigned planes), besides bytes UTF-8 never uses.
        """
        return [b for b, c in self.byte_to_char.items() if c not in self.vocab]

    @checked_by(checks.bpe_tokenizer_encode)
    def encode(self, text: str, *, allow_special: bool = True) -> list[int]:
        """Text -> ids. Special tokens written in the text become their single id
        (unless allow_special=False, when they are tokenized as plain text).

        >>> tok = BPETokenizer(tokens=["a", "b", "ab", "<s>"], merges=[("a", "b")], special=["<s>"])
        >>> tok.encode("<s>abb")
        [3, 2, 1]
        """
        ids = [self.bos_id] if self.add_bos and self.bos_id is not None else []
        segments = self._special_re.split(text) if (allow_special and self._special_re) else [text]
        for k, seg in enumerate(segments):
            if k % 2 == 1:  # odd segments are the captured special tokens
                ids.append(self.vocab[seg])
            elif seg:
                for word in self.pre_tokenize(seg):
                    ids.extend(self._encode_word(word))
        return ids

    @checked_by(checks.bpe_tokenizer_pieces)
    def pieces(self, ids) -> list[str]:
        """The vocabulary strings of the ids, as stored (bytes shown through GPT-2's table)."""
        return [self.tokens[int(i)] for i in ids]

    # --- decoding -------------------------------------------------------------------
    @checked_by(checks.bpe_tokenizer_token_bytes)
    def token_bytes(self, i: int) -> bytes:
        """The raw bytes one token stands for (a special token: its literal text).

        A token with a character outside GPT-2's byte table was written as plain text, not
        through the table: it stands for its own UTF-8 bytes, as in HF's ByteLevel decoder.
        """
        i = int(i)
        t = self.tokens[i]
        if i in self.special_ids:
            return t.encode("utf-8")  # every token has a UTF-8 form: checked at __post_init__
        try:
            return bytes(self.char_to_byte[c] for c in t)
        except KeyError:
            return t.encode("utf-8")

    @checked_by(checks.bpe_tokenizer_decode)
    def decode(self, ids) -> str:
        """Ids -> text. Bytes that are not valid UTF-8 (a token sequence cut inside a
        character) become U+FFFD, as in every byte-level tokenizer."""
        raw = b"".join(self.token_bytes(i) for i in ids)
        return raw.decode("utf-8", errors="replace")

    def stream_decoder(self):
        """A function id -> text that holds back the bytes of a character split across
        tokens until it is complete (for printing tokens as they are generated)."""
        dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        return lambda i: dec.decode(self.token_bytes(i))

    # --- chat -----------------------------------------------------------------------
    @checked_by(checks.bpe_tokenizer_apply_chat_template)
    def apply_chat_template(self, messages, add_generation_prompt: bool = True) -> str:
        """ChatML, as SmolLM2-Instruct's template writes it:

            <|im_start|>system\\n{system}<|im_end|>\\n<|im_start|>user\\n{text}<|im_end|>\\n<|im_start|>assistant\\n

        messages: a str (one user turn) or a list of {"role", "content"} dicts. A default
        system turn is inserted when the first message is not one.
        """
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        out = []
        for k, m in enumerate(messages):
            if k == 0 and m["role"] != "system":
                out.append(f"<|im_start|>system\n{CHATML_SYSTEM}<|im_end|>\n")
            out.append(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n")
        if add_generation_prompt:
            out.append("<|im_start|>assistant\n")
        return "".join(out)
