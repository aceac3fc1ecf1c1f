"""The store's writer of imported catalog rows: new names inserted, shipped and earlier imports replaced, rows
of the user kept, all in one transaction."""

from __future__ import annotations

import duckdb
import pytest

from stash_core import store
from stash_core.store.catalog_import import write_imported_rows
from stash_core.store.catalog_seed import CATALOG_COLUMNS


def _row(name: str, price: float, **fields) -> dict:
    row = dict.fromkeys(CATALOG_COLUMNS)
    row.update(name=name, provider="aws", accelerator_count=1, on_demand_usd_per_h=price, **fields)
    return row


def _stored(db) -> dict[str, tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT name, on_demand_usd_per_h, origin, region FROM instances").fetchall()
    return {name: (price, origin, region) for name, price, origin, region in rows}


def test_imports_replace_shipped_rows_and_keep_the_users(tmp_path) -> None:
    db = tmp_path / "cat.duckdb"
    with store.connect(db) as con:  # a new database: the shipped rows, then one of the user's
        con.execute("UPDATE instances SET origin = 'user' WHERE name = 'g5.xlarge'")
    outcome = write_imported_rows(
        db, [_row("p3.2xlarge", 2.0, region="us-east-1"), _row("g5.xlarge", 0.5), _row("new.type", 9.0)]
    )
    assert outcome.inserted == ["new.type"] and outcome.replaced == ["p3.2xlarge"]
    assert outcome.kept_user == ["g5.xlarge"]
    stored = _stored(db)
    assert stored["p3.2xlarge"] == (2.0, "import", "us-east-1")
    assert stored["g5.xlarge"] == (pytest.approx(1.006), "user", None)
    assert stored["new.type"] == (9.0, "import", None)
    assert stored["g4dn.xlarge"][1] == "builtin"
    write_imported_rows(db, [_row("new.type", 8.0)])  # a later import replaces an earlier one
    assert _stored(db)["new.type"][0] == 8.0


def test_a_failing_import_writes_nothing(tmp_path) -> None:
    db = tmp_path / "cat.duckdb"
    with store.connect(db):
        pass
    before = _stored(db)
    bad = _row("bad.type", 1.0)
    bad["vcpus"] = "many"  # not an INTEGER: the insert fails after the good row
    with pytest.raises(duckdb.Error):
        write_imported_rows(db, [_row("good.type", 1.0), bad])
    assert _stored(db) == before


@pytest.mark.parametrize("rows", [3, 300], ids=["one-statement", "bulk"])
def test_a_name_given_twice_in_one_import_keeps_its_last_row(tmp_path, rows) -> None:
    db = tmp_path / "cat.duckdb"
    many = [_row(f"type.{index}", 1.0) for index in range(rows)]
    write_imported_rows(db, [*many, _row("p3.2xlarge", 2.0), _row("p3.2xlarge", 3.0)])
    stored = _stored(db)
    assert stored["p3.2xlarge"] == (3.0, "import", None)
    assert stored[f"type.{rows - 1}"] == (1.0, "import", None)
