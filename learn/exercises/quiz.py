"""Answer checking for the question exercises (topic `reading`, docs/learn/reading-flash-attention.md).

A question exercise's stub.py holds ANSWERS = {"q1": None, ...}; the learner replaces each None
with an int (a number), a short string (a name), or one letter (a multiple choice). Its check.py
holds only a fingerprint of each answer (EXPECTED = {"q1": "<16 hex digits>", ...}), so reading the
spec does not give the answers away; solution.py has them in clear.

Normalization before comparing: strings are stripped of surrounding whitespace, quotes, backticks
and a trailing "()", case-folded, and inner whitespace is collapsed to one space; "(c)" and "c)"
read as "c"; a string that is an integer literal counts as that integer. Numbers are exact: an int
(or an integral string), never a float, never a bool.

Grading: a wrong answer fails (check name = the question id, the message never reveals the answer);
otherwise the exercise is todo while any answer is still None.

To fingerprint a new answer:  python learn/exercises/quiz.py reading/<exercise> q<N> "<answer>"
"""

import hashlib
import re

from grading import Fail


def normalize(value):
    """The canonical string of an answer, or None if it has an unusable type."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        return None
    s = value.strip().strip("`'\"").strip()
    if s.endswith("()"):
        s = s[:-2]
    s = re.sub(r"\s+", " ", s).casefold()
    m = re.fullmatch(r"\(?([a-z])\)", s)  # "(c)" or "c)" -> "c"
    if m:
        s = m.group(1)
    if re.fullmatch(r"[+-]?\d+", s):
        s = str(int(s))
    return s


def fingerprint(exercise, qid, value):
    norm = normalize(value)
    if norm is None:
        return None
    return hashlib.sha256(f"flashlab-reading|{exercise}|{qid}|{norm}".encode()).hexdigest()[:16]


def check_answers(exercise, mod, expected):
    answers = getattr(mod, "ANSWERS", None)
    if not isinstance(answers, dict):
        raise Fail("answers", "stub.py must define ANSWERS = {'q1': ..., ...} (a dict)")
    missing = [q for q in expected if q not in answers]
    if missing:
        raise Fail("answers", f"ANSWERS lacks {', '.join(missing)}: keep every key of the stub")
    pending = False
    for qid, want in expected.items():
        got = answers[qid]
        if got is None:
            pending = True
            continue
        fp = fingerprint(exercise, qid, got)
        if fp is None:
            raise Fail(qid, f"{qid}: {got!r} has type {type(got).__name__}; give an int (a number), "
                            "a str (a name) or one letter (a multiple choice)")
        if fp != want:
            raise Fail(qid, f"{qid}: {got!r} is not the answer; re-read the part of the file the "
                            "guide points to")
    if pending:
        raise NotImplementedError("some answers are still None")


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[-1])
        sys.exit(2)
    ex, q, a = sys.argv[1:]
    print(fingerprint(ex, q, int(a) if re.fullmatch(r"[+-]?\d+", a.strip()) else a))
