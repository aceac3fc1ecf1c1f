"""stash_core.units: the one coercion of numbers."""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

from stash_core.units import finite_float, json_safe


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, 3.0),
        (2.5, 2.5),
        (-0.25, -0.25),
        (np.int64(7), 7.0),
        (np.float32(1.5), 1.5),
        (np.float64(0.1), 0.1),
        (Decimal("1.25"), 1.25),
        ("2.5", 2.5),
        (" 1e3 ", 1000.0),
    ],
)
def test_finite_float_of_numbers_and_numeric_text(value, expected):
    number = finite_float(value)
    assert type(number) is float
    assert number == expected


@pytest.mark.parametrize(
    "value",
    [
        None,
        math.nan,
        math.inf,
        -math.inf,
        np.float64("nan"),
        np.float32("inf"),
        "nan",
        "-inf",
        True,
        False,
        np.bool_(True),
        pd.NA,
        pd.NaT,
        "cheap",
        "",
        b"1",
        [1.0],
        {"x": 1},
        10**400,
        pd.Timestamp("2026-01-01"),
    ],
)
def test_finite_float_is_none_for_missing_infinite_and_non_numbers(value):
    assert finite_float(value) is None


@pytest.mark.parametrize(
    ("text", "parts"),
    [("3,224,224", ["3", "224", "224"]), ("3x32x32", ["3", "32", "32"]), ("(3, 32, 32)", ["3", "32", "32"]),
     ("128", ["128"]), ("3 32 32", ["3", "32", "32"]), ("3,x", None), ("3,,16", None), ("3,32,x,32", None),
     ("", None), ("3.5,2", None), ("3,-1", None), ("３,32", None)],
)  # fmt: skip
def test_shape_parts_never_shorten_a_shape(text, parts):
    from stash_core.units import shape_parts

    assert shape_parts(text) == parts


def test_json_safe_drops_non_finite_numbers_at_any_depth():
    value = {"a": math.nan, "b": [1.5, math.inf, (2, -math.inf)], "c": "nan", "d": 3}
    assert json_safe(value) == {"a": None, "b": [1.5, None, [2, None]], "c": "nan", "d": 3}


def test_two_costs_side_by_side_never_read_alike_unless_equal():
    from stash_core.units import usd_words_apart

    assert usd_words_apart(0.1791, 0.1794) == ("$0.1791", "$0.1794")  # usd_words gives $0.179 for both
    assert usd_words_apart(1234.5, 1234.5001) == ("$1,234.5000", "$1,234.5001")
    assert usd_words_apart(0.5, 2.0) == ("$0.500", "$2.00")  # apart already: as usd_words
    assert usd_words_apart(10.0, 10.0) == ("$10.00", "$10.00")


def test_a_duration_within_a_budget_is_never_shown_over_it() -> None:
    from stash_core.units import duration_words

    assert duration_words(15.97 * 3600) == "16.0 h"
    assert duration_words(15.97 * 3600, within_s=15.98 * 3600) == "15.97 h"
    assert duration_words(15.9799 * 3600, within_s=15.98 * 3600) == "15.98 h"  # the budget itself
    assert duration_words(15.97 * 3600, within_s=20 * 3600) == "16.0 h"  # rounding stays under: as before
    assert duration_words(17 * 3600, within_s=15.98 * 3600) == "17.0 h"  # over the budget: said as it is
    shown = (duration_words(0.5), duration_words(42), duration_words(200 * 86400))
    assert shown == ("0.50 s", "42 s", "200 d")


def test_a_limit_the_user_gave_is_said_without_zeros_they_did_not_give() -> None:
    from stash_core.units import usd_limit_words

    # "$0.0100 limit" read as a figure to three digits, for a limit typed as 0.01
    said = [usd_limit_words(usd) for usd in (0.01, 0.0125, 5, 0.1, 1234.5, None)]
    assert said == ["$0.01", "$0.0125", "$5.00", "$0.10", "$1,234.50", "-"]
