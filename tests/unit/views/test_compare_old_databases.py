"""Readers take a database of schema version 1 or newer as it is: a column added since reads as absent. The
Compare page's reads on a version-2 layout (stall_breakdown without the remainder's columns)."""

from __future__ import annotations

import math
from pathlib import Path

import duckdb
import pytest
from result_docs import result_doc

from stash_core import store, views

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


def test_compare_reads_a_version_2_database_with_the_remainder_interval_absent(version_2_db: Path) -> None:
    frame = views.compare.compare_configurations(version_2_db, "resnet18", 32)
    assert len(frame) == 1 and frame.iloc[0]["runs"] == 2
    assert math.isnan(frame.iloc[0]["unattributed_ci95_s"])
    assert frame.iloc[0]["compute_s"] == pytest.approx(0.105)
    assert not views.compare.compare_stall_frame(frame).empty
