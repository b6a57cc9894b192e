"""Every lesson ends with "Try it" exercises; their solutions live in lessons/solutions/, one module a
lesson, and each solution's answer is checked here against the package.

A solutions module `lessons/solutions/NN_topic.py` holds, for each exercise k, `exercise_k()`: the
answer worked out as a learner would (by hand, with the formula written out as arithmetic, or in a few
lines of NumPy), and `check_k(answer, T)`: the same quantity computed with the package (`T` is
`import transformer as T`), asserting that the two agree within a stated tolerance. The learner's answer
never calls the function it is checked against.

Every check must also refuse a wrong answer: `test_check_refuses_a_wrong_answer` perturbs each answer
(see `perturbed`), or takes `wrong_k()` from the module where no generic perturbation applies (a
function, a set of ids), and expects check_k to raise AssertionError.
"""
import importlib.util
import re
from pathlib import Path

import pytest

import transformer as T

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.py"))
SOLUTIONS = sorted((ROOT / "lessons" / "solutions").glob("[0-9][0-9]_*.py"))
TRY_IT = re.compile(r"^# #+ Try it", re.MULTILINE)


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"solutions_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def exercises(path: Path) -> list[str]:
    return sorted(n.removeprefix("exercise_") for n in vars(load(path)) if n.startswith("exercise_"))


CASES = [(p, k) for p in SOLUTIONS for k in exercises(p)]


def test_every_lesson_with_exercises_has_its_solutions():
    for lesson in LESSONS:
        if TRY_IT.search(lesson.read_text(encoding="utf-8")):
            solution = ROOT / "lessons" / "solutions" / lesson.name
            assert solution.exists(), f"{lesson.name} has a 'Try it' section but no lessons/solutions/{lesson.name}"
            assert len(exercises(solution)) >= 2, f"lessons/solutions/{lesson.name} solves fewer than 2 exercises"


@pytest.mark.parametrize("path, k", CASES, ids=[f"{p.stem}-{k}" for p, k in CASES])
def test_solution_agrees_with_the_package(path, k):
    module = load(path)
    assert hasattr(module, f"check_{k}"), f"{path.name}: exercise_{k} has no check_{k}"
    getattr(module, f"check_{k}")(getattr(module, f"exercise_{k}")(), T)


def perturbed(x):
    """A wrong answer made from a right one: numbers x·1.1 + 1 (ints x + 1, bools not x), strings x + "?",
    arrays element-wise, and in a tuple, list or dict the first element that can be perturbed."""
    import numpy as np

    if isinstance(x, (bool, np.bool_)):
        return not x
    if isinstance(x, (int, np.integer)):
        return x + 1
    if isinstance(x, (float, np.floating)):
        return x * 1.1 + 1
    if isinstance(x, str):
        return x + "?"
    if isinstance(x, np.ndarray):
        if x.dtype == bool:
            return ~x
        return x + 1 if np.issubdtype(x.dtype, np.integer) else x * 1.1 + 1
    if isinstance(x, (tuple, list)):
        for i, item in enumerate(x):
            wrong = perturbed(item)
            if wrong is not None:
                return type(x)([*x[:i], wrong, *x[i + 1:]])
        return None
    if isinstance(x, dict):
        for key, item in x.items():
            wrong = perturbed(item)
            if wrong is not None:
                return {**x, key: wrong}
        return None
    return None


@pytest.mark.parametrize("path, k", CASES, ids=[f"{p.stem}-{k}" for p, k in CASES])
def test_check_refuses_a_wrong_answer(path, k):
    module = load(path)
    if hasattr(module, f"wrong_{k}"):
        wrong = getattr(module, f"wrong_{k}")()
    else:
        wrong = perturbed(getattr(module, f"exercise_{k}")())
        assert wrong is not None, f"{path.name}: exercise_{k}'s answer cannot be perturbed generically; define wrong_{k}()"
    with pytest.raises(AssertionError):
        getattr(module, f"check_{k}")(wrong, T)
