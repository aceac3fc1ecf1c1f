"""The catalog is in every database from its first use: store creation seeds it from the shipped CSV (the
store reads the file by its path, below decide in the layers); seeding never touches an edited row."""

from __future__ import annotations

import pandas as pd
import pytest
from result_docs import result_doc

from stash_core import store
from stash_core.catalog import (
    CATALOG_CSV,
    COLUMNS,
    add_instance,
    builtin_instances,
    get_instance,
    list_instances,
    seed_and_refresh,
    seed_catalog,
    set_instance,
)
from stash_core.errors import UsageError
from stash_core.store.catalog_seed import BUILTIN_CATALOG_CSV
from stash_core.store.schema import create_schema


def stored_catalog(db) -> pd.DataFrame:
    frame = store.query_readonly(db, f"SELECT {', '.join(COLUMNS)} FROM instances ORDER BY name")
    return frame.astype({"price_date": "datetime64[ns]"})


def test_a_new_database_holds_the_shipped_catalog(tmp_path) -> None:
    db = tmp_path / "new.duckdb"
    store.ingest_result(db, result_doc("resnet18", instance="box"))  # a first write creates the database
    stored = stored_catalog(db)
    shipped = builtin_instances().sort_values("name").reset_index(drop=True)[list(COLUMNS)]
    shipped = shipped.astype({"price_date": "datetime64[ns]"})
    pd.testing.assert_frame_equal(stored, shipped, check_dtype=False)
    assert list_instances(db)["stored"].all()
    assert CATALOG_CSV == BUILTIN_CATALOG_CSV and CATALOG_CSV.is_file()


def test_a_database_not_created_yet_reads_as_one_with_the_catalog(tmp_path) -> None:
    db = tmp_path / "missing.duckdb"
    names = store.query_readonly(db, "SELECT name FROM instances")["name"]
    assert set(names) == set(builtin_instances()["name"])
    joined = store.query_readonly(
        db, "SELECT on_demand_usd_per_h FROM (SELECT 'g5.xlarge' AS label) JOIN instances ON name = label"
    )
    assert joined.iloc[0, 0] == pytest.approx(1.006)
    assert not db.exists()


def test_seeding_again_keeps_edits_and_counts_what_it_stored(tmp_path) -> None:
    db = tmp_path / "cat.duckdb"
    assert seed_catalog(db) == len(builtin_instances())  # created by this call, with the catalog
    set_instance(db, "p3.2xlarge", on_demand_usd_per_h=2.5)
    with store.connect(db) as con:
        con.execute("DELETE FROM instances WHERE name = 'g5.xlarge'")
        create_schema(con)  # what a migration does: the missing row comes back, the edited one stays
    assert get_instance(db, "p3.2xlarge")["on_demand_usd_per_h"] == 2.5
    assert list_instances(db).set_index("name").loc["g5.xlarge", "stored"]
    assert seed_catalog(db) == 0


def test_a_refused_edit_writes_nothing(tmp_path) -> None:
    db = tmp_path / "never.duckdb"
    with pytest.raises(UsageError, match="unknown instance"):
        set_instance(db, "p9.huge", vcpus=4)
    with pytest.raises(UsageError, match="already in the catalog"):
        add_instance(db, name="p3.2xlarge", vcpus=8)
    with pytest.raises(UsageError, match="must not be negative"):
        add_instance(db, name="lab", on_demand_usd_per_h=-1)
    assert not db.exists()


def test_rows_still_as_shipped_take_this_stashs_values_and_edited_ones_stay(tmp_path) -> None:
    """A database an older Stash seeded kept the old prices of rows nobody edited: seeding added names."""
    db = tmp_path / "old.duckdb"
    seed_catalog(db)
    set_instance(db, "p3.2xlarge", on_demand_usd_per_h=2.5)  # the user's (origin 'user')
    with store.connect(db) as con:  # what an older Stash shipped for g5.xlarge, and an import's row
        con.execute("UPDATE instances SET on_demand_usd_per_h = 0.5, source = 'old' WHERE name = 'g5.xlarge'")
        con.execute(
            "UPDATE instances SET on_demand_usd_per_h = 0.7, origin = 'import' WHERE name = 'g4dn.xlarge'"
        )
    assert seed_and_refresh(db) == (0, ["g5.xlarge"])
    shipped = builtin_instances().set_index("name").loc["g5.xlarge"]
    refreshed = get_instance(db, "g5.xlarge")
    for column in ("on_demand_usd_per_h", "source"):
        assert refreshed[column] == shipped[column]
    assert get_instance(db, "p3.2xlarge")["on_demand_usd_per_h"] == 2.5
    assert get_instance(db, "g4dn.xlarge")["on_demand_usd_per_h"] == 0.7
    assert seed_and_refresh(db) == (0, [])


def test_a_migration_leaves_old_values_for_seed_to_refresh_and_name(tmp_path, capsys) -> None:
    """A price never changes unsaid: the migration keeps a row's old values, `instances list` says so, and
    `instances seed` refreshes and names it (a refresh inside the migration left seed nothing to name)."""
    from stash_core.cli.main import main

    db = tmp_path / "migrated.duckdb"
    seed_catalog(db)
    with store.connect(db) as con:
        con.execute("UPDATE instances SET memory_gib = 1.0 WHERE name = 'g5.xlarge'")
        create_schema(con)  # what a migration ends with
    assert get_instance(db, "g5.xlarge")["memory_gib"] == 1.0
    assert main(["instances", "list", "--db", str(db)]) == 0
    said = "note: 1 built-in instance(s) hold an older Stash's values: g5.xlarge (memory_gib); `stash"
    assert said in capsys.readouterr().out
    assert main(["instances", "seed", "--db", str(db)]) == 0
    assert "refreshed 1 built-in instance(s) to this Stash's values: g5.xlarge" in capsys.readouterr().out
    shipped = builtin_instances().set_index("name")
    assert get_instance(db, "g5.xlarge")["memory_gib"] == shipped.loc["g5.xlarge", "memory_gib"] > 1.0
    assert main(["instances", "list", "--db", str(db)]) == 0
    assert "older Stash" not in capsys.readouterr().out
