"""`python -m transformer check 03 | all [--workbook DIR]`: the package's cases on the learner's workbook.

    python -m transformer check 03                     # workbook/03_attention.py
    python -m transformer check all                    # every workbook file
    python -m transformer check 03 --workbook ~/mine   # a copy of the workbook elsewhere
    python -m transformer check 03 --watch             # check again at each save of the file, until Ctrl-C
    python -m transformer check all --on-model         # then SmolLM2-135M with every function of yours that passed

Each function's lines are printed as soon as its cases have run; the last line sums up the run
("9 failed, 15 passed, 2 not written"). Exit 0 when every function written so far passes (a stub still
raising NotImplementedError is "not written yet", not a failure); 1 when one fails or a file cannot be
imported.
"""
from __future__ import annotations

from pathlib import Path

def register(sub) -> None:
    p = sub.add_parser("check", help="check your workbook: the package's own test cases run on the functions you "
                                     "wrote in workbook/NN_*.py",
                       description="Import workbook/NN_*.py and run, for each function it holds, the cases the "
                                   "package's tests use (against the package and, when installed, torch). One line "
                                   "per function: passed, not written yet, or failed with what is wrong and a hint.")
    p.add_argument("lessons", nargs="+", metavar="LESSON",
                   help="lesson numbers (03, 3, 03_attention) or 'all'")
    p.add_argument("--workbook", metavar="DIR", default=None,
                   help="the workbook folder (default: ./workbook, else the repository's workbook/)")
    p.add_argument("--time-limit", type=float, default=None, metavar="S",
                   help="seconds one case may take before it counts as a loop that never ends (default 5)")
    p.add_argument("--no-torch", action="store_true", help="compare with the package only, even if torch is installed")
    p.add_argument("--watch", action="store_true",
                   help="stay and check again each time one of the files is saved (Ctrl-C stops)")
    p.add_argument("--on-model", action="store_true",
                   help="then run SmolLM2-135M with every function of yours that passed (embed, RoPE, attention, "
                        "heads, the mask, the KV cache, RMSNorm, SwiGLU …) in place of the package's, and compare "
                        "its logits and reply with the package's own; with lesson 18, also train lesson 19's "
                        "decoder with them and compare the losses")
    p.set_defaults(func=_check)


def workbook_folder(given: str | None) -> Path:
    """The folder to check: --workbook, else ./workbook, else the repository's own."""
    if given is not None:
        folder = Path(given).expanduser()
        if not folder.is_dir():
            raise ValueError(f"--workbook {given!r} is not a folder")
        return folder
    from ..tutor.run import WORKBOOK  # the repository's, beside the package (loaded by `check` already)

    for folder in (Path.cwd() / "workbook", WORKBOOK):
        if folder.is_dir():
            return folder
    raise ValueError("no workbook/ folder here: run from the repository root or pass --workbook DIR")


def chosen_lessons(names: list[str], files: dict, folder: Path) -> list[str]:
    """'all', '3', '03', '03_attention' or 'workbook/03_attention.py' -> ['03', …], in order, each once;
    files: the lesson files found in the workbook folder."""
    from ..tutor import LESSON_SPECS

    chosen = []
    for name in names:
        if name == "all":
            chosen += sorted(files)
            continue
        stem = Path(name).name.split("_")[0].removesuffix(".py")
        if not stem.isdigit() or len(stem) > 2:
            raise ValueError(f"LESSON must be a lesson number such as 03, or 'all'; got {name!r}")
        number = stem.zfill(2)
        if number not in LESSON_SPECS:
            raise ValueError(f"lesson {number} has no workbook file; the workbook covers "
                             f"{', '.join(sorted(LESSON_SPECS))}")
        if number not in files:
            raise ValueError(f"no workbook file for lesson {number} ({number}_*.py) in {folder}")
        chosen.append(number)
    return list(dict.fromkeys(chosen))


def _check(args) -> int:
    from ..tutor import workbook_files
    from ..tutor.isolated import check_isolated
    from ..tutor.report import format_summary
    from ..tutor.run import DEFAULT_TIME_LIMIT, lesson_files

    if args.time_limit is not None and not 0 < args.time_limit <= 86_400:  # setitimer refuses what time_t cannot hold
        raise ValueError(f"--time-limit must be a number of seconds more than 0 and at most 86400 (a day), "
                         f"got {args.time_limit:g}")
    folder = workbook_folder(args.workbook)
    lessons = chosen_lessons(args.lessons, lesson_files(folder), folder)
    files = workbook_files(folder, lessons)

    status = None  # the last whole check's: 0 when every function written so far passes, else 1
    bar = CaseBar()

    def check():
        nonlocal status
        # in a child process: code that crashes Python itself (ctypes, a bad as_strided) fails its function, at
        # the learner's line, and the check goes on in a new child
        reports = check_isolated(files, lessons, args.time_limit or DEFAULT_TIME_LIMIT, args.no_torch, bar.say,
                                 bar.case)
        status = 0 if all(report.ok for report in reports) else 1  # set before the last line is printed
        bar.say(format_summary(reports))
        if args.on_model:
            status = on_model(reports, {lesson: files[lesson] for lesson in lessons}, bar.say) or status

    if not args.watch:
        check()
        return status
    paths = [files[lesson] for lesson in lessons]
    seen = stamps(paths)  # before the check: a save while it runs is seen after it
    try:
        check()
        while True:
            saved, seen = next_save(paths, seen)
            print(f"\n{saved.name} was saved: checking again (Ctrl-C stops)", flush=True)
            check()
    except KeyboardInterrupt:  # the way out of --watch: the status of the last whole check, no "interrupted" line
        if status is None:  # stopped before any check ended: interrupted, as without --watch
            raise
        return status


def on_model(reports, checked: dict, say) -> int:
    """--on-model after the report: SmolLM2-135M with the decoder's functions that passed (lessons 01–07, 10),
    all-MiniLM-L6-v2 with the encoder's (01–05, 10, 12), and lesson 19's decoder trained with lesson 18's too (and
    its held-out accuracy scored by lesson 19's).
    1 when the learner's code raised or ran past its time in one of them."""
    from ..tutor.on_model import (ENCODER_FUNCTIONS, MODEL_FUNCTIONS, format_encoder_run, format_model_run,
                                  format_training_run, run_on_encoder, run_on_model, run_training)

    decoder = {lesson for lesson, _ in MODEL_FUNCTIONS.values()}
    encoder = {lesson for lesson, _ in ENCODER_FUNCTIONS.values()}
    if not (decoder | encoder | {"18", "19"}) & set(checked):
        say("\n--on-model uses the functions of lessons 01–07 and 10 (SmolLM2-135M answers with them), 12 (with "
            "them, all-MiniLM-L6-v2 embeds sentences), 18 and 19 (lesson 19's decoder trains with them): check one "
            "of these with it")
        return 0
    status = 0
    if decoder & set(checked):
        run = run_on_model(reports, checked)
        status = 1 if run.error.startswith("inside the model") else status
        say(format_model_run(run))
    if encoder & set(checked):
        embedded = run_on_encoder(reports, checked)
        status = 1 if embedded.error.startswith("inside the encoder") else status
        say(format_encoder_run(embedded))
    if {"18", "19"} & set(checked):  # the training step's functions: lesson 19's decoder trained by them
        trained = run_training(reports, checked)
        status = 1 if trained.error else status
        say(format_training_run(trained))
    return status


class CaseBar:
    """On a terminal, a bar under the report for the function being checked, a step a case, wiped before each line
    of the report: a function's lines come once all its cases have run, and counting the memory of a loop written
    number by number takes a minute under tracemalloc, in which nothing was printed. Nothing when stderr is not a
    terminal (a pipe, the tests) or TQDM_DISABLE is set."""

    def __init__(self):
        import sys

        from ..backend import progress_enabled

        self.bar, self.name = None, None
        self.shown = progress_enabled() and sys.stderr.isatty()

    def case(self, name: str, i: int, n: int, counting: bool):
        """Case i of n of `name` starts, or (counting) its memory is being counted."""
        if not self.shown:
            return
        from tqdm.auto import tqdm

        if self.name != name:
            self.say(None)
            self.bar, self.name = tqdm(total=n, desc=f"  {name}", unit="case", leave=False), name
        self.bar.n = i - 1
        self.bar.set_postfix_str("counting its memory (tracemalloc: slow for a loop of Python numbers)"
                                 if counting else "", refresh=False)
        self.bar.refresh()

    def say(self, text: str | None):
        """Wipe the bar, then print text (None: only wipe it)."""
        if self.bar is not None:
            self.bar.close()
            self.bar, self.name = None, None
        if text is not None:
            print(text, flush=True)


def stamps(paths: list[Path]) -> dict:
    """Each file's modification time (ns), None for one missing: an editor that saves by writing a new file and
    renaming it over the old one leaves the path missing for a moment."""
    import os

    def stamp(p):
        try:
            return os.stat(p).st_mtime_ns
        except FileNotFoundError:
            return None
    return {p: stamp(p) for p in paths}


def next_save(paths: list[Path], before: dict, every: float = 0.3) -> tuple[Path, dict]:
    """Wait until one of `paths` has another modification time than in `before`, and is there, and return it with
    the times then; a save in several writes is waited out until its time stops changing."""
    import time

    while True:
        now = stamps(paths)
        changed = [p for p in paths if now[p] is not None and now[p] != before[p]]
        if changed:
            time.sleep(every)
            later = stamps(paths)
            if later[changed[0]] == now[changed[0]]:  # no longer being written
                return changed[0], later
            continue
        time.sleep(every)
