"""What the checker says of a case whose input must be refused (`Case.refuses`): no answer is compared, and the
learner's call must raise the exception the case asks for, with a message a caller can act on."""
from __future__ import annotations

import re

from .cases import Case
from .compare import kind_of
from .report import CaseFailure

__all__ = ["NUMPY_OWN", "refusal_failure"]

# the messages of NumPy's own errors, raised where bad input breaks a step: the right type, but the caller learns
# nothing of what was wrong with their input
NUMPY_OWN = (r"could not broadcast|cannot reshape array|operands could not be broadcast|is out of bounds for axis|"
             r"not aligned|mismatch in its core dimension|setting an array element with a sequence")


def refusal_failure(case: Case, kind: str, value, raised: str) -> CaseFailure | None:
    """None when the learner's call refused the case's input with the exception asked for, in words that name a number
    at fault; else what it did. kind: "ok" or "raised" (value: the answer or the exception); raised: the checker's
    lines for the exception ('raised ValueError: …', the learner's line), or ''."""
    wanted = case.refuses.__name__
    if kind == "raised" and isinstance(value, case.refuses):
        said = str(value)
        if re.search(NUMPY_OWN, said):
            return CaseFailure(case.label, f"{raised}\nthe right exception, but NumPy's own, raised where the input "
                               f"broke a step: check the input first and say what is wrong with it, {case.refusal}",
                               "refused", case=case, value=value)
        if not case.names or any(re.search(rf"(?<![\w.]){re.escape(str(n))}(?![\w.])", said) for n in case.names):
            return None
        numbers = " or ".join(str(n) for n in case.names)
        return CaseFailure(case.label, f"{raised}\nthe right exception, but its message names none of the numbers at "
                           f"fault ({numbers}): say what is wrong in the caller's terms, {case.refusal}", "refused",
                           case=case, value=value)
    if kind == "raised":
        return CaseFailure(case.label, f"{raised}\nwhere a {wanted} should say it: {case.refusal}", "raised",
                           case=case, value=value)
    returned = "None" if value is None else kind_of(value)
    return CaseFailure(case.label, f"returned {returned} where it must refuse the input: {case.refusal}; "
                       f"raise {wanted} with a message that names the bad value", "refused", case=case, value=value)

