"""Probes in the store: a profile's "probes" section, `stash probe` documents, old databases without them."""

from __future__ import annotations

import json

import duckdb
import pytest

from stash_core.errors import UsageError
from stash_core.store import DB_SCHEMA_VERSION, connect, ingest_files, ingest_result, query_readonly
from stash_core.store.ingest import ingest_probe

MIB = 1024 * 1024


def allreduce(size: int, time_s: float) -> dict:
    return {"size_bytes": size, "repetitions": 4, "time_s": time_s, "time_min_s": time_s * 0.95,
            "algbw_gbps": size * 8 / time_s / 1e9, "busbw_gbps": size * 8 / time_s / 1e9}  # fmt: skip


def probe_set(phase: str, nodes: int) -> dict:
    return {
        "probe_id": f"run-1-{phase}", "run_id": "run-1", "phase": phase,
        "started_at": "2026-11-22T10:42:00+00:00", "hostname": "box1", "instance": None, "backend": "gloo",
        "device": "cpu", "world_size": 2, "nodes": nodes, "workers_per_node": 2 // nodes,
        "link_gbps": 0.2 if nodes > 1 else None,
        "allreduce": [allreduce(4096, 0.001), allreduce(MIB, 0.045)],
        "gradient_allreduce": {"size_bytes": 6 * MIB, "time_s": 0.27, "repetitions": 2, "buckets": 2},
        "p2p": [{"scope": "inter_node" if nodes > 1 else "intra_node", "size_bytes": 8, "time_s": 5e-4}],
    }  # fmt: skip


def profile_doc(run_id: str = "run-1", probes: list | None = None) -> dict:
    phase = {
        "name": "R1", "description": "2 workers on one machine", "workers": 2, "nodes": 1,
        "data": "synthetic", "status": "completed", "error": None, "warmup_iterations": 2, "iterations": 3,
        "iteration_s": {"mean": 0.1, "ci95": 0.01, "std": 0.01, "median": 0.1, "p5": 0.09, "p95": 0.11,
                        "n": 3},
        "parts_mean_s": {"data_s": 0.0, "forward_s": 0.03, "backward_s": 0.06, "optimizer_s": 0.01},
        "samples": {"iteration_s": [0.1, 0.1, 0.1]}, "rank_skew_s": 0.0, "wall_s": 5.0,
        "telemetry": {"interval_s": 0.5, "t_s": [], "metrics": {}},
    }  # fmt: skip
    return {
        "schema_version": 1, "kind": "stash-profile", "run_id": run_id, "status": "completed", "error": None,
        "started_at": "2026-11-22T10:41:00+00:00", "finished_at": "2026-11-22T10:43:00+00:00",
        "spec": {"model": "mlp", "batch_size": 8, "workers_per_node": 1, "nodes": 2,
                 "instance": "emulated@200mbit", "device": "cpu", "backend": "gloo",
                 "hosts": ["10.213.0.10", "10.213.0.11"]},
        "model": {"name": "mlp", "grad_bytes": 6 * MIB}, "phases": [phase], "breakdown": None,
        **({"probes": probes} if probes is not None else {}),
    }  # fmt: skip


def test_a_profiles_probes_are_stored_with_its_run_once(tmp_path):
    db = tmp_path / "r.duckdb"
    doc = profile_doc(probes=[probe_set("R1", 1), probe_set("R1n", 2)])
    assert ingest_result(db, doc) is True
    assert ingest_result(db, doc) is False
    rows = query_readonly(
        db,
        "SELECT phase, kind, scope, nodes, instance, link_gbps FROM probes ORDER BY phase, kind, size_bytes",
    )
    assert len(rows) == 2 * (2 + 1 + 1)
    r1n = rows[rows["phase"] == "R1n"]
    assert set(r1n["kind"]) == {"allreduce", "gradient_allreduce", "p2p"}
    assert set(r1n["scope"]) == {"all", "inter_node"}
    assert set(r1n["nodes"]) == {2} and set(r1n["link_gbps"]) == {0.2}
    # the run's instance label is used when the probe set has none (the stall fits match on it)
    assert set(rows["instance"]) == {"emulated@200mbit"}


def test_a_result_without_probes_still_ingests(tmp_path):
    db = tmp_path / "r.duckdb"
    assert ingest_result(db, profile_doc())
    assert query_readonly(db, "SELECT count(*) AS n FROM probes")["n"][0] == 0


def test_malformed_probes_are_refused_and_nothing_is_stored(tmp_path):
    db = tmp_path / "r.duckdb"
    bad = probe_set("R1n", 2)
    bad["allreduce"][0]["time_s"] = "fast"
    with pytest.raises(UsageError, match="time_s must be a number"):
        ingest_result(db, profile_doc(probes=[bad]))
    with pytest.raises(UsageError, match="probes must be a list"):
        ingest_result(db, profile_doc(probes={"R1n": {}}))
    assert query_readonly(db, "SELECT count(*) AS n FROM runs")["n"][0] == 0


def test_stash_probe_documents_ingest_from_memory_and_files(tmp_path):
    db = tmp_path / "r.duckdb"
    doc = {
        **probe_set("R1n", 2),
        "kind": "stash-probe",
        "schema_version": 1,
        "probe_id": "probe-x",
        "run_id": None,
    }
    assert ingest_probe(db, doc) is True
    assert ingest_probe(db, doc) is False
    path = tmp_path / "probe.json"
    path.write_text(json.dumps({**doc, "probe_id": "probe-y"}))
    [(_, probe_id, inserted)] = ingest_files(db, [path])
    assert (probe_id, inserted) == ("probe-y", True)
    counts = query_readonly(
        db, "SELECT probe_id, count(*) AS n, count(run_id) AS runs FROM probes GROUP BY 1"
    )
    assert sorted(counts["probe_id"]) == ["probe-x", "probe-y"]
    assert set(counts["runs"]) == {0}
    with pytest.raises(UsageError, match="schema_version"):
        ingest_probe(db, {**doc, "probe_id": "z", "schema_version": 9})


def test_a_probe_id_stored_with_other_figures_is_refused(tmp_path):
    """A probe file whose probe_id is stored with other figures was 'already stored', its figures dropped."""
    db = tmp_path / "r.duckdb"
    doc = {**probe_set("R1n", 2), "kind": "stash-probe", "schema_version": 1, "probe_id": "p1"}
    other = json.loads(json.dumps(doc))
    other["allreduce"][1]["time_s"] = 0.09
    assert ingest_probe(db, doc) is True
    assert ingest_probe(db, json.loads(json.dumps(doc))) is False
    with pytest.raises(UsageError, match="probe p1 is already stored with other time_s; refused"):
        ingest_probe(db, other)
    same, changed = tmp_path / "same.json", tmp_path / "changed.json"
    same.write_text(json.dumps(doc))
    changed.write_text(json.dumps(other))
    with pytest.raises(UsageError, match=f"{changed}: probe p1 is already stored with other time_s"):
        ingest_files(db, [changed])
    with pytest.raises(UsageError, match=f"{changed}: probe p1 is also in {same} with other time_s"):
        ingest_files(tmp_path / "fresh.duckdb", [same, changed])
    rows = query_readonly(db, "SELECT time_s FROM probes WHERE size_bytes = ? AND kind = 'allreduce'", [MIB])
    assert list(rows["time_s"]) == [0.045]


def test_a_version_1_database_made_before_the_probes_table_gets_it(tmp_path):
    db = tmp_path / "old.duckdb"
    ingest_result(db, profile_doc("run-0"))
    with duckdb.connect(str(db)) as con:
        con.execute("DROP TABLE probes")  # what a database written before probes existed looks like
        con.execute("UPDATE schema_meta SET value = '1' WHERE key = 'schema_version'")
    ingest_result(db, profile_doc("run-1", probes=[probe_set("R1n", 2)]))
    with connect(db, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM probes").fetchall()[0][0] == 4
        version = con.execute("SELECT value FROM schema_meta WHERE key = 'schema_version'").fetchall()
        assert version == [(str(DB_SCHEMA_VERSION),)]


def test_a_stored_probe_gives_the_fits_the_alpha_and_beta_the_probe_itself_gives(tmp_path):
    """The probes table read for the fits holds each size's fastest repetition, so `stash fit` takes alpha
    from it as `stash probe` does (it took the smallest message's mean: 40x the wire time, beta collapsed);
    with two probes of one configuration, the fastest of either, not the first listed."""
    from stash_core.analysis.comm import probe_alpha_beta
    from stash_core.decide.fit.physics import link_from_probes
    from stash_core.store.reads import bandwidth_probes

    db = tmp_path / "r.duckdb"
    slow, fast = probe_set("R1", 1), probe_set("R1n", 1)
    slow["allreduce"] = [{**allreduce(4096, 0.004), "time_min_s": 0.0005}, allreduce(MIB, 0.045)]
    ingest_result(db, profile_doc(probes=[slow]))
    link = link_from_probes(bandwidth_probes(db))
    assert (link.alpha_s, link.beta_s_per_byte) == pytest.approx(probe_alpha_beta(slow), rel=1e-9)
    fast["allreduce"] = [{**allreduce(4096, 0.003), "time_min_s": 0.0002}, allreduce(MIB, 0.045)]
    ingest_result(db, profile_doc("run-2", probes=[{**fast, "probe_id": "run-2-R1", "run_id": "run-2"}]))
    both = link_from_probes(bandwidth_probes(db))
    # alpha: the fastest smallest call (0.2 ms, the second probe's) less its wire time (ring factor 1)
    assert both.alpha_s < link.alpha_s and both.alpha_s == pytest.approx(0.0002 - 4096 * both.beta_s_per_byte)
