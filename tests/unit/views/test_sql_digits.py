"""A query's numbers on the SQL page: one a browser cannot hold exactly (past 2^53, or more than 15 digits)
is shown as its digits, right-aligned, not greyed and marked as a value the table could not show."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pandas as pd

from stash_core.views.sql import digits_as_text


def test_numbers_past_what_a_browser_holds_are_shown_as_their_digits() -> None:
    frame = pd.DataFrame({
        "big": np.array([2**53 + 1, 1], dtype="int64"),
        "low": np.array([-(2**63), 0], dtype="int64"),
        "unsigned": np.array([12345678901234567890, 3], dtype="uint64"),
        "huge": [Decimal("170141183460469231731687303715884105727"), None],
        "with_null": pd.Series([2**60, None], dtype=object),  # as the console gives a column with a NULL
        "small": np.array([5, 6], dtype="int64"),
        "exact": [Decimal("1.50"), Decimal("2.25")],
        "real": [0.1, 1e300],
    })  # fmt: skip
    shown, changed = digits_as_text(frame)
    assert changed == ["big", "low", "unsigned", "huge", "with_null"]
    assert shown["big"].tolist() == ["9007199254740993", "1"]
    assert shown["low"].iloc[0] == "-9223372036854775808"
    assert shown["unsigned"].iloc[0] == "12345678901234567890"
    assert shown["huge"].tolist() == ["170141183460469231731687303715884105727", None]
    assert shown["with_null"].tolist() == [str(2**60), None]
    # the rest as they were, and the query's own frame unchanged (its downloads keep the numbers)
    assert shown["small"].dtype == np.int64 and shown["exact"].iloc[0] == Decimal("1.50")
    assert frame["big"].dtype == np.int64 and isinstance(frame["huge"].iloc[0], Decimal)


def test_a_frame_of_numbers_a_browser_holds_is_shown_as_it_is() -> None:
    frame = pd.DataFrame({"n": [2**53, -(2**53)], "b": [True, False], "text": ["1" * 40, None]})
    shown, changed = digits_as_text(frame)
    assert changed == [] and shown is frame
