"""Column widths that keep a table inside the page: a table whose columns would be wider than the space a
page gives it (784 px or more in a 1280 px window) gets its text columns narrowed to share what is left, and
their text wrapped over taller rows, instead of scrolling sideways with its right-hand columns cut off.
Columns of short text (dates, "8/8") keep their width, as numbers do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import pandas as pd

# The width a page's table is given in a 1280 px window, less a margin for the grid's own borders.
TABLE_BUDGET_PX = 770
CHAR_PX = 6.2  # one character of the grid's font, on average (measured on its headings and cells)
PAD_PX = 22  # a cell's padding
MIN_TEXT_PX = 80  # a narrowed text column is never narrower, nor narrower than its heading
NARROWEST_TEXT_PX = 50  # ... unless the table has too many text columns for that
EDITOR_ICON_PX = 22  # an editable table's headings start with an icon
WRAP_LINES = 3  # lines a wrapped row holds at least (pages/_shared.WRAPPED_ROW_HEIGHT_PX)
MOST_WRAP_LINES = 8  # ... and at most: a longer cell is cut (its whole text is in the cell's tooltip)
MOST_FEW_ROWS_LINES = 16  # ... or up to this in a table of few rows, TABLE_LINES lines in all
TABLE_LINES = 32
LINE_PX = 20  # a wrapped line of the grid's font
ROW_PAD_PX = 6
HEADER_PX = 36  # the grid's heading row
TALL_ROWS_SHOWN = 10
SAMPLE_ROWS = 200


def natural_width(frame: pd.DataFrame, column: Any, heading: str, heading_extra_px: int = 0) -> int:
    """About how wide the grid draws a column: its heading or its longest cell (of the first rows)."""
    cells = frame[column].head(SAMPLE_ROWS)
    longest = max((len(_cell_text(value)) for value in cells), default=0)
    return int(max(len(heading) * CHAR_PX + heading_extra_px, longest * CHAR_PX) + PAD_PX)


def heading_width(heading: str, heading_extra_px: int = 0) -> int:
    return int(len(heading) * CHAR_PX + heading_extra_px + PAD_PX)


def fitted_widths(
    frame: pd.DataFrame,
    headings: Mapping[Any, str],
    budget_px: int = TABLE_BUDGET_PX,
    heading_extra_px: int = 0,
) -> tuple[dict[Any, int], bool]:
    """Pixel widths for the columns of a table that would not fit `budget_px`, and whether its text must
    wrap; ({}, False) for one that fits as it is. Number columns keep their width and the widest text
    columns are narrowed to one width that makes the table fit (narrow ones keep theirs), never below their
    heading nor MIN_TEXT_PX (NARROWEST_TEXT_PX when that is too wide); when that is not enough, the widest
    columns of any kind are (their headings may then be cut, never a column)."""
    named = {column: headings.get(column, str(column)) for column in frame}
    widths = {column: natural_width(frame, column, named[column], heading_extra_px) for column in frame}
    if sum(widths.values()) <= budget_px:
        return {}, False
    text = {column: widths[column] for column in frame if _narrowable(frame[column])}
    room = budget_px - sum(width for column, width in widths.items() if column not in text)
    for least, words in ((MIN_TEXT_PX, True), (NARROWEST_TEXT_PX, False)):  # as narrow as headings allow
        # first as wide as the longest word too (up to WORD_FLOOR_PX): "leave-one-mo del-out" read as two
        floors = {column: max(least, heading_width(named[column], heading_extra_px),
                              _longest_word_px(frame[column]) if words else 0)
                  for column in text}  # fmt: skip
        cap = _level(list(text.values()), room, list(floors.values()))
        fitted = {column: min(width, max(cap, floors[column])) for column, width in text.items()}
        if text and sum(fitted.values()) <= room:
            return {**widths, **fitted}, True
    # Still too wide: the widest columns are cut to one width, their headings too, but never a number's or a
    # short text's cells (a cut figure or date reads as another value): the table may then scroll sideways.
    floors = {column: 40 if column in text else max(40, _cells_width(frame, column)) for column in widths}
    cap = _level(list(widths.values()), budget_px, list(floors.values()))
    narrowed = {column: max(floors[column], min(width, cap)) for column, width in widths.items()}
    return narrowed, any(text[column] > cap for column in text)


WORD_FLOOR_PX = 160  # a longer word (a path, an id) may be broken rather than widen its column further


def _longest_word_px(series: pd.Series) -> int:
    """The width of a text column's longest word (of the first rows), up to WORD_FLOOR_PX."""
    longest = max((len(word) for value in series.head(SAMPLE_ROWS) for word in _cell_text(value).split()),
                  default=0)  # fmt: skip
    return min(int(longest * CHAR_PX * WIDE_TEXT + PAD_PX), WORD_FLOOR_PX)


def _cells_width(frame: pd.DataFrame, column: Any) -> int:
    """The width of a column's longest cell (of the first rows), without its heading."""
    cells = frame[column].head(SAMPLE_ROWS)
    return int(max((len(_cell_text(value)) for value in cells), default=0) * CHAR_PX + PAD_PX)


def wrapped_row_px(frame: pd.DataFrame, widths: Mapping[Any, int]) -> int:
    """A row height that holds the longest text cell's wrapped lines at its column's width (WRAP_LINES to
    MOST_WRAP_LINES): three lines cut a longer note off mid-sentence."""
    lines = WRAP_LINES
    for column, width in widths.items():
        if column in frame and _is_text(frame[column]):
            room_chars = max(int((width - PAD_PX) / (CHAR_PX * WIDE_TEXT)), 1)
            cells = frame[column].head(SAMPLE_ROWS)
            lines = max([lines, *(wrapped_lines(_cell_text(value), room_chars) for value in cells)])
    # a table of few rows may take taller ones: its note is then read whole, not in its tooltip
    most = min(max(TABLE_LINES // max(len(frame), 1), MOST_WRAP_LINES), MOST_FEW_ROWS_LINES)
    return min(lines, most) * LINE_PX + ROW_PAD_PX


WIDE_TEXT = 1.05  # a line of words is wider than its characters' average (capitals, digits)


def wrapped_lines(text: str, room_chars: int) -> int:
    """The lines `text` takes wrapped at word boundaries in lines of `room_chars` characters (a word longer
    than a line is broken, as the grid breaks it): a word that does not fit moves the line's end forward."""
    lines, used = 1, 0
    for word in text.split():
        if used and used + 1 + len(word) > room_chars:
            lines, used = lines + 1, 0
        if used:
            used += 1
        lines += max(len(word) - 1, 0) // room_chars  # a word wider than a line takes more of them
        used += (len(word) - 1) % room_chars + 1  # what its last line holds of it
    return lines


def table_height_px(rows: int, row_px: int) -> int:
    """A table's height that shows up to TALL_ROWS_SHOWN rows of `row_px` whole, then scrolls: the grid's
    "auto" height is ten rows of its own height, fewer (the last cut) of taller rows."""
    return HEADER_PX + min(rows, TALL_ROWS_SHOWN) * row_px + 2


def _level(widths: list[int], room: float, floors: list[int] | None = None) -> int:
    """The largest width C such that the widths, each cut to C (but not below its floor), add up to at most
    `room` (0 when none does)."""
    floors = floors or [0] * len(widths)

    def total(cap: int) -> int:
        return sum(min(width, max(cap, floor)) for width, floor in zip(widths, floors, strict=True))

    low, high = 0, max(widths, default=0)
    while low < high:
        middle = (low + high + 1) // 2
        if total(middle) <= room:
            low = middle
        else:
            high = middle - 1
    return low


SHORT_TEXT_CHARS = 12  # a date ("2026-11-25"), a count ("8/8"): kept whole, as a number is


def _narrowable(series: pd.Series) -> bool:
    """A text column that wraps readably: not one of short cells, which wrapped or cut reads as another value
    ("2026-11-2")."""
    cells = series.head(SAMPLE_ROWS)
    return _is_text(series) and max((len(_cell_text(value)) for value in cells), default=0) > SHORT_TEXT_CHARS


def _is_text(series: pd.Series) -> bool:
    """Not numbers, truth values or times (a time the grid draws on one line, and cuts: "2026-12-0")."""
    types = pd.api.types
    return not (types.is_numeric_dtype(series) or types.is_bool_dtype(series)
                or types.is_datetime64_any_dtype(series))  # fmt: skip


def _cell_text(value: Any) -> str:
    if isinstance(value, (pd.Timestamp, datetime)):
        return "2026-01-01 00:00"  # as the pages show times: to the minute
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.4g}"
    return "" if value is None else str(value)
