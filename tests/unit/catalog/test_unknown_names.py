"""A name a command does not know: close names offered, and a NAME:QUOTA (spot's form) said to be one where
names alone are taken. `predict --instances g5.xlarge:2` said "see `stash instances list`", which lists
g5.xlarge; spot-profile's and campaign's advice, `stash instances add g3.4xlarge:2`, is refused (a colon)."""

from __future__ import annotations

import pytest
from support import one_line_error, stash_here

from stash_core.catalog.unknown_names import not_in_catalog_text, unknown_names_note


def test_close_names_and_the_quota_form_are_said() -> None:
    known = ["g5.xlarge", "g5.2xlarge", "p3.2xlarge"]
    assert (
        unknown_names_note(["g5.xlarge:2"], known)
        == " (g5.xlarge:2: names only here, no :QUOTA (give g5.xlarge))"
    )
    assert unknown_names_note(["g5.xlarg"], known).startswith(" (g5.xlarg: did you mean g5.xlarge")
    assert unknown_names_note(["zzzz"], known) == ""
    # another case of a known name: too far apart for a close match, said all the same
    assert unknown_names_note(["G5.XLARGE"], known) == " (G5.XLARGE: did you mean g5.xlarge?)"


@pytest.mark.parametrize(
    "argv",
    [
        ["predict", "--model", "resnet18", "--batch-size", "32", "--instances", "g5.xlarge:2"],
        ["recommend", "--model", "resnet18", "--batch-size", "32", "--epochs", "1",
         "--dataset-images", "1000", "--budget-hours", "10", "--instances", "g5.xlarge:2"],
    ],
    ids=["predict", "recommend"],
)  # fmt: skip
def test_commands_that_take_names_say_a_quota_is_not_taken(tmp_path, capsys, monkeypatch, argv) -> None:
    done = stash_here(capsys, monkeypatch, *argv, "--db", str(tmp_path / "r.duckdb"))
    assert done.returncode == 2
    assert "g5.xlarge:2: names only here, no :QUOTA (give g5.xlarge)" in one_line_error(done)


def test_the_add_advice_is_left_out_for_a_quota_of_a_known_name(tmp_path) -> None:
    db = tmp_path / "r.duckdb"
    advice = " (stash instances add NAME ...)"
    quota = not_in_catalog_text(db, "g3.4xlarge:2", "instance 'g3.4xlarge:2'", advice)
    assert (
        quota
        == "instance 'g3.4xlarge:2' is not in the catalog (g3.4xlarge:2: names only here, no :QUOTA (give "
        "g3.4xlarge))"
    )
    assert not_in_catalog_text(db, "m9.huge", "instance type m9.huge", advice).endswith(advice)


def test_a_name_of_another_case_is_not_advised_to_be_added(tmp_path) -> None:
    """`stash instances add G3.8XLARGE` was advised, which add refuses (a clash of case with g3.8xlarge)."""
    said = not_in_catalog_text(tmp_path / "r.duckdb", "G3.8XLARGE", "instance 'G3.8XLARGE'",
                               " (stash instances add G3.8XLARGE ...)")  # fmt: skip
    assert said == "instance 'G3.8XLARGE' is not in the catalog (G3.8XLARGE: did you mean g3.8xlarge?)"
    other = not_in_catalog_text(tmp_path / "r.duckdb", "my-box", "instance 'my-box'", " (add it)")
    assert other.endswith(" (add it)")
