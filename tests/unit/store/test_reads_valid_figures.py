"""The store's reads for fits and predictions take only figures the breakdown view counts: an inf, NaN or
negative "measured" stall (a hand-edited or damaged row) made every communication fit over it NaN."""

from __future__ import annotations

import duckdb
import pytest

from stash_core import store
from stash_core.store import reads


@pytest.mark.parametrize("bad", ["'inf'::DOUBLE", "'nan'::DOUBLE", "-5.0"])
def test_communication_stalls_leave_out_invalid_figures(db_path, result_doc, bad) -> None:
    for index in range(3):
        store.ingest_result(db_path, result_doc(run_id=f"run-{index}"))
    before = reads.communication_stalls(db_path)
    kept = before[before["stall"] == "interconnect"]
    assert len(kept) == 3
    with duckdb.connect(str(db_path)) as con:
        con.execute(
            f"UPDATE stalls SET seconds = {bad}, status = 'measured' "
            "WHERE run_id = 'run-1' AND stall = 'interconnect'"
        )
    after = reads.communication_stalls(db_path)
    assert set(after[after["stall"] == "interconnect"]["run_id"]) == {"run-0", "run-2"}


def test_a_profile_of_no_finite_iteration_time_is_not_measured(db_path, result_doc) -> None:
    doc = result_doc(run_id="run-a")
    store.ingest_result(db_path, doc)
    model, batch = doc["spec"]["model"], doc["spec"]["batch_size"]
    assert list(reads.measured_profiles(db_path, model, batch)["run_id"]) == ["run-a"]
    with duckdb.connect(str(db_path)) as con:
        con.execute("UPDATE runs SET iteration_s = 'inf'::DOUBLE")
    assert reads.measured_profiles(db_path, model, batch).empty

