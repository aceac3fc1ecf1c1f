"""Fractional number fields show what was typed: Streamlit's default format rounds to two decimals, so a
node uplink typed as 0.0001 Gbit/s read "0.00" while the simulation used 0.0001."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("page", ["schedule", "spot", "recommend", "campaign"])
def test_every_fractional_field_shows_its_value_unrounded(page, empty_db, monkeypatch):
    monkeypatch.setenv("STASH_DB", str(empty_db))
    app = AppTest.from_file(str(REPO / "pages" / f"{page}.py"), default_timeout=120)
    app.session_state["stash_db_path"] = str(empty_db)
    app.run()
    assert not app.exception
    fractional = [field for field in app.number_input if field.step != int(field.step) or
                  isinstance(field.value, float) or field.value is None]  # fmt: skip
    assert fractional
    # %.12g: a whole-number field (taken as any number, refused unless whole) shows its seed of 2**31 - 1 whole
    assert [field.label for field in fractional if field.format not in ("%g", "%.12g")] == []
