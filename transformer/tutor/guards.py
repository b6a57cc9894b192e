"""What the checker puts around a learner's code while it runs: a time limit, its prints and input() kept out
of the report, os._exit and os.abort turned into exceptions, warnings silenced, and the bytes it holds at its
peak."""
from __future__ import annotations

import io
import os
import signal
import sys
import threading
import tracemalloc
import warnings
from contextlib import contextmanager, redirect_stderr, redirect_stdout

import numpy as np

__all__ = ["TimeLimit", "time_limit", "ProcessEnd", "exits_refused", "captured_output", "guarded", "peak_bytes"]


class TimeLimit(Exception):
    """A case ran past its time limit."""


@contextmanager
def time_limit(seconds: float | None):
    """Raise TimeLimit inside the block after `seconds` (on the main thread of a Unix process; else no limit)."""
    usable = (seconds and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def expire(signum, frame):
        raise TimeLimit(f"took longer than {seconds:g} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class ProcessEnd(Exception):
    """The learner's code called os._exit or os.abort, which would have ended the check with no word."""


@contextmanager
def exits_refused():
    """os._exit(n) and os.abort() raise ProcessEnd inside the block: a checked function returns its answer."""
    def refusal(name: str):
        def refuse(*args):
            call = f"os.{name}({', '.join(map(repr, args))})"
            raise ProcessEnd(f"{call} would end the check here with no word: a checked function returns its answer")
        return refuse
    saved = os._exit, os.abort
    os._exit, os.abort = refusal("_exit"), refusal("abort")
    try:
        yield
    finally:
        os._exit, os.abort = saved


@contextmanager
def captured_output(buffer: io.StringIO):
    """What the block prints goes to `buffer`, not the report, and input() reads nothing (EOFError)."""
    stdin = sys.stdin
    sys.stdin = io.StringIO("")
    try:
        with redirect_stdout(buffer), redirect_stderr(buffer):
            yield
    finally:
        sys.stdin = stdin


@contextmanager
def guarded(seconds: float | None, buffer: io.StringIO):
    """Around each call of a learner's function: the time limit, its prints into `buffer`, exits refused, and
    warnings and NumPy's floating-point errors silenced (an overflow in the learner's exp: the hint says more)."""
    with (time_limit(seconds), warnings.catch_warnings(), np.errstate(all="ignore"), captured_output(buffer),
          exits_refused()):
        warnings.simplefilter("ignore")
        yield


@contextmanager
def peak_bytes():
    """Yields a list that holds, after the block, the most bytes the block held at once (tracemalloc, which NumPy
    reports its arrays to)."""
    held = [0]
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        yield held
    finally:
        held[0] = tracemalloc.get_traced_memory()[1] - base
        if not tracing:
            tracemalloc.stop()
