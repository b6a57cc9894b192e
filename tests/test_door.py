"""The door (`require.checked_by`): the first door checks, the package's inner calls are trusted.

A call from outside any door binds its arguments to the formula's signature, fills in the formula's
defaults and runs the check on all of them by keyword; a call made while a door's formula runs skips
its check; the depth is restored after an exception and is not shared between threads. Every door of
the package has a check with its formula's parameters, in order, and no defaults. Refusals an inner
door used to make still come, with the same message, from the outer door the caller went through.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import threading

import numpy as np
import pytest

import transformer as T
from transformer.models import llama as llama_mod
from transformer.require import binder, checked_by
from transformer.tokenizers.bpe import BPETokenizer, bytes_to_unicode
from transformer.tasks import induction, induction_checks


# --- every door of the package ----------------------------------------------------------------------
def package_doors() -> dict:
    """name -> door, for every function and method of the package that has a check at its door."""
    doors = {}
    for info in pkgutil.walk_packages(T.__path__, "transformer."):
        if info.name.endswith("__main__"):  # the CLI's entry point runs on import
            continue
        module = importlib.import_module(info.name)
        owners = [module] + [c for c in vars(module).values() if inspect.isclass(c) and c.__module__ == module.__name__]
        for owner in owners:
            for f in vars(owner).values():
                f = f.__func__ if isinstance(f, (staticmethod, classmethod)) else f
                if callable(f) and hasattr(f, "check") and hasattr(f, "unchecked") and f.__module__ == module.__name__:
                    doors[f"{f.__module__}.{f.__qualname__}"] = f
    return doors


DOORS = package_doors()


def test_the_walk_finds_the_doors():
    assert len(DOORS) > 150, sorted(DOORS)  # 196 when this was written
    assert "transformer.core.attention.softmax" in DOORS and "transformer.models.llama.Llama.stream" in DOORS


@pytest.mark.parametrize("name", sorted(DOORS))
def test_each_check_takes_its_formulas_parameters_without_defaults(name):
    door = DOORS[name]
    formula, check = inspect.signature(door.unchecked), inspect.signature(door.check)
    assert list(check.parameters) == list(formula.parameters), (
        f"{door.check.__module__}.{door.check.__name__} takes {list(check.parameters)}, {name} {list(formula.parameters)}")
    defaults = [p.name for p in check.parameters.values() if p.default is not p.empty]
    assert not defaults, f"{door.check.__module__}.{door.check.__name__} states defaults for {defaults}: the door gives them"


def calls_of(signature):
    """Call shapes (args, kwargs) of sentinels: every parameter given, by position as far as possible or by
    keyword; only the required ones; one missing; one unknown keyword; one given twice; one too many."""
    params = list(signature.parameters.values())
    by_pos = [p for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    required = [p for p in params if p.default is p.empty]
    value = {p.name: object() for p in params}
    yield tuple(value[p.name] for p in by_pos), {p.name: value[p.name] for p in params if p not in by_pos}
    yield (), {p.name: value[p.name] for p in params}
    yield (), {p.name: value[p.name] for p in required}
    if required:
        yield (), {p.name: value[p.name] for p in required[1:]}
    yield (), {**{p.name: value[p.name] for p in required}, "no_such_argument": 0}
    if by_pos:
        yield (value[by_pos[0].name],), {p.name: value[p.name] for p in required}
    yield tuple(object() for _ in range(len(by_pos) + 1)), {}


@pytest.mark.parametrize("name", sorted(DOORS))
def test_the_door_binds_a_call_as_python_does(name):
    formula = DOORS[name].unchecked
    signature, by_name = inspect.signature(formula), binder(formula)
    for args, kwargs in calls_of(signature):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            assert by_name(args, kwargs) is None, (args, kwargs)
            continue
        bound.apply_defaults()
        assert by_name(args, kwargs) == dict(bound.arguments), (args, kwargs)


def test_the_induction_packed_row_is_stated_once_in_effect():
    assert induction_checks.N_CTX == induction.N_CTX


# --- the door itself ------------------------------------------------------------------------------
@pytest.fixture
def doors():
    """inner(x, scale=2) and outer(x) = inner(x) + 1, each with a check that records its call."""
    seen = []

    def inner_check(x, scale):
        seen.append(("inner", x, scale))
        if x < 0:
            raise ValueError(f"x must be ≥ 0, got x={x}")

    @checked_by(inner_check)
    def inner(x, scale=2):
        return x * scale

    def outer_check(x):
        seen.append(("outer", x))

    @checked_by(outer_check)
    def outer(x):
        return inner(x) + 1

    def failing_check(x):
        pass

    @checked_by(failing_check)
    def failing(x):
        inner(x)
        raise RuntimeError("the formula failed")

    return seen, inner, outer, failing


def test_a_call_from_outside_runs_the_check_with_every_argument(doors):
    seen, inner, _, _ = doors
    assert inner(3) == 6 and seen == [("inner", 3, 2)]  # the formula's default, given to the check
    assert inner(3, scale=5) == 15 and seen[-1] == ("inner", 3, 5)
    with pytest.raises(ValueError, match="x must be ≥ 0, got x=-1"):
        inner(-1)


def test_a_nested_call_skips_the_inner_check(doors):
    seen, _, outer, _ = doors
    assert outer(3) == 7
    assert seen == [("outer", 3)]  # inner ran inside outer's door: its check did not
    assert outer(-1) == -1  # inner's refusal is outer's to make: trusted inside


def test_unchecked_skips_the_check_anywhere(doors):
    seen, inner, _, _ = doors
    assert inner.unchecked(-1) == -2 and seen == []


def test_the_depth_is_restored_after_an_exception(doors):
    seen, inner, _, failing = doors
    with pytest.raises(RuntimeError, match="the formula failed"):
        failing(1)
    assert seen == []  # inside failing's door, inner was trusted
    with pytest.raises(ValueError, match="x must be ≥ 0"):
        inner(-1)  # outside again: checked, and its check's refusal came before any depth was raised
    with pytest.raises(ValueError, match="x must be ≥ 0"):
        inner(-1)  # so it is checked again


def test_two_threads_do_not_share_the_depth(doors):
    seen, inner, _, _ = doors
    inside, release = threading.Event(), threading.Event()

    def hold_check():
        pass

    @checked_by(hold_check)
    def hold():  # a door whose formula waits: its thread is inside a door meanwhile
        inside.set()
        release.wait(10)

    other = threading.Thread(target=hold)
    other.start()
    try:
        assert inside.wait(10)
        assert inner(4) == 8 and seen == [("inner", 4, 2)]  # this thread is outside any door: checked
    finally:
        release.set()
        other.join(10)


def test_a_bad_call_raises_pythons_own_type_error_naming_the_function():
    x = np.ones(3)
    for call in (lambda f: f(x, axs=0), lambda f: f(), lambda f: f(x, -1, None, 4)):
        with pytest.raises(TypeError) as door:
            call(T.softmax)
        with pytest.raises(TypeError) as plain:
            call(T.softmax.unchecked)
        assert str(door.value) == str(plain.value) and str(door.value).startswith("softmax()")


def test_a_bad_method_call_names_the_method(tiny):
    with pytest.raises(TypeError, match=r"^Llama\.logits\(\) missing 1 required positional argument: 'ids'$"):
        tiny.logits()


def test_keyword_options_passed_on_reach_the_check():
    seen = []

    def check(a, **kw):
        seen.append((a, kw))

    @checked_by(check)
    def f(a, **kw):
        return a

    f(1, block=2)
    assert seen == [(1, {"block": 2})]


# --- refusals an inner door made, now made at the outer door -----------------------------------------
@pytest.fixture(scope="module")
def tiny():
    """A 1-layer random Llama with a byte-level tokenizer (one token per byte), n_ctx 32."""
    m = T.random_llama(T.LlamaConfig(L=1, d=16, h=2, h_kv=1, d_h=8, d_ff=24, v=256, n_ctx=32))
    m.tokenizer = BPETokenizer(tokens=[bytes_to_unicode()[b] for b in range(256)], merges=[])
    return m


@pytest.fixture(scope="module")
def decoder():
    cfg = T.DecoderConfig(v=8, d=8, h=2, h_kv=1, L=1, d_ff=16, n_max=8)
    return T.init_decoder(cfg), cfg


def induction_model():
    cfg = T.induction_config()
    return T.init_decoder(cfg), cfg


def small_attention():
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((3, 4)), rng.standard_normal((5, 4)), rng.standard_normal((5, 4))
    W, w = rng.standard_normal((4, 6)), rng.standard_normal(6)
    return q, k, v, W, W, w


def test_the_loss_refuses_targets_as_cross_entropy_does(decoder):
    params, cfg = decoder
    ids = np.zeros((1, 4), dtype=np.int64)
    with pytest.raises(ValueError, match=r"^targets must lie in \[0, 8\) or equal ignore_index=-100, "
                                         r"got min 99, max 99 \(ignore_index aside\)$"):
        T.decoder_loss_and_grads(params, ids, np.full((1, 4), 99), cfg)
    with pytest.raises(TypeError, match="^targets must be integer token ids, got dtype float64$"):
        T.decoder_loss_and_grads(params, ids, np.zeros((1, 4)), cfg)


@pytest.mark.parametrize("call, err, match", [
    (lambda: T.encoder_mask(np.array([5]), 3), ValueError, r"^lengths must lie in \[0, 3\], got \[5\]$"),
    (lambda: T.encoder_mask(np.array([1.0]), 3, causal=True), TypeError, "^lengths must be integer token counts"),
    (lambda: T.additive_attention(*small_attention(), np.ones((2, 2), bool)), ValueError,
     r"^mask of shape \(2, 2\) is not broadcastable to x's shape = \(3, 5\)$"),
    (lambda: T.induction_rows([np.arange(66) % 30 + 1], packed=True), ValueError,
     "^document 0 has 66 tokens, more than a row of n_ctx=64"),
    (lambda: T.induction_heldout_accuracy(*induction_model(), [np.array([1, 2, 40, 1, 2, 40])]), ValueError,
     r"^ids must lie in \[0, 32\) \(token ids\), got min 1, max 40$"),
    (lambda: T.attention_maps(*induction_model(), np.array([1, 99, 3])), ValueError,
     r"^ids must lie in \[0, 32\) \(token ids\), got min 1, max 99$"),
    (lambda: T.load_decoder(""), TypeError, r"^path_or_dir must be a path \(str or Path\), got path_or_dir=''$"),
    (lambda: BPETokenizer(tokens=["a"], merges=[], pre="nope").encode("a"), ValueError,
     "^unknown pre-tokenizer 'nope'"),
])
def test_a_refusal_of_an_inner_door_comes_from_the_outer_one(call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_the_llama_doors_refuse_what_their_inner_doors_did(tiny):
    with pytest.raises(ValueError, match="^document 0 has 6 tokens, more than a row of n_ctx=4"):
        tiny.packed_logits(["abcdef"], 4)
    with pytest.raises(ValueError, match="^n_ctx must be an integer ≥ 1, got n_ctx=2.5$"):
        tiny.packed_logits(["ab"], 2.5)
    with pytest.raises(ValueError, match="^text is not valid Unicode: a lone surrogate U"):
        tiny.logits("a\ud800")
    cos, sin = tiny.rope_tables(8)
    with pytest.raises(ValueError, match=r"^KV cache overflow: 0 cached \+ 5 new tokens > n_max=4"):
        llama_mod.forward(np.zeros((1, 5), np.int64), tiny.weights, tiny.config, cos, sin, cache=tiny.new_cache(1, 4))
    with pytest.raises(ValueError, match=r"^k_new must be \(b, h_kv, t, d_h\) = \(2, 1, t, 8\)"):
        llama_mod.forward(np.zeros((1, 2), np.int64), tiny.weights, tiny.config, cos, sin, cache=tiny.new_cache(2, 4))


# --- parse, then check ---------------------------------------------------------------------------------
def test_a_checks_parse_reaches_the_formula_in_place_of_the_argument():
    parses = []

    def check(text, n=2):
        parses.append(text)
        return {"text": text.split()}  # what the formula would otherwise parse again

    @checked_by(check)
    def count(text, n=2):
        return len(text) * n

    assert count("a b c") == 6 and count("a b", n=3) == 6 and parses == ["a b c", "a b"]
    assert count.unchecked(["x"]) == 2  # the formula takes the parsed form as it is


class CountingTokenizer(BPETokenizer):
    """tiny's byte tokenizer, counting the texts it encodes."""
    calls = 0

    def encode(self, text, *args, **kwargs):
        CountingTokenizer.calls += 1
        return super().encode(text, *args, **kwargs)


@pytest.mark.parametrize("call, texts", [
    (lambda m: m.logits("abc"), 1),
    (lambda m: m.next_token_probs("abc", 3), 1),
    (lambda m: m.hidden_states("abc"), 1),
    (lambda m: m.attention_weights("abc", layer=0), 1),
    (lambda m: list(m.iter_attention_weights("abc")), 1),
    (lambda m: m.generate("abc", 2, stop_at_eos=False), 1),
    (lambda m: list(m.stream("abc", 2, stop_at_eos=False)), 1),
    (lambda m: m.generate_batch(["abc", "de"], 2, stop_at_eos=False), 2),
    (lambda m: m.packed_logits(["abc", "de"]), 2),
], ids=["logits", "next_token_probs", "hidden_states", "attention_weights", "iter_attention_weights", "generate",
        "stream", "generate_batch", "packed_logits"])
def test_a_text_prompt_is_tokenized_once(call, texts):
    """The door's check tokenizes a text to judge its length; the formula gets those ids, not the text again."""
    m = T.random_llama(T.LlamaConfig(L=1, d=16, h=2, h_kv=1, d_h=8, d_ff=24, v=256, n_ctx=32))
    m.tokenizer = CountingTokenizer(tokens=[bytes_to_unicode()[b] for b in range(256)], merges=[])
    CountingTokenizer.calls = 0
    call(m)
    assert CountingTokenizer.calls == texts
