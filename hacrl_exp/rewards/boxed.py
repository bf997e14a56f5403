"""Final-answer extraction: the content of the last `\\boxed{...}` in a response (MATH / PRM800K convention), and
the boxes that end a response together (`final_boxes`, for answers in several parts).

Linear time on any input: the search is `str.rfind` (C speed) and brace matching walks only the braces after the
chosen box, through one compiled character-class regex (no backtracking).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

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


def _boxes_backwards(text: str) -> Iterator[tuple[int, int, str | None]]:
    """(start, end, content) of each box command in `text`, last first; content None (and end -1) when its group
    never closes. `end` is just past the closing brace (or the bare answer). Linear: each rfind searches only before
    the occurrence just consumed, so thousands of `\\boxedx` decoys cost one pass."""
    last = {cmd: text.rfind(cmd) for cmd in _COMMANDS}
    while True:
        cmd = max(last, key=last.__getitem__)
        start = last[cmd]
        if start < 0:
            return
        last[cmd] = text.rfind(cmd, 0, start)
        pos = start + len(cmd)
        if _LETTER.match(text, pos):  # `\boxedx`, `\fboxes`: another command
            continue
        body = _BLANK.match(text, pos).end()
        if body < len(text) and text[body] == "{":
            close = _match_braces(text, body)
            yield (start, -1, None) if close is None else (start, close + 1, text[body + 1 : close].strip())
        elif body > pos:  # `\boxed 9`: at least one space, then the bare answer up to `$` or newline
            stop = _BARE_END.search(text, body)
            end = stop.start() if stop else len(text)
            if text[body:end].strip():
                yield start, end, text[body:end].strip()
        # `\boxed` with no argument: look further back


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
    return next((content for _, _, content in _boxes_backwards(text)), None)


def final_boxes(text: str) -> list[str]:
    """The boxes that end `text` together, in order: the last box, and each box before it that only separators part
    from the next (`,` `;` spaces, `\\quad`, math delimiters, "and"/"or", `\\text{ and }`, a label such as `y_2 =`).
    `\\boxed{(2,2)} and \\boxed{(6,2)}` gives both; `\\boxed{1} no, wait: \\boxed{2}` and a sentence end between two
    boxes give only the last. [] when the last box is missing or never closes. At most MAX_FINAL_BOXES boxes."""
    boxes: list[str] = []
    next_start = -1
    for start, end, content in _boxes_backwards(text):
        if content is None or (boxes and not (0 <= end <= next_start)):
            break  # unclosed, or a box around the one after it
        if boxes and not _joins(text[end:next_start]):
            break
        boxes.insert(0, content)
        next_start = start
        if len(boxes) == MAX_FINAL_BOXES:
            break
    return boxes


MAX_FINAL_BOXES = 20
_MAX_GAP = 80
_JOINER = re.compile(
    r"(?:\s|[,;&~$]|\\[,;:! ()\[\]\\]|\\q?quad(?![A-Za-z])|\\text\s*\{\s*,?\s*(?:and|or)?\s*\}"
    r"|(?<![A-Za-z])(?:and|or)(?![A-Za-z])|[A-Za-z](?:_\{?\w{1,4}\}?)?\s*=)*"
)


def _joins(gap: str) -> bool:
    """The text between two boxes only separates them (see `final_boxes`); bounded: long gaps never join."""
    return len(gap) <= _MAX_GAP and _JOINER.fullmatch(gap) is not None
