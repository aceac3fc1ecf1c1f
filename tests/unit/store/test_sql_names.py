"""A name written into SQL as a quoted identifier reads back as the same name."""

import duckdb

from stash_core.store.sql_names import quoted_name


def test_any_name_reads_back_whole() -> None:
    for name in ("plain", 'a"b', '"', 'x.y z', "select", '"; DROP TABLE runs; --'):
        assert duckdb.sql(f"SELECT 1 AS {quoted_name(name)}").columns == [name]
