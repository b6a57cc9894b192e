"""The package's folders draw its architecture, and these rules keep the drawing true.

Read from the source with `ast` (nothing is imported), so a rule broken by an import hidden
inside a function is caught as well:
- the core (`core/`) and the tokenizers import only the array backend (`backend`, `require`);
- `flash/` and `models/` build on the core (models also on the tokenizers) and never on each other;
- `train/` is the machinery of training (optimizer, loop, rows and batches, checkpoints) and the trainable
  models, which use the models: one Llama forward and one backward (models/llama.py, llama_backward.py),
  which the tiny trained decoder runs too, and no other module turns q and k by RoPE;
- `tasks/` (induction, translation) uses `train/`, which never imports a task;
- a model's maths (`llama.py`, `bert.py`) never imports the file format it is read from;
- only the CLI draws (`plotting`); no import cycle; no underscore name crosses a module;
- no module a reader cannot hold in one sitting (over 500 lines);
- the refusals of `X/name.py` live in `X/name_checks.py`, each named after its function;
- lessons and benchmarks reach the package through its public names only.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "transformer"
MAX_LINES = 500

# what each room may import, besides itself (prefixes of dotted module names under transformer)
ALLOWED = {
    "backend": (),
    "version": (),  # the package's version string, which the command line prints
    "require": ("backend",),
    # files: write_atomic, the one way the package writes a file (a checkpoint, metrics, a figure),
    # shared by train/, tasks/ and plotting/, which may not import each other; it imports nothing itself
    "files": (),
    "plotting": ("backend", "files"),
    "core": ("backend", "require"),
    "tokenizers": ("backend", "require"),
    "flash": ("backend", "require", "core"),
    "models": ("backend", "require", "core", "tokenizers"),
    "train": ("backend", "require", "files", "core", "flash", "models"),  # the machinery; the trained models
    "tasks": ("backend", "require", "files", "core", "flash", "models", "train"),  # the two tasks, on train/
    # the workbook's checker: its cases and the package's functions they check against
    "tutor": ("backend", "require", "core", "tokenizers", "flash", "models", "train", "tasks"),
    "cli": ("backend", "version", "require", "files", "core", "tokenizers", "flash", "models", "train", "tasks", "plotting",
            "tutor"),
}
LOADERS = {"models.llama_gguf", "models.bert_files"}  # file formats -> weights
MODELS = {"models.llama", "models.bert"}  # the maths, which reads no file


def module_name(path: Path) -> str:  # transformer/core/attention.py -> "core.attention"
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def resolve(name: str, node: ast.ImportFrom | ast.Import) -> list[tuple[str, list[str]]]:
    """The transformer modules an import statement reads, each with the names it takes from it."""
    found = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name == "transformer" or alias.name.startswith("transformer."):
                found.append((alias.name.removeprefix("transformer").lstrip("."), []))
        return found
    if node.level == 0:
        if not (node.module == "transformer" or (node.module or "").startswith("transformer.")):
            return []
        base = node.module.removeprefix("transformer").lstrip(".")
    else:
        here = name.split(".") if is_package(name) else name.split(".")[:-1]
        here = [p for p in here if p]
        up = node.level - 1
        base = ".".join(here[:len(here) - up] + ([node.module] if node.module else []))
    names = [a.name for a in node.names]
    submodules = [f"{base}.{n}".lstrip(".") for n in names if f"{base}.{n}".lstrip(".") in MODULES]
    if submodules:  # `from . import checks`: the submodules themselves
        found += [(m, []) for m in submodules]
        rest = [n for n in names if f"{base}.{n}".lstrip(".") not in MODULES]
        if rest:
            found.append((base, rest))
    else:
        found.append((base, names))
    return found


def imports_of(name: str) -> list[tuple[str, list[str], int]]:  # (module, names taken, line)
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out += [(m, names, node.lineno) for m, names in resolve(name, node)]
    return out


GRAPH = {name: imports_of(name) for name in MODULES}


def room(name: str) -> str:
    return name.split(".")[0] if name else ""


def test_the_rooms_exist():
    assert {room(m) for m in MODULES} >= set(ALLOWED), sorted({room(m) for m in MODULES})


@pytest.mark.parametrize("name", [m for m in MODULES if room(m) in ALLOWED])
def test_each_room_imports_only_the_rooms_below_it(name):
    allowed = set(ALLOWED[room(name)]) | {room(name)}
    wrong = [(m or "transformer", line) for m, _, line in GRAPH[name] if room(m) not in allowed]
    assert not wrong, f"transformer/{name.replace('.', '/')}.py may import only {sorted(allowed)}, imports {wrong}"


def test_models_never_import_their_loaders():
    assert LOADERS <= set(MODULES) and MODELS <= set(MODULES)
    wrong = [(name, m, line) for name in MODELS for m, _, line in GRAPH[name] if m in LOADERS]
    assert not wrong, f"a model imports a file format: {wrong}"


def test_one_generation_loop_with_the_fast_path_below_it():
    """The loop (models/generation.py) knows no model's maths; llama.py runs it and never imports its fast
    path (llama_fast.py), which plugs into the loop as an engine."""
    imports = {name: {m for m, _, _ in GRAPH[name]} for name in ("models.llama", "models.generation")}
    assert "models.llama_fast" not in imports["models.llama"], "llama.py imports its fast path"
    assert "models.generation" in imports["models.llama"], "llama.py does not run the generation loop"
    assert "models.llama" not in imports["models.generation"], "the loop imports a model's maths"
    assert "models.llama_fast" in imports["models.generation"], "the fast path is not an engine of the loop"


# RoPE turns q and k inside a decoder's attention: a module that uses it writes a Llama forward (or its
# backward). Besides the core, which defines it, the package's public names (__init__.py), and the tutor,
# which checks a learner's RoPE against it, these do:
ROPE_USERS = {
    "models.llama": "the forward",
    "models.llama_backward": "its backward",
    "models.decode_twins": "the GPU decode step's kernels in NumPy, tested equal to the forward",
}


def names_used(name: str) -> set[str]:  # every identifier a module imports, reads or calls
    used = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            used |= {a.name for a in node.names}
    return used


def test_one_llama_forward_and_one_backward():
    """The Llama's maths is written once: only llama.py and its backward (and the decode step's twins) use
    RoPE, and the trained decoder's forward and backward are llama.forward and llama_backward.forward_backward.
    A second forward, in train/ or anywhere, would turn q and k itself."""
    users = {name for name in MODULES if room(name) not in ("", "core", "tutor")
             and any(n.startswith("apply_rope") for n in names_used(name))}
    extra = sorted(users - set(ROPE_USERS))
    assert not extra, f"a second Llama forward or backward: RoPE used in {extra}; run models.llama.forward"
    assert users == set(ROPE_USERS), f"{sorted(set(ROPE_USERS) - users)} no longer use RoPE: update ROPE_USERS"
    taken = {m: set(names) for m, names, _ in GRAPH["train.decoder"]}
    assert "forward" in taken.get("models.llama", set()), "train/decoder.py does not run llama.forward"
    assert "forward_backward" in taken.get("models.llama_backward", set()), (
        "train/decoder.py does not run llama_backward.forward_backward")
    assert {"forward", "forward_backward"} <= names_used("train.decoder")


def test_one_encoder_decoder():
    """The original Transformer's layers are written once as well: train/seq2seq.py runs
    models/encoder_decoder.py's layers and encoder_decoder_backward.py's backward, MiniLM (models/bert.py)
    runs the same encoder layer (with GELU), and no module defines a function named encoder_layer… or
    decoder_layer…, MiniLM's included."""
    taken = {m: set(names) for m, names, _ in GRAPH["train.seq2seq"]}
    assert {"seq2seq_encoder_layer", "seq2seq_decoder_layer"} <= taken.get("models.encoder_decoder", set()), (
        "train/seq2seq.py does not run models/encoder_decoder.py's layers")
    assert {"seq2seq_encoder_layer_backward", "seq2seq_decoder_layer_backward"} <= taken.get(
        "models.encoder_decoder_backward", set()), "train/seq2seq.py does not run the layers' backward"
    bert_takes = {n for m, names, _ in GRAPH["models.bert"] if m == "models.encoder_decoder" for n in names}
    assert "seq2seq_encoder_layer" in bert_takes, "models/bert.py does not run models/encoder_decoder.py's layer"
    layers = sorted((name, node.name) for name in MODULES if not is_check_module(name)
                    for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8")))
                    if isinstance(node, ast.FunctionDef) and node.name.startswith(("encoder_layer", "decoder_layer")))
    assert layers == [], f"a second encoder or decoder layer: {layers}"


def test_only_the_cli_draws():
    wrong = [(name, line) for name, imps in GRAPH.items() for m, _, line in imps
             if room(m) == "plotting" and room(name) not in ("cli", "plotting")]
    assert not wrong, f"only cli/ (and lessons) may import plotting: {wrong}"


def test_no_underscore_name_crosses_a_module():
    wrong = [(name, m, n, line) for name, imps in GRAPH.items() for m, names, line in imps
             for n in names if n.startswith("_") and not n.startswith("__") and m != name]
    assert not wrong, f"private names imported across modules: {wrong}"


def test_no_import_cycle():
    edges = {name: {m for m, _, _ in imps if m in MODULES and m != name} for name, imps in GRAPH.items()}
    state: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(nxt):] + [nxt]))
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_over_500_lines(name):
    n = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"transformer/{name.replace('.', '/')}.py has {n} lines: split it by concept"


# --- where a refusal lives -------------------------------------------------------------------------
# The rooms the rule holds in: every room whose modules have doors.
CHECK_RULE_ROOMS = {"core", "flash", "tokenizers", "models", "train", "tasks"}


def is_check_module(name: str) -> bool:  # "core.attention_checks", "core.shared_checks", "core.checks"
    return name.split(".")[-1] == "checks" or name.endswith("_checks")


def imported_names(name: str) -> dict[str, tuple[str, str | None]]:
    """alias -> (module, None) for a module imported whole, (module, name) for a name taken from one."""
    names = {}
    for node in ast.parse(MODULES[name].read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if is_ours(alias.name) and alias.asname:
                    names[alias.asname] = (alias.name.removeprefix("transformer").lstrip("."), None)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:  # `from . import attention_checks as checks`, `from .x import y`
                for module, taken in resolve(name, ast.ImportFrom(module=node.module, names=[alias], level=node.level)):
                    names[alias.asname or alias.name] = (module, taken[0] if taken else None)
    return names


def doors_of(name: str):
    """(class or None, function, decorator node) for each function of the module with `@checked_by(...)`."""
    def visit(body, cls):
        for node in body:
            if isinstance(node, ast.ClassDef):
                yield from visit(node.body, node.name)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for d in node.decorator_list:
                    f = d.func if isinstance(d, ast.Call) else None
                    if (getattr(f, "id", None) or getattr(f, "attr", None)) == "checked_by":
                        yield cls, node, d
    yield from visit(ast.parse(MODULES[name].read_text(encoding="utf-8")).body, None)


def check_of(name: str, door: ast.Call, names: dict) -> tuple[str | None, str | None]:
    """The check a door names, as (its module, its name): `checks.softmax` or `softmax` imported."""
    arg = door.args[0] if len(door.args) == 1 and not door.keywords else None
    if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name):
        module, taken = names.get(arg.value.id, (None, None))
        return (module, arg.attr) if taken is None else (None, None)
    if isinstance(arg, ast.Name):
        return names.get(arg.id, (name, arg.id))  # imported from a check module, or defined here
    return None, None


def check_name_fits(check: str, cls: str | None, function: str) -> bool:
    """softmax for softmax; for a method, the class in snake case, then the method without its
    dunder underscores: KVCache.update -> kv_cache_update, BPETokenizer.__post_init__ ->
    bpe_tokenizer_post_init. The class part is compared without its underscores, as a class's
    words are spoken (WordPieceTokenizer -> wordpiece_tokenizer)."""
    if cls is None:
        return check == function
    method = function.strip("_")
    prefix = check.removesuffix(f"_{method}")
    return prefix != check and prefix.replace("_", "") == cls.lower()


FORMULA_MODULES = [m for m in MODULES if room(m) in CHECK_RULE_ROOMS and not is_check_module(m) and not is_package(m)]


@pytest.mark.parametrize("name", FORMULA_MODULES)
def test_the_refusals_of_a_module_live_in_its_checks_module(name):
    """Each door of X/name.py names a check in X/name_checks.py, called after its function."""
    own, names = f"{name}_checks", imported_names(name)
    wrong = []
    for cls, function, door in doors_of(name):
        module, check = check_of(name, door, names)
        where = f"{cls}.{function.name}" if cls else function.name
        if module != own:
            wrong.append(f"line {door.lineno}: {where}'s check comes from {module!r}, not {own!r}")
        elif not check_name_fits(check, cls, function.name):
            wrong.append(f"line {door.lineno}: {where}'s check is named {check!r}")
    assert not wrong, f"transformer/{name.replace('.', '/')}.py: " + "; ".join(wrong)


def test_the_check_rule_sees_the_doors():
    """The rule above reads every door: a parser that found none would pass it in silence."""
    doors = [d for m in FORMULA_MODULES for d in doors_of(m)]
    assert len(doors) > 180, len(doors)  # 197 when models/ and train/ joined the rule (124 before them)
    assert check_name_fits("kv_cache_update", "KVCache", "update")
    assert check_name_fits("bpe_tokenizer_post_init", "BPETokenizer", "__post_init__")
    assert check_name_fits("wordpiece_tokenizer_init", "WordPieceTokenizer", "__init__")
    assert not check_name_fits("kv_cache_advance", "KVCache", "update")
    assert not check_name_fits("softmax_backward", None, "softmax")


def is_ours(module) -> bool:  # "transformer" or one of its modules (not HF's "transformers")
    return module == "transformer" or (module or "").startswith("transformer.")


def outside_users():
    return sorted((ROOT / "lessons").glob("*.py")) + sorted((ROOT / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("path", outside_users(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_lessons_and_benchmarks_use_public_names(path):
    """`import transformer as T` (and `transformer.plotting` for figures): never an internal module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    wrong = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            wrong += [(a.name, node.lineno) for a in node.names
                      if a.name.startswith("transformer.") and a.name != "transformer.plotting"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and is_ours(node.module):
            ok = node.module == "transformer.plotting" or (
                node.module == "transformer" and all(a.name == "plotting" or not a.name.startswith("_")
                                                     and a.name not in {room(m) for m in MODULES}
                                                     for a in node.names))
            if not ok:
                wrong.append((node.module, node.lineno))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "T":
            if node.attr.startswith("_") and not node.attr.startswith("__") or node.attr in ALLOWED:
                wrong.append((f"T.{node.attr}", node.lineno))
    assert not wrong, f"{path.name} reaches into the package: {wrong}"


def test_tests_reach_no_private_name_of_the_package():
    """Tests may import a sub-module to test it, but never a name the package keeps private."""
    wrong = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                aliases |= {a.asname or a.name.split(".")[0] for a in node.names if is_ours(a.name)}
            elif isinstance(node, ast.ImportFrom) and is_ours(node.module):
                wrong += [(path.name, a.name, node.lineno) for a in node.names if a.name.startswith("_")]
                aliases |= {a.asname or a.name for a in node.names
                            if f"{node.module.removeprefix('transformer').lstrip('.')}.{a.name}".lstrip(".") in MODULES}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                wrong.append((path.name, f"{node.value.id}.{node.attr}", node.lineno))
    assert not wrong, f"tests reach private names: {wrong}"
