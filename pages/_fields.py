"""Number fields checked on the page's action, not in the browser: a number typed past a bound there is kept
out of the form (a small red mark on the field) and the action then ran with the field's previous value, or
did nothing, with no word. Here any number is taken, and the action says which field is out of its bounds."""

from typing import Any

import streamlit as st


class CheckedNumbers:
    """The page's number fields and what their values break (one list per run of the page)."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def number(
        self, container: Any, label: str, low: float, high: float, value: float, **options: Any
    ) -> Any:
        """`container.number_input` without bounds; a value outside [low, high] is kept as a problem, unless
        the field is disabled (its value is not used)."""
        got = container.number_input(label, value=value, **options)
        if got is not None and not options.get("disabled") and not low <= got <= high:
            self.problems.append(f"{label}: must be from {_said(low)} to {_said(high)}, got {_said(got)}")
        return got

    def refused(self) -> bool:
        """Whether a field is out of its bounds, said as the page's error (the first one)."""
        if self.problems:
            st.error(self.problems[0], icon=":material/error:")
        return bool(self.problems)


def _said(number: float) -> str:
    """A bound or a value as typed: whole numbers in full with thousands marks (31,536,000, not 3.15e+07)."""
    whole = float(number).is_integer() and abs(number) < 1e15
    return f"{int(number):,}" if whole else f"{number:,g}"
