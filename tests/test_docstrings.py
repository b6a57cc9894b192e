"""The examples in the package's docstrings run as written (doctest), so the documentation
cannot drift from the code. Examples that need a model file are marked +SKIP there; the
tests of those models check the same calls against HF transformers and sentence-transformers."""
import doctest
import importlib
import pkgutil

import pytest

import transformer


def _has_examples(name: str) -> bool:
    return any(t.examples for t in doctest.DocTestFinder().find(importlib.import_module(name)))


MODULES = [m.name for m in pkgutil.walk_packages(transformer.__path__, "transformer.")
           if m.name != "transformer.__main__" and _has_examples(m.name)]


def test_the_package_has_examples_to_run():
    assert len(MODULES) >= 10, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (output above)"
