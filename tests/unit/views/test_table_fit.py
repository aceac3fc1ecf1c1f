"""Column widths that keep a table inside the page: a table that fits is left alone; a wider one is narrowed
to the budget, its number columns kept, its text columns no narrower than their headings, and wrapped."""

from __future__ import annotations

import pandas as pd

from stash_core.views.table_fit import TABLE_BUDGET_PX, fitted_widths, heading_width, natural_width

SENTENCE = "not enough profiles (2 of 4 needed, each of a different model)"


def test_a_table_that_fits_is_left_alone() -> None:
    assert fitted_widths(pd.DataFrame({"phase": ["R0"], "mean_s": [0.2]}), {"mean_s": "mean (s)"}) == (
        {},
        False,
    )


def test_a_wide_table_is_narrowed_to_the_page_with_its_headings_whole() -> None:
    frame = pd.DataFrame({"best": [False], "model": ["linear: tensors"], "points": [2], "r2": [SENTENCE],
                          "lomo_mape": [SENTENCE], "lobo_mape": [SENTENCE],
                          "note": [SENTENCE * 3]})  # fmt: skip
    headings = {"r2": "R²", "lomo_mape": "error, model out", "lobo_mape": "error, bandwidth out"}
    widths, wrap = fitted_widths(frame, headings)
    assert wrap and sum(widths.values()) <= TABLE_BUDGET_PX
    for column in ("lomo_mape", "lobo_mape"):
        assert widths[column] >= heading_width(headings[column])
    assert widths["points"] == natural_width(frame, "points", "points")  # numbers keep their width


def test_many_columns_are_all_narrowed_rather_than_any_cut_off() -> None:
    frame = pd.DataFrame({f"a_rather_long_heading_{index}_s": [1.0] for index in range(15)})
    widths, _ = fitted_widths(frame, {})
    assert len(widths) == 15 and sum(widths.values()) <= TABLE_BUDGET_PX
