"""Text from files and users written out as text: on a terminal and in a CSV, never run.

A name, job id or warning read from a file may hold an escape sequence (ESC [ 2 J clears a screen, others
set a window title or a hyperlink): printed raw, it acts on the user's terminal. Every line Stash prints from
stored or given text goes through `printable`, and so does every text cell of a CSV Stash writes, its
backslashes doubled first so that an upload reads the text back whole (csv_escaped; cells.csv_text; the
DuckDB export through `escaped_characters`). A CSV cell that starts like a formula runs
in a spreadsheet: every CSV Stash writes passes its text cells through `formula_safe` after that.
"""

from __future__ import annotations

import functools
import re
import shlex

# C0 and C1 controls (but newline and tab, which lay out a table), the bidirectional overrides, and the line
# and paragraph separators (a line break to many readers: one cell read as two lines).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


# Control characters (C0, DEL, C1) and the bidirectional controls that reorder what a terminal shows.
_UNSAFE_CHARACTERS_RE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


# Invisible in a name, which then looks like another ("zw\u200bx" as "zwx"), or breaks its line: refused in
# names given now (a stored one of an older version is still read).
_INVISIBLE_RE = re.compile("[\u200b-\u200d\u2028\u2029\u2060\ufeff]")


def invisible_character(text: str) -> str | None:
    """The first invisible character of `text` (as U+XXXX), or None."""
    match = _INVISIBLE_RE.search(text)
    return f"U+{ord(match.group()):04X}" if match else None


def unsafe_character(text: str) -> str | None:
    """The first control or bidirectional-control character of `text` (as U+XXXX), or None: names, labels
    and ids are refused with it before they are stored or printed."""
    match = _UNSAFE_CHARACTERS_RE.search(text)
    return f"U+{ord(match.group()):04X}" if match else None


@functools.cache
def escaped_characters() -> tuple[str, ...]:
    """Every character `printable` escapes, for a writer that cannot call it per cell (the DuckDB CSV
    export); found once, when first asked, not at every start-up."""
    return tuple(chr(code) for code in range(0x2070) if _CONTROL.match(chr(code)))


def printable(text: str) -> str:
    """`text` with every control character written as \\xNN or \\uNNNN (newlines and tabs kept), and the bytes
    of a file name that is not UTF-8 as \\xNN (without_surrogates)."""
    text = without_surrogates(text)
    return _CONTROL.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def without_surrogates(text: str) -> str:
    """`text` as UTF-8 can hold it: a file name's bytes that are not UTF-8 (which Python keeps as lone
    surrogates, U+DC80..U+DCFF) written as \\xNN, any other lone surrogate as \\uXXXX. Printed raw, a
    surrogate fails the write; stored, DuckDB refuses the JSON that holds it."""
    if text.isascii() or not _SURROGATE.search(text):
        return text
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file name makes
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def one_line(value: object) -> str:
    """`value` as a cell or field of a line (a table row, a header): `printable`, and a newline or tab written
    as \\n or \\t too, so that a stored value can neither start a line of its own nor shift the columns."""
    return printable(str(value)).replace("\n", "\\n").replace("\t", "\\t")


def clipped(value: object, limit: int = 80, quoted: bool = False) -> str:
    """`value` as text (in quotes, as repr writes it, when `quoted`), or, when longer than `limit` characters,
    its start and end around "..." and its length, all of it within `limit` (unless repr escapes characters,
    or the limit is too small for the length: then as short as it can be, never longer than the value): a
    message echoes a mistyped entry, not 5,000 characters pasted into a field."""
    text = str(value)
    whole = repr(text) if quoted else text
    if len(text) <= limit:
        return whole
    length = f" ({len(text)} characters)"
    room = max(limit - len(length) - len("...") - (2 if quoted else 0), 2)
    head = (room + 1) // 2
    shown = f"{text[:head]}...{text[-(room - head) :]}"
    cut = f"{repr(shown) if quoted else shown}{length}"
    return cut if len(cut) < len(whole) else whole  # a limit too small for the length said: the value itself


MESSAGE_CHARS = 300  # of an error's message: a line, not a data dump pasted into an exception


def named_message(name: str, message: str) -> str:
    """An error as 'Name: message' on one line: its lines and spaces joined, clipped to MESSAGE_CHARS with
    its start and end kept (a long message's cause is often its last words); the name alone without one."""
    text = clipped(" ".join(message.split()), MESSAGE_CHARS)
    return f"{name}: {text}" if text else name


def shell_word(text: str) -> str:
    """`text` as one word of a shell command to copy and paste: quoted where a shell would split or expand
    it (a space, $, a quote); with a control character (or a byte that is not UTF-8), a $'...' word (bash,
    zsh) that writes it as \\xNN, so that the line stays printable and still names the same file."""
    if not any(_unprintable_in_shell(char) for char in text):
        return shlex.quote(text)
    return "$'" + "".join(_in_dollar_quotes(char) for char in text) + "'"


def _unprintable_in_shell(char: str) -> bool:
    return bool(_CONTROL.match(char)) or char in "\n\t" or "\udc80" <= char <= "\udcff"


def _in_dollar_quotes(char: str) -> str:
    if _unprintable_in_shell(char):  # its bytes, each \\xNN
        return "".join(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogateescape"))
    return "\\" + char if char in "\\'" else char


# A spreadsheet reads a cell that starts with one of these as a formula (OWASP's CSV injection rule).
FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")


# A formula's lead after any quotes: such a cell gets one quote more, so that reading one off gives it back
# whole ("'=x", a value of its own, is written "''=x").
_QUOTED_FORMULA_RE = re.compile("^'*[" + re.escape("".join(FORMULA_LEADS)) + "]")


def csv_escaped(text: str) -> str:
    """A text cell of a CSV Stash writes: each backslash doubled, then `printable` (a control character as
    \\xNN, \\r or \\uNNNN), so that csv_unescaped gives the text back whole ("\\x1b" typed as text stays
    that text, an ESC comes back an ESC). The DuckDB export writes the same (store/export.py)."""
    return printable(text.replace("\\", "\\\\"))


_CSV_ESCAPE_RE = re.compile(r"\\(\\|r|x[0-9a-f]{2}|u[0-9a-f]{4})")


def csv_unescaped(text: str) -> str:
    """A text cell of a CSV Stash wrote (csv_escaped), as it was: \\\\ a backslash, \\r, \\xNN and \\uNNNN
    their characters; any other backslash as it stands (a CSV of an older version)."""
    if "\\" not in text:
        return text

    def character(match: re.Match[str]) -> str:
        code = match.group(1)
        if code == "\\":
            return "\\"
        return "\r" if code == "r" else chr(int(code[1:], 16))

    return _CSV_ESCAPE_RE.sub(character, text)


def formula_safe(value: object) -> object:
    """A text cell that a spreadsheet would run as a formula, prefixed with a quote; anything else as is."""
    if isinstance(value, str) and _QUOTED_FORMULA_RE.match(value):
        return "'" + value
    return value


def formula_unquoted(value: object) -> object:
    """A cell of a CSV that Stash wrote, as it was before formula_safe quoted it."""
    if isinstance(value, str) and value.startswith("'") and _QUOTED_FORMULA_RE.match(value):
        return value[1:]
    return value
