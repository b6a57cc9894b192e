"""Byte-level BPE against references: HF `tokenizers` built from the same vocabulary and
merges (with SmolLM2's own pre-tokenizer: digits one by one, then GPT-2's byte-level split),
hand-worked merges, and the chat template rendered by jinja2 from the file's own template."""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from transformer.tokenizers.bpe import BPETokenizer, bytes_to_unicode, pre_tokenize

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TEXTS = [
    "The capital of France is",
    "Hello, world! It's 2024; we'll see—won't we?",
    "def f(x):\n    return x**2  # square\n\n\tprint(f(3))",
    "3.14159 + 2718 = 12345678901234567890, ½ ⅓ ²³",
    "   leading spaces, trailing spaces   ",
    "tabs\t\tand\n\n\nnewlines \r\n and  double  spaces",
    "机器学习是人工智能的一个分支。注意力机制！",
    "emoji 😀👍🏽 🇫🇷 family 👨‍👩‍👧 and accents: café naïve Ångström",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|><|endoftext|>text<|im_end|><repo_name>x",
    "a <|im_start|> in the middle and a broken <|im_start tag",
    "",
    " ",
    "\n",
    "x" * 300,
    "Ελληνικά, русский, العربية, हिन्दी, 日本語のテキスト",
    "I'M SHOUTING, you're whispering; they'd've",
]


@pytest.fixture(scope="module")
def gguf_reader():
    from transformer.models.llama_gguf import open_gguf, smollm2_path
    return open_gguf(smollm2_path())


@pytest.fixture(scope="module")
def tok(gguf_reader):
    from transformer.models.llama_gguf import read_tokenizer
    return read_tokenizer(gguf_reader)


@pytest.fixture(scope="module")
def reference(tok):
    """SmolLM2's tokenizer as HF `tokenizers` builds it, from the same vocab and merges."""
    from tokenizers import Tokenizer, AddedToken, decoders, models, pre_tokenizers

    ref = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tok.tokens)}, merges=tok.merges))
    ref.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    ref.decoder = decoders.ByteLevel()
    ref.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in tok.special])
    return ref


@pytest.mark.parametrize("text", TEXTS)
def test_ids_equal_reference(tok, reference, text):
    assert tok.encode(text) == reference.encode(text).ids


@pytest.mark.parametrize("text", TEXTS)
def test_roundtrip(tok, text):
    assert tok.decode(tok.encode(text)) == text


def encodable(tok, text):
    missing = set(tok.missing_bytes())
    return not any(missing & set(ch.encode("utf-8")) for ch in text)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(max_size=60))
def test_roundtrip_and_reference_any_string(tok, reference, text):
    assume(encodable(tok, text))  # a few bytes have no token: see test_unencodable_bytes
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert ids == reference.encode(text).ids


def test_known_prompt_ids(tok):
    # The ids HF transformers' own GGUF tokenizer gives for the walk-through prompt.
    from transformers import AutoTokenizer
    from transformer.models.llama_gguf import smollm2_path
    p = smollm2_path()
    hf = AutoTokenizer.from_pretrained(os.path.dirname(p), gguf_file=os.path.basename(p))
    for text in ["The capital of France is", "Hello, world!", "<|im_start|>user\nhi<|im_end|>"]:
        assert tok.encode(text) == hf(text).input_ids


def test_special_tokens_are_single_ids(tok):
    for s in ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]:
        assert s in tok.special
        assert tok.encode(s) == [tok.tokens.index(s)]
    assert tok.tokens[tok.eos_id] == "<|im_end|>"
    # Switched off, the same text is plain characters.
    assert len(tok.encode("<|im_end|>", allow_special=False)) > 1


def test_pre_tokenizer_hand_worked():
    assert pre_tokenize("I'm 42  years") == ["I", "'m", " ", "4", "2", " ", " years"]
    assert pre_tokenize("I'm 42  years", "gpt2") == ["I", "'m", " 42", " ", " years"]
    assert pre_tokenize("a\n\n b") == ["a", "\n\n", " b"]


@pytest.mark.parametrize("change, err, match", [
    ({"special": "<s>"}, TypeError, r"special must be a list of token strings, got str '<s>': write \['<s>'\]"),
    ({"merges": ["a b"]}, ValueError, r"merge 0 must be a \(left, right\) pair of token strings, got 'a b'"),
    ({"merges": None}, TypeError, r"merges must be a list of \(left, right\) pairs"),
    ({"bos_id": "1"}, TypeError, r"bos_id must be an integer, got str"),
    ({"eos_id": 99, "add_bos": True}, ValueError, r"eos_id=99 is outside the vocabulary \[0, 4\)"),
    ({"add_bos": "yes"}, TypeError, r"add_bos must be True or False"),
])
def test_a_tokenizer_built_from_bad_parts_is_refused_by_name(change, err, match):
    # special="<s>" made '<', 's' and '>' special; a bos_id of 10**6 was prepended to every encoding
    parts = {"tokens": ["a", "b", "ab", "<s>"], "merges": [("a", "b")], "special": ["<s>"]} | change
    with pytest.raises(err, match=match):
        BPETokenizer(**parts)


@pytest.mark.parametrize("ids, what", [(None, "NoneType"), ("ab", "str"), (np.zeros((2, 2), int), "ndarray of shape \\(2, 2\\)")])
def test_decode_names_ids_that_are_no_sequence(ids, what):
    tok = BPETokenizer(tokens=["a", "b", "ab"], merges=[("a", "b")])
    with pytest.raises(TypeError, match=f"ids must be a list or 1-D array of token ids, got {what}"):
        tok.decode(ids)  # "'NoneType' object is not iterable" before


def test_an_iterator_is_refused_where_the_check_would_use_it_up():
    # tok.decode(iter(ids)) returned '' and apply_chat_template(iter(messages)) only the assistant header
    tok = BPETokenizer(tokens=["a", "b", "ab", "<s>"], merges=[("a", "b")], special=["<s>"])
    assert tok.decode([2, 0]) == "aba"
    with pytest.raises(TypeError, match="ids must be a list or 1-D array of token ids, got list_iterator"):
        tok.decode(iter([2, 0]))
    with pytest.raises(TypeError, match="messages must be a str or a list of .* dicts, got list_iterator"):
        tok.apply_chat_template(iter([{"role": "user", "content": "x"}]))


@pytest.mark.parametrize("messages, flag, match", [
    ({"role": "user", "content": "x"}, True, r"got one dict: wrap it in \[ \]"),
    ([{"role": None, "content": "x"}], True, r"message 0's role must be a str, got NoneType"),
    ([{"role": "user", "content": [1, 2]}], True, r"message 0's content must be a str, got list"),
    ("hi", "no", r"add_generation_prompt must be True or False"),
])
def test_a_chat_of_the_wrong_shape_is_named(messages, flag, match):
    # None and [1, 2] were written into the prompt as the text "None" and "[1, 2]"
    tok = BPETokenizer(tokens=["a", "b", "ab", "<s>"], merges=[("a", "b")], special=["<s>"])
    with pytest.raises(TypeError, match=match):
        tok.apply_chat_template(messages, add_generation_prompt=flag)


def test_allow_special_must_be_a_bool():
    tok = BPETokenizer(tokens=["a", "b", "ab", "<s>"], merges=[("a", "b")], special=["<s>"])
    with pytest.raises(TypeError, match="allow_special must be True or False, got allow_special=0"):
        tok.encode("<s>ab", allow_special=0)


def test_bytes_to_unicode_is_a_bijection():
    t = bytes_to_unicode()
    assert sorted(t) == list(range(256)) and len(set(t.values())) == 256
    assert t[ord(" ")] == "Ġ" and t[ord("\n")] == "Ċ" and t[ord("a")] == "a"


def test_merges_hand_worked():
    # merges in rank order: (a, b) first, then (ab, c), then (c, a); "abcab":
    # a b c a b -> ab c ab (rank 0 everywhere) -> abc ab (rank 1); (c, a) never gets its turn.
    tok = BPETokenizer(tokens=["a", "b", "c", "ab", "abc", "ca"], merges=[("a", "b"), ("ab", "c"), ("c", "a")])
    assert tok.bpe("abcab") == ["abc", "ab"]
    assert tok.encode("abcab") == [4, 3]
    assert tok.bpe("cab") == ["c", "ab"]  # (a, b) outranks (c, a)


def test_token_bytes_equal_hf_byte_level_decoding(tok, reference):
    """Every id's raw bytes: HF's token string through transformers' own copy of GPT-2's
    byte <-> character table; and the text HF's ByteLevel decoder makes of each id alone
    (bytes that are not whole UTF-8 characters become U+FFFD there as here)."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode as hf_bytes_to_unicode
    byte_to_char = hf_bytes_to_unicode()
    char_to_byte = {c: b for b, c in byte_to_char.items()}
    ids = range(reference.get_vocab_size())
    assert len(ids) == len(tok.tokens) == 49152
    texts = reference.decode_batch([[i] for i in ids], skip_special_tokens=False)
    for i, text in zip(ids, texts):
        piece = reference.id_to_token(i)
        expected = piece.encode("utf-8") if i in tok.special_ids else bytes(char_to_byte[c] for c in piece)
        assert tok.token_bytes(i) == expected, i
        assert tok.token_bytes(i).decode("utf-8", errors="replace") == text, i
    # hand-checked ones: 'Ġ' is the space byte; a special token is its literal text
    im_start = reference.token_to_id("<|im_start|>")
    assert im_start in tok.special_ids and tok.token_bytes(im_start) == b"<|im_start|>"
    assert tok.token_bytes(reference.token_to_id("Ġthe")) == b" the"
    lead = reference.token_to_id(byte_to_char[0xE6])  # the lead byte of 机 (E6 9C BA) alone
    assert tok.token_bytes(lead) == b"\xe6" and texts[lead] == "\ufffd"  # raw byte kept, text replaced


def test_stream_decoder_holds_partial_characters(tok):
    text = "😀 é 中"
    ids = tok.encode(text)
    step = tok.stream_decoder()
    pieces = [step(i) for i in ids]
    assert "".join(pieces) == text
    assert "\ufffd" not in "".join(pieces)


def test_chat_template_matches_the_files_jinja(tok, gguf_reader):
    import jinja2
    template = gguf_reader.get_field("tokenizer.chat_template").contents()
    render = jinja2.Environment().from_string(template).render
    for messages in ([{"role": "user", "content": "What is the capital of France?"}],
                     [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                      {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}]):
        for gen in (True, False):
            assert tok.apply_chat_template(messages, add_generation_prompt=gen) == \
                render(messages=messages, add_generation_prompt=gen)
    assert tok.apply_chat_template("Hi") == tok.apply_chat_template([{"role": "user", "content": "Hi"}])


def test_bad_inputs(tok):
    with pytest.raises(TypeError, match="bytes"):
        tok.encode(b"bytes")
    with pytest.raises(ValueError, match="surrogate"):
        tok.encode("ok \ud800 no")
    with pytest.raises(ValueError, match="49152"):
        tok.decode([49152])
    with pytest.raises(ValueError, match="-1"):
        tok.decode([-1])
    with pytest.raises(ValueError, match="message 0"):
        tok.apply_chat_template([{"content": "no role"}])
    with pytest.raises(ValueError, match="'wordpiece'"):
        pre_tokenize("x", "wordpiece")
    with pytest.raises(ValueError, match="<missing>"):
        BPETokenizer(tokens=["a"], merges=[], special=["<missing>"])


@pytest.mark.parametrize("text,cp,pos", [("ok \ud800 no", "D800", 3), ("\udcff", "DCFF", 0),
                                         ("a\ud83d\ude00b", "D83D", 1)])  # a UTF-16 pair written as two code points
def test_lone_surrogates_are_refused_as_by_the_reference(tok, reference, text, cp, pos):
    """A lone surrogate has no UTF-8 form (the definition), so no byte to tokenize: the reference
    refuses the str outright (a TypeError from its Rust binding); we name the code point and where it is."""
    with pytest.raises(Exception):
        reference.encode(text)
    with pytest.raises(ValueError, match=rf"surrogate U\+{cp} at position {pos}\b"):
        tok.encode(text)


def test_unencodable_bytes(tok, reference):
    # SmolLM2's vocabulary has no token for byte 0xF1 (the UTF-8 lead byte of U+40000…U+7FFFF):
    # the reference tokenizer silently drops such characters; we refuse, naming the character.
    assert 0xF1 in tok.missing_bytes() and 0x04 in tok.missing_bytes()
    assert reference.decode(reference.encode("a\U00040000b").ids) != "a\U00040000b"  # lossy there
    with pytest.raises(ValueError, match="U\\+40000.*0xF1"):
        tok.encode("a\U00040000b")
    with pytest.raises(ValueError, match="U\\+0004"):
        tok.encode("ctrl \x04 char")


def long_words():
    """Words of 10,000 characters without a space: the case a quadratic merge loop cannot take."""
    import random
    rng = random.Random(24)
    letters = [chr(c) for c in range(0x20000) if chr(c).isalpha() and c not in range(0xD800, 0xE000)]
    return {
        "ascii letters": "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(10_000)),
        "one letter repeated": "a" * 10_000,  # every pair ties: leftmost first, then the merged pairs
        "two letters": "".join(rng.choice("ab") for _ in range(10_000)),
        "letters of every script": "".join(rng.choice(letters) for _ in range(10_000)),
        "random Latin-1 characters": "".join(chr(rng.randrange(0xA0, 0x100)) for _ in range(10_000)),
        "punctuation run": "".join(rng.choice("!#$%&()*+,-./:;<=>?@[]^_`{|}~") for _ in range(10_000)),
    }


@pytest.mark.parametrize("kind", list(long_words()))
def test_long_words_equal_reference(tok, reference, kind):
    text = long_words()[kind]
    assert tok.encode(text) == reference.encode(text).ids


def test_heap_merge_equals_rescanning_merge(tok):
    """`bpe` (heap over a linked list, O(n log n)) and `bpe_quadratic` (rescan after every merge)
    are the same rule: on the real merges they give the same pieces."""
    import random
    rng = random.Random(5)
    words = [w for text in TEXTS + [long_words()["ascii letters"][:2000]] for w in tok.pre_tokenize(text)]
    words += ["".join(rng.choice("abcdeéλ中 ") for _ in range(rng.randrange(1, 300))) for _ in range(200)]
    for w in words:
        if encodable(tok, w):
            assert tok.bpe(w) == tok.bpe_quadratic(w), w


def test_equal_ranks_merge_leftmost_first():
    # By hand, "aaaaa": (a, a) ties four times; the leftmost merges first, so aa aa a (not a aa aa);
    # then (aa, a), rank 1, beats (aa, aa), rank 2: aa aaa, and no pair is left.
    from tokenizers import Tokenizer, models
    vocab = {"a": 0, "aa": 1, "aaa": 2, "aaaa": 3}
    merges = [("a", "a"), ("aa", "a"), ("aa", "aa")]
    tok = BPETokenizer(tokens=list(vocab), merges=merges)
    ref = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    for n in range(1, 12):
        assert tok.encode("a" * n) == ref.encode("a" * n).ids, n
    assert tok.bpe("aaaaa") == ["aa", "aaa"]


def test_token_that_is_not_utf8_is_named_by_id():
    # A vocabulary file's bytes that are not UTF-8 reach Python as bytes, or as lone surrogates
    # when decoded with errors="surrogateescape": refused at load, naming the token id.
    with pytest.raises(ValueError, match=r"^token id 1 is not valid UTF-8: .*U\+DCFF"):
        BPETokenizer(tokens=["a", "b\udcff"], merges=[])
    with pytest.raises(TypeError, match=r"^token id 2 must be a str, got bytes"):
        BPETokenizer(tokens=["a", "b", b"\xff"], merges=[])


def test_token_outside_the_byte_table_decodes_as_hf():
    # A token written as plain text ("€x", not through GPT-2's byte table) stands for its own
    # UTF-8 bytes in HF's ByteLevel decoder.
    from tokenizers import Tokenizer, decoders, models
    tokens = ["a", "\u20acx", "\u0120b", "\u20ac\u0120"]
    ref = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=[]))
    ref.decoder = decoders.ByteLevel()
    tok = BPETokenizer(tokens=tokens, merges=[])
    for ids in ([0], [1], [2], [3], [0, 1, 2, 3]):
        assert tok.decode(ids) == ref.decode(ids)
