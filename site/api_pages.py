"""The API reference pages, generated from the package: every public name of `import transformer as T`.

One page per folder of the package (core, flash, models, …), one section per module with its
docstring, then each public name of that module as T exports it (`transformer.softmax`, not
`transformer.core.attention.softmax`), documented by autodoc from its docstring. A name added to
transformer/__init__.py appears here with no edit to the site.
"""
from __future__ import annotations

import inspect
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FOLDER_TITLES = {  # folder -> page title; a folder not listed gets its own name
    "backend": "Array backends and argument checks",
    "core": "core: the formulas",
    "flash": "flash: FlashAttention",
    "tokenizers": "tokenizers: BPE and WordPiece",
    "models": "models: SmolLM2, MiniLM, the encoder–decoder, counting",
    "train": "train: training from scratch, the machinery",
    "tasks": "tasks: the induction and translation tasks",
}
EXTRA_MODULES = {"flash": ["transformer.flash.cuda_kernels"]}  # reached as T.cuda_kernels.NAME


def public_names() -> dict[str, list[tuple[str, object]]]:
    """module name -> [(public name in T, object)] for every class and function T exports."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import transformer as T

    by_module = defaultdict(list)
    for name in sorted(dir(T)):
        obj = getattr(T, name)
        if name.startswith("_") or inspect.ismodule(obj) or not callable(obj):
            continue
        by_module[obj.__module__].append((name, obj))
    return by_module


def folder_of(module: str) -> str:
    """'transformer.core.attention' -> 'core'; 'transformer.backend' -> 'backend'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else "backend"


def page(folder: str, modules: dict[str, list[tuple[str, object]]]) -> str:
    title = FOLDER_TITLES.get(folder, folder)
    lines = [f"# {title}", ""]
    for module in sorted(modules):
        path = module.replace(".", "/")[len("transformer/"):] + ".py"
        lines += [f"## `{path}`", "", "```{eval-rst}", f".. automodule:: {module}", "   :no-members:", "```", ""]
        for name, obj in modules[module]:
            directive = "autoclass" if inspect.isclass(obj) else "autofunction"
            options = ["   :members:"] if inspect.isclass(obj) else []
            lines += ["```{eval-rst}", f".. {directive}:: transformer.{name}", *options, "```", ""]
    for module in EXTRA_MODULES.get(folder, []):
        path = module.replace(".", "/")[len("transformer/"):] + ".py"
        lines += [f"## `{path}`", "", "```{eval-rst}", f".. automodule:: {module}", "   :members:", "```", ""]
    return "\n".join(lines)


def write(out_dir: Path) -> list[Path]:
    """Write out_dir/index.md and one page per folder; return the pages written."""
    by_folder = defaultdict(dict)
    for module, names in public_names().items():
        by_folder[folder_of(module)][module] = names
    out_dir.mkdir(parents=True, exist_ok=True)
    order = [f for f in FOLDER_TITLES if f in by_folder] + sorted(set(by_folder) - set(FOLDER_TITLES))
    written = []
    for folder in order:
        written.append(out_dir / f"{folder}.md")
        written[-1].write_text(page(folder, by_folder[folder]), encoding="utf-8")
    count = sum(len(v) for m in by_folder.values() for v in m.values())
    index = ["# API reference", "",
             f"Every public name of `import transformer as T` ({count} functions and classes), with its "
             "docstring: the formula it computes, the shapes it takes and returns (the signature comment of "
             "its `def` line, shown first), and a small example. Grouped by the folder of the package "
             "that holds it ([architecture](../docs/architecture.md) says why each folder exists).", "",
             "```{toctree}", ":maxdepth: 2", "", *[p.stem for p in written], "```", ""]
    (out_dir / "index.md").write_text("\n".join(index), encoding="utf-8")
    return [out_dir / "index.md", *written]
