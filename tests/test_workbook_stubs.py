"""The workbook (workbook/NN_*.py): one file a lesson, the functions it teaches as stubs for the learner.

A stub mirrors the package function it stands for (STYLE.md, rule 16): the same name and the exact
signature (`inspect.signature`, defaults and annotations included; `flash_attention` keeps a reduced
signature: a subset of the package's parameters, in order, with equal defaults), a docstring with the
formula and at least one shape written in the legend's dimension names, a body that raises
NotImplementedError with a hint (never a line of the package's body), and a last line that names the
package's file and function. Each stub is called here with arguments the package function accepts.
The files import cleanly, fast, and without the package's heavy parts, as the checker
(`python -m transformer check NN`) imports them.
"""
from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import transformer as T
from transformer.tutor.specs_sampling import GivenUniforms  # an rng that hands out the uniform numbers it is given

ROOT = Path(__file__).resolve().parents[1]
WORKBOOK = ROOT / "workbook"
FILES = sorted(WORKBOOK.glob("[0-9][0-9]_*.py"))

# file -> the package names its stubs stand for (a method as Class.method)
STUBS = {
    "01_text_to_vectors.py": ["merge_symbols", "wordpiece", "embed", "lm_head"],
    "02_positions.py": ["sinusoidal_positions", "learned_positions", "rope_angles", "apply_rope_half",
                        "apply_rope_interleaved"],
    "03_attention.py": ["softmax", "scaled_dot_product_attention", "additive_scores"],
    "04_multi_head.py": ["split_heads", "merge_heads", "multi_head_attention"],
    "05_masks.py": ["causal_mask", "padding_mask", "sliding_window_mask", "strided_mask", "fixed_mask", "global_mask"],
    "06_kv_cache.py": ["KVCache.update", "decoder_mask"],
    "07_gqa.py": ["repeat_kv", "qkv_heads"],
    "08_online_softmax.py": ["merge_softmax_stats", "online_softmax_stats", "online_attention_update"],
    "09_flash_tiling.py": ["flash_attention", "visible_key_tiles", "standard_attention_io", "flash2_io",
                           "flash_attention_backward"],
    "10_block.py": ["layer_norm", "rms_norm", "gelu", "ffn", "swiglu_ffn", "residual"],
    "11_real_llm.py": ["filter_logits", "sample_next"],
    "12_real_encoder.py": ["bert_embeddings", "mean_pool", "l2_normalize"],
    "13_counting.py": ["count_parameters", "forward_flops", "arithmetic_intensity", "kv_cache_bytes_per_token"],
    "14_paged_kv.py": ["PagedKVCache.write", "paged_attention", "paged_memory_report"],
    "15_cross_attention.py": ["seq2seq_encoder_layer", "seq2seq_decoder_layer"],
    "16_packing.py": ["pack_documents", "document_mask", "key_tiles_read"],
    "17_flash_gpu_kernels.py": ["mma_fragment_layout"],
    "18_training_step.py": ["cross_entropy", "cross_entropy_backward", "lm_head_backward", "rms_norm_backward",
                            "swiglu_ffn_backward", "linear_backward", "merge_heads_backward",
                            "softmax_backward", "scaled_dot_product_attention_backward", "apply_rope_half_backward",
                            "split_heads_backward", "embed_backward", "dropout", "dropout_backward",
                            "clip_by_global_norm", "lr_at", "adamw_step"],
    "19_training_from_scratch.py": ["induction_head_scores", "induction_accuracy"],
}
# the learner writes the heart of it; the package's has more options (the decoder layer: `saved`, for its backward)
REDUCED = {"flash_attention", "flash_attention_backward", "seq2seq_encoder_layer", "seq2seq_decoder_layer",
           "forward_flops"}
CASES = [(f, name) for f, names in STUBS.items() for name in names]
# a stub whose package function is not a top-level name: where it is under `transformer`
PACKAGE_NAME = {"key_tiles_read": "cuda_kernels.key_tiles_read",
                "mma_fragment_layout": "cuda_kernels.mma_fragment_layout",
                "merge_symbols": "tokenizers.bpe.merge_symbols", "wordpiece": "tokenizers.wordpiece.wordpiece"}

LEGEND = {"b", "n", "n_q", "n_k", "d", "h", "h_kv", "d_h", "v", "L"}
# named in the stub's own docstring
OTHER_SIZES = {"d_ff", "d_in", "d_out", "d_c", "t", "n_max", "n_rep", "length", "Br", "Bc", "n_dec", "n_enc", "n_half"}
BRACKETS = re.compile(r"[(\[]([^()\[\]\n]*,[^()\[\]\n]*)[)\]]")
AFTER = re.compile(r"After trying: the package's version is `([\w/.]+\.py)`, `([\w.]+)`\.\s*$")
HEAVY = ["matplotlib", "torch", "cupy", "scipy", "IPython", "sphinx", "transformers", "tokenizers", "safetensors"]


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"workbook_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lookup(root, dotted: str):
    for part in dotted.split("."):
        root = getattr(root, part)
    return root


def package(name: str):
    """The package's function (or Class.method) that the stub `name` stands for."""
    return lookup(T, PACKAGE_NAME.get(name, name))


def stub(file: str, name: str):
    return lookup(load(WORKBOOK / file), name)


def shapes_in(doc: str) -> list[str]:
    """The shapes a docstring writes, `(b, h, n_q, d_h)` or `[..., Br, 1]`: bracketed, comma-separated
    sizes made of dimension names, numbers and ·, /, +, −, with at least one name from the legend."""
    found = []
    for inner in BRACKETS.findall(doc):
        items = [s.strip() for s in inner.split(",") if s.strip()]
        names = [w for s in items for w in re.findall(r"[A-Za-z_]\w*", s)]
        if (items and all(re.fullmatch(r"(\.\.\.|…|[\w·/+−\- ]+)", s) for s in items)
                and set(names) <= LEGEND | OTHER_SIZES and set(names) & LEGEND):
            found.append(f"({inner})")
    return found


def valid_call(name: str, target):
    """A call of `target` (the stub or the package's function) with arguments the package accepts."""
    rng = np.random.default_rng(0)
    r = lambda *shape: rng.standard_normal(shape)  # noqa: E731
    calls = {
        "embed": lambda f: f(np.array([[2, 1]]), r(3, 4)),
        "merge_symbols": lambda f: f(list("abcab"), {("a", "b"): 0, ("ab", "c"): 1}),
        "wordpiece": lambda f: f("unaffable", {"un", "##aff", "##able"}),
        "lm_head": lambda f: f(r(1, 2, 4), r(3, 4)),
        "sinusoidal_positions": lambda f: f(4, 6),
        "learned_positions": lambda f: f(3, r(8, 4), offset=2),
        "rope_angles": lambda f: f(np.arange(5), 8),
        "apply_rope_half": lambda f: f(r(1, 2, 3, 4), r(3, 2), r(3, 2)),
        "apply_rope_interleaved": lambda f: f(r(1, 2, 3, 4), r(3, 2), r(3, 2)),
        "softmax": lambda f: f(r(2, 3)),
        "additive_scores": lambda f: f(r(1, 2, 3, 4), r(1, 2, 5, 4), r(4, 6), r(4, 6), r(6)),
        "scaled_dot_product_attention": lambda f: f(r(1, 4, 3, 8), r(1, 2, 5, 8), r(1, 2, 5, 8), T.causal_mask(3, 5)),
        "split_heads": lambda f: f(r(1, 3, 8), 2),
        "merge_heads": lambda f: f(r(1, 2, 3, 4)),
        "multi_head_attention": lambda f: f(r(1, 3, 8), T.AttentionWeights(r(8, 8), r(8, 4), r(8, 4), r(8, 8)), 4, 2),
        "causal_mask": lambda f: f(3),
        "padding_mask": lambda f: f([2, 3]),
        "sliding_window_mask": lambda f: f(3, 2),
        "strided_mask": lambda f: f(8, 3),
        "fixed_mask": lambda f: f(8, 3, 2),
        "KVCache.update": lambda f: f(0, r(1, 2, 3, 4), r(1, 2, 3, 4)),
        "PagedKVCache.write": lambda f: f(0, 1, r(2, 6, 4), r(2, 6, 4)),  # sequence 0, layer 1, t = 6
        "repeat_kv": lambda f: f(r(1, 2, 3, 4), 2),
        "merge_softmax_stats": lambda f: f(r(2, 1), np.ones((2, 1)), r(2, 1), np.ones((2, 1))),
        "online_attention_update": lambda f: f(np.full((1, 2, 1), -np.inf), np.zeros((1, 2, 1)), np.zeros((1, 2, 4)),
                                               r(1, 2, 3), r(1, 3, 4)),
        "flash_attention": lambda f: f(r(1, 4, 5, 8), r(1, 2, 5, 8), r(1, 2, 5, 8), causal=True, block_q=2, block_k=3),
        "layer_norm": lambda f: f(r(2, 4), np.ones(4), np.zeros(4)),
        "rms_norm": lambda f: f(r(2, 4), np.ones(4)),
        "swiglu_ffn": lambda f: f(r(2, 4), r(4, 6), r(4, 6), r(6, 4)),
        "gelu": lambda f: f(r(2, 4), "tanh"),
        "cross_entropy": lambda f: f(r(2, 3, 5), np.array([[1, 4, -100], [0, 2, 3]])),
        "cross_entropy_backward": lambda f: f(r(2, 3, 5), np.array([[1, 4, -100], [0, 2, 3]])),
        "lr_at": lambda f: f(3, lr_max=1e-3, warmup=2, total=10),
        "clip_by_global_norm": lambda f: f({"W": r(3, 3), "b": r(3)}, 1.0),
        "filter_logits": lambda f: f(r(2, 5), 0.7, 3, 0.9),
        "mean_pool": lambda f: f(r(2, 3, 4), np.array([3, 1])),
        "count_parameters": lambda f: f(T.load_config("smollm2-135m")),
        "kv_cache_bytes_per_token": lambda f: f(T.load_config("llama-3-8b"), "float32"),
        "l2_normalize": lambda f: f(r(2, 4)),
        "seq2seq_decoder_layer": lambda f: f(r(1, 3, 4), r(1, 5, 4), T.seq2seq_decoder_weights(T.init_seq2seq(
            T.Seq2SeqConfig(v=10, d=4, h=2, d_ff=6, L_enc=1, L_dec=1, n_max=8), 0, dtype="float64"), 0), 2),
        "paged_attention": lambda f: f(r(2, 3, 4), r(3, 1, 4, 4), r(3, 1, 4, 4), [2, 0], 6),
        "document_mask": lambda f: f(np.array([[0, 0, 1, -1]])),
        "pack_documents": lambda f: f([[7, 7, 7], [8, 8], [9, 9, 9, 9]], 5),
        "key_tiles_read": lambda f: f(4, 2, 2, causal=True, doc=np.array([[0, 0, 1, 1]])),
        "mma_fragment_layout": lambda f: f("C"),
        "induction_head_scores": lambda f: f(np.broadcast_to(np.tri(6) / np.arange(1, 7)[:, None], (1, 2, 6, 6)), 3),
        "flash_attention_backward": lambda f: f(*(lambda q, k, v: (r(*q.shape), q, k, v, *T.flash_attention(
            q, k, v, causal=True, return_lse=True)))(r(1, 4, 5, 8), r(1, 2, 5, 8), r(1, 2, 5, 8)), causal=True,
            block_q=2, block_k=3),
        "online_softmax_stats": lambda f: f(r(2, 5), 2, []),
        "softmax_backward": lambda f: f(r(2, 3), T.softmax(r(2, 3))),
        "rms_norm_backward": lambda f: f(r(2, 4), r(2, 4), np.ones(4)),
        "lm_head_backward": lambda f: f(r(2, 3, 5), r(2, 3, 4), r(5, 4)),
        "apply_rope_half_backward": lambda f: f(r(1, 2, 3, 4), r(3, 2), r(3, 2)),
        "embed_backward": lambda f: f(r(2, 3, 4), np.array([[1, 0, 1], [2, 2, 4]]), 5),
        "swiglu_ffn_backward": lambda f: f(r(2, 4), r(2, 4), r(4, 6), r(4, 6), r(6, 4)),
        "global_mask": lambda f: f(6, [0, 3]),
        "decoder_mask": lambda f: f(2, 3, np.array([[False, True, True, True, True]])),
        "paged_memory_report": lambda f: f(T.load_config("smollm2-135m"), [100, 37], n_max=256),
        "induction_accuracy": lambda f: f(np.array([[0, 0, 0, 6, 5, 0]]), np.array([[5, 6, 7, 5, 6, 7]])),
        "seq2seq_encoder_layer": lambda f: f(r(1, 5, 4), T.seq2seq_encoder_weights(T.init_seq2seq(
            T.Seq2SeqConfig(v=10, d=4, h=2, d_ff=6, L_enc=1, L_dec=1, n_max=8), 0, dtype="float64"), 0), 2),
        "bert_embeddings": lambda f: f(np.array([[1, 4, 2]]), T.BertWeights(
            r(6, 4), r(8, 4), r(2, 4), np.ones(4), np.zeros(4)), T.BertConfig(v=6, d=4, h=2, L=1, d_ff=8, n_max=8)),
        "qkv_heads": lambda f: f(r(2, 3, 8), T.AttentionWeights(r(8, 8), r(8, 4), r(8, 4), r(8, 8)), 4, 2),
        "sample_next": lambda f: f(r(3, 7), 0.8, top_k=4, rng=1),
        "visible_key_tiles": lambda f: f(5, 9, 2, 4, True),
        "standard_attention_io": lambda f: f(4, 6, 8, 2),
        "flash2_io": lambda f: f(8, 8, 4, 2, 4, causal=True, heads=2),
        "ffn": lambda f: f(r(2, 3, 4), r(4, 6), r(6, 4), r(6), r(4), activation=T.gelu),
        "residual": lambda f: f(r(2, 3, 4), lambda t: 2 * t, lambda t: T.rms_norm(t, np.ones(4)), pre_norm=False),
        "arithmetic_intensity": lambda f: f(T.load_config("llama-3-8b"), 64, batch=4, dtype="float32"),
        "forward_flops": lambda f: f(T.load_config("smollm2-135m"), 16, batch=2, phase="decode"),
        "linear_backward": lambda f: f(r(2, 3, 5), r(2, 3, 4), r(4, 5), True),
        "merge_heads_backward": lambda f: f(r(2, 3, 8), 2),
        "split_heads_backward": lambda f: f(r(2, 2, 3, 4)),
        "dropout": lambda f: f(r(2, 3), 0.5, rng=0),
        "dropout_backward": lambda f: f(r(2, 3), rng.random((2, 3)) >= 0.5, 0.5),
        "scaled_dot_product_attention_backward": lambda f: f(r(1, 4, 3, 8), r(1, 4, 3, 8), r(1, 2, 5, 8),
                                                             r(1, 2, 5, 8), T.softmax(r(1, 4, 3, 5))),
        "adamw_step": lambda f: (lambda p: f(p, {k: r(*a.shape) for k, a in p.items()}, T.adamw_state(p), 0.01))(
            {"W": r(3, 3), "b": r(3)}),
    }
    return calls[name](target)


def bound(name: str, obj, module_or_T):
    """The callable to try: a method is called on a fresh cache built by that side's own class."""
    if name == "KVCache.update":
        return module_or_T.KVCache(2, 1, 2, 8, 4, dtype=np.float64).update
    if name == "PagedKVCache.write":
        cache = module_or_T.PagedKVCache(2, 0, 2, 32, 4, block_size=4, n_blocks=8, dtype=np.float64)
        cache.add_sequence()
        return cache.write
    return obj


def test_the_workbook_covers_every_lesson():
    assert [p.name for p in FILES] == sorted(STUBS), "workbook/ should hold exactly the files of STUBS"
    assert sorted(int(p.name[:2]) for p in FILES) == [*range(1, 20)]
    for p in FILES:
        lesson = ROOT / "lessons" / p.name
        assert lesson.is_file(), f"workbook/{p.name} has no lesson of the same name in lessons/"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_file_says_its_lesson_and_how_to_check_it(path):
    doc = load(path).__doc__ or ""
    assert f"lessons/{path.name}" in doc, f"{path.name}: its docstring should name the lesson it goes with"
    assert f"python -m transformer check {path.name[:2]}" in doc
    assert "fill in the bod" in doc.lower() and "keep the name" in doc.lower()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_function_but_the_stubs(path):
    """Every function a file defines (not imports) is a stub the table names: no stray helpers."""
    module = load(path)
    defined = {n for n, obj in vars(module).items() if inspect.isfunction(obj) and obj.__module__ == module.__name__}
    defined |= {n for n, obj in vars(module).items() if inspect.isclass(obj) and obj.__module__ == module.__name__}
    assert defined == {n.split(".")[0] for n in STUBS[path.name]}


@pytest.mark.parametrize("file,name", CASES)
def test_stub_has_the_package_signature(file, name):
    mine, theirs = inspect.signature(stub(file, name)), inspect.signature(package(name))
    if name not in REDUCED:
        assert mine == theirs, f"workbook/{file}: {name}{mine} differs from the package's {name}{theirs}"
        return
    order = list(theirs.parameters)
    kept = [order.index(p) for p in mine.parameters]
    assert kept == sorted(kept), f"{name}: the stub's parameters are not in the package's order"
    for p in mine.parameters.values():
        q = theirs.parameters[p.name]
        assert (p.kind, p.default) == (q.kind, q.default), f"{name}: parameter {p.name} differs from the package's"


def test_the_kv_cache_is_given_whole_but_update():
    mine = stub("06_kv_cache.py", "KVCache")
    assert inspect.signature(mine) == inspect.signature(T.KVCache)
    a, b = mine(2, 1, 3, 8, 4), T.KVCache(2, 1, 3, 8, 4)
    assert a.nbytes == b.nbytes == 2 * 2 * 1 * 3 * 8 * 4 * 4  # 2 (K, V) · L · b · h_kv · n_max · d_h · float32
    a.advance(3)
    assert (a.length, a.written, [x.shape for x in a.k]) == (3, [0, 0], [(1, 3, 8, 4)] * 2)


def test_the_paged_cache_is_given_whole_but_write():
    """The workbook's PagedKVCache opens, extends, frees and reads sequences as the package's does, written through
    the package's write: the same tables, free list, bytes and gathered K and V."""
    mine = stub("14_paged_kv.py", "PagedKVCache")
    assert inspect.signature(mine) == inspect.signature(T.PagedKVCache)
    rng = np.random.default_rng(1)
    caches = [cls(2, 0, 2, 32, 4, block_size=4, n_blocks=8, dtype=np.float64) for cls in (mine, T.PagedKVCache)]
    kv = [(rng.standard_normal((2, t, 4)), rng.standard_normal((2, t, 4))) for t in (6, 3, 5)]
    def write(c, seq, layer, k, v):  # by hand: blocks from the free list's end, then position by position
        start, table = c.lengths[seq], c.tables[seq]
        while len(table) * 4 < start + k.shape[1]:
            table.append(c.free.pop())
        for i in range(k.shape[1]):
            p = start + i
            c.k[layer][table[p // 4], :, p % 4], c.v[layer][table[p // 4], :, p % 4] = k[:, i], v[:, i]
        c.written[seq][layer] = start + k.shape[1]

    for c in caches:
        a, b = c.add_sequence(), c.add_sequence()
        for seq, (k, v) in zip((a, b, a), kv):
            for layer in range(2):
                write(c, seq, layer, k, v)
            c.extend(seq, k.shape[1])
        c.free_sequence(b)
    (m, p) = caches
    assert (m.tables, m.lengths, m.written, m.free, m.batch) == (p.tables, p.lengths, p.written, p.free, p.batch)
    # by hand: A's 6 take blocks 0, 1; B's 3 take 2; A's 5 more (positions 6–10) take 3; B's block goes back on top
    assert (m.tables, m.free) == ({0: [0, 1, 3]}, [7, 6, 5, 4, 2])
    for layer in range(2):
        for x, y in zip(m.gather(0, layer), p.gather(0, layer)):
            assert np.array_equal(x, y)
    assert np.array_equal(m.gather(0, 1)[0], np.concatenate([kv[0][0], kv[2][0]], axis=1))  # (h_kv, 11, d_h)
    assert all(np.array_equal(x, y) for x, y in zip(m.k + m.v, p.k + p.v))  # B's blocks zeroed in both


@pytest.mark.parametrize("file,name", CASES)
def test_stub_docstring_has_a_shape_and_names_the_package_version(file, name):
    doc = inspect.getdoc(stub(file, name)) or ""
    assert shapes_in(doc), f"workbook/{file}: {name}'s docstring writes no shape in the legend's names"
    m = AFTER.search(doc)
    assert m, f"workbook/{file}: {name}'s docstring should end with \"After trying: the package's version is …\""
    path, named = m.groups()
    assert named == PACKAGE_NAME.get(name, name)
    assert (ROOT / path).is_file(), f"{name}: {path} does not exist"
    real = Path(inspect.getsourcefile(inspect.unwrap(package(name)))).resolve()
    assert real == (ROOT / path).resolve(), f"{name} is in {real.relative_to(ROOT)}, not {path}"


@pytest.mark.parametrize("file,name", CASES)
def test_stub_raises_a_hint_never_the_answer(file, name):
    module = load(WORKBOOK / file)
    valid_call(name, bound(name, package(name), T))  # the arguments are valid: the package accepts them
    with pytest.raises(NotImplementedError) as info:
        valid_call(name, bound(name, lookup(module, name), module))
    hint = str(info.value)
    assert len(hint) > 40 and name.split(".")[-1] in hint, f"{name}: the hint should name the function and say how to start"
    source = inspect.getsource(inspect.unwrap(package(name)))
    body = source.split('"""')[-1] if source.count('"""') >= 2 else source
    for line in body.splitlines():
        code = line.split("#")[0].strip()
        assert len(code) < 16 or code not in hint, f"{name}: the hint gives away the package's line {code!r}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_files_import_only_public_names(path):
    """Like a lesson, a workbook file reaches the package through `from transformer import NAME` only."""
    wrong = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            wrong += [a.name for a in node.names if a.name.startswith("transformer")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("transformer"):
            if node.module != "transformer" or any(a.name.startswith("_") or not hasattr(T, a.name) for a in node.names):
                wrong.append(f"from {node.module} import {', '.join(a.name for a in node.names)}")
    assert not wrong, f"workbook/{path.name} reaches into the package: {wrong}"


def test_files_import_fast_without_the_heavy_parts():
    """As the checker imports them: in a fresh process, each file's import (the first one includes
    `import transformer`) takes under a second of CPU time, and none pulls in a plotting, deep-learning
    or documentation library."""
    script = f"""
import importlib.util, json, sys, time
times = {{}}
for path in {[str(p) for p in FILES]!r}:
    t = time.process_time()
    spec = importlib.util.spec_from_file_location("wb", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    times[path] = time.process_time() - t
print(json.dumps({{"times": times, "heavy": sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r}))}}))
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    facts = json.loads(out.stdout.splitlines()[-1])
    assert facts["heavy"] == [], f"importing the workbook pulls in {facts['heavy']}"
    slow = {Path(p).name: round(s, 2) for p, s in facts["times"].items() if s >= 1.0}
    assert not slow, f"workbook files slower than 1 s to import: {slow}"


# A stub's worked example is a claim: each is run here on the package's function (tested against its references
# elsewhere), with the values written out by hand as the docstring gives them.
T_, F_ = True, False
EXAMPLES = [
    ("01_text_to_vectors.py", "merge_symbols", 'gives ["abc", "ab"]',
     lambda: T.tokenizers.bpe.merge_symbols(list("abcab"), {("a", "b"): 0, ("ab", "c"): 1, ("c", "a"): 2}),
     ["abc", "ab"]),
    ("01_text_to_vectors.py", "wordpiece", 'gives ["un", "##aff", "##able"]',
     lambda: T.tokenizers.wordpiece.wordpiece("unaffable", {"un", "##aff", "##able", "##a"}),
     ["un", "##aff", "##able"]),
    ("01_text_to_vectors.py", "embed", "give [[[3, 4], [1, 2]]]",
     lambda: T.embed(np.array([[2, 1]]), np.array([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])), [[[3, 4], [1, 2]]]),
    ("02_positions.py", "sinusoidal_positions", "≈ [[0, 1], [0.841, 0.540]]",
     lambda: T.sinusoidal_positions(2, 2), [[0, 1], [0.841, 0.540]]),
    ("02_positions.py", "learned_positions", "n = 10, offset = 4 gives rows 4 … 13",
     lambda: T.learned_positions(10, np.arange(512.0)[:, None], offset=4)[:, 0], [*range(4, 14)]),
    ("02_positions.py", "rope_angles", "= [[0, 0], [1, 0.01], [2, 0.02]]",
     lambda: T.rope_angles(np.array([0, 1, 2]), 4), [[0, 0], [1, 0.01], [2, 0.02]]),
    ("03_attention.py", "softmax", "softmax([1000.0, 1000.0]) = [0.5, 0.5]",
     lambda: T.softmax(np.array([1000.0, 1000.0])), [0.5, 0.5]),
    ("05_masks.py", "causal_mask", "causal_mask(3) = [[T, F, F], [T, T, F], [T, T, T]]", lambda: T.causal_mask(3),
     [[T_, F_, F_], [T_, T_, F_], [T_, T_, T_]]),
    ("05_masks.py", "sliding_window_mask", "sliding_window_mask(3, 2) = [[T, F, F], [T, T, F], [F, T, T]]",
     lambda: T.sliding_window_mask(3, 2), [[T_, F_, F_], [T_, T_, F_], [F_, T_, T_]]),
    ("05_masks.py", "strided_mask", "strided_mask(5, 2) row 4 = [T, F, T, T, T]", lambda: T.strided_mask(5, 2)[4],
     [T_, F_, T_, T_, T_]),
    ("05_masks.py", "fixed_mask", "fixed_mask(6, 3) row 4 = [F, F, T, T, T, F]", lambda: T.fixed_mask(6, 3)[4],
     [F_, F_, T_, T_, T_, F_]),
    ("05_masks.py", "global_mask", "global_mask(4, [1]) = [[F, T, F, F], [T, T, T, T], [F, T, F, F], [F, T, F, F]]",
     lambda: T.global_mask(4, [1]), [[F_, T_, F_, F_], [T_, T_, T_, T_], [F_, T_, F_, F_], [F_, T_, F_, F_]]),
    ("05_masks.py", "padding_mask", "padding_mask([2, 3]) = [[[[T, T, F]]], [[[T, T, T]]]]",
     lambda: T.padding_mask(np.array([2, 3])), [[[[T_, T_, F_]]], [[[T_, T_, T_]]]]),
    ("03_attention.py", "scaled_dot_product_attention", "out[0, 0] ≈ [[0.67, 0.33], [0.33, 0.67]]",
     lambda: T.scaled_dot_product_attention(*[np.eye(2)[None, None]] * 3)[0, 0], [[0.67, 0.33], [0.33, 0.67]]),
    ("03_attention.py", "additive_scores", "= [[1.5232, 0]]",
     lambda: T.additive_scores(np.array([[0.5]]), np.array([[0.5], [-0.5]]), np.eye(1), np.eye(1), np.array([2.0])),
     [[1.5232, 0]]),
    ("07_gqa.py", "qkv_heads", "q = [[[[1]], [[2]]]], k = [[[[3]]]], v = [[[[2]]]]",
     lambda: T.qkv_heads(np.array([[[1.0, 2.0]]]), T.AttentionWeights(np.eye(2), np.array([[1.0], [1.0]]),
                                                                      np.array([[2.0], [0.0]]), np.eye(2)), 2, 1),
     ([[[[1]], [[2]]]], [[[[3]]]], [[[[2]]]])),
    ("08_online_softmax.py", "online_attention_update", "end with O / l = 3",
     lambda: (lambda m, l, O: O / l)(*T.online_attention_update(*T.online_attention_update(
         np.full((1, 1), -np.inf), np.zeros((1, 1)), np.zeros((1, 1)), np.zeros((1, 1)), np.array([[2.0]])),
         np.zeros((1, 1)), np.array([[4.0]]))), [[3]]),
    ("09_flash_tiling.py", "visible_key_tiles", "visible_key_tiles(8, 8, 2, 2, True) = [1, 2, 3, 4]",
     lambda: T.visible_key_tiles(8, 8, 2, 2, True), [1, 2, 3, 4]),
    ("09_flash_tiling.py", "standard_attention_io", "stores = 6 + 6 + 8 = 20 (S, P, O), total = 64",
     lambda: [T.standard_attention_io(2, 3, 4)[k] for k in ("loads", "stores", "total")], [44, 20, 64]),
    ("09_flash_tiling.py", "flash2_io", "stores = 4·3 = 12, total = 44 (without the mask: loads 40, total 52)",
     lambda: [T.flash2_io(4, 4, 2, 2, 2, causal=c)[k] for c in (True, False) for k in ("loads", "stores", "total")],
     [32, 12, 44, 40, 12, 52]),
    ("10_block.py", "gelu", "GELU(1) = Φ(1) = 0.8413, GELU(−1) = −0.1587, and the tanh form gives 0.8412 and −0.1588",
     lambda: (T.gelu(np.array([1.0, -1.0])), T.gelu(np.array([1.0, -1.0]), "tanh")),
     ([0.8413, -0.1587], [0.8412, -0.1588])),
    ("11_real_llm.py", "filter_logits", "the first two are kept: finite = [T, T, F, F]",
     lambda: np.isfinite(T.filter_logits(np.log(np.array([0.5, 0.3, 0.15, 0.05])), top_p=0.75)), [T_, T_, F_, F_]),
    ("16_packing.py", "pack_documents",
     "positions [[0, 1, 2, 0, 1], [0, 1, 2, 3, 0]], doc [[0, 0, 0, 1, 1], [2, 2, 2, 2, −1]]",
     lambda: (lambda p: (p.positions, p.doc))(T.pack_documents([[1, 2, 3], [4, 5], [6, 7, 8, 9]], 5)),
     ([[0, 1, 2, 0, 1], [0, 1, 2, 3, 0]], [[0, 0, 0, 1, 1], [2, 2, 2, 2, -1]])),
    ("16_packing.py", "document_mask", "row 0 sees key 0; row 1 sees keys 0, 1; row 2 sees key 2 only",
     lambda: T.document_mask(np.array([[0, 0, 1]]))[0, 0], [[T_, F_, F_], [T_, T_, F_], [F_, F_, T_]]),
    ("16_packing.py", "key_tiles_read", "out[0] = [[T, F], [T, T]]; with doc = [[0, 0, 1, 1]] as well: out[0] = "
     "[[T, F], [F, T]]", lambda: [T.cuda_kernels.key_tiles_read(4, 2, 2, causal=True, doc=d)[0].tolist()
                                 for d in (None, np.array([[0, 0, 1, 1]]))],
     [[[T_, F_], [T_, T_]], [[T_, F_], [F_, T_]]]),
    ("08_online_softmax.py", "merge_softmax_stats", "merge to m = 0, l = 2",
     lambda: T.merge_softmax_stats(*(np.array([v]) for v in (0.0, 1.0, 0.0, 1.0))), ([0.0], [2.0])),
    ("08_online_softmax.py", "online_softmax_stats", "history m = [0, 0.693, 1.099], l = [1, 1.5, 2]",
     lambda: (lambda h: (T.online_softmax_stats(np.log(np.array([1.0, 2.0, 3.0])), 1, h), [x for x, _ in h],
                         [y for _, y in h])[1:])([]), ([0, 0.693, 1.099], [1, 1.5, 2])),
    ("10_block.py", "layer_norm", "≈ [−1.2247, 0, 1.2247]", lambda: T.layer_norm(np.array([1.0, 2.0, 3.0]), np.ones(3)),
     [-1.2247, 0, 1.2247]),
    ("10_block.py", "rms_norm", "≈ [0.8485, 1.1314]", lambda: T.rms_norm(np.array([3.0, 4.0]), np.ones(2)),
     [0.8485, 1.1314]),
    ("10_block.py", "ffn", "g(x W₁ + b₁) = [[0], [2.5]], so FFN(x) = [[1], [8.5]]",
     lambda: T.ffn(np.array([[-1.0], [2.0]]), np.array([[1.0]]), np.array([[3.0]]), np.array([0.5]), np.array([1.0])),
     [[1], [8.5]]),
    ("10_block.py", "residual",
     "[[2 + 3·1]] = [[5]] with pre_norm=True, and [[(2 + 6) / 2]] = [[4]] with pre_norm=False",
     lambda: [T.residual(np.array([[2.0]]), lambda t: 3 * t, lambda t: t / 2, pre_norm=p)[0, 0] for p in (True, False)],
     [5, 4]),
    ("11_real_llm.py", "sample_next", "c = [0.1, 0.3, 0.6, 1.0], so token 3 (0.6 ≤ 0.65 < 1.0); u = 0.25 gives token 1",
     lambda: [int(T.sample_next(np.log(np.array([0.1, 0.2, 0.3, 0.4])), 1.0, rng=GivenUniforms([u])))
              for u in (0.65, 0.25)], [3, 1]),
    ("12_real_encoder.py", "bert_embeddings", "give [2, 5] before the LayerNorm; with γ = [1, 1] and β = [0, 0] a "
     "LayerNorm over 2 numbers gives [−1, 1]",
     lambda: T.bert_embeddings(np.array([[1]]), T.BertWeights(
         np.array([[0.0, 0.0], [1.0, 3.0]]), np.array([[0.0, 1.0], [0.0, 0.0]]), np.array([[1.0, 1.0]]), np.ones(2),
         np.zeros(2)), T.BertConfig(v=2, d=2, h=1, L=1, d_ff=4, n_max=2, n_types=1))[0, 0], [-1, 1]),
    ("12_real_encoder.py", "mean_pool", "e_0 = [2, 3]",
     lambda: T.mean_pool(np.array([[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]]), np.array([2]))[0], [2, 3]),
    ("12_real_encoder.py", "l2_normalize", "out = [0.6, 0.8]", lambda: T.l2_normalize(np.array([3.0, 4.0])),
     [0.6, 0.8]),
    ("13_counting.py", "count_parameters", "SmolLM2-135M 134,515,008",
     lambda: T.count_parameters(T.load_config("smollm2-135m")), 134_515_008),
    ("13_counting.py", "forward_flops", "matmul = 368, attention = 64, total = 432, tokens = 1",
     lambda: (lambda f: [f[k] for k in ("qkvo", "ffn", "scores", "mix", "head", "matmul", "attention", "total",
                                        "tokens")])(T.forward_flops(T.ModelConfig(
                                            "toy", "decoder", L=1, d=4, h=2, h_kv=1, d_h=2, d_ff=8, v=10, n_ctx=16),
                                            3, phase="decode")), [96, 192, 32, 32, 80, 368, 64, 432, 1]),
    ("13_counting.py", "arithmetic_intensity", "prefill: 1,088 FLOPs / (368 + 3·8) bytes = 2.78, decode: 432 FLOPs / "
     "(368 + 4·8) bytes = 1.08. Llama-3-8B at 1,024 tokens: 980 and 1.03",
     lambda: [a[p][k] for a in (T.arithmetic_intensity(T.ModelConfig(
         "toy", "decoder", L=1, d=4, h=2, h_kv=1, d_h=2, d_ff=8, v=10, n_ctx=16), 3),) for p in ("prefill", "decode")
              for k in ("flops", "bytes", "intensity")]
     + [T.arithmetic_intensity("llama-3-8b", 1024)[p]["intensity"] for p in ("prefill", "decode")],
     [1088, 392, 2.7755, 432, 400, 1.08, 980.2505, 1.0266]),
    ("06_kv_cache.py", "decoder_mask", "decoder_mask(2, 3) = [[T, T, T, T, F], [T, T, T, T, T]]",
     lambda: T.decoder_mask(2, 3), [[T_, T_, T_, T_, F_], [T_, T_, T_, T_, T_]]),
    ("14_paged_kv.py", "paged_memory_report", "take 7 + 3 = 10 blocks, 160 token slots for 137 tokens",
     lambda: (lambda r: [r["blocks"], r["paged_reserved"] // r["bytes_per_token"], r["used"] // r["bytes_per_token"]])(
         T.paged_memory_report(T.load_config("smollm2-135m"), [100, 37])), [10, 160, 137]),
    ("19_training_from_scratch.py", "induction_accuracy", "6 is right and 5 is wrong: 0.5",
     lambda: T.induction_accuracy(np.array([[0, 0, 0, 6, 5, 0]]), np.array([[5, 6, 7, 5, 6, 7]])), 0.5),
    ("13_counting.py", "kv_cache_bytes_per_token", "= 131,072 bytes",
     lambda: T.kv_cache_bytes_per_token(T.load_config("llama-3-8b"), "float16"), 131_072),
    ("18_training_step.py", "cross_entropy", "L = −log ½ = 0.6931",
     lambda: T.cross_entropy(np.array([[0.0, 0.0], [5.0, 1.0]]), np.array([1, -100])), 0.6931),
    ("18_training_step.py", "cross_entropy_backward", "dz = [[0.5, −0.5], [0, 0]]",
     lambda: T.cross_entropy_backward(np.array([[0.0, 0.0], [5.0, 1.0]]), np.array([1, -100])), [[0.5, -0.5], [0, 0]]),
    ("18_training_step.py", "lm_head_backward", "dx = [[3, 2]], dW_E = [[1, 1], [0, 0], [2, 2]]",
     lambda: T.lm_head_backward(np.array([[1.0, 0.0, 2.0]]), np.array([[1.0, 1.0]]),
                                np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])), ([[3, 2]], [[1, 1], [0, 0], [2, 2]])),
    ("18_training_step.py", "rms_norm_backward", "dx = [[0.1810, −0.1358]], dγ = [0.8485, 0]",
     lambda: T.rms_norm_backward(np.array([[1.0, 0.0]]), np.array([[3.0, 4.0]]), np.ones(2), eps=0.0),
     ([[0.1810, -0.1358]], [0.8485, 0])),
    ("18_training_step.py", "swiglu_ffn_backward", "dx = [[0]], dW_gate = [[3]], dW_up = [[0]], dW_down = [[0]]",
     lambda: T.swiglu_ffn_backward(*(np.array([[v]]) for v in (1.0, 1.0, 0.0, 2.0, 3.0))),
     ([[0]], [[3]], [[0]], [[0]])),
    ("18_training_step.py", "linear_backward", "dx = [[3], [3]], dW = [[3]] (1·1 + 2·1), db = [2]",
     lambda: T.linear_backward(np.ones((2, 1)), np.array([[1.0], [2.0]]), np.array([[3.0]]), True),
     ([[3], [3]], [[3]], [2])),
    ("18_training_step.py", "merge_heads_backward", "h = 2: [[[[1, 2]], [[3, 4]]]]",
     lambda: T.merge_heads_backward(np.array([[[1.0, 2.0, 3.0, 4.0]]]), 2), [[[[1, 2]], [[3, 4]]]]),
    ("18_training_step.py", "split_heads_backward", "(b = n = 1, h = d_h = 2): [[[1, 2, 3, 4]]]",
     lambda: T.split_heads_backward(np.array([[[[1.0, 2.0]], [[3.0, 4.0]]]])), [[[1, 2, 3, 4]]]),
    ("18_training_step.py", "dropout", "Y = [2, 0, 6, 0]",
     lambda: T.dropout(np.array([1.0, 2.0, 3.0, 4.0]), 0.5, mask=np.array([T_, F_, T_, F_]))[0], [2, 0, 6, 0]),
    ("18_training_step.py", "dropout_backward", "dX = [2, 0]",
     lambda: T.dropout_backward(np.array([1.0, 1.0]), np.array([T_, F_]), 0.5), [2, 0]),
    ("18_training_step.py", "softmax_backward", "give dS = [0.25, −0.25, 0]",
     lambda: T.softmax_backward(np.array([1.0, 0.0, 5.0]), np.array([0.5, 0.5, 0.0])), [0.25, -0.25, 0]),
    ("18_training_step.py", "apply_rope_half_backward", "dY = [[1, 2]] gives dX = [[2.2, 0.4]]",
     lambda: T.apply_rope_half_backward(np.array([[1.0, 2.0]]), np.array([[0.6]]), np.array([[0.8]])), [[2.2, 0.4]]),
    ("18_training_step.py", "embed_backward", "dW_E = [[2], [0], [5]]",
     lambda: T.embed_backward(np.array([[[1.0], [2.0], [4.0]]]), np.array([[2, 0, 2]]), 3), [[2], [0], [5]]),
    ("18_training_step.py", "clip_by_global_norm", "returns 5.0, and g[\"a\"] becomes ≈ [0.6, 0.8]",
     lambda: (lambda g: (T.clip_by_global_norm(g, 1.0), g["a"]))({"a": np.array([3.0, 4.0])}), (5.0, [0.6, 0.8])),
    ("18_training_step.py", "adamw_step", "to ≈ [0.9, −2.1], and state.t = 1",
     lambda: (lambda p, st: (T.adamw_step(p, {"theta": np.array([0.5, 0.5])}, st, 0.1), p["theta"], st.t)[1:])(
         *(lambda p: (p, T.adamw_state(p)))({"theta": np.array([1.0, -2.0])})), ([0.9, -2.1], 1)),
    ("18_training_step.py", "lr_at", "give 0.5, 1, 1, 0.854, 0.5, 0.146, 0, 0",
     lambda: [T.lr_at(s, lr_max=1.0, warmup=2, total=6) for s in range(8)], [0.5, 1, 1, 0.854, 0.5, 0.146, 0, 0]),
]


@pytest.mark.parametrize("file, name, text, run, expected", EXAMPLES, ids=[e[1] for e in EXAMPLES])
def test_a_stubs_worked_example_is_what_the_package_gives(file, name, text, run, expected):
    doc = " ".join((inspect.getdoc(stub(file, name)) or "").split())
    assert text in doc, f"workbook/{file}: {name}'s docstring no longer says {text!r}"
    got = run()
    if isinstance(expected, list) and expected and isinstance(expected[0], str):
        assert got == expected
        return
    if isinstance(expected, tuple):
        for g, e in zip(got, expected):
            np.testing.assert_allclose(np.asarray(g, float), np.asarray(e, float), atol=6e-4)
        return
    if isinstance(expected, list) and isinstance(np.asarray(expected).flat[0], (bool, np.bool_)):
        assert np.asarray(got).tolist() == expected
        return
    np.testing.assert_allclose(np.asarray(got, float), np.asarray(expected, float), atol=6e-4)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_the_lesson_and_the_workbook_readme_name_every_stub(path):
    """Where a learner looks for what to write: the lesson's "Write it yourself" paragraph and the workbook's
    README table name every stub of the file (a method by its own name: `write`, or PagedKVCache.write)."""
    lesson = (ROOT / "lessons" / path.name).read_text(encoding="utf-8")
    paragraph = lesson[lesson.index("**Write it yourself"):]
    paragraph = paragraph[:paragraph.index("\n#\n")] if "\n#\n" in paragraph else paragraph
    row = next(line for line in (WORKBOOK / "README.md").read_text(encoding="utf-8").splitlines()
               if line.startswith(f"| `{path.name}`"))
    for name in STUBS[path.name]:
        short = name.split(".")[-1]
        assert f"`{name}`" in paragraph or f"`{short}`" in paragraph, f"lessons/{path.name} does not name {name}"
        assert f"`{name}`" in row or f"`{short}`" in row, f"workbook/README.md's row for {path.name} lacks {name}"
