"""Number fields checked on the page's action, not in the browser: a number typed past a bound there is kept
out of the form (a small red mark on the field) and the action then ran with the field's previous value, or
did nothing, with no word. Here any number is taken, and the action says which field is out of its bounds."""

from typing import Any

import streamlit as st

# A whole-number field as a number input of any value: the browser's whole-number input reads 2.5 as 2 and
# 1e12 as 1, without a word; so any number is taken (shown unrounded) and a check refuses one not whole.
WHOLE = {"step": 1.0, "format": "%.12g"}


def as_typed(number: float | None) -> int | float | None:
    """A number of a WHOLE field: an int when whole, else as typed (for its check to refuse); one past any
    field's bound stays a float (1e300 would be said in 301 digits)."""
    whole = number is not None and float(number).is_integer() and abs(number) < 2**53
    return int(number) if whole else number


class CheckedNumbers:
    """The page's number fields and what their values break (one list per run of the page)."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def number(
        self, container: Any, label: str, low: float, high: float, value: float, **options: Any
    ) -> Any:
        """`container.number_input` without bounds; a value outside [low, high] is kept as a problem, unless
        the field is disabled (its value is not used). A field whose default is a whole number takes whole
        numbers (an int back), but as a number input of any value: the browser's whole-number input reads
        2.5 as 2 and 1e12 as 1, so 2.5 is a problem here instead."""
        whole = isinstance(value, int) and not isinstance(value, bool) and "format" not in options
        if whole:
            options = {**options, **WHOLE, "step": float(options.get("step", 1))}
        got = container.number_input(label, value=float(value) if whole else value, **options)
        if got is None or options.get("disabled"):
            return got
        if whole and not float(got).is_integer():
            self.problems.append(f"{label}: must be a whole number, got {_said(got)}")
            return got
        if not low <= got <= high:
            self.problems.append(f"{label}: must be from {_said(low)} to {_said(high)}, got {_said(got)}")
        return as_typed(got) if whole else got

    def refused(self) -> bool:
        """Whether a field is out of its bounds, said as the page's error (the first one)."""
        if self.problems:
            st.error(self.problems[0], icon=":material/error:")
        return bool(self.problems)


def _said(number: float) -> str:
    """A bound or a value as typed: whole numbers in full with thousands marks (31,536,000, not 3.15e+07)."""
    whole = float(number).is_integer() and abs(number) < 1e15
    return f"{int(number):,}" if whole else f"{number:,g}"
