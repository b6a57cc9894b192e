"""What the checker knows about each workbook function: its cases, its reference and its known mistakes.

A `Spec` names one function of a workbook file. Its cases are built from a seed, as the package's
tests build theirs (odd n, GQA/MQA, masked rows, float16, huge logits, batch > 1); the expected value
of a case is the package's own function run on it, and, where torch is installed and the suite
compares with torch, torch's value too. A `Mistake` is a known wrong way to write the function: a
`variant` that computes what the mistaken code returns (so an answer equal to it is recognised),
a `tag` (the hint applies when only the cases with that tag fail), or `raises` (a pattern in the
message of an exception the learner's code raised). The variants are never shown to the learner.
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from .compare import Tolerance

__all__ = ["Case", "Mistake", "NotingNamespace", "Spec", "call_plain", "fresh"]


@dataclass
class Case:
    """One call: a label a learner can read, the arguments, and tags naming what the case exercises."""
    label: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    tags: frozenset = frozenset()
    # where this case's answer must be closer than its dtype's tolerance (a float16 softmax rounded once)
    tol: Tolerance | None = None
    # bytes the call may hold at its peak (tracemalloc, its argument copies included), and what a learner over it
    # should know: FlashAttention's loop never holds the n_q × n_k scores
    max_bytes: int | None = None
    memory_note: str = ""
    # an input the function must refuse: the exception it raises (ValueError), and what is wrong with the input, in
    # words ("10 positions from 508 run past the 512 rows"): no answer is compared, the package's function refuses it
    refuses: type | None = None
    refusal: str = ""
    # the numbers a refusal's message should name, one of them at least (n_max, the length it would reach): an error
    # NumPy raises on its own ("could not broadcast …") is the right type with nothing the caller can act on
    names: tuple = ()


class NotingNamespace:
    """NumPy's array namespace, noting each name read from it. A case passes one as xp= to see that the function
    builds its arrays with the xp it is given (CuPy on a GPU), not with np: `read` stays empty when it does not."""

    def __init__(self):
        self.read = set()

    def __getattr__(self, name):
        import array_api_compat.numpy as xp_numpy  # the namespace that namespace(None) gives
        if not name.startswith("__"):  # namespace(xp) reads __name__ to tell CuPy: that is not using it
            self.read.add(name)
        return getattr(xp_numpy, name)

    def __deepcopy__(self, memo):  # fresh() copies a case's arguments: the copy must note into this one
        return self

    def __repr__(self):
        return "xp"


@dataclass
class Mistake:
    """A known mistake and the hint that says how to fix it, in the learner's terms."""
    hint: str
    variant: Callable | None = None  # same call as the function: returns what the mistaken code returns
    tag: str | None = None  # applies when every failing case no other hint explains has this tag, and no passing
    # case has it (never to a wrong shape or dtype)
    raises: str | None = None  # regular expression on the message of the learner's exception

    def matches_exception(self, exc: BaseException, case: Case) -> bool:
        if self.raises is None or not re.search(self.raises, str(exc)):
            return False
        return self.tag is None or self.tag in case.tags


def fresh(case: Case) -> tuple[tuple, dict]:
    """A deep copy of the case's arguments: a function that writes into its inputs spoils no other call."""
    return copy.deepcopy(case.args), copy.deepcopy(case.kwargs)


def call_plain(fn, case: Case):
    """Call fn(*args, **kwargs) on a fresh copy of the case's arguments."""
    args, kwargs = fresh(case)
    return fn(*args, **kwargs)


@dataclass
class Spec:
    """One workbook function: how to call it, what it must return, how it goes wrong."""
    name: str
    reference: Any  # the package's function (or class), called through `call`
    cases: Callable[[], list[Case]]
    where: str  # the package file that holds the reference, for "after trying, read …"
    dims: Any = None  # the result's dimension names, or one tuple of names per returned value
    names: tuple | None = None  # names of the returned values when there are several
    tuple_dims: tuple | None = None  # when a call returns a tuple where others return one array (return_weights)
    tuple_names: tuple | None = None
    mistakes: list[Mistake] = field(default_factory=list)
    call: Callable = call_plain  # call(obj, case) -> result, for the learner's object and the reference alike
    torch: Callable | None = None  # torch_twin(case) -> expected, or None where torch is not compared
    shown: str | None = None  # the name the report prints, when it is not `name` (KVCache.update)
    # arguments the function writes on purpose (adamw_step's params and state); None: those the package's
    # function writes, seen by running it. Any other argument the learner's code changes is a failure.
    writes: tuple | None = None
    # what the result's dtype follows, said after a wrong dtype ("the table is float32 unless dtype= is given");
    # None: "keep the input's dtype …" when the case has a float array argument, else nothing
    dtype_rule: str | None = None

    def labels_for(self, expected) -> tuple:
        """(dims, names) of this call's expected value: one array, or a tuple of them."""
        if isinstance(expected, tuple) and self.tuple_dims is not None:
            return self.tuple_dims, self.tuple_names
        if isinstance(expected, tuple) and self.dims and all(isinstance(d, str) for d in self.dims):
            return (self.dims,) * len(expected), self.names
        return self.dims, self.names
