"""The workbook's checker: the package's own cases run on a learner's code, with what is wrong said in words.

`python -m transformer check 03` runs it on `workbook/03_attention.py` (see workbook/README.md).
"""
from .run import LESSON_SPECS, FileReport, Result, check_file, check_function, format_report, workbook_files

__all__ = ["LESSON_SPECS", "FileReport", "Result", "check_file", "check_function", "format_report",
           "workbook_files"]
