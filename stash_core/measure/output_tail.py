"""The last lines a user's script wrote to stderr and stdout (measure/script_entry.py), kept for its failure
report: the result file's `phases[].stderr_tail` and `.stdout_tail`, and a hang's last words."""

from __future__ import annotations

import collections
import re
import time

TAIL_LINES = 20
TAIL_LINE_CHARS = 2000  # of each kept line, its end: a progress line written without a line end grows
LINE_END = re.compile(r"(\r\n|\r|\n)")


class OutputTail:
    """sys.stderr or sys.stdout, passed through, keeping its last lines (a failure reports them) in bounded
    memory and time per write, however much the script writes: a progress line redrawn with "\r" every step
    is one line, the latest, and no line is kept longer than TAIL_LINE_CHARS (its end)."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.lines: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.partial = ""
        self.redrawn = False  # the last kept line ended with "\r": the next one is drawn over it
        self.written_at = 0.0  # time.monotonic() of its last write: which of two streams spoke last

    def write(self, text: str) -> int:
        if text.strip():  # a blank line is not the last thing said
            self.written_at = time.monotonic()
        if "\n" not in text and "\r" not in text:
            self.partial = (self.partial + text)[-TAIL_LINE_CHARS:]
        else:
            *whole, self.partial = LINE_END.split(self.partial[-TAIL_LINE_CHARS:] + text)
            for line, end in zip(whole[::2], whole[1::2], strict=True):
                self.keep(line[-TAIL_LINE_CHARS:], redrawn=end == "\r")
            self.partial = self.partial[-TAIL_LINE_CHARS:]
        return self.stream.write(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def keep(self, line: str, redrawn: bool) -> None:
        if not line.strip():
            self.redrawn = self.redrawn and redrawn  # a line end moves on: the line drawn last stays
            return
        if self.redrawn and self.lines:
            self.lines.pop()  # a terminal shows only the line drawn over it
        self.lines.append(line)
        self.redrawn = redrawn

    def flush(self) -> None:
        self.stream.flush()

    def close(self) -> None:
        """A script that closes sys.stderr closes only its view: the failure report still needs it."""
        self.flush()

    def tail(self) -> list[str]:
        if not self.partial.strip():
            return list(self.lines)
        kept = list(self.lines)[:-1] if self.redrawn else list(self.lines)
        return [*kept, self.partial]

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def last_words(*tails: OutputTail) -> str:
    """'; its last output: "..."': the last line the script wrote to either stream ('' when none)."""
    spoken = [tail for tail in tails if tail.tail()]
    if not spoken:
        return ""
    line = max(spoken, key=lambda tail: tail.written_at).tail()[-1].strip()
    return f'; its last output: "{line[:300]}"'
