"""Page tables show no raw "None": every st.dataframe goes through pages/_shared.show_table (a missing value
as "—"), and a static st.table gets its frame from views.common.with_missing_shown."""

from __future__ import annotations

import re

import pandas as pd
from support import REPO

from stash_core.views.common import MISSING_TEXT, with_missing_shown


def test_missing_values_and_booleans_read_as_words() -> None:
    frame = pd.DataFrame(
        {
            "cost_usd": [1.5, None],
            "cheapest": ["a", None],
            "within_deadline": [True, False],
            "at": pd.to_datetime(["2026-11-25", None]),
        }
    )
    shown = with_missing_shown(frame)
    assert shown.iloc[1].tolist() == [MISSING_TEXT, MISSING_TEXT, "no", MISSING_TEXT]
    assert shown["within_deadline"].tolist() == ["yes", "no"]
    assert shown.iloc[0, 0] == 1.5 and shown.iloc[0, 1] == "a"
    assert not shown.astype(str).isin(["None", "nan", "NaT", "True", "False"]).any().any()


def test_every_page_table_shows_missing_values_as_a_dash() -> None:
    shared = (REPO / "pages" / "_shared.py").read_text()
    assert 'options.setdefault("placeholder", MISSING_TEXT)' in shared
    for page in sorted((REPO / "pages").glob("*.py")):
        text = page.read_text()
        if page.name != "_shared.py":
            assert "st.dataframe(" not in text, f"{page.name}: use show_table"
        for call in re.findall(r"st\.table\((.*)\)", text):
            assert call.startswith("views.common.with_missing_shown("), f"{page.name}: st.table({call})"


def test_the_schema_panel_lists_each_column_with_its_whole_meaning_as_text() -> None:
    from stash_core.views.sql import columns_markdown

    columns = [
        {"column": "metric", "type": "VARCHAR", "meaning": "name: cpu_util_pct, gpu<i>_util_pct"},
        {"column": "t_s", "type": "DOUBLE", "meaning": ""},
    ]
    lines = columns_markdown(columns).splitlines()
    assert lines == [
        r"- `metric` VARCHAR — name: cpu\_util\_pct, gpu\<i\>\_util\_pct",  # no emphasis, no HTML
        "- `t_s` DOUBLE",
    ]


def test_a_figure_just_under_a_unit_is_said_in_the_next_unit_never_in_scientific_notation() -> None:
    from pages._shared import seconds_text

    assert seconds_text(0.9996, 0.0009996) == "1 s ± 1 ms"
    assert seconds_text(0.5, 0.00042) == "500 ms ± 420 µs"


def test_a_figure_smaller_than_its_interval_is_said_in_the_intervals_unit() -> None:
    from pages._shared import seconds_text

    assert seconds_text(0.0, 0.997) == "0 ms ± 997 ms"
    assert seconds_text(-0.00004, 0.997) == "0 ms ± 997 ms"
    assert seconds_text(0.05, 1.2) == "0.1 s ± 1.2 s"
    assert seconds_text(0.0123, 0.0456) == "12.3 ms ± 45.6 ms"
    assert seconds_text(3.0, 900.0) == "0.1 min ± 15.0 min"
