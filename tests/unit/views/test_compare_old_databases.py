"""Readers take a database of schema version 3 or newer as it is (a column added since reads as absent) and
refuse an older one, whose runs.unattributed_s meant something else, in one line naming the command that
migrates it. The Compare page's reads on a version-2 layout (stall_breakdown without the remainder's
columns), then after that command."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from result_docs import result_doc

from stash_core import store, views
from stash_core.errors import UsageError

_REMAINDER_COLUMNS = "unattributed_s, unattributed_ci95_s, unattributed_share, unattributed_epoch_s"


@pytest.fixture()
def version_2_db(tmp_path: Path) -> Path:
    """Two runs of one job, then the layout turned back to version 2's where readers see it."""
    db = tmp_path / "results.duckdb"
    for compute_s in (0.10, 0.11):
        assert store.ingest_result(db, result_doc("resnet18", batch_size=32, stalls={"compute": compute_s}))
    with duckdb.connect(str(db)) as con:
        con.execute(
            f"CREATE TABLE stall_breakdown_v2 AS SELECT * EXCLUDE ({_REMAINDER_COLUMNS}) FROM stall_breakdown"
        )
        con.execute("DROP VIEW stall_breakdown")
        con.execute("CREATE VIEW stall_breakdown AS SELECT * FROM stall_breakdown_v2")
        con.execute("UPDATE schema_meta SET value = '2' WHERE key = 'schema_version'")
    return db


def test_compare_refuses_a_version_2_database_and_reads_it_once_migrated(version_2_db: Path) -> None:
    with pytest.raises(UsageError, match=f"run `stash instances seed --db {version_2_db}`") as refused:
        views.compare.compare_configurations(version_2_db, "resnet18", 32)
    assert "\n" not in str(refused.value)
    from stash_core.cli.main import main

    assert main(["instances", "seed", "--db", str(version_2_db)]) == 0
    frame = views.compare.compare_configurations(version_2_db, "resnet18", 32)
    assert len(frame) == 1 and frame.iloc[0]["runs"] == 2
    assert frame.iloc[0]["compute_s"] == pytest.approx(0.105)
    assert not views.compare.compare_stall_frame(frame).empty
