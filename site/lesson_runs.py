"""One lesson run in its own Jupyter kernel, for site/conf.py's process pool (run_lessons_in_parallel).

A module of its own because a process pool sends its workers a function by its module and name:
conf.py is executed by Sphinx, not imported, so a function defined there cannot be sent.
"""
from __future__ import annotations

from pathlib import Path


def execute_lesson(path: str, timeout: int) -> tuple[dict, float, str | None]:
    """(the notebook with its outputs, seconds, the traceback or None): lessons/NN_*.py as
    site/lesson_reader.py makes it for its page, run in lessons/ as myst-nb would run it."""
    from jupyter_cache.executors.utils import single_nb_execution

    from lesson_reader import reads

    nb = reads(Path(path).read_text(encoding="utf-8"))
    result = single_nb_execution(nb, cwd=str(Path(path).parent), allow_errors=False, timeout=timeout,
                                 meta_override=True)
    return nb, result.time, None if result.err is None else result.exc_string
