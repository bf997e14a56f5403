"""Final-answer extraction: the content of the last `\\boxed{...}` in a response (MATH / PRM800K convention).

Linear time on any input: the search is `str.rfind` (C speed) and brace matching walks only the braces after the
chosen box, through one compiled character-class regex (no backtracking).
"""

from __future__ import annotations

import re

_COMMANDS = ("\\boxed", "\\fbox")
# An escaped brace (`\{`, `\}`, e.g. in `\left\{ ... \right.`) is text, not grouping, and `\\` is a line break
# (so `\\{` opens a group): two-character tokens are matched first and skipped.
_BRACE = re.compile(r"\\[{}\\]|[{}]")
_LETTER = re.compile(r"[A-Za-z]")
_BLANK = re.compile(r"[ \t]*")
_BARE_END = re.compile(r"[$\n]")


def _match_braces(text: str, open_at: int) -> int | None:
    """Index of the `}` closing the `{` at `open_at`, or None when the group never closes."""
    depth = 0
    for m in _BRACE.finditer(text, open_at):
        tok = m.group()
        if len(tok) == 2:  # `\{`, `\}` or `\\`
            continue
        depth += 1 if tok == "{" else -1
        if depth == 0:
            return m.start()
    return None


def last_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` / `\\fbox{...}` in `text`, brace-matched, or None.

    Also reads the brace-less form `\\boxed 9` (content runs to the next `$` or newline). An occurrence that is not a
    box command (e.g. `\\boxedx`) is skipped and the search goes on to earlier ones. When the last box never closes
    (a truncated response), the answer is None: falling back to an earlier box would reward an intermediate result.
    Unbalanced braces elsewhere are ignored; escaped braces `\\{ \\}` do not count. Content is stripped of outer
    whitespace; `\\boxed{}` gives "".
    """
    if not isinstance(text, str):
        raise TypeError(f"last_boxed expects str, got {type(text).__name__}")
    # Last position of each command; only the one just consumed is searched again, so the total rfind work stays
    # linear even on text made of thousands of `\boxedx` decoys.
    last = {cmd: text.rfind(cmd) for cmd in _COMMANDS}
    while True:
        cmd = max(last, key=last.__getitem__)
        start = last[cmd]
        if start < 0:
            return None
        last[cmd] = text.rfind(cmd, 0, start)
        pos = start + len(cmd)
        if _LETTER.match(text, pos):  # `\boxedx`, `\fboxes`: another command
            continue
        body = _BLANK.match(text, pos).end()
        if body < len(text) and text[body] == "{":
            close = _match_braces(text, body)
            return None if close is None else text[body + 1 : close].strip()
        if body > pos:  # `\boxed 9`: at least one space, then the bare answer up to `$` or newline
            stop = _BARE_END.search(text, body)
            content = text[body : stop.start() if stop else len(text)].strip()
            if content:
                return content
        # `\boxed` with no argument: look further back
