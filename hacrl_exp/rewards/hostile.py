"""Hostile model outputs the grader must survive (docs/reliability.md): megabytes of text, 10,000-deep `\\frac`,
power towers, huge factorials, deep parentheses, unbalanced braces, null bytes and unicode junk.

Each is graded against `GOLD` and must get reward 0 within the grader's timeout, a stuck worker killed and replaced.
tests/reliability/test_hostile_outputs.py asserts it; `python -m benchmarks.reliability` times each one. Importing
this module builds about 20 MB of strings: only the test and the benchmark import it.
"""

from __future__ import annotations

GOLD = "42"

HOSTILE = {  # name: (response, reasons it may get)
    "10 MB of prose, box at the end": ("x" * 10_000_000 + " so \\boxed{7}", {"wrong"}),
    "10 MB inside one box": ("\\boxed{" + "1" * 10_000_000 + "}", {"no_answer"}),
    "\\frac nested 10,000 deep": ("\\boxed{" + "\\frac{1}{" * 10_000 + "2" + "}" * 10_001, {"no_answer"}),
    "\\frac nested 1,500 deep": ("\\boxed{" + "\\frac{1}{" * 1_500 + "2" + "}" * 1_501, {"timeout", "grader_error"}),
    "power tower 9^{9^{9^{9}}}": ("\\boxed{9^{9^{9^{9}}}}", {"timeout"}),
    "10**10**10": ("\\boxed{10**10**10}", {"wrong", "timeout"}),
    "huge factorial": ("\\boxed{(10^{10})!}", {"timeout"}),
    "5,000 nested parentheses": ("\\boxed{" + "(" * 5_000 + "1" + ")" * 5_000 + "}", {"timeout", "grader_error"}),
    "unbalanced braces": ("\\boxed{{{{{{1}", {"no_answer"}),
    "null bytes": ("\\boxed{4\x00\x002}", {"wrong", "grader_error"}),
    "unicode junk": ("\\boxed{\u202e\ufeff\U0001f4a9\u0301\udc80}", {"wrong", "grader_error"}),
    "a 5,000-digit number": ("\\boxed{" + "9" * 5_000 + "}", {"wrong"}),
}
"""name: (response, the grade reasons it may get)."""
