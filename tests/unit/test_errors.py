"""errors.first_line: the one line a user is shown of an error, DuckDB's JSON detail read as words."""

from __future__ import annotations

import duckdb

from stash_core.errors import first_line


def test_the_first_line_of_a_message_or_the_type_without_one():
    assert first_line(ValueError("bad value\nmore detail")) == "bad value"
    assert first_line(KeyError()) == "KeyError"


def test_duckdbs_json_detail_becomes_its_type_and_message():
    detail = (
        'IO Error: Async write failed for range [offset=0, size=437]: {"exception_type":"IO",'
        '"exception_message":"Could not write file \\"x/runs.csv\\": No space left on device","errno":"28"}'
    )
    assert first_line(duckdb.IOException(detail)) == (
        'IO Error: Could not write file "x/runs.csv": No space left on device'
    )
    broken = 'IO Error: failed: {"exception_type":"IO", "exception_mess'  # not JSON: kept as it is
    assert first_line(duckdb.IOException(broken)) == broken
