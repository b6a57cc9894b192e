"""Writing a file so that a crash, a Ctrl-C or a symbolic link cannot damage what was there.

Every file the package writes (a checkpoint, metrics.json, a figure) goes through `write_atomic`:

    1. the bytes go to a new file beside the target, .NAME.RANDOM.tmp, in the same folder so that
       the rename below stays on one filesystem; it is created with O_EXCL | O_NOFOLLOW and mode
       0o666, which the umask trims as it trims any file `open(…, "w")` creates;
    2. it is flushed to the disk (fsync), then renamed over the target with os.replace, which is
       atomic on POSIX: a reader sees the old file or the new one, never half of one;
    3. on any failure, an interrupt included, the new file is removed and the target is untouched.

A target that is a symbolic link is refused, never followed: writing through it would overwrite
a file elsewhere, which the user did not name.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import signal
import threading
from pathlib import Path

__all__ = ["write_atomic", "check_writable_folder", "interrupts_deferred"]

NEW_FILE_MODE = 0o666  # what open(…, "w") asks for; the umask takes away the rest (0o644 with umask 022)


def refuse_link_or_folder(path: Path) -> None:
    """One line when path is a symbolic link (to anything, or dangling) or a folder."""
    if path.is_symlink():
        raise ValueError(f"{path} is a symbolic link (to {os.readlink(path)}): refusing to write through it to a "
                         "file elsewhere; remove the link or choose another folder")
    if path.is_dir():
        raise ValueError(f"{path} is a folder: cannot write the {path.name} there")


def new_temp_file(folder: Path, name: str):  # -> (fd, path) of a new, empty file beside the target
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    while True:  # 2⁶⁴ names: a clash is one more draw, not an error
        tmp = folder / f".{name}.{secrets.token_hex(8)}.tmp"
        try:
            return os.open(tmp, flags, NEW_FILE_MODE), tmp
        except FileExistsError:
            continue


def write_atomic(path, write) -> Path:
    """Write `path` by calling write(f) on a new binary file beside it, then renaming that file over
    it (see the module's docstring); return the path.

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "a.txt"
    >>> write_atomic(p, lambda f: f.write(b"hi")).read_bytes()
    b'hi'
    """
    path = Path(path)
    refuse_link_or_folder(path)
    fd, tmp = new_temp_file(path.parent, path.name)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())  # the bytes are on the disk before the name points at them
        os.replace(tmp, path)  # renames the link itself if one appeared since the check: never follows it
    except BaseException:  # KeyboardInterrupt too: no .tmp file is left behind
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def check_writable_folder(folder, names=()) -> Path:
    """Make sure `folder` can receive the files `names` before any work is spent on them: create it
    (and its parents), write and remove a probe file in it, and refuse a name that is a symbolic
    link or a folder. One line naming the folder or the file; returns the folder."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder} exists and is not a folder: the files are written into a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = new_temp_file(folder, "probe")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise PermissionError(f"cannot write into {folder}: {e.strerror or e}; choose another output folder") from None
    for name in names:
        refuse_link_or_folder(folder / name)
    return folder


@contextlib.contextmanager
def interrupts_deferred():
    """Hold a Ctrl-C (SIGINT) until the block ends, then raise it: files written together (a
    checkpoint and its metrics) are all new or all old. Outside the main thread, where Python
    delivers no signal, the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught and callable(previous):  # Python's own handler raises KeyboardInterrupt; SIG_IGN does nothing
        previous(signal.SIGINT, None)
