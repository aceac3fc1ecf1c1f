"""An export read back as result documents: a completed run needs its phases and stalls, the samples may be
left out."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from result_docs import result_doc

from stash_core import store
from stash_core.errors import UsageError
from stash_core.store.import_export import docs_from_export

RUN_ID = "20261122T080000Z-eeee0006"
FAILED_ID = "20261122T090000Z-ffff0007"


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pd.DataFrame]:
    folder = tmp_path_factory.mktemp("export")
    db = folder / "results.duckdb"
    store.ingest_result(db, result_doc(run_id=RUN_ID, samples=True, telemetry=True, seed=6))
    failed = result_doc(run_id=FAILED_ID, seed=7)
    failed.update(status="failed", error="the workers ran out of memory", phases=[], breakdown=None)
    store.ingest_result(db, failed)
    paths = store.export(db, "parquet", folder / "out")
    return {Path(path).stem: pd.read_parquet(path) for path in paths}


def test_a_completed_run_without_its_phases_and_stalls_is_refused(tables) -> None:
    with pytest.raises(UsageError, match=f"completed run {RUN_ID} needs its phases and stalls"):
        docs_from_export({"runs": tables["runs"]})
    with pytest.raises(UsageError, match="needs its stalls, or it would be stored with no breakdown"):
        docs_from_export({"runs": tables["runs"], "phases": tables["phases"]})


def test_phases_and_stalls_of_another_export_are_refused(tables) -> None:
    other = {name: tables[name].iloc[0:0] for name in ("phases", "stalls")}
    with pytest.raises(UsageError, match=f"hold no row of completed run {RUN_ID}"):
        docs_from_export({"runs": tables["runs"], **other})


def test_a_failed_run_needs_no_breakdown_and_samples_may_be_left_out(tables) -> None:
    failed = tables["runs"][tables["runs"]["run_id"] == FAILED_ID]
    assert [doc["run_id"] for doc in docs_from_export({"runs": failed})] == [FAILED_ID]
    docs = docs_from_export({name: tables[name] for name in ("runs", "phases", "stalls")})
    completed = next(doc for doc in docs if doc["run_id"] == RUN_ID)
    assert set(completed["breakdown"]["stalls"]) == {"compute", "interconnect", "network", "cpu", "disk"}
    assert all(phase["samples"] == {} for phase in completed["phases"])


def test_stalls_of_another_export_beside_the_runs_phases_are_refused(tables) -> None:
    """Half a breakdown is no run either: the phases of the run without its stalls would be stored as a run
    whose iteration is all 'not separated'."""
    other_stalls = tables["stalls"].iloc[0:0]
    with pytest.raises(UsageError, match=f"the stalls table holds no row of completed run {RUN_ID}"):
        docs_from_export({"runs": tables["runs"], "phases": tables["phases"], "stalls": other_stalls})


def test_a_completed_run_stored_without_a_breakdown_comes_back_from_its_own_export(tmp_path) -> None:
    """The store takes a completed run whose file had no breakdown; its export was then refused as 'the
    stalls table holds no row of completed run ...; upload them from the same export', which it was."""
    db = tmp_path / "results.duckdb"
    doc = result_doc(run_id=RUN_ID, seed=8)
    doc["breakdown"] = None
    store.ingest_result(db, doc)
    paths = store.export(db, "parquet", tmp_path / "out")
    read = {Path(path).stem: pd.read_parquet(path) for path in paths}
    assert [back["run_id"] for back in docs_from_export(read)] == [RUN_ID]
