"""Column widths that keep a table inside the page: a table that fits is left alone; a wider one is narrowed
to the budget, its number columns kept, its text columns no narrower than their headings, and wrapped."""

from __future__ import annotations

import pandas as pd

from stash_core.views.table_fit import (
    LINE_PX,
    MOST_FEW_ROWS_LINES,
    MOST_WRAP_LINES,
    TABLE_BUDGET_PX,
    fitted_widths,
    heading_width,
    natural_width,
    table_height_px,
    wrapped_row_px,
)

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


def test_a_column_of_short_text_keeps_its_width_as_a_number_does() -> None:
    """The Recommend table's price date was cut to "2026-11-2" (read as 2 November) to make room."""
    names = ("rank", "comm_error", "hours", "usd", "usd_per_h", "iteration_s")
    figures = {name: [1234.5678] for name in names}
    frame = pd.DataFrame({"config": ["1 x Standard_NC4as_T4_v3"], "accelerator": ["NVIDIA T4 16 GB"],
                          "gpus": ["8/8"], "source": ["◇ predicted"], **figures, "price_date": ["2026-11-25"],
                          "note": [SENTENCE * 3], "basis": [SENTENCE * 2]})  # fmt: skip
    widths, wrap = fitted_widths(frame, {"price_date": "price of"})
    assert wrap
    assert widths["price_date"] == natural_width(frame, "price_date", "price of")
    assert widths["gpus"] == natural_width(frame, "gpus", "gpus")
    assert widths["note"] < natural_width(frame, "note", "note")  # the long text made the room


def test_many_columns_are_all_narrowed_rather_than_any_cut_off() -> None:
    frame = pd.DataFrame({f"a_rather_long_heading_{index}_s": [1.0] for index in range(15)})
    widths, _ = fitted_widths(frame, {})
    assert len(widths) == 15 and sum(widths.values()) <= TABLE_BUDGET_PX


def test_a_row_is_as_tall_as_its_longest_wrapped_cell_within_bounds() -> None:
    """Three lines a row cut a longer note off mid-sentence (the stall table's "not separated" row)."""
    short = pd.DataFrame({"note": ["ok"], "n": [1.0]})
    assert wrapped_row_px(short, {"note": 200}) == 3 * LINE_PX + 6  # never below three lines
    note = "iteration time minus the named stalls: disk -0.0136 s (within the noise, reported as 0) " * 2
    tall = wrapped_row_px(pd.DataFrame({"note": [note]}), {"note": 200})
    assert 5 * LINE_PX < tall <= MOST_WRAP_LINES * LINE_PX + 6
    huge = wrapped_row_px(pd.DataFrame({"note": [note * 20] * 10}), {"note": 200})
    assert huge == MOST_WRAP_LINES * LINE_PX + 6  # beyond it the cell's tooltip holds the rest
    alone = wrapped_row_px(pd.DataFrame({"note": [note * 20]}), {"note": 200})
    assert alone == MOST_FEW_ROWS_LINES * LINE_PX + 6  # one row may be taller: read whole on the page


def test_a_table_of_tall_rows_is_tall_enough_for_ten_of_them() -> None:
    """Streamlit's "auto" height is ten rows of its own height: six rows of 66 px showed five and a half."""
    assert table_height_px(6, 66) >= 36 + 6 * 66
    assert table_height_px(50, 66) == table_height_px(10, 66)


def test_wrapped_lines_are_counted_by_words_and_a_column_keeps_its_longest_word_whole() -> None:
    """The Models page cut a status after its eighth estimated line ("... 44.6 MiB; the") and broke
    "leave-one-model-out" in two: lines were estimated from the characters alone, and columns narrowed
    below their longest word."""
    from stash_core.views.table_fit import wrapped_lines

    assert wrapped_lines("aaa bbb ccc", 7) == 2 and wrapped_lines("aaa bbb ccc", 6) == 3
    assert wrapped_lines("abcdefghij", 4) == 3 and wrapped_lines("ab abcdefghij x", 4) == 4
    status = "measured inside the profiled range " * 6 + "leave-one-model-out"
    frame = pd.DataFrame({f"note_{index}": [status] for index in range(4)})
    widths, wrap = fitted_widths(frame, {})
    assert wrap and all(width >= len("leave-one-model-out") * 6.2 for width in widths.values())
