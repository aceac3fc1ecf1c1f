"""Where `stash probe` keeps what it measured (cli/probe_store.py): a database it could not store the probe in
lost the whole measurement."""

from __future__ import annotations

import json

import pytest

from stash_core.cli.probe_store import store_probe
from stash_core.errors import StashError, UsageError
from stash_core.store import ingest_files, query_readonly
from stash_core.store.connection import DatabaseLocked
from stash_core.store.storable import check_storable


def _probe() -> dict:
    """A `stash probe` document, as tests/unit/store/test_probes_table.py makes them."""
    return {
        "kind": "stash-probe", "schema_version": 1, "probe_id": "probe-z", "run_id": None, "phase": "R1n",
        "started_at": "2026-11-22T10:42:00+00:00", "hostname": "box1", "instance": None, "backend": "gloo",
        "device": "cpu", "world_size": 2, "nodes": 2, "workers_per_node": 1, "link_gbps": 0.2,
        "allreduce": [{"size_bytes": 4096, "repetitions": 4, "time_s": 0.001, "time_min_s": 0.00095,
                       "algbw_gbps": 0.033, "busbw_gbps": 0.033}],
        "gradient_allreduce": {"size_bytes": 6 * 2**20, "time_s": 0.27, "repetitions": 2, "buckets": 2},
        "p2p": [{"scope": "inter_node", "size_bytes": 8, "time_s": 5e-4}],
    }  # fmt: skip


def test_a_probe_the_database_cannot_take_is_kept_with_the_command_to_store_it(tmp_path, monkeypatch):
    db = tmp_path / "r.duckdb"

    def locked(*args, **kwargs):
        raise DatabaseLocked(f"database {db} is locked by another process (PID 1) - gave up after 10 s")

    monkeypatch.setattr("stash_core.store.ingest.ingest_probe", locked)
    with pytest.raises(StashError) as refused:
        store_probe(_probe(), None, db)
    assert not isinstance(refused.value, UsageError)  # the machine's, exit 1
    kept = tmp_path / "results" / "probe-z.json"
    assert json.loads(kept.read_text())["probe_id"] == "probe-z"
    assert str(refused.value).startswith("could not store probe probe-z: database ")
    assert f"it is kept in {kept}: store it later with `stash ingest {kept} --db {db}`" in str(refused.value)
    monkeypatch.undo()
    assert ingest_files(db, [kept])[0][1:] == ("probe-z", True)  # the command it names works
    assert list(query_readonly(db, "SELECT probe_id FROM probes")["probe_id"].unique()) == ["probe-z"]


def test_a_database_of_a_newer_stash_is_refused_before_measuring(tmp_path):
    import duckdb

    db = tmp_path / "r.duckdb"
    store_probe(_probe(), None, db)
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE schema_meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(UsageError, match=f"^--db: database {db}.*999"):  # the path said once
        check_storable(db)
