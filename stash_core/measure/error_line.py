"""One line for a worker's or a script's error, as the launcher prints and stores it: the whole message on
one line (torch's and the user's messages put the cause on their second line: "Error(s) in loading
state_dict for Linear:" and then which tensor), and for a DataLoader process's error its own message instead
of torch's "Caught X in DataLoader worker process N."."""

from __future__ import annotations

import re
from pathlib import Path

from stash_core.terminal import MESSAGE_CHARS, clipped, named_message

_EXCEPTION_LINE = re.compile(r"([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning))(?::\s*(.*))?$")


def error_line(error: BaseException) -> str:
    """'Type: message' on one line (its lines joined); an error of a DataLoader process as its own type and
    message, '(in a data loader process)'."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if lines and lines[0].startswith("Caught ") and " in DataLoader worker process " in lines[0]:
        # torch re-raises it as "Caught X in DataLoader worker process N." + the traceback, which ends with
        # "module.X: message" (its further lines after it) or a bare "module.X".
        for index in range(len(lines) - 1, 0, -1):
            said = _EXCEPTION_LINE.match(lines[index])
            if said:
                name = said.group(1).rsplit(".", 1)[-1]
                named = named_message(name, " ".join([said.group(2) or "", *lines[index + 1 :]]))
                return f"{named} (in a data loader process)"
        return f"{clipped(lines[-1], MESSAGE_CHARS)} (in a data loader process)"
    return named_message(type(error).__name__, " ".join(lines))


def raised_at(error: BaseException, path: Path) -> str:
    """' at train.py line 13': the script's own last line the error passed through ('' where none did)."""
    line = None
    frame = error.__traceback__
    while frame is not None:
        if frame.tb_frame.f_code.co_filename == str(path):
            line = frame.tb_lineno
        frame = frame.tb_next
    return "" if line is None else f" at {path.name} line {line}"
